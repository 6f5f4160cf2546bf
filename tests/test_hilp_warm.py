"""The hierarchy cannot lose its warm start (issue 22): induced options, Pareto pruning, refinement, flat default."""

from __future__ import annotations

import math

import numpy as np
import pytest

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.core.schedule import eager_frees, input_order_peak, simulate
from remat_models.formulations.hilp.alternatives import base_options, local_run, measure, pareto
from remat_models.formulations.hilp.layers import layer_members, pair_layers
from remat_models.formulations.hilp.local import local_graph
from remat_models.formulations.hilp.refine import refine
from remat_models.formulations.hilp.solver import HierarchicalSolver, solve_hierarchical
from remat_models.formulations.hilp.warm import fitting_starts, halves, induced
from remat_models.heuristics.baselines import checkpoint_all, knapsack_baseline, sqrtn_baseline
from remat_models.io import linear_chain, transformer
from remat_models.planning.plan import plan

CHAIN = {"max_leaf": 4, "max_top": 8, "nb_peak": 2, "nb_save": 2}


def _solver(graph, budget, init, **options) -> tuple[HierarchicalSolver, object]:
    solver = HierarchicalSolver(graph, budget, "highs", {**CHAIN, **options})
    return solver, solver.run(init)


def test_induced_options_replay_the_warm_start_cluster_by_cluster() -> None:
    graph = linear_chain(12)
    start = sqrtn_baseline(graph, 10**9)
    solver, result = _solver(graph, input_order_peak(graph), start)
    split = halves(graph, start)
    clusters = [c for c in result.partition.clusters() if solver.backward[c].size]
    assert clusters
    for cluster in clusters:
        lg = solver._local(cluster)
        option = induced(lg, split)
        assert option is not None, cluster
        fwd, bwd = option
        sim = simulate(lg.graph, eager_frees(lg.graph, local_run(lg, fwd, bwd)))
        assert sim.total_cost == pytest.approx(lg.graph.cost[[*fwd, *bwd]].sum())
    # autograd (checkpoint-all) induces each cluster's base option 0: no warm option is added (no FastSA start)
    every, _ = _solver(graph, input_order_peak(graph), checkpoint_all(graph), warm=False)
    assert all(o.origin != "warm" for solved in every.solved.values() for o in solved.options)


def test_pareto_drops_dominated_grid_options_and_keeps_the_base_ones() -> None:
    graph = linear_chain(6)
    V = [graph.index["f2"], graph.index["f3"]]
    lg = local_graph(graph, np.array(V), layer_members(pair_layers(graph), V))
    base = base_options(lg)
    V, W = lg.forward.tolist(), lg.backward.tolist()
    worse = measure(lg, V, [*V, *V, *W])  # recomputes V twice: dominated by the base "recompute" option
    kept = pareto(lg, [*base, worse])
    assert kept == base


def test_the_top_never_returns_worse_than_its_warm_start_and_says_so() -> None:
    graph = transformer(4)
    budget = int(0.6 * input_order_peak(graph))
    start = knapsack_baseline(graph, budget)
    start_cost = simulate(graph, start).total_cost
    result = solve_hierarchical(graph, budget, "highs", {"nb_peak": 2, "nb_save": 2}, SolveLimits(time_limit=20))
    assert result.status is SolveStatus.FEASIBLE and result.top_status in ("optimal", "feasible")
    solver = HierarchicalSolver(graph, budget, "highs", {"nb_peak": 2, "nb_save": 2}, SolveLimits(time_limit=20))
    warm = solver.run(start)
    sim = simulate(graph, warm.schedule)
    assert sim.peak <= budget and sim.total_cost == pytest.approx(warm.objective)
    assert warm.objective <= start_cost * (1 + 1e-9)
    assert warm.returned_warm_start == (warm.objective == pytest.approx(start_cost) and not warm.refined)
    assert any(o.origin == "warm" for s in solver.solved.values() for o in s.options)


def test_fastsa_joins_a_fitting_init_and_the_solve_keeps_the_cheaper_start() -> None:
    graph = linear_chain(12)
    budget = input_order_peak(graph)
    start = sqrtn_baseline(graph, budget)  # fits, but recomputes although autograd fits
    starts = fitting_starts(graph, budget, start, time_limit=5.0)
    assert len(starts) == 2 and starts[0].schedule is start
    assert starts[1].simulation.total_cost < starts[0].simulation.total_cost
    assert [s.schedule for s in fitting_starts(graph, budget, start, time_limit=5.0, fastsa=False)] == [start]
    result = HierarchicalSolver(graph, budget, "highs", CHAIN, SolveLimits(time_limit=10)).run(start)
    sim = simulate(graph, result.schedule)
    assert sim.peak <= budget and sim.total_cost == pytest.approx(result.objective)
    assert result.objective <= starts[1].simulation.total_cost * (1 + 1e-9)


def test_refinement_swaps_in_cheaper_options_that_fit() -> None:
    graph = linear_chain(12)
    budget = input_order_peak(graph)
    start = sqrtn_baseline(graph, budget)
    before = simulate(graph, start)
    assert before.total_cost > graph.total_cost  # it recomputes although autograd fits
    solver, result = _solver(graph, budget, None, warm=False)
    schedule, after, kept = refine(graph, budget, start, before, solver._moves(result.partition), math.inf)
    sim = simulate(graph, schedule)
    assert kept >= 1 and sim.peak <= budget and sim.total_cost == after.total_cost < before.total_cost


def test_small_graphs_are_solved_flat_by_default() -> None:
    graph = linear_chain(12)
    flat = plan(graph, 8, formulation="hilp", time_limit=30)
    assert flat.solver_status is SolveStatus.OPTIMAL_IN_MODEL and "depth" not in flat.details  # proof: flat model
    assert flat.simulation.total_cost == 31.0
    hierarchical = plan(graph, 8, formulation="hilp", options={"flat_max_nodes": 10, **CHAIN}, time_limit=30)
    assert hierarchical.details["depth"] >= 2 and not hierarchical.solver_status.is_optimal
    assert simulate(graph, hierarchical.schedule).peak <= 8
    assert np.isfinite(hierarchical.simulation.total_cost)
