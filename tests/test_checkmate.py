"""Checkmate's MILP against brute force, the simulator, and itself across variants."""

from __future__ import annotations

import numpy as np
import pytest
from checkmate_graphs import budgets, diamond, random_dag, tiny_graphs, tiny_unet

from remat_models.backends import SolveLimits, SolveStatus, get_backend
from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak, input_order_schedule, simulate
from remat_models.errors import BudgetInfeasibleError, ConfigurationError, GraphError
from remat_models.formulations import get_formulation
from remat_models.formulations.checkmate.formulation import CHECKMATE
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.io import linear_chain, random_layered
from remat_models.planning.bounds import peak_lower_bound
from remat_models.planning.plan import PlanStatus, plan

LIMITS = SolveLimits(time_limit=60)


def solve(graph, budget, backend="highs", **options):
    built = CHECKMATE.build(graph, budget, {"integral_memory": backend == "cpsat", **options})
    return built, get_backend(backend).solve(built.model, LIMITS)


def checked(graph, built, result, budget):
    """Decode both ways, simulate, and compare with the model's accounting; return the eager schedule's sim."""
    sims = [simulate(graph, CHECKMATE.decode(built, result.values, frees=mode)) for mode in ("eager", "model")]
    bound = built.peak_bound(result.values)
    for sim in sims:
        assert sim.peak <= budget
        assert sim.peak <= bound + 1e-6 * max(budget, 1)
        assert sim.total_cost == pytest.approx(built.cost(result.objective), rel=1e-9)
    return sims[0]


@pytest.mark.parametrize("graph", tiny_graphs(), ids=lambda g: g.name)
def test_staged_optimum_equals_staged_brute_force(graph) -> None:
    for budget in budgets(graph):
        staged = exhaustive_optimum(graph, budget, "staged")
        free = exhaustive_optimum(graph, budget, "free")
        built, result = solve(graph, budget)
        if staged is None:
            assert result.status == SolveStatus.INFEASIBLE
            continue
        assert result.status == SolveStatus.OPTIMAL
        checked(graph, built, result, budget)
        assert built.cost(result.objective) == pytest.approx(staged.cost)
        assert free is not None and built.cost(result.objective) >= free.cost - 1e-9


@pytest.mark.parametrize("graph", [linear_chain(2), diamond(), random_dag(6, 3, workspace=True)], ids=lambda g: g.name)
def test_unpartitioned_lies_between_free_and_staged(graph) -> None:
    for budget in budgets(graph, 3):
        runs = exhaustive_optimum(graph, budget, "runs")
        built, result = solve(graph, budget, staged=False)
        if runs is None:
            assert result.status == SolveStatus.INFEASIBLE
            continue
        assert result.status == SolveStatus.OPTIMAL
        checked(graph, built, result, budget)
        cost = built.cost(result.objective)
        assert cost == pytest.approx(runs.cost)
        assert exhaustive_optimum(graph, budget, "free").cost <= cost + 1e-9
        assert cost <= exhaustive_optimum(graph, budget, "staged").cost + 1e-9


@pytest.mark.parametrize("seed", range(12))
def test_model_accounting_matches_the_simulator(seed) -> None:
    """Input order at its own peak: the model's U equals the simulated memory; hints are feasible."""
    graph = random_dag(9, seed, workspace=seed % 2 == 0, fixed=seed % 3 == 0)
    peak = input_order_peak(graph)
    for integral in (False, True):
        built = CHECKMATE.build(graph, peak, {"integral_memory": integral})
        values = CHECKMATE.hints(built, input_order_schedule(graph))
        assert built.model.check(values) == []
        assert built.peak_bound(values) == pytest.approx(peak)
        assert built.cost(built.model.objective_value(values)) == pytest.approx(graph.total_cost)


@pytest.mark.parametrize("seed", range(8))
def test_decoded_peak_never_exceeds_the_model_peak(seed) -> None:
    graph = random_dag(8, 100 + seed, workspace=seed % 2 == 1, fixed=seed % 4 == 0)
    rng = np.random.default_rng(seed)
    budget = int(rng.integers(graph.lower_bound, input_order_peak(graph) + 1))
    built, result = solve(graph, budget, "cpsat" if seed % 2 else "highs")
    if result.has_solution:
        checked(graph, built, result, budget)
    else:
        assert exhaustive_optimum(graph, budget, "staged") is None


def test_budget_at_input_order_peak_needs_no_recomputation() -> None:
    for graph in (tiny_unet(), random_layered(12, seed=4), random_dag(12, 9, workspace=True)):
        outcome = solve_model(graph, input_order_peak(graph), "checkmate", "highs", limits=LIMITS)
        assert outcome.status == SolveStatus.OPTIMAL_IN_MODEL  # Checkmate's model: one order, stages
        assert outcome.objective == pytest.approx(graph.total_cost)


