"""Leaf clusters' options solved by Checkmate, Moccasin or MONeT (issue 22, ``leaf`` option; docs/hilp.md)."""

from __future__ import annotations

import pytest

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.core.schedule import Compute, eager_frees, input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.formulations.hilp.alternatives import base_options, local_run, measure, once_ok
from remat_models.formulations.hilp.graph import build_hgraph
from remat_models.formulations.hilp.leaves import leaf_graph, solve_leaf
from remat_models.formulations.hilp.level import HILP_LEVEL
from remat_models.formulations.hilp.options import HilpOptions
from remat_models.formulations.hilp.partition import Cluster
from remat_models.formulations.hilp.solver import HierarchicalSolver, _split, budget_grid
from remat_models.heuristics.baselines import knapsack_baseline
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.io import linear_chain, transformer, unet
from remat_models.planning.plan import plan

LEAVES = ("checkmate", "moccasin", "monet")
CHAIN = {"max_leaf": 4, "max_top": 8, "nb_peak": 2, "nb_save": 2, "warm": False}
LIMITS = SolveLimits(time_limit=20)


def _run(graph, budget, init=None, **options):
    solver = HierarchicalSolver(graph, budget, "highs", options, LIMITS)
    return solver, solver.run(init)


def _leaf_clusters(solver: HierarchicalSolver, result) -> list[Cluster]:
    return [
        c
        for c in result.partition.clusters()
        if solver.backward[c].size and not any(isinstance(m, Cluster) for m in c.members)
    ]


def _held_at_loss(lg, fwd, bwd) -> int:
    """Bytes resident while ``l_C`` runs in the option's eager-free local run."""
    resident: set[int] = set()
    for step in eager_frees(lg.graph, local_run(lg, fwd, bwd)).steps:
        if isinstance(step, Compute) and step.node == lg.loss:
            return int(lg.graph.mem[sorted(resident)].sum()) if resident else 0
        (resident.add if isinstance(step, Compute) else resident.discard)(step.node)
    raise AssertionError("l_C never runs")


@pytest.mark.parametrize("leaf", LEAVES)
def test_each_leaf_formulation_fits_beats_its_warm_start_and_leaves_parents_to_hilp(leaf: str) -> None:
    graph = transformer(2)
    budget = int(0.7 * input_order_peak(graph))
    start = knapsack_baseline(graph, budget)
    start_sim = simulate(graph, start)
    assert start_sim.fits(budget)
    solver, result = _run(graph, budget, start, partition={"max_leaf": 6, "max_top": 10}, leaf=leaf, warm=False)
    assert result.status is SolveStatus.FEASIBLE
    sim = simulate(graph, result.schedule)
    assert sim.peak <= budget and sim.total_cost == pytest.approx(result.objective)
    assert result.objective <= start_sim.total_cost + 1e-9
    labels = {label.split("@")[0] for label, _, _ in result.ilp_times}
    assert {"leaf", "cluster", "top"} <= labels  # leaves by ``leaf``; clusters with children stay H-ILP
    leaves = {solver._local(c).graph.name for c in _leaf_clusters(solver, result)}
    assert {label.split("@", 1)[1] for label, _, _ in result.ilp_times if label.startswith("leaf@")} <= leaves


