"""networkx node-link JSON: the Checkmate and random-layered benchmark flavours, and a generic one.

The flavour is detected from the first node's fields (see ``docs/graph-format.md``):

- Checkmate-derived: ``{id, name, backward, cost_cpu, cost_ram}``, links ``{source, target}`` by id,
  ids in topological order;
- random layered (Gagrani et al.): ``{name, out_cost, duration, param_cost}``, links ``{"0", "1"}``
  by name, input order in ``graph.order``;
- generic (what :func:`to_node_link` writes): ``{id, cost?, mem?, workspace?, kind?, recomputable?}``,
  links ``{source, target}``, outputs, order and fixed memory in the ``graph`` attributes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from remat_models.core.graph import Graph, Node, NodeKind
from remat_models.errors import GraphError
from remat_models.io._fields import (
    NodeColumns,
    as_bool,
    as_int,
    as_kind,
    as_list,
    as_mapping,
    as_number,
    as_str,
    key_index,
    lookup,
    require,
)
from remat_models.io.graph_json import node_records

_DEFAULT = Node(name="default")


class NodeLinkFlavour(StrEnum):
    """Which kind of node-link data a file holds."""

    CHECKMATE = "checkmate-repository"  # the files of Checkmate's repository (the paper graphs)
    RANDOM_LAYERED = "random-layered"
    GENERIC = "generic"


_SIGNATURES: dict[NodeLinkFlavour, tuple[str, ...]] = {
    NodeLinkFlavour.CHECKMATE: ("id", "name", "backward", "cost_cpu", "cost_ram"),
    NodeLinkFlavour.RANDOM_LAYERED: ("name", "out_cost", "duration"),
    NodeLinkFlavour.GENERIC: ("id",),
}
_EXPECTED = "expected networkx node-link data whose nodes have " + "; or ".join(
    f"{{{', '.join(fields)}}} ({flavour.value})" for flavour, fields in _SIGNATURES.items()
)


def detect_flavour(data: Any) -> NodeLinkFlavour:
    """Detect the flavour of node-link ``data`` from its first node; GraphError says what was expected."""
    if not isinstance(data, Mapping) or not isinstance(data.get("nodes"), list):
        raise GraphError(f"not node-link data: {_EXPECTED}")
    if not data["nodes"]:
        raise GraphError("node-link data has no nodes")
    first = data["nodes"][0]
    if isinstance(first, Mapping):
        for flavour, fields in _SIGNATURES.items():
            if all(key in first for key in fields):
                return flavour
    raise GraphError(f"node-link data not recognised: {_EXPECTED}; its first node is {first!r}")


def from_node_link(data: Any) -> Graph:
    """Read node-link ``data`` of any accepted flavour into a Graph (directed: ``"directed": false`` is refused)."""
    flavour = detect_flavour(data)
    if not as_bool(data.get("directed", True), "node-link 'directed'"):
        raise GraphError('node-link data is undirected ("directed": false); a computation graph is directed')
    attrs = as_mapping(data.get("graph", {}), "node-link 'graph' attributes")
    name = as_str(attrs.get("name", ""), "graph name")
    columns = NodeColumns()
    reader = _READERS[flavour]
    for i, node in enumerate(data["nodes"]):
        reader(columns, as_mapping(node, f"node {i}"), f"node {i}")
    index = key_index(columns.keys, "id")
    source, target = ("0", "1") if flavour is NodeLinkFlavour.RANDOM_LAYERED else ("source", "target")
    edges = _links(data, source, target, index)
    order: Sequence[int] | None = None
    outputs: list[int] | None = None
    fixed_mem = 0
    if flavour is NodeLinkFlavour.CHECKMATE:
        order = sorted(range(len(columns.keys)), key=columns.keys.__getitem__)
    elif flavour is NodeLinkFlavour.RANDOM_LAYERED:
        order = _key_list(attrs, "order", index)
        fixed_mem = _param_bytes(data["nodes"])
    else:
        order = _key_list(attrs, "order", index)
        outputs = _key_list(attrs, "outputs", index)
        fixed_mem = as_int(attrs.get("fixed_mem", 0), "graph fixed_mem")
    return columns.to_graph(edges, outputs=outputs, order=order, fixed_mem=fixed_mem, name=name)


def to_node_link(graph: Graph) -> dict[str, Any]:
    """Export ``graph`` as generic node-link data, readable by ``networkx.node_link_graph(data, edges="links")``."""
    if graph.impl_table is not None:
        raise GraphError(
            f"graph {graph.name!r} has operator implementations, which node-link data cannot hold: "
            "use the remat-graph format (or graph.default_view())"
        )
    names = graph.names
    return {
        "directed": True,
        "multigraph": False,
        "graph": {
            "name": graph.name,
            "fixed_mem": graph.fixed_mem,
            "outputs": [names[v] for v in graph.outputs.tolist()],
            "order": [names[v] for v in graph.order.tolist()],
        },
        "nodes": node_records(graph, "id"),
        "links": [{"source": names[u], "target": names[v]} for u, v in graph.edges.tolist()],
    }


# --- flavour readers: append one node's columns ---------------------------------------------------


def _read_checkmate(columns: NodeColumns, node: Mapping[str, Any], where: str) -> None:
    """Read a Checkmate node: ``cost_cpu`` is the duration, ``cost_ram`` the output bytes."""
    key = as_int(require(node, "id", where), f"{where} id")
    name = as_str(require(node, "name", where), f"{where} name")
    where = f"{where} ({name!r})"
    backward = as_bool(require(node, "backward", where), f"{where} backward")
    columns.add(
        key,
        name,
        cost=as_number(require(node, "cost_cpu", where), f"{where} cost_cpu"),
        mem=as_int(require(node, "cost_ram", where), f"{where} cost_ram"),
        kind=NodeKind.LOSS if name.lower() == "loss" else NodeKind.BACKWARD if backward else NodeKind.FORWARD,
    )


def _read_random_layered(columns: NodeColumns, node: Mapping[str, Any], where: str) -> None:
    """Read a random-layered node: ``out_cost`` is the output size, ``duration`` the cost."""
    key = require(node, "name", where)
    where = f"{where} ({key!r})"
    columns.add(
        key,
        str(key),
        cost=as_number(require(node, "duration", where), f"{where} duration"),
        mem=as_int(require(node, "out_cost", where), f"{where} out_cost"),
    )


def _read_generic(columns: NodeColumns, node: Mapping[str, Any], where: str) -> None:
    """Read a generic node: ``id`` is the name; missing attributes take Node's defaults."""
    key = require(node, "id", where)
    where = f"{where} ({key!r})"
    columns.add(
        key,
        key if isinstance(key, str) else str(key),
        cost=as_number(node.get("cost", _DEFAULT.cost), f"{where} cost"),
        mem=as_int(node.get("mem", _DEFAULT.mem), f"{where} mem"),
        workspace=as_int(node.get("workspace", _DEFAULT.workspace), f"{where} workspace"),
        kind=as_kind(node.get("kind", _DEFAULT.kind.value), f"{where} kind"),
        recomputable=as_bool(node.get("recomputable", _DEFAULT.recomputable), f"{where} recomputable"),
    )


