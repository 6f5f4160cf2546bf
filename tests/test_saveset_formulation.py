"""The exact save-set formulation: optimum = brute force over all save sets = HiGHS = CP-SAT <= the heuristic."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from remat_models.core.graph import Graph
from remat_models.core.schedule import simulate
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.formulations import get_formulation
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.recompute import (
    forward_mask,
    saved_set_sequence,
    sequence_schedule,
    sequence_score,
)
from remat_models.heuristics.saveset import saveset, saveset_search
from remat_models.io._training import Op, training_graph
from remat_models.io.generators import linear_chain
from remat_models.planning.plan import plan

FORMULATION = "saveset-exact"


def random_training_graph(seed: int, ops: int = 7) -> Graph:
    """A tiny training graph: each forward op reads one or two earlier ops; sizes, costs and saved inputs random."""
    rng = np.random.default_rng(seed)
    forward = [Op("x0", (), mem=int(rng.integers(1, 6)), cost=float(rng.integers(1, 5)))]
    for i in range(1, ops):
        inputs = tuple(dict.fromkeys(f"x{j}" for j in rng.choice(i, size=min(i, int(rng.integers(1, 3))))))
        forward.append(
            Op(
                f"x{i}",
                inputs,
                mem=int(rng.integers(1, 6)),
                cost=float(rng.integers(1, 5)),
                saves_inputs=bool(rng.integers(2)),
                saves_output=bool(rng.integers(2)),
            )
        )
    loss = Op("loss", (f"x{ops - 1}",), mem=1, cost=1.0)
    return training_graph(forward, loss, name=f"random_training_s{seed}")


def with_fixed(graph: Graph, fixed: list[int]) -> Graph:
    """``graph`` with the nodes ``fixed`` not recomputable (random ops)."""
    return graph.with_recomputable(dict.fromkeys(fixed, False))


# seeds whose save sets span several peaks
GRAPHS = [
    linear_chain(5),
    random_training_graph(4),
    random_training_graph(7),
    random_training_graph(9, ops=8),
    with_fixed(linear_chain(6), [1, 3]),
]


def brute_force(graph: Graph) -> list[tuple[np.ndarray, int, float]]:
    """(saved candidates, peak, cost) of every save set of the recomputable forward values."""
    candidates = np.flatnonzero(forward_mask(graph) & graph.recomputable)
    plans = []
    for bits in itertools.product([False, True], repeat=candidates.size):
        saved = candidates[np.array(bits, dtype=bool)]
        peak, cost = sequence_score(graph, saved_set_sequence(graph, saved))
        plans.append((saved, peak, cost))
    return plans


def budgets(plans: list[tuple[np.ndarray, int, float]]) -> list[int]:
    """The least, a middle and the largest distinct peak of the save sets."""
    peaks = sorted({peak for _, peak, _ in plans})
    return sorted({peaks[0], peaks[len(peaks) // 2], peaks[-1]})


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.name)
def test_optimum_is_the_brute_force_optimum_on_highs_and_cpsat(graph: Graph) -> None:
    plans = brute_force(graph)
    for budget in budgets(plans):
        best = min(cost for _, peak, cost in plans if peak <= budget)
        for backend in ("highs", "cpsat"):
            outcome = solve_model(graph, budget, FORMULATION, backend)
            assert outcome.status.value == "optimal_in_model", (backend, budget)  # among save sets
            result = simulate(graph, outcome.schedule)
            assert result.peak <= budget
            assert result.total_cost == pytest.approx(best)
            assert outcome.objective == pytest.approx(best)
        heuristic = simulate(graph, saveset(graph, budget))
        if heuristic.peak <= budget:
            assert heuristic.total_cost >= best - 1e-9


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.name)
def test_below_every_save_sets_peak_the_model_is_infeasible(graph: Graph) -> None:
    least = min(peak for _, peak, _ in brute_force(graph))
    for backend in ("highs", "cpsat"):
        assert solve_model(graph, least - 1, FORMULATION, backend).status.value == "no_schedule_in_model"


@pytest.mark.parametrize("graph", GRAPHS[:4], ids=lambda g: g.name)
def test_every_save_set_satisfies_the_rows_exactly_when_its_peak_fits(graph: Graph) -> None:
    """The model's rows at each save set's schedule: feasible iff the simulated peak is within the budget."""
    plans = brute_force(graph)
    budget = budgets(plans)[1]  # a middle peak: some save sets fit, others do not
    form = get_formulation(FORMULATION)
    built = form.build(graph, budget, {"integral_memory": True})
    for saved, peak, cost in plans:
        values = form.hints(built, sequence_schedule(graph, saved_set_sequence(graph, saved)))
        assert (not built.model.check(values)) == (peak <= budget), (saved, peak)
        assert built.model.objective_value(values) == pytest.approx(cost / built.units.cost_unit)


def test_the_heuristic_warm_starts_the_solver() -> None:
    graph = random_training_graph(7)
    budget = budgets(brute_force(graph))[1]
    start = saveset(graph, budget)
    started = simulate(graph, start)
    assert started.peak <= budget
    outcome = solve_model(graph, budget, FORMULATION, "highs", init=start)
    assert outcome.warm_start
    assert simulate(graph, outcome.schedule).total_cost <= started.total_cost


def test_a_schedule_outside_the_save_set_space_gives_no_hints() -> None:
    graph = linear_chain(6)
    form = get_formulation(FORMULATION)
    built = form.build(graph, 10)
    with pytest.raises(InvalidScheduleError, match="not a save-set schedule"):
        form.hints(built, sequence_schedule(graph, np.append(saved_set_sequence(graph, []), 0)))  # f0 once more


def test_planned_by_name_through_plan() -> None:
    graph = random_training_graph(4)
    budget = budgets(brute_force(graph))[0]
    result = plan(graph, budget, f"{FORMULATION}/cpsat", init="saveset")  # the heuristic warm-starts it
    assert result.outcome is not None and result.outcome.warm_start
    assert simulate(graph, result.schedule).peak <= budget
    assert result.simulation.total_cost <= saveset_search(graph, budget).cost + 1e-9


def test_bad_option_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="cost_precision"):
        get_formulation(FORMULATION).build(linear_chain(3), 10, {"cost_precision": 2.0})


def test_compile_route_uses_the_exact_choice_on_a_small_joint_graph() -> None:
    """``rt.compile(..., method="saveset-exact")``: what runs fits, no dearer than the heuristic, eager's gradients."""
    torch = pytest.importorskip("torch")
    import remat_models.torch as rt
    from remat_models.torch.compiled import choose_save_set, partitioner_view

    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(
        nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 8)
    )
    inputs, targets = torch.randn(16, 16), torch.randn(16, 8)
    loss_fn = torch.nn.functional.mse_loss
    step = rt.compile(
        model, inputs, loss_fn, targets, activation_budget=0.5, backend="aot_eager", method="saveset-exact"
    )
    plan = step.plan
    assert plan is not None and plan.fits
    graph = partitioner_view(plan.joint)  # matmuls not recomputable, as PyTorch's partitioner has it
    assert graph.recomputable.sum() < plan.joint.graph.recomputable.sum()
    exact, heuristic = choose_save_set(graph, plan.budget, "saveset-exact"), saveset_search(graph, plan.budget)
    assert exact.peak <= plan.budget and heuristic.peak <= plan.budget
    assert exact.cost <= heuristic.cost
    assert plan.emitted_peak == exact.peak  # PyTorch's order peaks as the model says
    assert set(plan.saved) == {graph.names[v] for v in exact.saved}  # the partitioner got the exact choice
    assert simulate(graph, sequence_schedule(graph, saved_set_sequence(graph, exact.saved))).peak == exact.peak
    model.zero_grad()
    step(inputs, targets).backward()
    compiled_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss_fn(model(inputs), targets).backward()
    for ours, eager in zip(compiled_grads, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(ours, eager)
