"""Paging on Moccasin (spec C.5): an offload flag and optional fetch intervals per paged node.

- ``offload[v]`` (bool): v is copied to the host right after its first computation (serial mode: the
  offload's timing changes neither memory nor cost, FastSA B.3).
- ``fetch[v, k]`` (optional intervals, ``Paging.fetches`` per node): a device copy of v from the
  prefetch event ``start`` (before that event's compute) to ``end`` (exclusive), like a retention
  interval. ``presence => offload[v]``, ``presence => start >= s_v^1 + 1``, fetches form a prefix and
  are ordered (``presence[k+1] => end[k] <= start[k+1]``).
- Memory: the fetch intervals join the cumulative ``memory`` with demand mem[v]. Supply: each fetch
  joins the reservoir of every (edge (v, w), interval of w), so it supplies consumers like a computed copy.
- Host: ``sum_v mem[v] offload[v] <= host_capacity`` (host copies persist).
- Objective (phase 2): ``+ t_out(v) offload[v] + t_in(v) presence``; phase 1 (peak) takes no transfer terms.

Only nodes with C_v >= 2 are paged (Moccasin keeps single-interval producers' supply as linear rows, which
a fetch cannot join). Copies of v may overlap in the model: eager frees keep one copy on the device, and
the cumulative over-counts, so the simulated peak stays within the model's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from remat_models.core.schedule import TRANSFER_STEPS, Offload, Prefetch, Schedule
from remat_models.formulations.base import PagingPart
from remat_models.formulations.base import PagingPlugin as Paging  # what the calling extension offers
from remat_models.formulations.rows import Rows
from remat_models.model import Var
from remat_models.model.index import IndexMap

log = logging.getLogger(__name__)


def paged(paging: Paging, built: Any) -> np.ndarray:
    """Paged node ids: the plug-in's eligible nodes with at least two retention intervals."""
    nodes = paging.paged_nodes(built.graph)
    single = nodes[built.layout.counts[nodes] < 2]
    if single.size:
        log.debug("paging on moccasin skips %d node(s) with one retention interval", single.size)
    return nodes[built.layout.counts[nodes] >= 2]


def apply(paging: Paging, built: Any) -> None:
    """Add offload flags, fetch intervals, their rows, cumulative/reservoir terms and costs to a Moccasin model."""
    m, lay, graph = built.model, built.layout, built.graph
    nodes = paged(paging, built)
    K = paging.fetches
    P = nodes.size
    owner = np.repeat(nodes, K)  # node of each fetch interval
    rank = np.tile(np.arange(K), P)
    lo = built.layout.start_bounds()[0][lay.ptr[owner]] + 1
    T = lay.horizon
    offload = m.bool_block("offload", P)
    hi = np.full(P * K, T)
    fetch = m.interval_block("fetch", P * K, start=(lo, hi), size=(1, T), end=(lo + 1, T + 1), optional=True)
    start, end, presence = fetch.start.cols, fetch.end.cols, fetch.presence.cols  # type: ignore[union-attr]
    which = np.repeat(np.arange(P), K)
    Rows(P * K).term(presence, 1.0).term(offload.cols[which], -1.0).add_to(m, ub=0.0, name="paging_offload")
    later = np.flatnonzero(rank > 0)
    Rows(later.size).term(presence[later], 1.0).term(presence[later - 1], -1.0).add_to(m, ub=0.0)
    retain_start = m.block("retain.start").cols
    r = np.arange(P * K)
    if r.size:  # presence => start >= s_v^1 + 1
        m.add_indicators(
            presence, np.concatenate([r, r]), np.concatenate([start, retain_start[lay.ptr[owner]]]),
            np.concatenate([np.ones(r.size), -np.ones(r.size)]), 1.0, np.inf,
        )
    if later.size:  # presence[k+1] => end[k] <= start[k+1]
        q = np.arange(later.size)
        m.add_indicators(
            presence[later], np.concatenate([q, q]), np.concatenate([end[later - 1], start[later]]),
            np.concatenate([np.ones(later.size), -np.ones(later.size)]), -np.inf, 0.0,
        )
    if P:
        m.extend_cumulative(built.hooks["memory"], fetch.ids, built.scaled.mem[owner])
    _supply(built, nodes, K, start, end, presence)
    capacity = paging.transfer.host_capacity
    if capacity is not None and P:  # host copies persist: the host holds every offloaded value at the end
        unit = built.units.mem_unit
        Rows(1).term(offload.cols, graph.mem[nodes] / unit, rows=np.zeros(P, dtype=np.int64)).add_to(
            m, ub=capacity / unit, name="paging_capacity"
        )
    if built.phase != 1:
        transfer, unit = paging.transfer, built.units.cost_unit
        mem = graph.mem.astype(np.float64)
        m.add_objective_terms(offload.cols, transfer.out_time(mem[nodes]) / unit)
        m.add_objective_terms(presence, transfer.in_time(mem[owner]) / unit)
    shape = (graph.n, max(K, 1))
    m.set_index(IndexMap.sparse("offload", ("node",), (graph.n,), (nodes,), offload.cols, (graph.names,)))
    for part in ("start", "end", "presence"):
        block = m.block(f"fetch.{part}")
        axes = ("node", "copy")
        m.set_index(IndexMap.sparse(block.name, axes, shape, (owner, rank), block.cols, (graph.names, None)))
    built.extensions[paging.name] = {"nodes": nodes, "owner": owner}


