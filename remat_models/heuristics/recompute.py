"""Compute-sequence engine shared by the baselines: minimal-closure recomputation and selection.

The sequences are built and scored by numba kernels (:mod:`._sequence_kernels`) in time linear in
their length, so a sweep over many checkpoint sets costs one kernel call each and only the chosen
sequence becomes a :class:`~remat_models.core.schedule.Schedule` (with :func:`eager_frees`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Free, Schedule, eager_frees, simulate
from remat_models.errors import InvalidScheduleError
from remat_models.heuristics import _sequence_kernels as kernels

logger = logging.getLogger(__name__)

Score = tuple[int, float]  # (peak, total cost) of a schedule
T = TypeVar("T")


def forward_mask(graph: Graph) -> np.ndarray:
    """Forward nodes as a boolean mask; every node counts as forward if there is no backward/loss node."""
    if not graph.of_kind(NodeKind.BACKWARD, NodeKind.LOSS).any():
        return np.ones(graph.n, dtype=bool)
    return graph.of_kind(NodeKind.FORWARD)


def forward_nodes(graph: Graph) -> np.ndarray:
    """Return the forward nodes' indices, in the graph's input order."""
    return graph.order[forward_mask(graph)[graph.order]]


def checkpoint_sequence(
    graph: Graph, checkpoints: Iterable[int] | np.ndarray, forward: np.ndarray | None = None
) -> np.ndarray:
    """Compute sequence of the cheapest recomputation implied by a checkpoint set (see :func:`checkpoint_schedule`).

    ``forward``: :func:`forward_mask` of the graph, if the caller has it.
    """
    forward = forward_mask(graph) if forward is None else forward
    is_checkpoint = np.zeros(graph.n, dtype=bool)
    is_checkpoint[np.fromiter(checkpoints, dtype=np.int64)] = True
    fwd = graph.order[forward[graph.order]]
    segment = np.full(graph.n, -1, dtype=np.int64)
    segment[fwd] = np.cumsum(is_checkpoint[fwd]) - is_checkpoint[fwd]
    droppable = forward & ~is_checkpoint & graph.recomputable
    return kernels.checkpoint_sequence(
        graph.order, forward, segment, droppable, graph.pred_ptr, graph.pred_idx, graph.position
    )


def saved_set_sequence(
    graph: Graph, saved: Iterable[int] | np.ndarray, forward: np.ndarray | None = None
) -> np.ndarray:
    """Compute sequence keeping the forward values ``saved`` (and the non-recomputable ones) for the backward pass.

    Every other forward value is dropped after its last reader in the forward pass (the loss included)
    and recomputed, once, from what is available when the backward pass first needs it (PyTorch's
    saved-tensors model of recomputation).
    """
    forward = forward_mask(graph) if forward is None else forward
    is_saved = np.zeros(graph.n, dtype=bool)
    is_saved[np.fromiter(saved, dtype=np.int64)] = True
    droppable = forward & ~is_saved & graph.recomputable
    return kernels.saved_set_sequence(
        graph.order, droppable, last_forward_use(graph, forward), graph.pred_ptr, graph.pred_idx, graph.position
    )


def last_forward_use(graph: Graph, forward: np.ndarray) -> np.ndarray:
    """Each node's last reader in the forward pass, the loss included (-1: none): where a dropped value is dropped."""
    reads_in_forward = forward | graph.of_kind(NodeKind.LOSS)  # the loss is the forward pass's last step
    readers = graph.edges[reads_in_forward[graph.edges[:, 1]]]
    last = np.full(graph.n, -1, dtype=np.int64)
    latest = np.full(graph.n, -1, dtype=np.int64)
    np.maximum.at(latest, readers[:, 0], graph.position[readers[:, 1]])
    has_reader = latest >= 0
    last[has_reader] = graph.order[latest[has_reader]]
    return last


def checkpoint_schedule(graph: Graph, checkpoints: Iterable[int] | np.ndarray) -> Schedule:
    """Cheapest recomputation implied by a checkpoint set of forward nodes (Checkmate App. B).

    A forward node's segment is the number of checkpoints strictly before it in input order (a
    checkpoint ends its segment). Nodes are computed in input order, each after the minimal closure
    of its unavailable ancestors (recomputed in input order); after computing forward node v, every
    recomputable non-checkpoint forward value of an earlier segment is dropped. Backward stages
    drop nothing, so each earlier segment is recomputed once, from its checkpoint, when the
    backward pass first needs it, and freed after its last use (Chen's per-segment ladder).
    """
    return sequence_schedule(graph, checkpoint_sequence(graph, checkpoints))


