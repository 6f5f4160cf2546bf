"""The project's own versioned JSON format for a Graph ("remat-graph", version 1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from remat_models.core.graph import Graph
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
    check_header,
    key_index,
    lookup,
    require,
)
from remat_models.io.impls_json import add_impl_fields, check_aux_of, read_impl_fields

GRAPH_FORMAT = "remat-graph"
GRAPH_VERSION = 1


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """Convert every field of ``graph`` to JSON-ready data (names for nodes, exact ints for bytes)."""
    names = graph.names
    nodes = node_records(graph, "name")
    add_impl_fields(graph, nodes)
    return {
        "format": GRAPH_FORMAT,
        "version": GRAPH_VERSION,
        "name": graph.name,
        "fixed_mem": graph.fixed_mem,
        "nodes": nodes,
        "edges": [[names[u], names[v]] for u, v in graph.edges.tolist()],
        "outputs": [names[v] for v in graph.outputs.tolist()],
        "order": [names[v] for v in graph.order.tolist()],
    }


def node_records(graph: Graph, name_key: str) -> list[dict[str, Any]]:
    """List one JSON object per node: its name under ``name_key``, then cost, mem, workspace, kind, recomputable."""
    cost, mem, workspace = graph.cost.tolist(), graph.mem.tolist(), graph.workspace.tolist()
    recomputable = graph.recomputable.tolist()
    return [
        {
            name_key: graph.names[v],
            "cost": cost[v],
            "mem": mem[v],
            "workspace": workspace[v],
            "kind": graph.kind[v].value,
            "recomputable": recomputable[v],
        }
        for v in range(graph.n)
    ]


def graph_from_dict(data: Any) -> Graph:
    """Read a "remat-graph" object; GraphError names the field (and node) that is wrong."""
    data = check_header(data, GRAPH_FORMAT, GRAPH_VERSION)
    graph_name = as_str(require(data, "name", GRAPH_FORMAT), "graph name")
    fixed_mem = as_int(require(data, "fixed_mem", GRAPH_FORMAT), "fixed_mem")
    nodes = as_list(require(data, "nodes", GRAPH_FORMAT), "nodes")
    columns = NodeColumns()
    for i, node in enumerate(nodes):
        node = as_mapping(node, f"node {i}")
        name = as_str(require(node, "name", f"node {i}"), f"node {i} name")
        where = f"node {i} ({name!r})"
        columns.add(
            name,
            name,
            cost=as_number(require(node, "cost", where), f"{where} cost"),
            mem=as_int(require(node, "mem", where), f"{where} mem"),
            workspace=as_int(require(node, "workspace", where), f"{where} workspace"),
            kind=as_kind(require(node, "kind", where), f"{where} kind"),
            recomputable=as_bool(require(node, "recomputable", where), f"{where} recomputable"),
        )
    index = key_index(columns.keys, "name")
    edges = as_list(require(data, "edges", GRAPH_FORMAT), "edges")
    impls, aux_of = read_impl_fields(nodes, index)
    graph = columns.to_graph(
        [_edge(edge, j, index) for j, edge in enumerate(edges)],
        outputs=_node_list(data, "outputs", index),
        order=_node_list(data, "order", index),
        fixed_mem=fixed_mem,
        name=graph_name,
        impls=impls,
    )
    check_aux_of(graph, aux_of)
    return graph


def _edge(edge: Any, j: int, index: Mapping[str, int]) -> tuple[int, int]:
    """Return the node indices of the edge ``[source name, target name]`` at position ``j``."""
    where = f"edge {j}"
    if not (isinstance(edge, (list, tuple)) and len(edge) == 2):
        raise GraphError(f"{where}: expected [source, target], got {edge!r}")
    return lookup(index, edge[0], where), lookup(index, edge[1], where)


def _node_list(data: Mapping[str, Any], field: str, index: Mapping[str, int]) -> list[int]:
    """Return the node indices of the list of names ``data[field]``."""
    values = as_list(require(data, field, GRAPH_FORMAT), field)
    return [lookup(index, value, f"{field}[{i}]") for i, value in enumerate(values)]