def test_leaf_solves_respect_peak_and_save_agree_with_each_other_and_with_the_hilp_level() -> None:
    graph = transformer(2)
    solver, result = _run(graph, int(0.7 * input_order_peak(graph)), partition={"max_leaf": 6, "max_top": 10})
    checked = 0
    for cluster in _leaf_clusters(solver, result)[:2]:
        lg = solver._local(cluster)
        peak, saves = budget_grid(lg, base_options(lg), 2, 3)[-1]  # the highest peak: every save has a schedule
        hg = build_hgraph(lg.graph, [], loss=lg.loss)
        for save in saves:
            costs = {}
            for leaf in LEAVES:
                sequence, status = solve_leaf(lg, peak, save, leaf, LIMITS)
                assert status == "optimal_in_model", (leaf, save)
                fwd, bwd, impl_fwd, impl_bwd = _split(lg, sequence)
                assert once_ok(lg, fwd, bwd) and impl_fwd == impl_bwd == ()  # no implementation table: defaults
                option = measure(lg, list(fwd), list(bwd))
                assert option.peak <= peak
                assert _held_at_loss(lg, list(fwd), list(bwd)) <= save
                costs[leaf] = float(lg.graph.cost[[*fwd, *bwd]].sum())
            built = HILP_LEVEL.build_level(hg, peak, {"save": save})
            level = solver.solver.solve(built.model, LIMITS)
            assert level.status is SolveStatus.OPTIMAL
            hilp = float(lg.graph.cost[list(built.sequence(level.values))].sum())
            # the same problem (H-ILP's flat level is Checkmate's staged MILP with its own save row): equal optima
            assert costs["moccasin"] == pytest.approx(costs["checkmate"])
            assert costs["monet"] == pytest.approx(costs["checkmate"])
            assert hilp == pytest.approx(costs["checkmate"])
            checked += 1
    assert checked >= 4


def test_checkmate_leaves_are_the_brute_force_optimum_of_each_grid_point() -> None:
    graph = linear_chain(12)
    solver, result = _run(graph, 8, **CHAIN, leaf="checkmate")
    assert simulate(graph, result.schedule).peak <= 8
    clusters = _leaf_clusters(solver, result)
    assert clusters
    found = 0
    for cluster in clusters:
        lg = solver._local(cluster)
        interface = int(lg.graph.mem[: lg.n_in].sum() + lg.graph.mem[lg.out_data].sum())
        for peak in range(max(lg.graph.lower_bound, interface), max(o.peak for o in base_options(lg)) + 1):
            for save in range(interface, peak + 1):
                sequence, _ = solve_leaf(lg, peak, save, "checkmate", LIMITS)
                brute = exhaustive_optimum(leaf_graph(lg, peak, save, "checkmate"), peak, "staged")
                assert (sequence is None) == (brute is None), (peak, save)
                if sequence is not None:
                    assert float(lg.graph.cost[[v for v, _ in sequence]].sum()) == pytest.approx(brute.cost)
                    found += 1
    assert found >= 4


@pytest.mark.parametrize("graph", [transformer(2), unet(3)], ids=["transformer2", "unet3"])
def test_checkmate_leaves_match_hilp_leaves_and_beat_the_base_options(graph) -> None:
    budget = int(0.7 * input_order_peak(graph))
    partition = {"max_leaf": 6, "max_top": 10}
    objective = {}
    for leaf in ("hilp", "checkmate"):
        solver, result = _run(graph, budget, partition=partition, leaf=leaf, warm=False, nb_peak=2, nb_save=2)
        assert simulate(graph, result.schedule).peak <= budget
        objective[leaf] = result.objective
        for cluster in _leaf_clusters(solver, result):  # every leaf has grid options at least as cheap
            options = solver.solved[solver.key_of[cluster]].options
            lg = solver._local(cluster)
            base = min(float(lg.graph.cost[[*o.fwd, *o.bwd]].sum()) for o in options if o.origin == "base")
            assert min(float(lg.graph.cost[[*o.fwd, *o.bwd]].sum()) for o in options) <= base
    assert objective["checkmate"] == pytest.approx(objective["hilp"], rel=0.02)


def test_a_leaf_backend_can_be_named() -> None:
    graph = linear_chain(12)
    _, result = _run(graph, 8, **CHAIN, leaf="checkmate/cpsat")
    assert simulate(graph, result.schedule).peak <= 8
    assert any(label.startswith("leaf@") and status == "optimal_in_model" for label, _, status in result.ilp_times)


@pytest.mark.parametrize("value", ["gurobi", "Checkmate", "checkmate/nosuch", "hilp/cpsat", 3, ""])
def test_a_bad_leaf_is_a_configuration_error_naming_it(value) -> None:
    with pytest.raises(ConfigurationError, match="leaf"):
        HilpOptions.of({"leaf": value}).validated()
    with pytest.raises(ConfigurationError, match="leaf"):
        plan(linear_chain(6), 6, "hilp", options={"leaf": value, "partition": True})
