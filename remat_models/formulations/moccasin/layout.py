"""Moccasin's retention intervals: how many per node, where they may start (event numbering), their values.

Events are numbered 1..T. With ``order="free"`` (paper eq. 9) T = sum C_v and every event may run
any node. With ``order="input"`` (paper sec. 2.3) stage g (1..n) holds the events (g, 1..g); slot p
runs only the node at position p of the input order, and the node at position p computes first at
the last event of stage p. The paper numbers these events triangularly (1..n(n+1)/2); here event
(g, p) is ``n * (g - 1) + p``: the same events in the same order, but an *affine* function of the
stage, so a start variable is ``n * stage + const`` and the restricted domain needs no table.

Interval i of node v covers events ``start..end - 1`` (``end`` is exclusive, i.e. the paper's
inclusive end e is ``end - 1``): v is computed at ``start`` and retained through its last use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from remat_models.core.graph import Graph
from remat_models.errors import ConfigurationError

Order = Literal["input", "free"]
ORDERS: tuple[Order, ...] = ("input", "free")
DEFAULT_C = 2


@dataclass(frozen=True)
class Layout:
    """Interval bookkeeping for one graph: counts C_v, interval ids per node, event domains."""

    graph: Graph
    order: Order
    counts: np.ndarray  # C_v after clipping
    ptr: np.ndarray  # intervals of node v are ptr[v] .. ptr[v + 1] - 1
    horizon: int  # T, the last event

    @property
    def size(self) -> int:
        """Number of intervals K = sum C_v."""
        return int(self.ptr[-1])

    @cached_property
    def owner(self) -> np.ndarray:
        """Node of each interval (read-only; computed once: the model build asks per reservoir)."""
        return _frozen(np.repeat(np.arange(self.graph.n), self.counts))

    @cached_property
    def rank(self) -> np.ndarray:
        """Index of each interval within its node (0 = the first, always active; read-only)."""
        return _frozen(np.arange(self.size) - self.ptr[self.owner])

    @property
    def first(self) -> np.ndarray:
        """Id of the first interval of every node."""
        return self.ptr[:-1]

    @property
    def slot(self) -> np.ndarray:
        """Input order: the slot (1-based position) of each interval's node."""
        return self.graph.position[self.owner] + 1

    def stage_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Input order: the stages each interval may start in (first: its own stage; later: the ones after)."""
        slot, first = self.slot, self.rank == 0
        return np.where(first, slot, slot + 1), np.where(first, slot, self.graph.n)

    def event(self, stage: np.ndarray | int, slot: np.ndarray | int) -> np.ndarray:
        """Input order: the event number of (stage, slot)."""
        return self.graph.n * (np.asarray(stage) - 1) + np.asarray(slot)

    def start_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of every interval's start event."""
        if self.order == "free":
            return np.ones(self.size, dtype=np.int64), np.full(self.size, self.horizon, dtype=np.int64)
        lo, hi = self.stage_bounds()
        return self.event(lo, self.slot), self.event(hi, self.slot)


def make_layout(
    graph: Graph, order: Order = "input", C: int = DEFAULT_C, C_nodes: Mapping[str, int] | None = None
) -> Layout:
    """The layout with C_v = ``C`` (``C_nodes`` by name), 1 if not recomputable, in input order at most n - position."""
    if order not in ORDERS:
        raise ConfigurationError(f"unknown Moccasin order {order!r}; choose one of {', '.join(ORDERS)}")
    counts = np.full(graph.n, int(C), dtype=np.int64)
    for name, c in (C_nodes or {}).items():
        if name not in graph.index:
            raise ConfigurationError(f"C override names unknown node {name!r}")
        counts[graph.index[name]] = int(c)
    if (counts < 1).any():
        raise ConfigurationError(f"C must be >= 1 for every node, got {int(counts.min())}")
    counts[~graph.recomputable] = 1
    if order == "input":
        counts = np.minimum(counts, graph.n - graph.position)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    horizon = int(ptr[-1]) if order == "free" else graph.n * graph.n
    return Layout(graph, order, counts, ptr, horizon)


