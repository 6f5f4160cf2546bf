"""Compute-sequence engine shared by the baselines: minimal-closure recomputation and selection."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import numpy as np

from remat_models.graph import Graph, NodeKind
from remat_models.schedule import Schedule, SimulationResult, eager_frees, simulate

logger = logging.getLogger(__name__)


def forward_mask(graph: Graph) -> np.ndarray:
    """Forward nodes as a boolean mask; every node counts as forward if there is no backward/loss node."""
    kinds = np.array([kind.value for kind in graph.kind])
    if not np.isin(kinds, [NodeKind.BACKWARD.value, NodeKind.LOSS.value]).any():
        return np.ones(graph.n, dtype=bool)
    return kinds == NodeKind.FORWARD.value


def forward_nodes(graph: Graph) -> np.ndarray:
    """Return the forward nodes' indices, in the graph's input order."""
    return graph.order[forward_mask(graph)[graph.order]]


class SequenceBuilder:
    """Grow a compute sequence; computing a node first recomputes the closure of its missing ancestors.

    ``available`` holds the values the plan means to keep. ``ensure(v)`` computes v (if it is not
    available) after every unavailable ancestor reachable through unavailable nodes, in input
    order; ``drop`` forgets recomputable values (non-recomputable ones are never dropped).
    The schedule is the sequence with eager frees, so memory follows actual last uses.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.sequence: list[int] = []
        self.available = np.zeros(graph.n, dtype=bool)
        self.computed = np.zeros(graph.n, dtype=bool)
        self._preds = [graph.preds(v).tolist() for v in range(graph.n)]
        self._position = graph.position.tolist()

    def ensure(self, v: int) -> None:
        """Make v available, recomputing the minimal closure of unavailable ancestors first."""
        available = self.available
        if available[v]:
            return
        closure, stack, seen = [], [v], {v}
        while stack:
            u = stack.pop()
            closure.append(u)
            for p in self._preds[u]:
                if p not in seen and not available[p]:
                    seen.add(p)
                    stack.append(p)
        closure.sort(key=self._position.__getitem__)
        self.sequence.extend(closure)
        available[closure] = True
        self.computed[closure] = True

    def ensure_rest(self) -> None:
        """Compute, in input order, every node that has never been computed."""
        for v in self.graph.order[~self.computed[self.graph.order]].tolist():
            self.ensure(v)

    def drop(self, nodes: np.ndarray | list[int]) -> None:
        """Forget the recomputable values among ``nodes`` (an index array or a boolean mask)."""
        hit = np.zeros(self.graph.n, dtype=bool)
        hit[nodes] = True
        self.available &= ~(hit & self.graph.recomputable)

    def schedule(self) -> Schedule:
        """Return the sequence so far, with eager frees."""
        return eager_frees(self.graph, self.sequence)


def checkpoint_schedule(graph: Graph, checkpoints: Iterable[int] | np.ndarray) -> Schedule:
    """Cheapest recomputation implied by a checkpoint set of forward nodes (Checkmate App. B).

    A forward node's segment is the number of checkpoints strictly before it in input order (a
    checkpoint ends its segment). Stages follow the input order; after a stage computing forward
    node v, every non-checkpoint forward value of an earlier segment is dropped. Backward stages
    drop nothing, so each earlier segment is recomputed once, from its checkpoint, when the
    backward pass first needs it, and freed after its last use (Chen's per-segment ladder).
    """
    forward = forward_mask(graph)
    is_checkpoint = np.zeros(graph.n, dtype=bool)
    is_checkpoint[np.fromiter(checkpoints, dtype=np.int64)] = True
    fwd = forward_nodes(graph)
    segment = np.full(graph.n, -1, dtype=np.int64)
    segment[fwd] = np.cumsum(is_checkpoint[fwd]) - is_checkpoint[fwd]
    droppable = forward & ~is_checkpoint
    builder = SequenceBuilder(graph)
    for v in graph.order.tolist():
        builder.ensure(v)
        if forward[v] and segment[v] > 0:
            builder.drop(droppable & (segment < segment[v]))
    return builder.schedule()


def _rank(result: SimulationResult, budget: int) -> tuple[bool, float, float]:
    """Sort key: fitting schedules first by cost then peak, the others by peak then cost."""
    if result.fits(budget):
        return (False, result.total_cost, result.peak)
    return (True, result.peak, result.total_cost)


def best_schedule(
    graph: Graph,
    schedules: Iterable[Schedule],
    budget: int,
    *,
    until: Callable[[int, SimulationResult], bool] | None = None,
) -> Schedule:
    """Cheapest schedule (ties: lower peak) whose peak fits ``budget``, else the lowest-peak one.

    Schedules are simulated as they are drawn; ``until(k, result)`` true for the k-th one stops
    drawing more (it still competes).
    """
    best: tuple[tuple[bool, float, float], Schedule] | None = None
    for k, schedule in enumerate(schedules):
        result = simulate(graph, schedule)
        key = _rank(result, budget)
        if best is None or key < best[0]:
            best = (key, schedule)
        if until is not None and until(k, result):
            break
    if best is None:
        raise ValueError("best_schedule needs at least one schedule")
    logger.debug("best schedule (over budget %d, then rank keys) %s", budget, best[0])
    return best[1]
