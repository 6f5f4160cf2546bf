"""A greedy staged plan: the input order plus recomputations, added where memory peaks, until the budget fits.

The plan has Checkmate's and Moccasin's input-order shape: stage g recomputes some earlier nodes in input
order, then computes the node at position g. Event (g, p) is numbered ``g * n + p`` (0-based). Every
computation keeps its output from its event through its last read (a reader reads the latest earlier
computation of each input; graph outputs stay to the end), which is what eager frees give, so the plan's
memory profile is the simulator's (and Moccasin's cumulative's on the same intervals).

Each step takes the fullest over-budget event and, for a few values resident there but not read there
(largest ``mem x over-budget events skipped`` first), tries recomputing the value in the stage of its
next read, or, for a node computed ``copies`` times already, moving its last recomputation there. Rule 1
keeps the candidate leaving the least total excess over the budget (the cheaper on ties), rule 2 the one
removing the most excess per unit of cost. Once the plan fits, recomputations it also fits without are
dropped (the costliest first). The cheaper fitting plan of the two rules is returned; if neither fits,
both retry aiming a little below the budget. Non-recomputable nodes are computed once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, eager_frees

DEFAULT_CANDIDATES = 64
MARGINS = (0.0, 0.005, 0.01, 0.02)  # fractions of the budget to aim below when the greedy gets stuck


@dataclass(frozen=True)
class Profile:
    """Memory of a plan at each of its computations (sorted by event), with who reads what when."""

    event: np.ndarray  # event of each computation, ascending
    node: np.ndarray
    end: np.ndarray  # one past the last event the output is kept
    level: np.ndarray  # bytes in use at each computation's event (fixed memory included)
    read_copy: np.ndarray  # for each (reader computation, input) pair: the computation read
    read_event: np.ndarray  # ... and the event it is read at

    def excess(self, budget: int) -> int:
        """Bytes over the budget, summed over events."""
        return int(np.maximum(self.level - budget, 0).sum())


def staged_greedy(
    graph: Graph, budget: int, copies: int | np.ndarray = 2, candidates: int = DEFAULT_CANDIDATES
) -> Schedule:
    """The greedy plan's schedule (eager frees); it may still exceed ``budget`` if the greedy got stuck."""
    return eager_frees(graph, staged_greedy_sequence(graph, budget, copies, candidates))


def staged_greedy_sequence(
    graph: Graph,
    budget: int,
    copies: int | np.ndarray = 2,
    candidates: int = DEFAULT_CANDIDATES,
    deadline: float | None = None,
) -> list[int]:
    """The greedy plan's compute sequence (see the module docstring): the cheaper of the two rules' plans.

    If neither fits, both retry aiming a little below the budget (``MARGINS``), which often gets them unstuck.
    At ``deadline`` (``time.perf_counter()``) the greedy stops and returns its best plan so far, fitting or not.
    """
    limit = np.where(graph.recomputable, np.broadcast_to(np.asarray(copies, dtype=np.int64), (graph.n,)), 1)
    best: Profile | None = None
    for margin in MARGINS:
        target = int(budget * (1.0 - margin))
        plans = [_greedy(graph, budget, target, limit, candidates, per_cost, deadline) for per_cost in (False, True)]
        plans += [] if best is None else [best]
        best = min(plans, key=lambda p: (p.excess(budget), float(graph.cost[p.node].sum())))
        if best.excess(budget) == 0 or _past(deadline):
            break
    assert best is not None
    return best.node.tolist()


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def _greedy(
    graph: Graph, budget: int, target: int, limit: np.ndarray, candidates: int, per_cost: bool, deadline: float | None
) -> Profile:
    """Add recomputations until the plan fits ``target`` (or is stuck, or out of time); drop the needless ones."""
    prof = profile(graph, graph.order.astype(np.int64), np.arange(graph.n, dtype=np.int64))
    while prof.excess(target) > 0 and not _past(deadline):
        found = _step(graph, prof, target, limit, candidates, per_cost)
        if found is None:
            break
        prof = found
    if prof.excess(budget) > 0:
        return prof
    again = prof.event != graph.position[prof.node] * (graph.n + 1)  # recomputations
    for event in prof.event[again][np.argsort(-graph.cost[prof.node[again]], kind="stable")].tolist():
        if _past(deadline):
            break
        trial = _without(graph, prof, int(np.searchsorted(prof.event, event)))  # the costliest first
        if trial.excess(budget) == 0:
            prof = trial
    return prof


