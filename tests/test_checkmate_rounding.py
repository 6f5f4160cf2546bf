"""LP relaxation and two-phase rounding: bounds hold, candidates are valid and simulated."""

from __future__ import annotations

import numpy as np
import pytest
from checkmate_graphs import random_dag, tiny_unet

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.formulations.checkmate.rounding import lp_rounding
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.rounding import complete_stages, round_schedule
from remat_models.io import linear_chain, random_layered
from remat_models.planning.plan import PlanStatus, plan

LIMITS = SolveLimits(time_limit=60)


@pytest.mark.parametrize(
    ("graph", "budget"), [(linear_chain(4), 4), (tiny_unet(), 15), (random_layered(11, seed=6), 11424)]
)
def test_lp_bound_and_rounded_cost_bracket_the_optimum(graph, budget) -> None:
    optimum = solve_model(graph, budget, "checkmate", "highs", limits=LIMITS)
    outcome = lp_rounding(graph, budget, allowance=0.1)
    assert outcome.details["lp_status"] == SolveStatus.OPTIMAL
    assert outcome.bound <= optimum.objective + 1e-6
    assert outcome.details["candidates"] > 0
    if outcome.details["best"] is not None:
        sim = simulate(graph, outcome.schedule)
        assert sim.peak <= budget
        assert sim.total_cost >= optimum.objective - 1e-9


def test_ample_budget_rounds_to_no_recomputation() -> None:
    graph = random_dag(10, 2)
    outcome = lp_rounding(graph, input_order_peak(graph))
    assert outcome.details["best"] is not None
    assert outcome.simulation.total_cost == pytest.approx(graph.total_cost)


@pytest.mark.parametrize("seed", range(6))
def test_any_rounded_checkpoint_matrix_gives_a_valid_schedule(seed) -> None:
    graph = random_dag(9, seed)
    rng = np.random.default_rng(seed)
    S = rng.random((graph.n, graph.n)) < 0.4
    R, _ = complete_stages(graph, graph.order, S)
    assert R.diagonal().all() and not np.triu(R, 1).any()
    simulate(graph, round_schedule(graph, graph.order, S))  # raises on any invalid step


def test_plan_reports_no_rounded_schedule_within_budget() -> None:
    graph = linear_chain(6)
    result = plan(graph, graph.lower_bound, formulation="checkmate", approx="lp-rounding", allow_over_budget=True)
    assert result.status in (PlanStatus.WITHIN_BUDGET, PlanStatus.OVER_BUDGET)
    assert result.simulation is not None
    if result.status == PlanStatus.OVER_BUDGET:
        assert result.details["lowest_peak"] == result.simulation.peak > graph.lower_bound


def test_rounding_needs_a_relaxation_backend() -> None:
    with pytest.raises(ConfigurationError, match="relaxation backend"):
        lp_rounding(linear_chain(2), 4, backend="cpsat")