_READERS = {
    NodeLinkFlavour.CHECKMATE: _read_checkmate,
    NodeLinkFlavour.RANDOM_LAYERED: _read_random_layered,
    NodeLinkFlavour.GENERIC: _read_generic,
}


# --- shared helpers --------------------------------------------------------------------------------


def _links(data: Mapping[str, Any], source: str, target: str, index: Mapping[Any, int]) -> list[tuple[int, int]]:
    """Read the edges as index pairs; networkx writes them under "links" (or "edges" since 3.4), never both."""
    if "edges" in data and "links" in data:
        raise GraphError("node-link data has both 'links' and 'edges': give the edges under one of them")
    field_name = "edges" if "edges" in data else "links"
    links = as_list(require(data, field_name, "node-link data"), field_name)
    edges: list[tuple[int, int]] = []
    for j, link in enumerate(links):
        where = f"link {j}"
        link = as_mapping(link, where)
        edges.append(
            (lookup(index, require(link, source, where), where), lookup(index, require(link, target, where), where))
        )
    return edges


def _key_list(attrs: Mapping[str, Any], field_name: str, index: Mapping[Any, int]) -> list[int] | None:
    """Return the indices of the node keys listed in graph attribute ``field_name`` (a list or a JSON string of one)."""
    if field_name not in attrs:
        return None
    value = attrs[field_name]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise GraphError(f"graph {field_name}: not a JSON list: {error}") from None
    values = as_list(value, f"graph {field_name}")
    return [lookup(index, key, f"graph {field_name}[{i}]") for i, key in enumerate(values)]


def _param_bytes(nodes: list[Mapping[str, Any]]) -> int:
    """Sum the ``param_cost`` of random-layered nodes: parameters stay resident, so they are fixed memory."""
    return sum(as_int(node.get("param_cost", 0), f"node {i} param_cost") for i, node in enumerate(nodes))
