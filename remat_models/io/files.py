"""Graph files on disk: format detection on read, atomic JSON writes."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any, Literal

from remat_models.core.graph import Graph
from remat_models.errors import ConfigurationError, GraphError, InputTypeError
from remat_models.io._fields import ErrorType
from remat_models.io.atomic import write_text_atomic
from remat_models.io.graph_json import GRAPH_FORMAT, graph_from_dict, graph_to_dict
from remat_models.io.node_link import from_node_link, to_node_link

_log = logging.getLogger(__name__)

GraphFormat = Literal["remat", "node-link"]
GRAPH_FORMATS: tuple[GraphFormat, ...] = ("remat", "node-link")


def read_json(path: str | os.PathLike[str], error: ErrorType = GraphError) -> Any:
    """Return the decoded JSON of ``path``; a missing file or invalid JSON raises ``error`` naming the path.

    ``path`` must be a string or a path: anything else (an int would be taken for a file descriptor, 0 for
    stdin) raises InputTypeError.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InputTypeError(f"a file path is a str or an os.PathLike, got {type(path).__name__} {path!r}")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: invalid JSON: {exc}") from exc
    except ValueError as exc:  # a NUL byte in the path, or an integer past Python's digit limit in the file
        raise error(f"{path!r}: cannot read: {exc}") from exc
    except RecursionError:
        raise error(f"{path}: invalid JSON: nested too deeply for this reader") from None


def dumps_json(data: Any) -> str:
    """Encode readable JSON that stays compact for large files: one node, edge or step a line."""
    return _dumps(data, expand=2) + "\n"


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write ``data`` as JSON to ``path`` all at once (see ``remat_models.io.atomic``).

    Serialisation happens before anything touches the disk; on any failure an existing ``path`` is
    left as it was. A missing folder or a target that is not a regular file raises OutputError.
    """
    write_text_atomic(path, dumps_json(data))


def read_graph(path: str | os.PathLike[str]) -> Graph:
    """Read a graph file in the own format or as node-link data (detected from its content).

    ``path`` is a str or an os.PathLike (InputTypeError otherwise); a bad file raises GraphError naming it.
    """
    data = read_json(path)
    try:
        if isinstance(data, Mapping) and "format" in data:
            if data["format"] != GRAPH_FORMAT:
                raise GraphError(f"format {data['format']!r} is not a graph format (expected {GRAPH_FORMAT!r})")
            graph = graph_from_dict(data)
        elif isinstance(data, Mapping) and "nodes" in data:
            graph = from_node_link(data)
        else:
            raise GraphError(f"unrecognised content: expected a {GRAPH_FORMAT!r} object or networkx node-link data")
    except GraphError as exc:
        raise GraphError(f"{path}: {exc}") from exc
    _log.debug("read %s: graph %r with %d nodes and %d edges", path, graph.name, graph.n, graph.m)
    return graph


def write_graph(graph: Graph, path: str | os.PathLike[str], fmt: GraphFormat = "remat") -> None:
    """Write ``graph`` atomically in the own format ("remat") or as generic node-link data ("node-link")."""
    if fmt == "remat":
        write_json_atomic(path, graph_to_dict(graph))
    elif fmt == "node-link":
        write_json_atomic(path, to_node_link(graph))
    else:
        raise ConfigurationError(f"unknown graph format {fmt!r} (expected one of {GRAPH_FORMATS})")


def _dumps(value: Any, expand: int, indent: str = "") -> str:
    """Encode JSON with the first ``expand`` levels of objects, and of lists of containers, one item a line."""
    if expand <= 0 or not value or not _spread(value):
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    inner = indent + "  "
    if isinstance(value, Mapping):
        items = [f"{inner}{_key(key)}: {_dumps(item, expand - 1, inner)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    items = [inner + _dumps(item, expand - 1, inner) for item in value]
    return "[\n" + ",\n".join(items) + "\n" + indent + "]"


def _key(key: Any) -> str:
    """Encode an object key as JSON; like ``json.dumps``, only strings are taken as they are."""
    if not isinstance(key, str):
        raise TypeError(f"JSON object keys must be strings, got {key!r}")
    return json.dumps(key, ensure_ascii=False)


def _spread(value: Any) -> bool:
    """Tell whether ``value`` is laid out one item a line: an object, or a list holding objects or lists."""
    if isinstance(value, Mapping):
        return True
    return isinstance(value, list) and any(isinstance(item, (Mapping, list)) for item in value)