def _free_positions(graph: Graph, sequence: np.ndarray) -> np.ndarray:
    is_output = np.zeros(graph.n, dtype=bool)
    is_output[graph.outputs] = True
    free_at = kernels.eager_free_positions(sequence, graph.pred_ptr, graph.pred_idx, is_output)
    if sequence.size and free_at.size == 1 and free_at[0] <= -2:
        p = int(-2 - free_at[0])
        raise InvalidScheduleError(
            f"compute sequence computes {graph.names[sequence[p]]!r} before one of its inputs", step=p
        )
    return free_at


def sequence_schedule(graph: Graph, sequence: np.ndarray) -> Schedule:
    """``eager_frees(graph, sequence)``, built from arrays on graphs without implementations (long sequences)."""
    sequence = np.asarray(sequence, dtype=np.int64)
    if graph.impl_table is not None:
        return eager_frees(graph, sequence)
    free_at = _free_positions(graph, sequence)
    freed = np.flatnonzero(free_at >= 0)
    freed = freed[np.lexsort((sequence[freed], free_at[freed]))]  # by position, then node
    before = np.searchsorted(free_at[freed], np.arange(sequence.size), side="left")  # frees ahead of each compute
    steps = np.empty(sequence.size + freed.size, dtype=object)
    compute_at = np.arange(sequence.size) + before
    steps[compute_at] = _step_objects(Compute, graph.n)[sequence]  # steps are immutable: one object per node
    free_slots = np.ones(steps.size, dtype=bool)
    free_slots[compute_at] = False
    steps[free_slots] = _step_objects(Free, graph.n)[sequence[freed]]
    return Schedule(tuple(steps.tolist()))


def _step_objects(step: type[Compute] | type[Free], n: int) -> np.ndarray:
    objects = np.empty(n, dtype=object)
    objects[:] = [step(v) for v in range(n)]
    return objects


def sequence_score(graph: Graph, sequence: np.ndarray) -> Score:
    """(peak, total cost) of a compute sequence with eager frees, as the simulator gives them."""
    if graph.impl_table is not None:
        result = simulate(graph, eager_frees(graph, sequence))
        return result.peak, result.total_cost
    sequence = np.asarray(sequence, dtype=np.int64)
    free_at = _free_positions(graph, sequence)
    peak, cost = kernels.eager_peak_cost(sequence, free_at, graph.mem, graph.workspace, graph.cost, graph.fixed_mem)
    return int(peak), float(cost)


def _rank(score: Score, budget: int) -> tuple[bool, float, float]:
    """Sort key: fitting schedules first by cost then peak, the others by peak then cost."""
    peak, cost = score
    if peak <= budget:
        return (False, cost, peak)
    return (True, peak, cost)


def best_item(
    items: Iterable[T], score: Callable[[T], Score], budget: int, until: Callable[[int, Score], bool] | None = None
) -> T:
    """The item whose score ranks best (see :func:`best_sequence`; ties: the first)."""
    best: tuple[tuple[bool, float, float], T] | None = None
    for k, item in enumerate(items):
        scored = score(item)
        key = _rank(scored, budget)
        if best is None or key < best[0]:
            best = (key, item)
        if until is not None and until(k, scored):
            break
    if best is None:
        raise ValueError("best_schedule needs at least one schedule")
    logger.debug("best schedule (over budget %d, then rank keys) %s", budget, best[0])
    return best[1]


def best_sequence(
    graph: Graph,
    sequences: Iterable[np.ndarray],
    budget: int,
    *,
    until: Callable[[int, Score], bool] | None = None,
) -> np.ndarray:
    """Cheapest compute sequence (ties: lower peak, then the first) fitting ``budget``, else the lowest-peak one.

    Sequences are scored as they are drawn; ``until(k, (peak, cost))`` true for the k-th one stops
    drawing more (it still competes).
    """
    return best_item(sequences, lambda sequence: sequence_score(graph, sequence), budget, until)


def best_schedule(
    graph: Graph,
    schedules: Iterable[Schedule],
    budget: int,
    *,
    until: Callable[[int, Score], bool] | None = None,
) -> Schedule:
    """Cheapest schedule (ties: lower peak) whose peak fits ``budget``, else the lowest-peak one (see best_sequence)."""

    def score(schedule: Schedule) -> Score:
        result = simulate(graph, schedule)
        return result.peak, result.total_cost

    return best_item(schedules, score, budget, until)
