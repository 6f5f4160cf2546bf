"""FastSA's schedules recast into Checkmate's stage structure, so Checkmate keeps them as warm starts."""

from __future__ import annotations

import pytest

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, eager_frees, input_order_peak, simulate
from remat_models.core.stages import staged_sequence, stages_from_schedule
from remat_models.errors import InvalidScheduleError
from remat_models.heuristics.registry import run_heuristic
from remat_models.io.generators import unet
from remat_models.planning.plan import PlanStatus, plan


@pytest.fixture(scope="module")
def unet3_at_60() -> tuple[Graph, int, list[Schedule]]:
    """unet(3) at 60 % of its input-order peak, and the FastSA schedules there the stages cannot hold as they are."""
    graph = unet(3)
    budget = int(0.6 * input_order_peak(graph))
    return graph, budget, _fastsa_out_of_structure(graph, budget)


def _fastsa_out_of_structure(graph: Graph, budget: int) -> list[Schedule]:
    """FastSA schedules at ``budget`` (seeds 0-2) that Checkmate's stages cannot hold as they are."""
    found = []
    for seed in range(3):
        schedule, _ = run_heuristic("fastsa", graph, budget, seed=seed, time_limit=5)
        try:
            stages_from_schedule(graph, schedule.first_computation_order(), schedule)
        except InvalidScheduleError:
            found.append(schedule)
    return found


def test_recast_fastsa_schedules_keep_cost_and_fit_the_stages(unet3_at_60) -> None:
    graph, budget, schedules = unet3_at_60
    assert schedules  # FastSA recomputes outside the input-order stages here
    for schedule in schedules:
        order = schedule.first_computation_order()
        staged = eager_frees(graph, staged_sequence(graph, order, schedule))
        stages_from_schedule(graph, order, staged)  # now inside the structure
        before, after = simulate(graph, schedule), simulate(graph, staged)
        assert after.peak <= budget and after.total_cost <= before.total_cost


def test_checkmate_starts_from_a_recast_fastsa_schedule(unet3_at_60) -> None:
    graph, budget, schedules = unet3_at_60
    start = schedules[0]  # 5 s: the start is kept either way (HiGHS proves it optimal in the model in about 16)
    result = plan(graph, budget, formulation="checkmate", backend="highs", time_limit=5, init=start)
    assert result.details["warm_start"]
    assert result.status == PlanStatus.WITHIN_BUDGET
    assert simulate(graph, result.schedule).total_cost <= simulate(graph, start).total_cost


def test_a_schedule_computing_ahead_of_the_order_is_refused() -> None:
    graph = unet(3)
    schedule = eager_frees(graph, list(graph.order))
    with pytest.raises(InvalidScheduleError, match="before its turn"):
        staged_sequence(graph, graph.order[::-1].copy(), schedule)
