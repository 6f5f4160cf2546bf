"""``auto`` plans the least-peak search itself when none of its fallbacks fits (feasibility first, issue #31).

Under load its exact worker's own least-peak search ran after its slower baselines and came too late (LLaMA at
25 %: over budget at a 60 s limit); the parent now runs it from its fallbacks' schedules right away.
"""

from __future__ import annotations

from remat_models.core.schedule import simulate
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.least_peak import least_peak_search
from remat_models.io import unet
from remat_models.planning.plan import plan
from remat_models.planning.result import PlanStatus


def test_auto_reports_a_fitting_least_peak_member_when_no_fallback_fits() -> None:
    graph = unet(3)
    budget = least_peak_search(graph, time_limit=3).peak
    assert all(simulate(graph, BASELINES[name](graph, budget)).peak > budget for name in ("knapsack", "chen-greedy"))
    result = plan(graph, budget, "auto", time_limit=6)
    assert result.status == PlanStatus.WITHIN_BUDGET
    assert simulate(graph, result.schedule).peak <= budget
    members = {m["method"]: m for m in result.details["portfolio"]}
    assert members["least-peak"]["peak"] is not None and members["least-peak"]["peak"] <= budget


def test_no_least_peak_member_where_a_fallback_fits() -> None:
    graph = unet(3)
    budget = simulate(graph, BASELINES["knapsack"](graph, 0)).peak * 2
    result = plan(graph, budget, "auto", time_limit=4)
    assert result.status == PlanStatus.WITHIN_BUDGET and simulate(graph, result.schedule).peak <= budget
    assert "least-peak" not in {m["method"] for m in result.details["portfolio"]}
