"""Staged (R, S) matrices over a topological order and Schedules, both ways (Checkmate's representation).

Stage t runs the nodes k with ``R[t, k]`` in increasing position of ``order``; ``S[t, i]`` says
that i's output is resident when stage t starts. Matrices are indexed by *position* in ``order``
(``order[p]`` is the node at position p), shaped ``(T, n)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Free, Schedule, Step, eager_frees
from remat_models.errors import GraphError, InvalidScheduleError


def resolve_order(graph: Graph, order: Sequence[int] | np.ndarray | None) -> np.ndarray:
    """The given node order (default: the graph's input order), checked to be a topological permutation."""
    if order is None:
        return graph.order.copy()
    result = np.asarray(order, dtype=np.int64).reshape(-1)
    if result.size != graph.n or np.unique(result).size != graph.n or result.min() < 0 or result.max() >= graph.n:
        raise GraphError(f"stage order is not a permutation of the {graph.n} node indices")
    position = np.empty(graph.n, dtype=np.int64)
    position[result] = np.arange(graph.n)
    back = np.flatnonzero(position[graph.edges[:, 0]] >= position[graph.edges[:, 1]])
    if back.size:
        u, v = graph.edges[back[0]]
        raise GraphError(
            f"stage order is not topological: edge ({graph.names[u]!r}, {graph.names[v]!r}) goes backwards"
        )
    return result


def compute_sequence(order: np.ndarray, R: np.ndarray) -> list[int]:
    """Row-major scan of R (stage by stage, positions ascending) as node indices."""
    _, positions = np.nonzero(np.asarray(R, dtype=bool))
    return order[positions].tolist()  # np.nonzero is row-major already


def schedule_from_stages(graph: Graph, order: np.ndarray, R: np.ndarray) -> Schedule:
    """Algorithm 1 with every deallocation moved to its earliest point: the row-major scan of R, eager frees.

    For a given compute sequence eager frees are the least memory any free placement reaches, so
    the simulated peak never exceeds Checkmate's U accounting of a feasible (R, S, FREE).
    """
    return eager_frees(graph, compute_sequence(order, R))


def schedule_from_model_frees(
    graph: Graph, order: np.ndarray, R: np.ndarray, S: np.ndarray, frees: np.ndarray
) -> Schedule:
    """Algorithm 1 literally: compute by R, deallocate by FREE rows ``(t, i, k)`` (positions), plus what it leaves out.

    The additions keep the plan valid and within the model's accounting: a value resident at a
    stage start but not in S there is freed first (the model no longer counts it), and a
    checkpoint that is recomputed in the stage is freed just before (the model counts it twice).
    At the end, values other than graph outputs are freed.
    """
    R, S = np.asarray(R, dtype=bool), np.asarray(S, dtype=bool)
    n_stages, n = R.shape
    free_at: dict[tuple[int, int], list[int]] = {}
    for t, i, k in np.asarray(frees, dtype=np.int64).reshape(-1, 3).tolist():
        free_at.setdefault((t, k), []).append(i)
    resident = np.zeros(n, dtype=bool)
    steps: list[Step] = []

    def free(p: int) -> None:
        steps.append(Free(int(order[p])))
        resident[p] = False

    for t in range(n_stages):
        for p in np.flatnonzero(resident & ~S[t]).tolist():
            free(p)
        missing = np.flatnonzero(S[t] & ~resident)
        if missing.size:
            raise InvalidScheduleError(f"stage {t} keeps {graph.names[order[missing[0]]]!r}, which is not resident")
        for k in np.flatnonzero(R[t]).tolist():
            if resident[k]:
                free(k)
            steps.append(Compute(int(order[k])))
            resident[k] = True
            for i in sorted(free_at.get((t, k), [])):
                if resident[i]:
                    free(i)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    keep = np.zeros(n, dtype=bool)
    keep[position[graph.outputs]] = True
    for p in np.flatnonzero(resident & ~keep).tolist():
        free(p)
    return Schedule(tuple(steps))


def staged_sequence(graph: Graph, order: np.ndarray, schedule: Schedule) -> list[int]:
    """``schedule``'s compute sequence recast into the stage structure of ``order`` (a warm start for it).

    The schedule's first computations must follow ``order`` (``Schedule.first_computation_order``); stage
    t holds the computations up to the first one of ``order[t]``, sorted by position in ``order``, each node
    once. Dependencies still hold (``order`` is topological, earlier values are kept until read); the
    memory profile may differ, so whoever uses the result checks it.
    """
    position = np.empty(graph.n, dtype=np.int64)
    position[order] = np.arange(graph.n)
    stages: list[set[int]] = [set() for _ in range(graph.n)]
    t = 0
    for step, node in enumerate(schedule.compute_sequence()):
        p = int(position[node])
        if p > t or t >= graph.n:
            raise InvalidScheduleError(f"computes {graph.names[node]!r} before its turn in the given order", step=step)
        stages[t].add(p)
        t += p == t
    return [int(order[p]) for stage in stages for p in sorted(stage)]


def stages_from_schedule(
    graph: Graph, order: np.ndarray, schedule: Schedule, n_stages: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(R, S) of a schedule whose first computations follow ``order``, one stage per first computation.

    Stage t ends with the first computation of ``order[t]``; each stage must compute in increasing
    position. S marks the values an eager-free run keeps across stage boundaries. With
    ``n_stages`` > n (unpartitioned models), the extra trailing stages stay empty.
    """
    n = graph.n
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    sequence = [int(position[v]) for v in schedule.compute_sequence()]
    total = n if n_stages is None else n_stages
    if total < n:
        raise InvalidScheduleError(f"{total} stages cannot hold the {n} first computations")
    R = np.zeros((total, n), dtype=bool)
    stage_of = np.zeros(len(sequence), dtype=np.int64)
    t, last, seen = 0, -1, np.zeros(n, dtype=bool)
    for step, p in enumerate(sequence):
        if t >= n:
            raise InvalidScheduleError("computes after the last first computation: not a staged schedule", step=step)
        if p <= last or p > t:
            raise InvalidScheduleError(
                f"computes {graph.names[order[p]]!r} out of the stage structure of the given order", step=step
            )
        R[t, p] = True
        stage_of[step] = t
        if p == t and not seen[p]:
            seen[p] = True
            t, last = t + 1, -1
        else:
            last = p
    if t < n:
        raise InvalidScheduleError(f"node {graph.names[order[t]]!r} is never computed")
    S = np.zeros((total, n), dtype=bool)
    # eager residency: a computation at stage s lives until its last use before the next recomputation
    plan = eager_frees(graph, [int(order[p]) for p in sequence])
    compute_index, live_from = -1, {}
    for step in plan.steps:
        if isinstance(step, Compute):
            compute_index += 1
            live_from[position[step.node]] = stage_of[compute_index]
        else:
            p = int(position[step.node])
            S[live_from.pop(p) + 1 : stage_of[compute_index] + 1, p] = True
    for p, start in live_from.items():  # kept to the end (graph outputs)
        S[start + 1 :, p] = True
    return R, S
