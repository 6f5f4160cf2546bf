"""The default warm start lowers cheaper over-budget baselines into the budget where only rotor's plan fits."""

from __future__ import annotations

from remat_models.core.budget import parse_budget
from remat_models.core.schedule import simulate
from remat_models.heuristics.least_peak import STARTS
from remat_models.io.generators import transformer
from remat_models.planning.plan import plan
from remat_models.planning.warm_start import auto_init, fast_baselines


def test_only_rotor_fits_and_the_start_is_a_repaired_cheaper_baseline() -> None:
    graph = transformer(layers=8, seed=0)
    budget = parse_budget("20%", graph)
    baselines = {name: simulate(graph, schedule) for name, schedule in fast_baselines(graph, budget).items()}
    assert baselines["rotor"].peak <= budget  # the only fitting baseline, and the costliest of them
    assert all(baselines[name].peak > budget for name in STARTS)
    assert min(baselines[name].total_cost for name in STARTS) < baselines["rotor"].total_cost
    start = auto_init(graph, budget, time_limit=10)
    assert start is not None
    result = simulate(graph, start.schedule)
    assert result.peak <= budget
    assert result.total_cost < 0.5 * baselines["rotor"].total_cost  # 41 % TDI against rotor's 271 %


def test_a_formulation_starts_from_the_repaired_baseline() -> None:
    graph = transformer(layers=8, seed=0)
    budget = parse_budget("20%", graph)
    rotor = simulate(graph, fast_baselines(graph, budget)["rotor"])
    planned = plan(graph, budget, method="moccasin", time_limit=4)
    assert planned.schedule is not None
    result = simulate(graph, planned.schedule)
    assert result.peak <= budget
    assert result.total_cost < 0.5 * rotor.total_cost