def _supply(built: Any, nodes: np.ndarray, K: int, start: np.ndarray, end: np.ndarray, presence: np.ndarray) -> None:
    """Each fetch of v joins the reservoir of every (edge (v, w), interval of w)."""
    graph, lay, supply = built.graph, built.layout, built.hooks["supply"]
    edges = graph.edges
    for j, v in enumerate(nodes.tolist()):
        times, changes, actives = [], [], []
        for k in range(j * K, (j + 1) * K):
            times += [Var(int(start[k])), Var(int(end[k]))]
            changes += [1, -1]
            actives += [Var(int(presence[k]))] * 2
        for e in np.flatnonzero(edges[:, 0] == v).tolist():
            w = int(edges[e, 1])
            for i in range(int(lay.counts[w])):
                built.model.extend_reservoir(supply[(e, i)], times, changes, actives)


def events(paging: Paging, built: Any, values: Mapping[str, np.ndarray], sequence: list[Any]) -> list[Any]:
    """Before each event's compute the fetches starting there; after a first computation, its offload."""
    state = built.extensions[paging.name]
    nodes, owner = state["nodes"], state["owner"]
    if not nodes.size or "fetch.presence" not in values:  # e.g. decoding a warm start of the base blocks
        return sequence
    iv = built.interval_values(values)
    lay, graph = built.layout, built.graph
    active = iv.presence > 0
    order = np.argsort(iv.start[active], kind="stable")
    event_of = iv.start[active][order]  # event of each compute in the sequence
    node_of = lay.owner[active][order]
    p = np.rint(values["fetch.start"]).astype(np.int64)
    e = np.rint(values["fetch.end"]).astype(np.int64)
    on = np.rint(values["fetch.presence"]).astype(bool)
    offloaded = np.rint(values["offload"]).astype(bool)
    prefetch_at: dict[int, list[int]] = {}
    for k in np.flatnonzero(on).tolist():
        v = int(owner[k])
        readers = np.isin(node_of, graph.succ_idx[graph.succ_ptr[v] : graph.succ_ptr[v + 1]])
        inside = (event_of >= p[k]) & (event_of < e[k])
        if not (readers & inside).any():  # a fetch nobody reads from: dropped (it only costs)
            log.debug("paging: fetch of %r at event %d supplies no read; dropped", graph.names[v], p[k])
            continue
        prefetch_at.setdefault(int(np.flatnonzero(event_of >= p[k])[0]), []).append(v)
    first_event = iv.start[lay.ptr[:-1]]
    offload_at = {int(np.flatnonzero(event_of == first_event[v])[0]): v for v in nodes[offloaded].tolist()}
    result: list[Any] = []
    position = 0
    for item in sequence:
        if isinstance(item, TRANSFER_STEPS):
            result.append(item)
            continue
        result.extend(Prefetch(v) for v in prefetch_at.get(position, ()))
        result.append(item)
        if position in offload_at:
            result.append(Offload(offload_at[position]))
        position += 1
    return result


def peak_bound(paging: Paging, built: Any, values: Mapping[str, np.ndarray]) -> int | None:
    """Bytes the cumulative counts at its fullest compute event, fetch intervals included."""
    if "fetch.presence" not in values:
        return None
    lay, sc = built.layout, built.scaled
    iv = built.interval_values(values)
    act = iv.presence > 0
    on = np.rint(values["fetch.presence"]) > 0
    starts = np.concatenate([iv.start[act], np.rint(values["fetch.start"])[on].astype(np.int64)])
    ends = np.concatenate([iv.end[act], np.rint(values["fetch.end"])[on].astype(np.int64)])
    demand = np.concatenate([sc.mem[lay.owner[act]], sc.mem[built.extensions[paging.name]["owner"][on]]])
    events = np.unique(iv.start[act])
    covered = (starts[:, None] <= events[None, :]) & (ends[:, None] > events[None, :])
    level = demand.astype(np.int64) @ covered.astype(np.int64)
    np.add.at(level, np.searchsorted(events, iv.start[act]), sc.workspace[lay.owner[act]])
    return int(built.graph.fixed_mem + int(level.max(initial=0)) * built.units.mem_unit)


def hints(paging: Paging, built: Any, schedule: Schedule) -> dict[str, np.ndarray]:
    """No paging: no offload, every fetch absent at its earliest start."""
    m = built.model
    lo = np.asarray(m.col_lb[m.block("fetch.start").cols])
    size = m.block("fetch.start").cols.size
    values = {
        "offload": np.zeros(m.block("offload").cols.size),
        "fetch.start": lo,
        "fetch.end": lo + 1,
        "fetch.presence": np.zeros(size),
    }
    if "fetch.size" in m.blocks:
        values["fetch.size"] = np.ones(size)
    return values


class MoccasinPagingPart(PagingPart):
    """Moccasin's paging part (``Moccasin.paging_part``): fetch intervals per paged node."""

    apply = staticmethod(apply)
    events = staticmethod(events)
    hints = staticmethod(hints)
    peak_bound = staticmethod(peak_bound)
