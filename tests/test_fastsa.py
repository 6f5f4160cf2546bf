from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Schedule, eager_frees, input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.heuristics.fastsa import fastsa, fastsa_schedule
from remat_models.heuristics.fastsa.grouping import group_nodes, intermediate_memory, plain_units
from remat_models.heuristics.fastsa.state import SAState, slot_count
from remat_models.io import linear_chain, random_layered

FEW = (3000, 3000)


def _workspace_graph(seed: int) -> Graph:
    """Random layered graph with workspace, fixed memory, a non-sink output and a non-recomputable node."""
    base = random_layered(24, seed=seed)
    rng = np.random.default_rng(seed)
    recomputable = np.ones(base.n, dtype=bool)
    recomputable[int(base.order[1])] = False
    outputs = sorted({*base.outputs.tolist(), int(base.order[base.n // 2])})
    return Graph.from_arrays(
        base.names,
        base.cost,
        base.mem,
        base.edges,
        workspace=rng.integers(0, 3000, size=base.n),
        recomputable=recomputable,
        outputs=outputs,
        fixed_mem=1234,
        order=base.order,
        name="workspace_graph",
    )


def _graphs() -> list[Graph]:
    return [random_layered(30, seed=1), linear_chain(6), _workspace_graph(2)]


def _check(graph: Graph, schedule: Schedule, budget: int | None = None, met: bool | None = None) -> None:
    result = simulate(graph, schedule)  # raises on any dependency/semantics violation
    if met:
        assert budget is not None and result.peak <= budget


def _random_mutations(state: SAState, rng: np.random.Generator, steps: int) -> int:
    done = 0
    n_units = state.units.count
    for _ in range(steps):
        kind = rng.integers(3)
        occupied, nops = state.occupied(), state.nops()
        if kind == 0:
            done += state.add(int(rng.integers(n_units)), int(rng.choice(nops)))
        elif kind == 1:
            done += state.remove(int(rng.choice(occupied)))
        else:
            done += state.move(int(rng.choice(occupied)), int(rng.choice(nops)))
    return done


@pytest.mark.parametrize("graph_index", range(3))
@pytest.mark.parametrize("seed", range(3))
def test_incremental_peak_equals_simulation(graph_index: int, seed: int) -> None:
    graph = _graphs()[graph_index]
    state = SAState(graph, plain_units(graph), graph.order, slots=128)
    rng = np.random.default_rng(seed)
    applied = 0
    for _ in range(12):
        applied += _random_mutations(state, rng, 25)
        np.testing.assert_array_equal(state.profile(), state.reference_profile())
        simulation = simulate(graph, eager_frees(graph, state.compute_sequence()))
        assert state.peak() == simulation.peak
        assert state.cost() == pytest.approx(simulation.total_cost)
        assert (state.counts() >= 1).all()
        assert all(state.counts()[v] == 1 for v in np.flatnonzero(~graph.recomputable))
    assert applied > 50


def test_mutations_are_undone_by_their_inverse() -> None:
    graph = random_layered(30, seed=4)
    state = SAState(graph, plain_units(graph), graph.order, slots=256)
    rng = np.random.default_rng(0)
    _random_mutations(state, rng, 100)
    before = (state.slots.copy(), state.profile().copy(), state.cost())
    for _ in range(200):
        t = int(rng.choice(state.occupied()))
        unit = int(state.slots[t])
        if state.remove(t):
            assert state.add(unit, t)
        nop = int(rng.choice(state.nops()))
        if state.move(t, nop):
            assert state.move(nop, t)
    np.testing.assert_array_equal(state.slots, before[0])
    np.testing.assert_array_equal(state.profile(), before[1])
    assert state.cost() == pytest.approx(before[2])


def test_initial_layout_spreads_the_input_order() -> None:
    graph = random_layered(20, seed=0)
    state = SAState(graph, plain_units(graph), graph.order, slots=1024)
    np.testing.assert_array_equal(state.occupied(), np.arange(1, 21) * 1024 // 21)
    np.testing.assert_array_equal(state.compute_sequence(), graph.order)
    assert state.peak() == input_order_peak(graph)


@pytest.mark.parametrize("graph_index", range(3))
def test_reload_equals_a_new_state_of_the_same_sequence(graph_index: int) -> None:
    graph = _graphs()[graph_index]
    units, sequence = group_nodes(graph, graph.order)
    plain = plain_units(graph)
    state = SAState(graph, plain, units.expand(sequence), slots=4096)
    _random_mutations(state, np.random.default_rng(graph_index), 200)
    target = SAState(graph, plain, graph.order, slots=4096, copies=state.copies)
    state.reload(target.unit_sequence(), target.occupied())
    np.testing.assert_array_equal(state.slots, target.slots)
    np.testing.assert_array_equal(state.profile(), target.reference_profile())
    np.testing.assert_array_equal(state.counts(), target.counts())
    assert (state.peak(), state.cost()) == (target.peak(), target.cost())
    budget = (input_order_peak(graph) + graph.fixed_mem) // 2
    assert state.prune(budget) == target.prune(budget)
    np.testing.assert_array_equal(state.compute_sequence(), target.compute_sequence())
    simulation = simulate(graph, eager_frees(graph, state.compute_sequence()))
    assert simulation.peak == state.peak() == target.peak()


@pytest.mark.parametrize("graph_index", range(3))
def test_respread_equals_a_new_state_and_searches_alike(graph_index: int) -> None:
    graph = _graphs()[graph_index]
    units, sequence = group_nodes(graph, graph.order)
    plain = plain_units(graph)
    state = SAState(graph, plain, units.expand(sequence), spacing=32, copies=8)
    _random_mutations(state, np.random.default_rng(graph_index), 200)
    assert state.respread(graph.order, spacing=8, copies=3)
    fresh = SAState(graph, plain, graph.order, spacing=8, copies=3)
    assert (state.size, state.copies) == (fresh.size, fresh.copies) == (slot_count(graph.n, spacing=8), 3)
    for one, other in [(state, fresh)] * 2:
        np.testing.assert_array_equal(one.slots, other.slots)
        np.testing.assert_array_equal(one.profile(), other.reference_profile())
        np.testing.assert_array_equal(one.counts(), other.counts())
        assert (one.peak(), one.cost()) == (other.peak(), other.cost())
        applied = [_random_mutations(s, np.random.default_rng(7), 300) for s in (one, other)]
        assert applied[0] == applied[1] > 0
    assert state.counts().max() <= 3
    simulation = simulate(graph, eager_frees(graph, state.compute_sequence()))
    assert (simulation.peak, simulation.total_cost) == (state.peak(), pytest.approx(state.cost()))
    assert not state.respread(graph.order, spacing=4096, copies=3)  # more slots than allocated
    assert not state.respread(graph.order, spacing=8, copies=10_000)  # more copies than allocated


@pytest.mark.parametrize("graph_index", range(3))
def test_grouped_state_bounds_the_expanded_schedule(graph_index: int) -> None:
    graph = _graphs()[graph_index]
    units, sequence = group_nodes(graph, graph.order)
    state = SAState(graph, units, sequence, slots=256)
    rng = np.random.default_rng(graph_index)
    for _ in range(5):
        _random_mutations(state, rng, 20)
        np.testing.assert_array_equal(state.profile(), state.reference_profile())
        simulation = simulate(graph, eager_frees(graph, state.compute_sequence()))
        assert simulation.peak <= state.peak()
        assert simulation.total_cost == pytest.approx(state.cost())


def test_grouping_on_the_training_chain_fuses_the_forward_pass() -> None:
    graph = linear_chain(8)
    units, sequence = group_nodes(graph, graph.order)
    assert units.count < graph.n
    members = units.members[int(sequence[-1])]
    assert members[-1] == graph.index["b0"]
    order = [int(v) for v in graph.order]
    assert intermediate_memory(graph, order[:1]) == 0  # one unit node, no workspace: nothing internal
    assert intermediate_memory(graph, order[:2]) == 1  # f0 stays while f1 is computed; f1 is the output
    assert intermediate_memory(graph, order[:8]) == 1  # the forward pass frees as it goes
    expanded = units.expand(sequence)
    peak = simulate(graph, eager_frees(graph, expanded)).peak
    assert peak <= 4  # grouping alone: constant memory on a unit chain (C.1)


@pytest.mark.parametrize("objective", ["product", "elu", "memory"])
@pytest.mark.parametrize("graph_index", range(3))
def test_fastsa_schedules_are_valid(graph_index: int, objective: str) -> None:
    graph = _graphs()[graph_index]
    budget = max(graph.lower_bound, int(0.8 * input_order_peak(graph)))
    result = fastsa(graph, budget, seed=1, iterations=FEW, objective=objective, slots=256)
    _check(graph, result.schedule, budget, result.met_budget)
    assert result.peak == simulate(graph, result.schedule).peak
    assert result.met_budget == (result.peak <= budget)
    assert len(result.iterations) == 2 and all(0 <= i <= n for i, n in zip(result.iterations, FEW, strict=True))
    assert result.stages[-1].peak == result.peak  # annealer's count equals the simulator's
    times = [point.time for point in result.trajectory]
    assert times == sorted(times) and all(t <= result.wall_time for t in times)


@pytest.mark.parametrize("graph_index", range(3))
def test_budget_at_input_order_peak_adds_no_computation(graph_index: int) -> None:
    graph = _graphs()[graph_index]
    budget = input_order_peak(graph)
    result = fastsa(graph, budget, seed=0, iterations=FEW, slots=256)
    assert result.met_budget
    assert result.simulation.recomputations == 0
    assert result.cost == pytest.approx(graph.total_cost)
    assert result.iterations[0] == 0  # stage 1 stops at once: the budget is met


def test_training_chain_peak_falls_well_below_input_order() -> None:
    n = 24
    graph = linear_chain(n)
    reference = input_order_peak(graph)  # n + 2
    budget = 2 * math.isqrt(n) + 2
    result = fastsa(graph, budget, seed=0, iterations=(2000, 20000))
    _check(graph, result.schedule, budget, result.met_budget)
    assert result.met_budget
    assert result.peak <= budget < reference // 2


def test_deterministic_for_a_seed() -> None:
    graph = random_layered(40, seed=3)
    budget = int(0.75 * input_order_peak(graph))
    first = fastsa(graph, budget, seed=7, iterations=FEW, slots=512)
    again = fastsa(graph, budget, seed=7, iterations=FEW, slots=512)
    other = fastsa(graph, budget, seed=8, iterations=FEW, slots=512)
    assert first.schedule == again.schedule
    assert first.iterations == again.iterations
    _check(graph, other.schedule, budget, other.met_budget)


def test_order_only_mode_never_recomputes() -> None:
    graph = random_layered(40, seed=5)
    budget = int(0.85 * input_order_peak(graph))
    result = fastsa(graph, budget, seed=0, iterations=FEW, order_only=True, objective="memory", slots=512)
    _check(graph, result.schedule, budget, result.met_budget)
    assert result.simulation.recomputations == 0
    assert result.peak <= input_order_peak(graph)


def test_logaddexp_tree_option() -> None:
    graph = random_layered(30, seed=6)
    state = SAState(graph, plain_units(graph), graph.order, slots=128, logaddexp=True)
    _random_mutations(state, np.random.default_rng(0), 50)
    state.rebuild_trees()
    assert state.soft_peak() >= state.peak() - 1e-6 * state.peak()
    budget = int(0.8 * input_order_peak(graph))
    result = fastsa(graph, budget, seed=0, iterations=FEW, logaddexp=True, slots=256)
    _check(graph, result.schedule, budget, result.met_budget)


def test_non_recomputable_nodes_are_computed_once() -> None:
    graph = _workspace_graph(9)
    budget = max(graph.lower_bound, int(0.7 * input_order_peak(graph)))
    result = fastsa(graph, budget, seed=0, iterations=FEW, slots=256)
    _check(graph, result.schedule, budget, result.met_budget)
    computed = np.bincount(result.schedule.compute_sequence(), minlength=graph.n)
    assert (computed[~graph.recomputable] == 1).all()


def test_time_limit_and_trajectory() -> None:
    graph = random_layered(40, seed=2)
    budget = int(0.7 * input_order_peak(graph))
    result = fastsa(graph, budget, seed=0, iterations=(10**9, 10**9), time_limit=0.3, chunk=2000)
    _check(graph, result.schedule, budget, result.met_budget)
    assert sum(result.iterations) < 10**9
    assert result.trajectory and all(b.time >= a.time for a, b in pairwise(result.trajectory))


def test_first_computation_order_is_topological() -> None:
    graph = random_layered(30, seed=1)
    result = fastsa(graph, int(0.8 * input_order_peak(graph)), seed=0, iterations=FEW, slots=256)
    order = result.schedule.first_computation_order()
    assert sorted(order.tolist()) == list(range(graph.n))
    position = np.empty(graph.n, dtype=np.int64)
    position[order] = np.arange(graph.n)
    assert (position[graph.edges[:, 0]] < position[graph.edges[:, 1]]).all()
    assert Schedule.of([Compute(2), Compute(0), Compute(2)]).first_computation_order().tolist() == [2, 0]


def test_registry_adapter_and_option_errors() -> None:
    graph = linear_chain(3)
    schedule = fastsa_schedule(graph, input_order_peak(graph))
    _check(graph, schedule)
    with pytest.raises(ConfigurationError):
        fastsa(graph, 10, bogus=1)
    with pytest.raises(ConfigurationError):
        fastsa(graph, 10, objective="nope")
    with pytest.raises(ConfigurationError):
        fastsa(graph, 10, iterations=(-1, 0))


@pytest.mark.parametrize("graph_index", range(3))
def test_prune_keeps_validity_and_the_budget(graph_index: int) -> None:
    graph = _graphs()[graph_index]
    units, sequence = group_nodes(graph, graph.order, max_expansion=4.0)
    state = SAState(graph, plain_units(graph), units.expand(sequence), slots=1024)
    budget = max(state.peak(), int(0.9 * input_order_peak(graph)))
    cost_before = state.cost()
    removed = state.prune(budget)
    simulation = simulate(graph, eager_frees(graph, state.compute_sequence()))
    np.testing.assert_array_equal(state.profile(), state.reference_profile())
    assert state.peak() == simulation.peak <= budget
    assert state.cost() == pytest.approx(simulation.total_cost) and state.cost() <= cost_before
    assert (state.counts() >= 1).all()
    assert removed == 0 or state.cost() < cost_before
    assert state.prune(budget) == 0  # a fixed point


def test_restarts_are_deterministic_and_keep_the_best() -> None:
    graph = random_layered(40, seed=3)
    budget = int(0.75 * input_order_peak(graph))
    single = fastsa(graph, budget, seed=7, iterations=FEW, slots=512)
    first = fastsa(graph, budget, seed=7, iterations=FEW, slots=512, restarts=3)
    again = fastsa(graph, budget, seed=7, iterations=FEW, slots=512, restarts=3)
    assert first.schedule == again.schedule
    assert (not first.met_budget, first.cost) <= (not single.met_budget, single.cost)  # run 0 is the single run
    _check(graph, first.schedule, budget, first.met_budget)


def test_fill_time_runs_until_the_limit() -> None:
    graph = random_layered(30, seed=2)
    budget = int(0.8 * input_order_peak(graph))
    result = fastsa(graph, budget, seed=0, iterations=(1000, 1000), time_limit=0.3, fill_time=True, chunk=2000)
    _check(graph, result.schedule, budget, result.met_budget)
    assert result.iterations[1] > 1000


def test_copy_limits_are_per_unit_and_size_the_time_slabs() -> None:
    graph = random_layered(30, seed=3)
    source = int(graph.order[0])  # no inputs: repeating it up front keeps the sequence valid
    sequence = np.concatenate([np.full(40, source), graph.order])
    state = SAState(graph, plain_units(graph), sequence, slots=4096, copies=4)
    expected = np.full(graph.n, 4)
    expected[source] = 41
    np.testing.assert_array_equal(state.limits(), expected)
    assert state.copies == 41
    # slabs: productions by the producer's limit, uses by the readers' limits (not n x the most-copied unit)
    reads = sum(int(expected[v]) * graph.preds(v).size for v in range(graph.n))
    assert state.arrays.buf.size == int(expected.sum()) + reads
    other = int(graph.order[-1])
    placed = sum(state.add(other, int(t)) for t in state.nops()[-10:])  # the sink may go last, up to its limit
    assert placed == 3 and state.counts()[other] == 4
    np.testing.assert_array_equal(state.profile(), state.reference_profile())
    simulation = simulate(graph, eager_frees(graph, state.compute_sequence()))
    assert (simulation.peak, simulation.total_cost) == (state.peak(), pytest.approx(state.cost()))


def test_capacity_lets_respread_take_more_copies_than_the_start() -> None:
    graph = random_layered(30, seed=5)
    plain = plain_units(graph)
    more = np.concatenate([np.full(12, int(graph.order[0])), graph.order])
    assert not SAState(graph, plain, graph.order, slots=4096, copies=4).respread(more, slots=4096, copies=4)
    room = np.full(graph.n, 16)
    state = SAState(graph, plain, graph.order, slots=4096, copies=4, capacity=room)
    assert state.respread(more, slots=4096, copies=4)
    fresh = SAState(graph, plain, more, slots=4096, copies=4)
    np.testing.assert_array_equal(state.limits(), fresh.limits())
    np.testing.assert_array_equal(state.slots, fresh.slots)
    np.testing.assert_array_equal(state.profile(), fresh.reference_profile())
    assert (state.peak(), state.cost()) == (fresh.peak(), fresh.cost())
    applied = [_random_mutations(s, np.random.default_rng(1), 300) for s in (state, fresh)]
    assert applied[0] == applied[1] > 0
    np.testing.assert_array_equal(state.slots, fresh.slots)


def test_more_slots_than_the_packed_slot_index_holds_is_a_typed_error() -> None:
    graph = linear_chain(3)
    with pytest.raises(ConfigurationError, match=r"at most 2\*\*32"):
        fastsa(graph, input_order_peak(graph), slots=2**33, iterations=(10, 10))