def _step(
    graph: Graph, prof: Profile, budget: int, limit: np.ndarray, candidates: int, per_cost: bool
) -> Profile | None:
    """The best recomputation at the fullest over-budget event where one lowers the excess (None: stuck).

    Best: the least excess left (then the cheapest), or with ``per_cost`` the most excess removed per unit of cost.
    """
    excess = prof.excess(budget)
    over = np.flatnonzero(prof.level > budget)
    for peak in over[np.argsort(-prof.level[over], kind="stable")].tolist():
        best: tuple[tuple[float, float], Profile] | None = None
        for drop, u, g in _candidates(graph, prof, peak, budget, limit, candidates):
            trial = _without(graph, prof, drop, (u, g))
            left, cost = trial.excess(budget), float(graph.cost[u])
            key = (-(excess - left) / max(cost, 1e-12), cost) if per_cost else (float(left), cost)
            if left < excess and (best is None or key < best[0]):
                best = (key, trial)
        if best is not None:
            return best[1]
    return None


def _without(graph: Graph, prof: Profile, drop: int, add: tuple[int, int] | None = None) -> Profile:
    """The profile without computation ``drop`` (-1: none) and with the computation ``add`` = (node, stage)."""
    keep = np.arange(prof.node.size) != drop
    node, stage = prof.node[keep], prof.event[keep] // graph.n
    if add is not None:
        node, stage = np.append(node, add[0]), np.append(stage, add[1])
    return profile(graph, node, stage)


def profile(graph: Graph, node: np.ndarray, stage: np.ndarray) -> Profile:
    """Memory profile of the computations (node, stage) under eager frees, vectorized over the graph's edges."""
    n = graph.n
    event = stage * n + graph.position[node]
    order = np.argsort(event, kind="stable")
    event, node = event[order], node[order]
    horizon = n * n + 1
    by_node = np.lexsort((event, node))  # computations grouped by node, in event order
    key = node[by_node] * horizon + event[by_node]
    deg = np.diff(graph.pred_ptr)[node]
    reader = np.repeat(np.arange(node.size), deg)
    first = np.repeat(graph.pred_ptr[node] - np.cumsum(deg) + deg, deg) + np.arange(int(deg.sum()))
    inputs = graph.pred_idx[first]
    read_event = event[reader]
    read_copy = by_node[np.searchsorted(key, inputs * horizon + read_event) - 1]  # latest earlier computation
    end = event + 1
    np.maximum.at(end, read_copy, read_event + 1)
    last = by_node[np.searchsorted(key, (graph.outputs + 1) * horizon) - 1]
    end[last] = horizon
    delta = np.zeros(node.size + 1, dtype=np.int64)
    mem = graph.mem[node]
    np.add.at(delta, np.arange(node.size), mem)
    np.add.at(delta, np.searchsorted(event, end), -mem)
    level = np.cumsum(delta)[:-1] + graph.workspace[node] + graph.fixed_mem
    return Profile(event, node, end, level, read_copy, read_event)


def _candidates(
    graph: Graph, prof: Profile, peak: int, budget: int, limit: np.ndarray, count: int
) -> list[tuple[int, int, int]]:
    """(computation to drop or -1, node, stage): recomputations that free a value over ``prof.event[peak]``.

    A value resident there is recomputed in the stage of its next read; a node computed ``limit`` times
    already has its last recomputation moved there instead. The most promising come first.
    """
    n = graph.n
    at = int(prof.event[peak])
    computed = np.bincount(prof.node, minlength=n)
    covering = np.flatnonzero((prof.event < at) & (prof.end > at))
    node = prof.node[covering]
    first = prof.event[covering] == graph.position[node] * (n + 1)
    room = computed[node] < limit[node]
    covering = covering[room | ~first]
    drop = np.where(room[room | ~first], -1, covering)
    if covering.size == 0:
        return []
    later = prof.read_event >= at
    next_read = np.full(prof.node.size, n * n, dtype=np.int64)  # none: recompute in the last stage (an output)
    np.minimum.at(next_read, prof.read_copy[later], prof.read_event[later])
    nxt = next_read[covering]
    u = prof.node[covering]
    g = np.minimum(nxt // n, n - 1)
    ok = (nxt > at) & (g * n + graph.position[u] > at) & (g > graph.position[u])
    covering, u, g, nxt, drop = covering[ok], u[ok], g[ok], nxt[ok], drop[ok]
    over = prof.level > budget
    span = np.searchsorted(prof.event, nxt) - np.searchsorted(prof.event, at)
    over_cum = np.concatenate([[0], np.cumsum(over)])
    hits = over_cum[peak + span] - over_cum[peak]  # over-budget events the value is dropped over
    rank = np.argsort(-(graph.mem[u] * np.maximum(hits, 1)), kind="stable")[:count]
    return list(zip(drop[rank].tolist(), u[rank].tolist(), g[rank].tolist(), strict=True))
