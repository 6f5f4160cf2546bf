"""Moccasin: optimum against exhaustive search, decode -> simulate within budget, warm starts, scaling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, eager_frees, input_order_peak, simulate
from remat_models.errors import BudgetInfeasibleError, ConfigurationError
from remat_models.formulations import SolveOutcome
from remat_models.formulations.moccasin.formulation import MOCCASIN, solve_moccasin
from remat_models.formulations.moccasin.layout import intervals_from_sequence, make_layout
from remat_models.formulations.moccasin.model import MoccasinOptions, build_model, hint_values
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.baselines import checkpoint_all
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.io.generators import linear_chain
from remat_models.model import SolveStatus


def random_graph(n: int, seed: int, *, workspace: bool = True, fixed_mem: int = 0, density: float = 0.4) -> Graph:
    """A random DAG over 0..n-1 (index order is topological), integer costs/sizes, some workspace."""
    rng = np.random.default_rng(seed)
    edges = [(u, v) for v in range(1, n) for u in range(v) if rng.random() < density]
    return Graph.from_arrays(
        [f"v{i}" for i in range(n)],
        rng.integers(0, 6, n),
        rng.integers(1, 6, n),
        edges,
        workspace=rng.integers(0, 3, n) if workspace else None,
        fixed_mem=fixed_mem,
        name=f"random{n}_{seed}",
    )


def checked(graph: Graph, budget: int, result: SolveOutcome) -> float | None:
    """The total cost of a result after re-simulating its schedule (peak within budget, deps respected).

    No schedule is accepted only with a proof that Moccasin's model holds none (never a proof about the budget):
    a time-out (no verdict) fails the test.
    """
    if result.schedule is None:
        assert result.status == SolveStatus.NO_SCHEDULE_IN_MODEL, f"no schedule and no proof: {result.status}"
        return None
    sim = simulate(graph, result.schedule)
    assert sim.peak <= budget
    assert sim.total_cost == pytest.approx(result.total_cost)
    return sim.total_cost


def budgets(graph: Graph) -> list[int]:
    """Budgets from the lower bound to the input-order peak."""
    lo, hi = graph.lower_bound, input_order_peak(graph)
    return sorted({int(lo + f * (hi - lo)) for f in (0.0, 0.25, 0.5, 1.0)})


SMALL = [linear_chain(2), linear_chain(3), random_graph(6, 1), random_graph(6, 4), random_graph(6, 7, fixed_mem=3)]


@pytest.mark.parametrize("graph", SMALL, ids=lambda g: g.name)
def test_input_order_with_enough_intervals_is_the_staged_optimum(graph: Graph) -> None:
    for budget in budgets(graph):
        result = solve_moccasin(graph, budget, order="input", C=graph.n, workers=1, time_limit=30)
        exact = exhaustive_optimum(graph, budget, "staged")
        assert result.status in (SolveStatus.OPTIMAL_IN_MODEL, SolveStatus.NO_SCHEDULE_IN_MODEL)
        cost = checked(graph, budget, result)
        assert (cost is None) == (exact is None)
        if exact is not None:
            assert cost == pytest.approx(exact.cost)


@pytest.mark.parametrize("graph", SMALL[:4], ids=lambda g: g.name)
def test_free_order_is_exact_within_C_and_not_above_input_order(graph: Graph) -> None:
    C = 2
    for budget in budgets(graph):
        free = solve_moccasin(graph, budget, order="free", C=C, workers=1, time_limit=30)
        staged = solve_moccasin(graph, budget, order="input", C=C, workers=1, time_limit=30)
        exact = exhaustive_optimum(graph, budget, "free")
        free_cost, staged_cost = checked(graph, budget, free), checked(graph, budget, staged)
        assert free.status in (SolveStatus.OPTIMAL_IN_MODEL, SolveStatus.NO_SCHEDULE_IN_MODEL)
        if staged_cost is not None:
            assert free_cost is not None and free_cost <= staged_cost + 1e-9
        if exact is None:
            assert free_cost is None
            continue
        if free_cost is not None:
            assert free_cost >= exact.cost - 1e-9
        if max(np.bincount(exact.schedule.compute_sequence(), minlength=graph.n)) <= C:
            assert free_cost == pytest.approx(exact.cost)  # the exact plan is one of Moccasin's


@pytest.mark.parametrize("order", ["input", "free"])
def test_C1_recomputes_nothing(order: str) -> None:
    graph = linear_chain(3)
    budget = input_order_peak(graph)
    result = solve_moccasin(graph, budget, order=order, C=1, workers=1)
    checked(graph, budget, result)
    assert result.simulation is not None and result.simulation.recomputations == 0
    tight = solve_moccasin(graph, graph.lower_bound, order=order, C=1, workers=1)
    assert tight.status == SolveStatus.NO_SCHEDULE_IN_MODEL  # a chain's tight budget needs recomputation


def test_non_recomputable_nodes_get_one_interval() -> None:
    base = linear_chain(3)
    graph = base.with_recomputable({"f1": False})
    assert make_layout(graph, "free", C=3).counts[graph.index["f1"]] == 1
    for budget in budgets(graph):
        result = solve_moccasin(graph, budget, order="input", C=graph.n, workers=1)
        exact = exhaustive_optimum(graph, budget, "staged")
        cost = checked(graph, budget, result)
        assert (cost is None) == (exact is None)
        if exact is not None:
            assert cost == pytest.approx(exact.cost)
            assert result.schedule is not None
            assert result.schedule.compute_sequence().count(graph.index["f1"]) == 1


def test_outputs_are_retained_to_the_end() -> None:
    graph = Graph.from_arrays(
        ["a", "b", "c", "d"], [1, 1, 1, 1], [2, 1, 1, 1], [(0, 1), (1, 2), (0, 3), (2, 3)], outputs=[0, 3], name="outs"
    )
    for order in ("input", "free"):
        result = solve_moccasin(graph, input_order_peak(graph), order=order, workers=1)
        checked(graph, input_order_peak(graph), result)  # simulate checks that outputs stay resident


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    n=st.integers(3, 6),
    seed=st.integers(0, 10_000),
    fraction=st.floats(0.0, 1.2),
    order=st.sampled_from(["input", "free"]),
    C=st.integers(1, 3),
)
def test_decoded_schedules_fit_the_budget_and_the_model_bounds_the_simulation(
    n: int, seed: int, fraction: float, order: str, C: int
) -> None:
    graph = random_graph(n, seed, fixed_mem=seed % 3)
    budget = int(graph.lower_bound + fraction * (input_order_peak(graph) - graph.lower_bound))
    result = solve_moccasin(graph, budget, order=order, C=C, workers=1, time_limit=10)  # type: ignore[arg-type]
    checked(graph, budget, result)
    if result.phases.get("phase2") is not None and result.phases.get("phase2").has_solution:
        built = build_model(graph, budget, MoccasinOptions(**result.options))
        assert result.simulation is not None
        assert result.simulation.peak <= built.peak_bound(result.phases.get("phase2").values) <= budget


@pytest.mark.parametrize("order", ["input", "free"])
def test_trivial_start_is_a_feasible_point_of_the_model(order: str) -> None:
    graph = random_graph(7, 3)
    peak = input_order_peak(graph)
    built = build_model(graph, peak, MoccasinOptions(order=order))  # type: ignore[arg-type]
    start = intervals_from_sequence(built.layout, graph.order)  # type: ignore[arg-type]
    assert built.peak(start) == peak  # the cumulative's accounting equals the simulator's on eager ends
    assert built.model.check(hint_values(built, start)) == []
    phase1 = build_model(graph, peak * 3 // 4, MoccasinOptions(order=order), phase1_peak=peak)  # type: ignore[arg-type]
    assert phase1.model.check(hint_values(phase1, start)) == []


def test_two_phase_reaches_a_budget_below_the_input_order_peak() -> None:
    graph = linear_chain(3)
    budget = graph.lower_bound
    result = solve_moccasin(graph, budget, workers=1, C=graph.n, greedy=False)
    phase1 = result.phases.get("phase1")
    assert phase1 is not None and phase1.has_solution
    assert phase1.objective == phase1.bound == budget - graph.fixed_mem  # min max(M_var, M), units of 1
    assert checked(graph, budget, result) == pytest.approx(exhaustive_optimum(graph, budget, "staged").cost)  # type: ignore[union-attr]
    single = solve_moccasin(graph, budget, workers=1, C=graph.n, two_phase=False)
    assert single.phases.get("phase1") is None and checked(graph, budget, single) == pytest.approx(result.total_cost)


def test_a_fitting_greedy_start_skips_phase_1() -> None:
    graph = linear_chain(4)
    budget = input_order_peak(graph) - 1
    result = solve_moccasin(graph, budget, workers=1, C=2, time_limit=20)
    assert result.phases.get("phase1") is None and result.time_to_first is not None
    slow = solve_moccasin(graph, budget, workers=1, C=2, time_limit=20, greedy=False)
    assert slow.phases.get("phase1") is not None
    assert checked(graph, budget, result) == pytest.approx(checked(graph, budget, slow))


def test_warm_start_from_any_schedule_truncates_to_C() -> None:
    graph = linear_chain(3)
    budget = graph.lower_bound + 1
    exact = exhaustive_optimum(graph, budget, "staged")
    assert exact is not None
    result = solve_moccasin(graph, budget, C=graph.n, workers=1, init=exact.schedule)
    assert result.phases.get("phase1") is None  # the warm start fits: no phase 1
    assert checked(graph, budget, result) == pytest.approx(exact.cost)
    # a schedule with more computations of a node than C: the extra ones are dropped from the hint
    sequence = exact.schedule.compute_sequence()
    counts = np.bincount(sequence, minlength=graph.n)
    layout = make_layout(graph, "input", C=1)
    iv = intervals_from_sequence(layout, sequence)
    assert int(iv.presence.sum()) == graph.n and counts.max() > 1
    truncated = solve_moccasin(graph, input_order_peak(graph), C=1, workers=1, init=exact.schedule)
    checked(graph, input_order_peak(graph), truncated)


def test_formulation_protocol_roundtrip() -> None:
    from remat_models.backends import SolveLimits, get_backend

    graph = random_graph(6, 4)
    budget = input_order_peak(graph)
    built = MOCCASIN.build(graph, budget, {"order": "free", "C": 2})
    hints = MOCCASIN.hints(built, checkpoint_all(graph))
    res = get_backend("cpsat").solve(built.model, SolveLimits(workers=1), hints)
    schedule = MOCCASIN.decode(built, res.values)
    assert simulate(graph, schedule).total_cost == pytest.approx(built.cost(res.objective))
    assert simulate(graph, schedule).peak <= built.peak_bound(res.values) <= budget


def test_costs_and_sizes_are_scaled_and_reported_in_original_units() -> None:
    base = random_graph(6, 1, workspace=False)
    scaled = Graph.from_arrays(
        list(base.names), base.cost * 1000 + 0.25, base.mem * 4096, base.edges, fixed_mem=8192, name="scaled"
    )
    budget = scaled.fixed_mem + (budgets(base)[1] - base.fixed_mem) * 4096
    result = solve_moccasin(scaled, budget, C=scaled.n, workers=1)
    built = build_model(scaled, budget, MoccasinOptions(**result.options))
    assert built.units.mem_unit == 4096 and not built.units.cost_exact
    exact = exhaustive_optimum(scaled, budget, "staged")
    cost = checked(scaled, budget, result)
    assert (cost is None) == (exact is None)
    if exact is not None:
        assert cost == pytest.approx(exact.cost)


def test_errors() -> None:
    graph = linear_chain(2)
    with pytest.raises(BudgetInfeasibleError):
        solve_moccasin(graph, graph.lower_bound - 1)
    with pytest.raises(ConfigurationError):
        solve_moccasin(graph, input_order_peak(graph), order="any")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        solve_moccasin(graph, input_order_peak(graph), C=0)


def test_decode_of_interval_values_is_the_sorted_active_starts() -> None:
    graph = linear_chain(2)
    layout = make_layout(graph, "free", C=2)
    sequence = [0, 1, 2, 0, 3, 4]  # f0 f1 loss f0 b1 b0: recompute f0
    iv = intervals_from_sequence(layout, sequence)
    built = build_model(graph, 100, MoccasinOptions(order="free"))
    schedule = MOCCASIN.decode(built, hint_values(built, iv))
    assert isinstance(schedule, Schedule)
    assert schedule == eager_frees(graph, [graph.names.index(graph.names[v]) for v in sequence])


@pytest.mark.parametrize("graph", SMALL[:3], ids=lambda g: g.name)
def test_input_order_equals_checkmate_staged_optimum(graph: Graph) -> None:
    for budget in budgets(graph):
        checkmate = solve_model(graph, budget, "checkmate", "highs")
        moccasin = solve_moccasin(graph, budget, order="input", C=graph.n, workers=1)
        cost = checked(graph, budget, moccasin)
        if checkmate.schedule is None:
            assert cost is None
            continue
        assert cost == pytest.approx(simulate(graph, checkmate.schedule).total_cost)


@pytest.mark.bench
@pytest.mark.parametrize(("stem", "budget", "paper_tdi"), [("rl_g1_n100", 41_687, 0.8), ("rl_g1_n100", 37_055, 2.3)])
def test_paper_graph_reaches_the_published_tdi(
    shared_graphs_dir: Path, stem: str, budget: int, paper_tdi: float
) -> None:
    from remat_models.io.files import read_graph

    graph = read_graph(shared_graphs_dir / f"{stem}.json")
    result = solve_moccasin(graph, budget, time_limit=120)
    checked(graph, budget, result)
    assert result.tdi is not None and result.tdi <= paper_tdi + 0.05
