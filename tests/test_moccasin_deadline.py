"""Issue 24: a Moccasin build that cannot finish with time for a phase is not started; plan returns the warm start."""

from __future__ import annotations

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.formulations.moccasin import formulation as moccasin
from remat_models.formulations.solving import solve_model
from remat_models.io import transformer
from remat_models.planning.plan import plan

GRAPH = transformer(4)
BUDGET = int(0.6 * input_order_peak(GRAPH))


def test_a_build_estimated_past_the_limit_is_skipped_and_plan_returns_the_warm_start(monkeypatch) -> None:
    assert moccasin.MOCCASIN.least_seconds(GRAPH) < 5.0  # a small graph is built at 5 s
    monkeypatch.setattr(moccasin, "BUILD_SECONDS_PER_NODE", 1.0)
    outcome = solve_model(GRAPH, BUDGET, "moccasin", "cpsat", limits=SolveLimits(time_limit=5.0, workers=1))
    assert outcome.status is SolveStatus.NO_SOLUTION and outcome.schedule is None
    assert "not built" in outcome.details["build_skipped"] and outcome.build_time == 0.0
    result = plan(GRAPH, BUDGET, formulation="moccasin", backend="cpsat", time_limit=5.0, init="knapsack")
    assert result.solver_status is SolveStatus.NO_SOLUTION and result.details["returned_warm_start"]
    assert simulate(GRAPH, result.schedule).fits(BUDGET)