def test_below_the_lower_bound_is_a_typed_error() -> None:
    graph = tiny_unet()
    with pytest.raises(BudgetInfeasibleError) as error:
        plan(graph, graph.lower_bound - 1, formulation="checkmate")
    assert error.value.lower_bound == graph.lower_bound


def test_infeasible_budget_is_reported_not_raised() -> None:
    graph, budget = infeasible_above_the_bounds()
    # the model and the warm start (nothing fits, it stalls) take milliseconds: the limit only bounds a slow machine
    result = plan(graph, budget, formulation="checkmate", backend="cpsat", time_limit=30)
    # Checkmate's model (one order, stages) proves nothing about every schedule: never the plain "infeasible"
    assert result.status == PlanStatus.NO_SCHEDULE_IN_MODEL and result.schedule is None


def infeasible_above_the_bounds() -> tuple[Graph, int]:
    """A graph and a budget at its peak lower bound (the lineage bound, 20 B) where no schedule fits (the least
    peak is 22 B: brute force); every third node cannot be recomputed."""
    graph = random_dag(7, 0)
    mask = np.ones(graph.n, dtype=bool)
    mask[::3] = False
    graph = graph.with_recomputable(mask)
    budget = peak_lower_bound(graph).value
    assert budget == 20 and exhaustive_optimum(graph, budget, "free") is None
    return graph, budget


@pytest.mark.parametrize("layers", [4, 5])
def test_training_chains_reach_the_brute_force_optimum_at_every_budget(layers: int) -> None:
    graph = linear_chain(layers)  # 2 * layers + 1 nodes: within the exhaustive search's reach
    for budget in range(graph.lower_bound, input_order_peak(graph) + 1):
        best = exhaustive_optimum(graph, budget, "staged")
        assert best is not None, budget
        outcome = solve_model(graph, budget, "checkmate", "highs", limits=LIMITS)
        assert outcome.status == SolveStatus.OPTIMAL_IN_MODEL and outcome.objective == pytest.approx(best.cost), budget
        sim = simulate(graph, outcome.schedule)
        assert sim.peak <= budget and sim.total_cost == pytest.approx(best.cost)


def test_warm_start_from_a_baseline() -> None:
    graph = tiny_unet()
    budget = budgets(graph)[0]
    init = BASELINES["chen-greedy"](graph, budget)
    outcome = solve_model(graph, budget, "checkmate", "cpsat", limits=LIMITS, init=init)
    assert outcome.warm_start and outcome.status == SolveStatus.OPTIMAL_IN_MODEL
    assert simulate(graph, outcome.schedule).peak <= budget


def test_given_order_is_used_and_checked() -> None:
    graph = diamond()  # a, b, c, d, e; c may come before b
    order = [0, 2, 1, 3, 4]
    built, result = solve(graph, 9, order=order)
    assert result.status == SolveStatus.OPTIMAL
    schedule = CHECKMATE.decode(built, result.values)
    firsts = list(dict.fromkeys(schedule.compute_sequence()))
    assert firsts == order
    assert built.cost(result.objective) == exhaustive_optimum(graph, 9, "staged", order=order).cost
    with pytest.raises(GraphError, match="not topological"):
        CHECKMATE.build(graph, 9, {"order": [1, 0, 2, 3, 4]})


def test_only_possible_cells_are_variables() -> None:
    graph = linear_chain(3)
    built = CHECKMATE.build(graph, 5)
    n = graph.n
    assert built.model.block("R").size == n * (n + 1) // 2
    assert built.model.block("S").size == n * (n - 1) // 2
    assert built.model.block("FREE").size < n * graph.m


def test_options_are_validated() -> None:
    with pytest.raises(ConfigurationError, match="unknown checkmate option"):
        CHECKMATE.options({"stagd": False})
    with pytest.raises(ConfigurationError, match="allowance"):
        CHECKMATE.options({"allowance": 1.5})
    with pytest.raises(ConfigurationError, match="unknown formulation"):
        get_formulation("checkmat")


def test_checkmate_refuses_at_once_a_model_that_cannot_fit_in_memory() -> None:
    """9,607 nodes: ~160 M columns, hundreds of GiB; the whole model is refused, naming the size and the way out."""
    from remat_models.errors import ModelTooLargeError
    from remat_models.io.generators import transformer
    from remat_models.model.size import check_fits_in_memory

    with pytest.raises(ModelTooLargeError, match="columns would need"):
        check_fits_in_memory("a model", 10**15)
    graph = transformer(400)
    with pytest.raises(ModelTooLargeError, match=r"9,607 nodes.*moccasin, hilp, fastsa or auto"):
        CHECKMATE.check_size(graph, graph.lower_bound * 4)  # plan() then re-solves windows (tests/test_windows.py)
