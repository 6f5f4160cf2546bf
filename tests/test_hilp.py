"""Flat H-ILP (one level): equals Checkmate and brute force, chain optima, accounting (spec T1, T2, T7, T12)."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from checkmate_graphs import budgets, random_dag, tiny_graphs, tiny_unet

from remat_models.backends import SolveLimits, SolveStatus, available, get_backend
from remat_models.core.schedule import eager_frees, input_order_peak, input_order_schedule, simulate
from remat_models.core.stages import stages_from_schedule
from remat_models.errors import InvalidScheduleError, RematError
from remat_models.formulations.checkmate.formulation import CHECKMATE
from remat_models.formulations.hilp.formulation import HILP
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.heuristics.griewank import griewank_budget
from remat_models.io import linear_chain, random_layered, read_graph
from remat_models.model import constructs
from remat_models.model.lowering import estimate, lower

LIMITS = SolveLimits(time_limit=60)
FLAT = {"partition": False}
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "graphs"


def solve_flat(graph, budget, backend="highs"):
    """Build the flat H-ILP for ``backend``, solve, check the decoded schedule against the simulator."""
    solver = get_backend(backend)
    integral = constructs.CONTINUOUS not in solver.native_constructs
    built = HILP.build(graph, budget, {"integral_memory": integral, "partition": False})
    result = solver.solve(built.model, LIMITS)
    if not result.has_solution:
        return result.status, None
    schedule = HILP.decode(built, result.values)
    sim = simulate(graph, schedule)
    objective = built.cost(result.objective)
    assert sim.peak <= budget
    assert sim.total_cost == pytest.approx(objective)
    assert sim.peak <= built.peak_bound(result.values) + 1e-6 * budget
    return result.status, objective


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
def test_flat_hilp_equals_checkmate_and_brute_force(backend) -> None:
    for graph in [*tiny_graphs(), tiny_unet()]:
        for budget in budgets(graph):
            status, objective = solve_flat(graph, budget, backend)
            truth = exhaustive_optimum(graph, budget, "staged")
            if truth is None:
                assert status == SolveStatus.INFEASIBLE, (graph.name, budget)
                continue
            assert status == SolveStatus.OPTIMAL
            assert objective == pytest.approx(truth.cost), (graph.name, budget)
            cm = get_backend("highs").solve(CHECKMATE.build(graph, budget).model, LIMITS)
            assert objective == pytest.approx(CHECKMATE.build(graph, budget).cost(cm.objective))


CHAIN_OPTIMA = {
    3: (3, [10, 8, 7]),
    4: (3, [15, 11, 10, 9]),
    5: (3, [21, 14, 13, 12]),
    6: (3, [28, 18, 16, 15, 14, 13]),
    8: (3, [45, 26, 22, 21, 20, 19, 18, 17]),
}
CHEAP = {8: (4, 10)}  # the tight and loose ends of the longer chain keep the test short


@pytest.mark.parametrize("n", sorted(CHAIN_OPTIMA))
def test_chain_optima(n) -> None:
    first, costs = CHAIN_OPTIMA[n]
    graph = linear_chain(n)
    for budget, cost in enumerate(costs, start=first):
        if n in CHEAP and budget not in CHEAP[n]:
            continue
        status, objective = solve_flat(graph, budget)
        assert status == SolveStatus.OPTIMAL and objective == pytest.approx(cost), (n, budget)
        try:
            revolve = simulate(graph, griewank_budget(graph, budget))
        except RematError:
            continue
        if revolve.peak <= budget:
            assert objective <= revolve.total_cost + 1e-9


@pytest.mark.parametrize("backend", [b for b in available() if b not in ("highs", "cpsat")])
def test_flat_hilp_same_optimum_on_other_backends(backend) -> None:
    for graph, budget in [(linear_chain(4), 4), (tiny_unet(), 14), (random_dag(6, 3, workspace=True), 14)]:
        _, reference = solve_flat(graph, budget, "highs")
        status, objective = solve_flat(graph, budget, backend)
        assert status == SolveStatus.OPTIMAL and objective == pytest.approx(reference), (backend, graph.name)


def test_loose_budget_costs_the_sum_of_costs() -> None:
    for graph in (linear_chain(12), tiny_unet()):
        _, objective = solve_flat(graph, input_order_peak(graph))
        assert objective == pytest.approx(graph.total_cost)


def test_checkpoint_all_hints_are_a_feasible_assignment_with_the_simulated_peak() -> None:
    graphs = (linear_chain(5), tiny_unet(), random_layered(9, seed=2), random_dag(7, 1, workspace=True, fixed=True))
    for graph in graphs:
        budget = input_order_peak(graph)
        built = HILP.build(graph, budget, FLAT)
        values = HILP.hints(built, input_order_schedule(graph))
        assert built.model.check(values) == []
        assert built.peak_bound(values) == pytest.approx(budget)
        assert built.cost(built.model.objective_value(values)) == pytest.approx(graph.total_cost)


def test_estimate_matches_the_lowered_size() -> None:
    built = HILP.build(tiny_unet(), 14, {"integral_memory": True, "partition": False})
    native = get_backend("cpsat").native_constructs
    size = estimate(built.model, native)
    lowered = lower(built.model, native).model
    assert (size.variables, size.constraints) == (lowered.num_cols, lowered.num_rows)


def test_a_warm_start_outside_the_stage_structure_is_recast_and_is_the_incumbent() -> None:
    """Recomputations out of stage order (as FastSA's) and first computations in another topological order: the
    flat model takes the start (recast as Checkmate's, stages in its first-computation order) instead of dropping
    it; its hint assignment is feasible and costs what the start costs in the simulator."""
    chain = linear_chain(6)
    ix = chain.index
    names = [f"f{i}" for i in range(6)] + ["loss", "b5", "f4", "f3", "b4", "b3", "b2", "b1", "b0"]
    layered = random_layered(9, seed=2)
    dag = nx.DiGraph(layered.edges.tolist())
    dag.add_nodes_from(range(layered.n))
    other = list(nx.lexicographical_topological_sort(dag, key=lambda v: -v))  # not the input order
    for graph, sequence in ((chain, [ix[n] for n in names]), (layered, other)):
        start = eager_frees(graph, sequence)
        with pytest.raises(InvalidScheduleError):
            stages_from_schedule(graph, graph.order, start)
        sim = simulate(graph, start)
        opts = HILP.warm_options(FLAT, start)
        built = HILP.build(graph, sim.peak, opts)
        values = HILP.hints(built, start)
        assert built.model.check(values) == []
        assert built.cost(built.model.objective_value(values)) == pytest.approx(sim.total_cost)
        outcome = HILP.solve(built, "highs", LIMITS, init=start)
        assert outcome.simulation.peak <= sim.peak
        assert outcome.simulation.total_cost <= sim.total_cost + 1e-9


def test_flat_relaxation_is_tighter_than_checkmates() -> None:
    """Same cells and optimum as Checkmate's staged MILP (the brute-force tests above), but the LP relaxation pays for
    memory it holds: (7c) split per term forbids freeing a fraction of a kept value, and no hold or rerun that nothing
    uses. Before, H-ILP's relaxation was Checkmate's (or below it, with a free after every producer), and HiGHS needed
    twice Checkmate's time on cm1 at 70 % (docs/hilp.md)."""
    graph = read_graph(EXAMPLES / "unet_train.json")
    relax = get_backend("highs:lp")
    for fraction in (0.9, 0.7):
        budget = int(input_order_peak(graph) * fraction)
        flat = HILP.build(graph, budget, FLAT)
        checkmate = CHECKMATE.build(graph, budget)
        ours, theirs = relax.solve(flat.model, LIMITS), relax.solve(checkmate.model, LIMITS)
        assert ours.status == theirs.status == SolveStatus.OPTIMAL
        assert flat.cost(ours.objective) > checkmate.cost(theirs.objective) + 0.01 * (
            checkmate.cost(theirs.objective) - graph.total_cost
        )
        assert flat.model.block("FREE").size <= checkmate.model.block("FREE").size


def test_a_warm_start_with_an_idle_recomputation_gives_a_feasible_cheaper_hint() -> None:
    """A start that recomputes a value nothing reads again (f3 after b3, its last reader: a baseline's wasted step;
    `cnn:vgg11`'s least-peak start has seven) breaks the dominance rows as it is: the hint drops the rerun, so HiGHS
    keeps the start as its incumbent (before, the model started without one and returned "no schedule")."""
    chain = linear_chain(6)
    ix = chain.index
    names = [f"f{i}" for i in range(6)] + ["loss", "b5", "b4", "b3", "f3", "b2", "b1", "b0"]
    start = eager_frees(chain, [ix[n] for n in names])
    sim = simulate(chain, start)
    built = HILP.build(chain, sim.peak, HILP.warm_options(FLAT, start))
    values = HILP.hints(built, start)
    assert built.model.check(values) == []
    assert built.cost(built.model.objective_value(values)) == pytest.approx(sim.total_cost - chain.cost[ix["f3"]])
    outcome = HILP.solve(built, "highs", LIMITS, init=start)
    assert outcome.status == SolveStatus.OPTIMAL.in_model()
    assert outcome.simulation.total_cost == pytest.approx(chain.total_cost)
