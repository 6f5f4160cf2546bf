"""A second pass around the incumbent (issue 22): swap one cluster's backward part for a cheaper option's.

The incumbent is a whole-graph compute sequence (the top level's or the warm start's). A move replaces
the backward part of one cluster (at any level: the run of its nodes that leads to its first backward
node and every node of it after that) by the backward part of one of its options, placed where the old
part started. A move is kept when the eagerly freed sequence is valid, fits the budget and costs less,
as the simulator measures it: the level models' conservative accounting plays no part. On a graph with
operator implementations the result then gets the greedy implementation switch (``greedy_impls``) when it is cheaper.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Schedule, SimulationResult, eager_frees, simulate
from remat_models.errors import InvalidScheduleError
from remat_models.formulations.hilp.alternatives import steps_cost
from remat_models.heuristics.impl_greedy import greedy_impls

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Move:
    """The nodes of one cluster (V and W, global ids), its W, and its options' backward parts, cheapest first.

    A part is (node, implementation) steps.
    """

    members: frozenset[int]
    backward: frozenset[int]
    parts: tuple[tuple[tuple[int, int], ...], ...]


Steps = list[tuple[int, int]]  # (node, implementation)


def swap(graph: Graph, sequence: Steps, move: Move, part: tuple[tuple[int, int], ...]) -> Steps | None:
    """``sequence`` with the cluster's backward part replaced by ``part`` (None: no loss or no backward node)."""
    loss = next((i for i, (v, _) in enumerate(sequence) if graph.kind[v] == NodeKind.LOSS), None)
    if loss is None:
        return None
    after = sequence[loss + 1 :]
    first = next((i for i, (v, _) in enumerate(after) if v in move.backward), None)
    if first is None:
        return None
    start = first
    while start > 0 and after[start - 1][0] in move.members:
        start -= 1
    rest = [step for step in after[start:] if step[0] not in move.members]
    return [*sequence[: loss + 1], *after[:start], *part, *rest]


def refine(
    graph: Graph, budget: int, schedule: Schedule, simulation: SimulationResult, moves: list[Move], deadline: float
) -> tuple[Schedule, SimulationResult, int]:
    """First-improvement descent over ``moves`` until none improves or ``deadline`` (perf_counter) passes.

    Returns the best schedule, its simulation and the number of moves kept.
    """
    sequence = [(step.node, step.impl) for step in schedule.steps if isinstance(step, Compute)]
    kept, improved = 0, True
    while improved and time.perf_counter() < deadline:
        improved = False
        for move in moves:
            for part in move.parts:
                if time.perf_counter() >= deadline:
                    return schedule, simulation, kept
                candidate = swap(graph, sequence, move, part)
                if candidate is None or steps_cost(graph, *zip(*candidate, strict=True)) >= simulation.total_cost:
                    continue
                try:
                    trial = eager_frees(graph, candidate)
                    result = simulate(graph, trial)
                except InvalidScheduleError:
                    continue
                if result.fits(budget) and result.total_cost < simulation.total_cost:
                    sequence, schedule, simulation = candidate, trial, result
                    kept, improved = kept + 1, True
                    break
    if graph.impl_table is not None:  # then each step's cheapest implementation that keeps the budget (one move)
        switched = greedy_impls(graph, schedule, budget)
        result = simulate(graph, switched)
        if result.fits(budget) and result.total_cost < simulation.total_cost:
            schedule, simulation, kept = switched, result, kept + 1
    log.info("hilp refinement of %s: %d moves kept, cost %.6g", graph.name, kept, simulation.total_cost)
    return schedule, simulation, kept
