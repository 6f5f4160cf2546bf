"""Hierarchical H-ILP choosing operator implementations per cluster with ``leaf=monet`` (issue 22; docs/hilp.md)."""

from __future__ import annotations

import pytest
from impl_graphs import a2_mask, random_impl_training

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.core.schedule import Compute, eager_frees, input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.formulations.hilp.alternatives import inplace_ok, local_steps, steps_cost
from remat_models.formulations.hilp.formulation import HILP
from remat_models.formulations.hilp.leaves import leaf_graph, solve_leaf
from remat_models.formulations.hilp.partition import Cluster
from remat_models.formulations.hilp.solver import HierarchicalSolver, _split, budget_grid
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.planning.default_view import plan_default_view
from remat_models.planning.plan import plan

FORCED = {"partition": {"max_leaf": 2, "max_top": 3}}  # 13 nodes: four leaf clusters under one parent
MONET = {**FORCED, "leaf": "monet"}
LIMIT = 30.0


def _non_default(schedule) -> int:
    return sum(1 for step in schedule.steps if isinstance(step, Compute) and step.impl)


def _default_view_hierarchy(graph, budget):
    """What ``leaf=monet`` did before on a graph with implementations: the default view, then the greedy chooser."""

    def plan_view(view):
        return plan(view, budget, "hilp", options=MONET, time_limit=LIMIT, allow_over_budget=True)

    return plan_default_view(graph, budget, plan_view, greedy=True, allow_over_budget=False)


@pytest.mark.parametrize("seed", [4, 5])
def test_monet_leaves_choose_implementations_and_beat_the_default_view(seed: int) -> None:
    graph = random_impl_training(seed, k=6, masks=False)
    reference = input_order_peak(graph)
    strictly = 0
    for fraction in (0.9, 0.6):  # both seeds are strictly cheaper at each (and at 0.8/0.7 on seed 5)
        budget = int(fraction * reference)
        result = plan(graph, budget, "hilp", options=MONET, time_limit=LIMIT)
        assert "greedy-impls" not in result.method  # the hierarchy chose the implementations itself
        assert result.outcome.status is SolveStatus.FEASIBLE  # never a proof
        sim = simulate(graph, result.schedule)  # on the graph with its table: reads, in-place steps, workspaces
        assert sim.peak <= budget and sim.total_cost == pytest.approx(result.simulation.total_cost)
        before = _default_view_hierarchy(graph, budget)
        assert simulate(graph, before.schedule).peak <= budget
        assert sim.total_cost <= before.simulation.total_cost + 1e-9, fraction
        if sim.total_cost < before.simulation.total_cost - 1e-9:
            strictly += 1
            assert _non_default(result.schedule) >= 1
    assert strictly >= 1


def _leaf_clusters(solver: HierarchicalSolver, result) -> list[Cluster]:
    return [
        c
        for c in result.partition.clusters()
        if solver.backward[c].size and not any(isinstance(m, Cluster) for m in c.members)
    ]


def test_leaf_options_carry_their_implementations_measured_on_the_local_table() -> None:
    graph = random_impl_training(5, k=6, masks=False)
    budget = int(0.7 * input_order_peak(graph))
    solver = HierarchicalSolver(graph, budget, "highs", {**MONET, "warm": False}, SolveLimits(time_limit=LIMIT))
    result = solver.run()
    assert simulate(graph, result.schedule).peak <= budget
    chosen = 0
    for cluster in _leaf_clusters(solver, result):
        lg = solver._local(cluster)
        assert lg.graph.impl_table is not None
        for option in solver.solved[solver.key_of[cluster]].options:
            steps = local_steps(lg, option.fwd, option.bwd, option.impl_fwd, option.impl_bwd)
            sim = simulate(lg.graph, eager_frees(lg.graph, steps))  # the option replayed with its implementations
            assert sim.peak == option.peak and inplace_ok(lg, steps)
            cost = steps_cost(lg.graph, option.fwd, option.impl_fwd)
            assert sim.total_cost == pytest.approx(cost + steps_cost(lg.graph, option.bwd, option.impl_bwd))
            chosen += bool(option.impl_fwd or option.impl_bwd)
    assert chosen >= 1  # some leaf option runs a non-default implementation


def test_monet_leaf_points_equal_the_brute_force_with_implementations() -> None:
    graph = random_impl_training(5, k=6, masks=False)
    budget = int(0.8 * input_order_peak(graph))
    solver = HierarchicalSolver(graph, budget, "highs", {**MONET, "warm": False}, SolveLimits(time_limit=LIMIT))
    result = solver.run()
    points = 0
    for cluster in _leaf_clusters(solver, result):
        lg = solver._local(cluster)
        for peak, saves in budget_grid(lg, solver.solved[solver.key_of[cluster]].options, 2, 2):
            for save in saves:
                steps, _ = solve_leaf(lg, peak, save, "monet", SolveLimits(time_limit=LIMIT))
                copy = leaf_graph(lg, peak, save, "monet")  # the table, and l_C's workspace peak - save
                brute = exhaustive_optimum(copy, peak, "forward-once")
                assert (steps is None) == (brute is None), (peak, save)
                if steps is not None:
                    assert simulate(copy, eager_frees(copy, steps)).peak <= peak
                    fwd, bwd, impl_fwd, impl_bwd = _split(lg, steps)
                    cost = steps_cost(lg.graph, fwd, impl_fwd) + steps_cost(lg.graph, bwd, impl_bwd)
                    assert cost == pytest.approx(brute.cost)
                    points += 1
    assert points >= 4


def test_other_leaves_and_graphs_with_aux_values_keep_the_default_view() -> None:
    graph = random_impl_training(5, k=6, masks=False)
    budget = int(0.8 * input_order_peak(graph))
    assert HILP.chooses_impls(graph, MONET)
    assert not HILP.chooses_impls(graph, {**FORCED, "leaf": "checkmate"})
    assert not HILP.chooses_impls(graph, {"leaf": "monet"})  # 13 nodes: flat by default
    for leaf in ("hilp", "checkmate"):
        result = plan(graph, budget, "hilp", options={**FORCED, "leaf": leaf}, time_limit=LIMIT)
        assert result.method.endswith("+greedy-impls")  # today's route: default view, then the greedy chooser
        assert simulate(graph, result.schedule).peak <= budget
    masked = a2_mask()  # a sign mask is an aux value: the hierarchy does not take it
    assert not HILP.chooses_impls(masked, {**MONET, "partition": True})
    result = plan(masked, 12, "hilp", options={"partition": True, "leaf": "monet"}, time_limit=LIMIT)
    assert result.method.endswith("+greedy-impls") and simulate(masked, result.schedule).peak <= 12
    with pytest.raises(ConfigurationError, match="aux"):
        HierarchicalSolver(masked, 12, "highs", {"partition": True, "leaf": "monet"})
