"""Greedy implementation choice over any schedule (MONeT's "Checkmate-O" baseline).

Walk the compute steps in order and switch each one to its cheapest implementation that keeps the
re-simulated peak within the budget. ``mode="same-reads"`` (Checkmate-O) only considers
implementations with the same reads and neither in place nor producing aux values, so the free
steps stay as they are; ``mode="any"`` tries every implementation and rebuilds the frees with
``eager_frees`` (a switch that makes the schedule invalid is skipped).
"""

from __future__ import annotations

import logging
from typing import Literal

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Schedule, eager_frees, simulate
from remat_models.errors import InvalidScheduleError

log = logging.getLogger(__name__)

Mode = Literal["same-reads", "any"]


def greedy_impls(graph: Graph, schedule: Schedule, budget: int, mode: Mode = "same-reads") -> Schedule:
    """``schedule`` with each compute switched to its cheapest implementation that keeps the peak <= ``budget``."""
    table = graph.impl_table
    if table is None or not simulate(graph, schedule).fits(budget):
        return schedule
    computes = [s for s in schedule.steps if isinstance(s, Compute)]
    steps = list(schedule.steps) if mode == "same-reads" else list(eager_frees(graph, computes).steps)
    positions = [k for k, s in enumerate(steps) if isinstance(s, Compute)]
    seen: set[int] = set()
    for c, k in enumerate(positions):
        v, chosen = computes[c].node, computes[c].impl
        impls = table.impls[v]
        again = v in seen
        seen.add(v)
        for li in sorted(range(len(impls)), key=lambda li: impls[li].step_cost(again)):
            if impls[li].step_cost(again) >= impls[chosen].step_cost(again):
                break
            if mode == "same-reads" and (
                table.reads[v][li] != table.reads[v][chosen] or table.inplace[v][li] >= 0 or impls[li].aux
            ):
                continue
            trial_computes = [*computes[:c], Compute(v, li), *computes[c + 1 :]]
            try:
                if mode == "same-reads":
                    trial = [*steps[:k], Compute(v, li), *steps[k + 1 :]]
                else:
                    trial = list(eager_frees(graph, trial_computes).steps)
                fits = simulate(graph, trial).fits(budget)
            except InvalidScheduleError:
                continue
            if fits:
                steps, computes = trial, trial_computes
                break
    log.debug("greedy implementations on %s (%s): %d computes", graph.name, mode, len(computes))
    return Schedule(tuple(steps))
