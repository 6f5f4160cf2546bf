"""saveset-intervals, the compact save-set model: every solution it accepts fits (the simulator checks), its
optimum is never below the exact save-set optimum (brute force) and HiGHS agrees with CP-SAT; at real size it
improves the save-set search's schedule it starts from and the warm start of every exact solve uses it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_saveset_formulation import GRAPHS, brute_force, budgets

from remat_models.backends import SolveLimits
from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import simulate
from remat_models.formulations import get_formulation
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.recompute import forward_mask, saved_set_sequence, sequence_schedule, sequence_score
from remat_models.heuristics.saveset import saveset_search
from remat_models.io import read_graph
from remat_models.io.generators import transformer
from remat_models.planning.warm_start import auto_init

FORMULATION = "saveset-intervals"
ZOO_GPT2 = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo" / "zoo_gpt2.json"


def test_accepted_save_sets_fit_and_cost_what_the_simulator_says() -> None:
    """Random save sets at budgets around their peaks: where the model's constraints hold, the plan fits."""
    graph = transformer(8, seed=1)
    form = get_formulation(FORMULATION)
    forward = np.flatnonzero(forward_mask(graph))
    rng = np.random.default_rng(0)
    accepted = 0
    for _ in range(40):
        saved = forward[rng.random(forward.size) < rng.random()]
        sequence = saved_set_sequence(graph, saved)
        peak, cost = sequence_score(graph, sequence)
        budget = int(peak * rng.uniform(0.9, 1.1))
        built = form.build(graph, budget)
        values = form.hints(built, sequence_schedule(graph, sequence))
        if built.model.check(values):
            continue
        accepted += 1
        assert peak <= budget
        assert built.cost(built.model.objective_value(values)) == pytest.approx(cost, rel=1e-6)
    assert accepted >= 5


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.name)
def test_never_below_the_exact_optimum_and_backends_agree(graph: Graph) -> None:
    """At each budget: HiGHS and CP-SAT prove the same optimum, a fitting save set at least brute force's best."""
    plans = brute_force(graph)
    for budget in budgets(plans):
        best = min(cost for _, peak, cost in plans if peak <= budget)
        costs = []
        for backend in ("highs", "cpsat"):
            outcome = solve_model(graph, budget, FORMULATION, backend)
            if outcome.schedule is None:  # counted high: the model may reject the tightest save sets
                costs.append(None)
                continue
            result = simulate(graph, outcome.schedule)
            assert result.peak <= budget
            assert result.total_cost >= best - 1e-9
            assert result.total_cost == pytest.approx(outcome.objective, rel=1e-6)
            costs.append(result.total_cost)
        assert costs[0] == pytest.approx(costs[1]) if None not in costs else costs == [None, None]
    largest = max(budgets(plans))
    assert solve_model(graph, largest, FORMULATION, "cpsat").schedule is not None  # saving everything fits


def test_zoo_gpt2_improves_the_save_set_search_and_the_warm_start_uses_it() -> None:
    """GPT-2 (836 nodes) at 50 %: within 4 s no costlier than its start, and ``auto_init`` at least as cheap."""
    graph = read_graph(ZOO_GPT2)
    budget = parse_budget("50%", graph)
    start = saveset_search(graph, budget)
    assert start.peak <= budget
    form = get_formulation(FORMULATION)
    built = form.build(graph, budget)
    schedule = sequence_schedule(graph, saved_set_sequence(graph, start.saved))
    outcome = form.solve(built, "cpsat", SolveLimits(time_limit=4), init=schedule)
    result = simulate(graph, outcome.schedule)
    assert result.peak <= budget
    assert result.total_cost <= start.cost
    warm = auto_init(graph, budget, time_limit=12)
    assert warm is not None and warm.simulation.peak <= budget
    assert warm.simulation.total_cost <= start.cost
