"""JSON of operator implementations: the optional ``nodes[i].impls`` and ``nodes[i].aux_of`` fields of "remat-graph"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from remat_models.core.graph import Graph
from remat_models.core.impls import Impl
from remat_models.errors import GraphError
from remat_models.io._fields import as_int, as_list, as_mapping, as_number, as_str, lookup, require


def add_impl_fields(graph: Graph, records: list[dict[str, Any]]) -> None:
    """Add ``impls`` (every node but aux ones) and ``aux_of`` (aux nodes) to the node records, if ``graph`` has any."""
    table = graph.impl_table
    if table is None:
        return
    names = graph.names
    for v, record in enumerate(records):
        producer = int(table.aux_of[v])
        if producer >= 0:
            record["aux_of"] = names[producer]
            continue
        record["impls"] = [
            {
                "name": impl.name,
                "cost": impl.cost,
                "workspace": int(impl.workspace),
                "reads": None if impl.reads is None else [names[u] for u in impl.reads],
                "inplace_of": None if impl.inplace_of is None else names[impl.inplace_of],
                "aux": [names[a] for a in impl.aux],
                "recompute_cost": impl.recompute_cost,
                "tag": impl.tag,
            }
            for impl in table.impls[v]
        ]


def read_impl_fields(
    nodes: Sequence[Any], index: Mapping[str, int]
) -> tuple[dict[int, list[Impl]] | None, dict[int, int]]:
    """The implementations by node index (None when no node has any) and the declared ``aux_of`` producers."""
    impls: dict[int, list[Impl]] = {}
    aux_of: dict[int, int] = {}
    for i, node in enumerate(nodes):
        node = as_mapping(node, f"node {i}")
        where = f"node {i} ({node.get('name')!r})"
        if node.get("aux_of") is not None:
            aux_of[i] = lookup(index, node["aux_of"], f"{where} aux_of")
        if node.get("impls") is not None:
            records = as_list(node["impls"], f"{where} impls")
            impls[i] = [_impl(record, f"{where} impls[{j}]", index) for j, record in enumerate(records)]
    if not impls and not aux_of:
        return None, aux_of
    return impls, aux_of


def check_aux_of(graph: Graph, declared: Mapping[int, int]) -> None:
    """The ``aux_of`` fields must agree with the producers the implementations list."""
    found = graph.aux_of
    for v in range(graph.n):
        want = declared.get(v, -1)
        if int(found[v]) != want:
            producer = "none" if found[v] < 0 else repr(graph.names[int(found[v])])
            raise GraphError(
                f"node {graph.names[v]!r}: aux_of says {graph.names[want] if want >= 0 else None!r}, "
                f"but the implementations make its producer {producer}"
            )


def _impl(record: Any, where: str, index: Mapping[str, int]) -> Impl:
    record = as_mapping(record, where)

    def names(key: str) -> tuple[int, ...] | None:
        value = record.get(key)
        if value is None:
            return None
        return tuple(lookup(index, name, f"{where} {key}") for name in as_list(value, f"{where} {key}"))

    inplace = record.get("inplace_of")
    recompute = record.get("recompute_cost")
    return Impl(
        name=as_str(require(record, "name", where), f"{where} name"),
        cost=as_number(require(record, "cost", where), f"{where} cost"),
        workspace=as_int(record.get("workspace", 0), f"{where} workspace"),
        reads=names("reads"),
        inplace_of=None if inplace is None else lookup(index, inplace, f"{where} inplace_of"),
        aux=names("aux") or (),
        recompute_cost=None if recompute is None else as_number(recompute, f"{where} recompute_cost"),
        tag=as_str(record.get("tag", "default"), f"{where} tag"),
    )