@dataclass(frozen=True)
class IntervalValues:
    """Values of the intervals: start event, exclusive end event, presence (all length K)."""

    start: np.ndarray
    end: np.ndarray
    presence: np.ndarray


def compute_sequence(layout: Layout, start: np.ndarray, presence: np.ndarray) -> list[int]:
    """Active interval starts sorted give the compute sequence (node indices)."""
    active = np.flatnonzero(np.asarray(presence) > 0.5)
    starts = np.rint(np.asarray(start, dtype=np.float64)[active]).astype(np.int64)
    return layout.owner[active[np.argsort(starts, kind="stable")]].tolist()


def intervals_from_sequence(layout: Layout, sequence: Sequence[int]) -> IntervalValues:
    """Interval values of a compute sequence (warm start): events in sequence order, ends at last use.

    At most C_v computations per node are kept (later ones are dropped; a consumer then reads the
    last kept copy). In input order each computation goes to the earliest event of its node's slot
    after the previous one (a first computation to its own stage); a sequence whose first
    computations do not follow the input order gives an infeasible hint, which the solver repairs.
    """
    graph, n = layout.graph, layout.graph.n
    count = np.zeros(n, dtype=np.int64)
    ids: list[int] = []
    times: list[int] = []
    now = 0
    for v in (int(x) for x in sequence):
        if count[v] >= layout.counts[v]:
            continue
        if layout.order == "free":
            time = now + 1
        else:
            slot = int(graph.position[v]) + 1
            if count[v] == 0:
                time = int(layout.event(slot, slot))
            else:
                stage = _next_stage(now, slot, n)
                if stage > n:
                    continue
                time = int(layout.event(stage, slot))
        ids.append(int(layout.ptr[v] + count[v]))
        times.append(time)
        count[v] += 1
        now = max(now, time)
    return _fill(layout, np.array(ids, dtype=np.int64), np.array(times, dtype=np.int64))


def _next_stage(now: int, slot: int, n: int) -> int:
    """The first stage after event ``now`` whose event at ``slot`` follows it (and may recompute: > slot)."""
    if now == 0:
        return slot + 1
    stage, at = divmod(now - 1, n)  # now is event (stage + 1, at + 1)
    stage += 1 if slot > at + 1 else 2
    return max(stage, slot + 1)


def _fill(layout: Layout, ids: np.ndarray, times: np.ndarray) -> IntervalValues:
    """Complete interval values from the active (interval id, start) pairs: ends at last use, inactive parked last."""
    graph, K = layout.graph, layout.size
    _, start_hi = layout.start_bounds()
    start = start_hi.copy()
    presence = np.zeros(K, dtype=np.int64)
    start[ids] = times
    presence[ids] = 1
    end = start + 1
    latest = np.full(graph.n, -1, dtype=np.int64)
    owner = layout.owner
    pred_ptr, pred_idx = graph.pred_ptr, graph.pred_idx
    for k in ids[np.argsort(times, kind="stable")].tolist():
        v = int(owner[k])
        for u in pred_idx[pred_ptr[v] : pred_ptr[v + 1]].tolist():
            if latest[u] >= 0:
                end[latest[u]] = max(end[latest[u]], start[k] + 1)
        latest[v] = k
    kept = latest[graph.outputs]
    end[kept[kept >= 0]] = layout.horizon + 1
    return IntervalValues(start, end, presence)


def retained_peak(layout: Layout, values: IntervalValues, mem: np.ndarray, workspace: np.ndarray) -> int:
    """The cumulative's memory at its fullest compute event: covering intervals' mem + the workspace there."""
    active = np.flatnonzero(values.presence > 0)
    if active.size == 0:
        return 0
    start, end = values.start[active], values.end[active]
    events = np.unique(start)
    level = np.zeros(events.size + 1, dtype=np.int64)
    demand = np.asarray(mem)[layout.owner[active]]
    np.add.at(level, np.searchsorted(events, start), demand)
    np.add.at(level, np.searchsorted(events, end), -demand)
    at = np.cumsum(level)[:-1]
    np.add.at(at, np.searchsorted(events, start), np.asarray(workspace)[layout.owner[active]])
    return int(at.max())


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array`` made read-only (it is cached and shared)."""
    array.flags.writeable = False
    return array
