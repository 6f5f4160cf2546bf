"""A second pass around the incumbent (issue 22): swap one cluster's backward part for a cheaper option's.

The incumbent is a whole-graph compute sequence (the top level's or the warm start's). A move replaces
the backward part of one cluster (at any level: the run of its nodes that leads to its first backward
node and every node of it after that) by the backward part of one of its options, placed where the old
part started. A move is kept when the eagerly freed sequence is valid, fits the budget and costs less,
as the simulator measures it: the level models' conservative accounting plays no part.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Schedule, SimulationResult, eager_frees, simulate
from remat_models.errors import InvalidScheduleError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Move:
    """The nodes of one cluster (V and W, global ids), its W, and its options' backward parts, cheapest first."""

    members: frozenset[int]
    backward: frozenset[int]
    parts: tuple[tuple[int, ...], ...]


def swap(graph: Graph, sequence: list[int], move: Move, part: tuple[int, ...]) -> list[int] | None:
    """``sequence`` with the cluster's backward part replaced by ``part`` (None: no loss or no backward node)."""
    loss = next((i for i, v in enumerate(sequence) if graph.kind[v] == NodeKind.LOSS), None)
    if loss is None:
        return None
    after = sequence[loss + 1 :]
    first = next((i for i, v in enumerate(after) if v in move.backward), None)
    if first is None:
        return None
    start = first
    while start > 0 and after[start - 1] in move.members:
        start -= 1
    rest = [v for v in after[start:] if v not in move.members]
    return [*sequence[: loss + 1], *after[:start], *part, *rest]


def refine(
    graph: Graph, budget: int, schedule: Schedule, simulation: SimulationResult, moves: list[Move], deadline: float
) -> tuple[Schedule, SimulationResult, int]:
    """First-improvement descent over ``moves`` until none improves or ``deadline`` (perf_counter) passes.

    Returns the best schedule, its simulation and the number of moves kept.
    """
    sequence = [step.node for step in schedule.steps if isinstance(step, Compute)]
    cost = graph.cost
    kept, improved = 0, True
    while improved and time.perf_counter() < deadline:
        improved = False
        for move in moves:
            for part in move.parts:
                if time.perf_counter() >= deadline:
                    return schedule, simulation, kept
                candidate = swap(graph, sequence, move, part)
                if candidate is None or float(cost[np.array(candidate)].sum()) >= simulation.total_cost:
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
    log.info("hilp refinement of %s: %d moves kept, cost %.6g", graph.name, kept, simulation.total_cost)
    return schedule, simulation, kept
