"""Checked access to decoded JSON: every failure names the field and where it sits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from remat_models.core.graph import Graph, NodeKind
from remat_models.errors import GraphError, RematError

ErrorType = type[RematError]
_INT64 = 2**63
_KINDS = {kind.value: kind for kind in NodeKind}


def require(data: Mapping[str, Any], key: str, where: str, error: ErrorType = GraphError) -> Any:
    """Return ``data[key]``, or raise ``error`` saying that ``where`` lacks the field."""
    try:
        return data[key]
    except KeyError:
        raise error(f"{where}: missing field {key!r}") from None


def as_mapping(value: Any, where: str, error: ErrorType = GraphError) -> Mapping[str, Any]:
    """Return ``value`` if it is a JSON object."""
    if not isinstance(value, Mapping):
        raise error(f"{where}: expected a JSON object, got {_type_name(value)}")
    return value


def as_list(value: Any, where: str, error: ErrorType = GraphError) -> list[Any]:
    """Return ``value`` if it is a JSON array."""
    if not isinstance(value, list):
        raise error(f"{where}: expected a list, got {_type_name(value)}")
    return value


def as_str(value: Any, where: str, error: ErrorType = GraphError) -> str:
    """Return ``value`` if it is a string."""
    if not isinstance(value, str):
        raise error(f"{where}: expected a string, got {_type_name(value)}")
    return value


def as_bool(value: Any, where: str, error: ErrorType = GraphError) -> bool:
    """Return ``value`` if it is true or false."""
    if not isinstance(value, bool):
        raise error(f"{where}: expected true or false, got {_type_name(value)}")
    return value


def as_number(value: Any, where: str, error: ErrorType = GraphError) -> float:
    """Return ``value`` as a float if it is a JSON number (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"{where}: expected a number, got {_type_name(value)}")
    return float(value)


def as_int(value: Any, where: str, error: ErrorType = GraphError) -> int:
    """Return ``value`` as an exact int if it is a whole JSON number (``1e11`` is accepted, ``1.5`` is not)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{where}: expected a whole number, got {_type_name(value)} {value!r}")
    if not -_INT64 <= value < _INT64:
        raise error(f"{where}: {value} is out of the 64-bit integer range")
    return value


def as_kind(value: Any, where: str) -> NodeKind:
    """Return the NodeKind named by its string value ("forward", "backward", "loss", "other")."""
    try:
        return _KINDS[as_str(value, where)]
    except KeyError:
        raise GraphError(f"{where}: unknown kind {value!r} (expected one of {sorted(_KINDS)})") from None


def lookup(index: Mapping[Any, int], key: Any, where: str, error: ErrorType = GraphError) -> int:
    """Return the node index ``index[key]``, or raise ``error`` saying that ``where`` names an unknown node."""
    try:
        return index[key]
    except (KeyError, TypeError):
        raise error(f"{where}: unknown node {key!r}") from None


def key_index(keys: list[Any], what: str) -> dict[Any, int]:
    """Map each node key (a name or id) to its index; keys must be distinct strings or numbers."""
    index: dict[Any, int] = {}
    for i, key in enumerate(keys):
        if not isinstance(key, (str, int, float)):
            raise GraphError(f"node {i}: its {what} must be a string or a number, got {key!r}")
        if key == "":
            raise GraphError(f"node {i}: its {what} is empty")
        if key in index:
            raise GraphError(f"node {i}: duplicate {what} {key!r} (also node {index[key]})")
        index[key] = i
    return index


def check_header(data: Any, fmt: str, version: int, error: ErrorType = GraphError) -> Mapping[str, Any]:
    """Return the object ``data`` if its ``format`` is ``fmt`` and its ``version`` is one this reader knows."""
    data = as_mapping(data, f"{fmt} data", error)
    found = require(data, "format", f"{fmt} data", error)
    if found != fmt:
        raise error(f"unknown format {found!r} (expected {fmt!r})")
    found_version = require(data, "version", fmt, error)
    if isinstance(found_version, bool) or found_version != version:
        raise error(f"{fmt}: unsupported version {found_version!r} (this reader knows version {version})")
    return data


def _type_name(value: Any) -> str:
    """Return the JSON name of ``value``'s type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


@dataclass
class NodeColumns:
    """Per-node columns a reader collects before building the Graph with ``Graph.from_arrays``."""

    keys: list[Any] = field(default_factory=list)  # how edges and lists refer to the node
    names: list[str] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    mem: list[int] = field(default_factory=list)
    workspace: list[int] = field(default_factory=list)
    kind: list[NodeKind] = field(default_factory=list)
    recomputable: list[bool] = field(default_factory=list)

    def add(
        self,
        key: Any,
        name: str,
        *,
        cost: float,
        mem: int,
        workspace: int = 0,
        kind: NodeKind = NodeKind.FORWARD,
        recomputable: bool = True,
    ) -> None:
        """Append one node."""
        self.keys.append(key)
        self.names.append(name)
        self.cost.append(cost)
        self.mem.append(mem)
        self.workspace.append(workspace)
        self.kind.append(kind)
        self.recomputable.append(recomputable)

    def to_graph(
        self,
        edges: Sequence[tuple[int, int]],
        *,
        outputs: Sequence[int] | None = None,
        order: Sequence[int] | None = None,
        fixed_mem: int = 0,
        name: str = "",
        impls: Any = None,
    ) -> Graph:
        """Build the Graph (which validates the rest: cycles, duplicate edges, order, sizes, implementations)."""
        return Graph.from_arrays(
            self.names,
            self.cost,
            self.mem,
            edges,
            workspace=self.workspace,
            kind=self.kind,
            recomputable=self.recomputable,
            outputs=outputs,
            order=order,
            fixed_mem=fixed_mem,
            name=name,
            impls=impls,
        )
