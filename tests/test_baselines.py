"""Checkmate's baselines: Chen sqrt(n)/greedy (AP and linearized), Griewank revolve, checkpoint-all."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remat_models import Compute, Free, Graph, GraphError, Schedule, simulate
from remat_models.core.schedule import input_order_peak, input_order_schedule
from remat_models.heuristics.baselines import (
    BASELINES,
    articulation_candidates,
    best_schedule,
    candidate_nodes,
    checkpoint_all,
    checkpoint_schedule,
    chen_greedy,
    chen_greedy_checkpoints,
    chen_greedy_sweep,
    chen_sqrtn,
    chen_sqrtn_checkpoints,
    griewank,
    griewank_budget,
    knapsack_sequences,
)
from remat_models.heuristics.griewank import chain_of, max_useful_slots, revolve_table
from remat_models.heuristics.recompute import forward_mask, forward_nodes, saved_set_sequence, sequence_schedule

# --- graph builders -----------------------------------------------------------------------------


def training_chain(n: int, cost=None, mem=None) -> Graph:
    """Checkmate's linear training graph: f0..f{n-1}, loss (index n), backward of f_i at index 2n-i."""
    names = [f"f{i}" for i in range(n)] + ["loss"] + [f"b{n - 1 - k}" for k in range(n)]
    kind = ["forward"] * n + ["loss"] + ["backward"] * n
    edges = [(i, i + 1) for i in range(2 * n)] + [(i, 2 * n - i) for i in range(n)]
    size = 2 * n + 1
    return Graph.from_arrays(
        names, np.ones(size) if cost is None else cost, np.ones(size, int) if mem is None else mem, edges, kind=kind
    )


def mirrored_training_graph(forward_edges: list[tuple[int, int]], f: int, **arrays) -> Graph:
    """A forward DAG on 0..f-1, a loss reading its sinks, and each node's backward reading its op's inputs."""
    loss = f
    back = [2 * f - i for i in range(f)]  # backward of forward i; reverse forward order
    succs: list[list[int]] = [[] for _ in range(f)]
    preds: list[list[int]] = [[] for _ in range(f)]
    for u, v in forward_edges:
        succs[u].append(v)
        preds[v].append(u)
    edges = set(forward_edges)
    for i in range(f):
        if not succs[i]:
            edges.add((i, loss))
        edges.update((back[j], back[i]) for j in succs[i])  # upstream gradients
        if not succs[i]:
            edges.add((loss, back[i]))
        edges.add((i, back[i]))
        edges.update((p, back[i]) for p in preds[i])
    names = [f"f{i}" for i in range(f)] + ["loss"] + [f"b{f - 1 - k}" for k in range(f)]
    kind = ["forward"] * f + ["loss"] + ["backward"] * f
    return Graph.from_arrays(names, edges=sorted(edges), kind=kind, **arrays)


def diamond_training_graph() -> Graph:
    return mirrored_training_graph([(0, 1), (0, 2), (1, 3), (2, 3)], 4, cost=np.ones(9), mem=np.ones(9, int))


# --- Chen on Checkmate's linear chain ----------------------------------------------------------


@pytest.mark.parametrize("n", [16, 64, 100])
def test_chen_sqrtn_on_a_chain_has_sqrt_memory_and_at_most_double_cost(n: int) -> None:
    graph = training_chain(n)
    base = simulate(graph, checkpoint_all(graph))
    result = simulate(graph, chen_sqrtn(graph, "linearized"))
    k = math.isqrt(n)
    # Start of the backward pass: k-1 earlier checkpoints, the k values of the last segment,
    # the loss and the first gradient are resident: 2k + 1 (later segments hold fewer).
    assert result.peak <= 2 * k + 1 <= 3 * math.sqrt(n)
    assert result.recomputations == (k - 1) ** 2  # every non-checkpoint of the first k-1 segments, once
    assert result.total_cost <= 2 * base.total_cost
    assert base.peak == n + 2


@pytest.mark.parametrize("n", [5, 16, 30])
def test_ap_and_linearized_coincide_on_a_chain(n: int) -> None:
    graph = training_chain(n)
    assert articulation_candidates(graph).tolist() == forward_nodes(graph).tolist() == list(range(n))
    assert chen_sqrtn(graph, "ap") == chen_sqrtn(graph, "linearized")
    assert list(chen_greedy_sweep(graph, "ap")) == list(chen_greedy_sweep(graph, "linearized"))


def test_articulation_points_skip_residual_blocks() -> None:
    # f0 -> f1 -> f2 -> f4 with a skip f1 -> f3 -> f4 (f2, f3 inside the block), then f4 -> f5.
    graph = mirrored_training_graph(
        [(0, 1), (1, 2), (2, 4), (1, 3), (3, 4), (4, 5)], 6, cost=np.ones(13), mem=np.ones(13, int)
    )
    assert articulation_candidates(graph).tolist() == [0, 1, 4, 5]
    assert candidate_nodes(graph, [4]).tolist() == [4]
    with pytest.raises(ValueError, match="unknown candidate kind"):
        candidate_nodes(graph, "everything")


def test_edges_out_of_values_never_recomputed_do_not_hide_articulation_points() -> None:
    # x0 -> x1 -> x2 -> x3, and two random ops r1 (reads x0) and r2 (reads x1, ordered after r1: the RNG
    # stream), which x2 reads. r1 and r2 are never recomputed (they stay resident), so the order edge
    # r1 -> r2 ties no segments together: x1 still separates the graph, as in a traced dropout network.
    edges = [(0, 1), (0, 2), (1, 3), (2, 3), (2, 4), (3, 4), (4, 5)]
    recomputable = np.ones(13, bool)
    recomputable[[1, 3]] = False
    graph = mirrored_training_graph(edges, 6, cost=np.ones(13), mem=np.ones(13, int), recomputable=recomputable)
    assert articulation_candidates(graph).tolist() == [0, 2, 4, 5]
    for schedule in chen_greedy_sweep(graph, "ap"):
        simulate(graph, schedule)  # valid: dependencies respected
        computed = [step.node for step in schedule if isinstance(step, Compute)]
        assert computed.count(1) == computed.count(3) == 1  # the random ops run once


def test_sqrtn_checkpoints_take_every_kth_candidate() -> None:
    assert chen_sqrtn_checkpoints(np.arange(16)).tolist() == [3, 7, 11, 15]
    assert chen_sqrtn_checkpoints(np.arange(10, 20)).tolist() == [12, 15, 18]
    assert chen_sqrtn_checkpoints(np.arange(0)).tolist() == []


def test_greedy_checkpoints_follow_the_segment_size() -> None:
    graph = training_chain(8, mem=np.arange(1, 18))
    candidates = forward_nodes(graph)
    assert chen_greedy_checkpoints(graph, 0, candidates).tolist() == list(range(8))
    assert chen_greedy_checkpoints(graph, 10, candidates).tolist() == [4, 6]  # 1+..+5 > 10, 6+7 > 10, 8
    assert chen_greedy_checkpoints(graph, 10**6, candidates).tolist() == []
    assert chen_greedy(graph, 10**6) == checkpoint_all(graph)


def test_extreme_checkpoint_sets_reproduce_checkpoint_all() -> None:
    graph = diamond_training_graph()
    assert checkpoint_schedule(graph, []) == checkpoint_schedule(graph, forward_nodes(graph)) == checkpoint_all(graph)


def test_budgeted_chen_picks_the_cheapest_fitting_schedule() -> None:
    graph = training_chain(64)
    sqrtn = simulate(graph, chen_sqrtn(graph))
    assert simulate(graph, BASELINES["chen-sqrtn"](graph, sqrtn.peak)).peak == sqrtn.peak
    greedy = simulate(graph, BASELINES["chen-greedy"](graph, sqrtn.peak))
    assert greedy.peak <= sqrtn.peak and greedy.total_cost <= sqrtn.total_cost
    lowest = simulate(graph, BASELINES["linearized-greedy"](graph, 1))  # nothing fits: lowest peak
    assert all(lowest.peak <= simulate(graph, s).peak for s in chen_greedy_sweep(graph))


# --- Griewank ----------------------------------------------------------------------------------


def revolve_closed_form(steps: int, slots: int) -> int:
    """Griewank–Walther: r*l - binom(c+r, c+1) forward steps, c = slots+1 checkpoints, binom(c+r, c) >= l."""
    checkpoints = slots + 1
    r = 0
    while math.comb(checkpoints + r, checkpoints) < steps:
        r += 1
    return r * steps - math.comb(checkpoints + r, checkpoints + 1)


@cache
def revolve_recursion(steps: int, slots: int) -> int:
    if steps == 1:
        return 0
    if slots == 0:
        return steps * (steps - 1) // 2
    return min(j + revolve_recursion(steps - j, slots - 1) + revolve_recursion(j, slots) for j in range(1, steps))


def test_revolve_table_is_the_binomial_optimum() -> None:
    cost, split = revolve_table(40, 8)
    for steps in range(1, 41):
        for slots in range(9):
            assert cost[steps, slots] == revolve_recursion(steps, slots) == revolve_closed_form(steps, slots)
            if steps > 1 and slots > 0:
                j = split[steps, slots]
                assert j + cost[steps - j, slots - 1] + cost[j, slots] == cost[steps, slots]


@pytest.mark.parametrize("n", [2, 3, 7, 12, 21])
def test_griewank_recomputations_match_revolve_optimum(n: int) -> None:
    graph = training_chain(n)
    for slots in range(n):
        result = simulate(graph, griewank(graph, slots))
        forward_computations = 1 + revolve_closed_form(n, min(slots, max(n - 2, 0)))
        assert result.recomputations == forward_computations - n, slots


@pytest.mark.parametrize("n", [4, 16, 40])
def test_griewank_peak_falls_with_slots_and_plenty_of_slots_is_checkpoint_all(n: int) -> None:
    graph = training_chain(n)
    peaks = [simulate(graph, griewank(graph, slots)).peak for slots in range(n)]
    assert peaks == sorted(peaks)
    assert peaks[0] == 4  # snapshot f0, current forward value, gradient, new gradient
    top = max_useful_slots(chain_of(graph))
    assert griewank(graph, top) == griewank(graph, n + 5) == checkpoint_all(graph)


def test_griewank_budget_is_cheapest_within_budget() -> None:
    graph = training_chain(30)
    candidates = [simulate(graph, griewank(graph, s)) for s in range(29)]
    for budget in range(3, 34):
        result = simulate(graph, griewank_budget(graph, budget))
        fitting = [c.total_cost for c in candidates if c.fits(budget)]
        if fitting:
            assert result.fits(budget) and result.total_cost == min(fitting)
        else:
            assert result.peak == min(c.peak for c in candidates)


def test_griewank_rejects_a_diamond_naming_the_node() -> None:
    graph = diamond_training_graph()
    with pytest.raises(GraphError, match="griewank needs a chain: forward node 'f3' has 2 forward predecessors"):
        griewank(graph, 1)
    with pytest.raises(GraphError, match="'f3' has 2 forward"):
        BASELINES["griewank"](graph, 100)


def test_griewank_rejects_skips_and_a_forward_running_reversal() -> None:
    skip = Graph.from_arrays(["a", "b", "c"], [1, 1, 1], [1, 1, 1], [(0, 1), (1, 2), (0, 2)])
    with pytest.raises(GraphError, match="forward node 'c' has 2 forward predecessors"):
        chain_of(skip)
    names = ["f0", "f1", "g0", "g1"]
    kind = ["forward", "forward", "backward", "backward"]
    forward_running = Graph.from_arrays(names, [1] * 4, [1] * 4, [(0, 1), (0, 2), (1, 3), (2, 3)], kind=kind)
    with pytest.raises(GraphError, match="node 'g1' reads forward node 'f1' after 'g0'"):
        chain_of(forward_running)


def test_griewank_on_an_inference_chain_is_the_input_order() -> None:
    graph = Graph.from_arrays(["a", "b", "c"], [1, 1, 1], [1, 1, 1], [(0, 1), (1, 2)])
    assert chain_of(graph).length == 0
    assert griewank(graph, 0) == checkpoint_all(graph)


# --- best_schedule -----------------------------------------------------------------------------


def test_best_schedule_prefers_cheap_fitting_then_low_peak() -> None:
    graph = training_chain(16)
    schedules = [griewank(graph, s) for s in range(15)]
    results = [simulate(graph, s) for s in schedules]
    budget = results[5].peak
    best = simulate(graph, best_schedule(graph, schedules, budget))
    assert best.fits(budget) and best.total_cost == min(r.total_cost for r in results if r.fits(budget))
    assert simulate(graph, best_schedule(graph, reversed(schedules), 0)).peak == min(r.peak for r in results)
    drawn = []
    first = best_schedule(graph, (drawn.append(s) or s for s in schedules), budget, until=lambda k, _: k == 2)
    assert len(drawn) == 3 and first == schedules[2]
    with pytest.raises(ValueError, match="at least one"):
        best_schedule(graph, [], budget)


def test_registry_names() -> None:
    assert set(BASELINES) == {
        "checkpoint-all",
        "chen-sqrtn",
        "chen-greedy",
        "ap-sqrtn",
        "ap-greedy",
        "linearized-sqrtn",
        "linearized-greedy",
        "griewank",
        "knapsack",
    }


# --- properties on random graphs ---------------------------------------------------------------


@st.composite
def node_arrays(draw, size: int) -> dict:
    return {
        "cost": draw(st.lists(st.integers(0, 5), min_size=size, max_size=size)),
        "mem": draw(st.lists(st.integers(0, 9), min_size=size, max_size=size)),
        "workspace": draw(st.lists(st.sampled_from([0, 0, 0, 3]), min_size=size, max_size=size)),
        "recomputable": draw(st.lists(st.sampled_from([True, True, True, False]), min_size=size, max_size=size)),
    }


@st.composite
def forward_dags(draw, low: int = 1, high: int = 9) -> tuple[int, list[tuple[int, int]]]:
    f = draw(st.integers(low, high))
    edges = []
    for v in range(1, f):
        edges.append((draw(st.integers(0, v - 1)), v))  # connected
        edges.extend((u, v) for u in draw(st.sets(st.integers(0, v - 1), max_size=2)) if (u, v) not in edges)
    return f, edges


@st.composite
def training_graphs(draw) -> Graph:
    f, edges = draw(forward_dags())
    return mirrored_training_graph(edges, f, **draw(node_arrays(2 * f + 1)))


@st.composite
def inference_graphs(draw) -> Graph:
    f, edges = draw(forward_dags(high=12))
    if draw(st.booleans()):  # also disconnected ones
        edges = draw(st.lists(st.sampled_from(edges), unique=True)) if edges else []
    arrays = draw(node_arrays(f))
    return Graph.from_arrays([f"v{i}" for i in range(f)], edges=edges, **arrays)


@st.composite
def chain_graphs(draw) -> Graph:
    f = draw(st.integers(1, 12))
    graph = mirrored_training_graph([(i, i + 1) for i in range(f - 1)], f, **draw(node_arrays(2 * f + 1)))
    assert chain_of(graph).length == f
    return graph


any_graphs = st.one_of(training_graphs(), inference_graphs(), chain_graphs())
fast = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def lazy_free_peak(graph: Graph, schedule: Schedule) -> int:
    """The same compute sequence freeing nothing except a value right before it is recomputed."""
    resident: set[int] = set()
    steps = []
    for v in schedule.compute_sequence():
        if v in resident:
            steps.append(Free(v))
        steps.append(Compute(v))
        resident.add(v)
    return simulate(graph, steps).peak


@fast
@given(any_graphs, st.floats(0.0, 1.2))
def test_every_baseline_is_valid_and_eager_frees_never_hurt(graph: Graph, fraction: float) -> None:
    reference = input_order_peak(graph)
    budget = int(graph.lower_bound + fraction * (reference - graph.lower_bound))
    for name, baseline in BASELINES.items():
        try:
            schedule = baseline(graph, budget)
        except GraphError:
            assert name == "griewank"
            with pytest.raises(GraphError, match="griewank needs a chain"):
                chain_of(graph)
            continue
        result = simulate(graph, schedule)
        assert result.total_cost == pytest.approx(float(graph.cost[schedule.compute_sequence()].sum()))
        assert result.peak <= lazy_free_peak(graph, schedule), name
        recomputed = np.bincount(schedule.compute_sequence(), minlength=graph.n) > 1
        assert not (recomputed & ~graph.recomputable).any()


@fast
@given(any_graphs)
def test_checkpoint_all_is_the_input_order(graph: Graph) -> None:
    assert checkpoint_all(graph) == input_order_schedule(graph)
    assert simulate(graph, checkpoint_all(graph)).peak == input_order_peak(graph)
    assert checkpoint_schedule(graph, []) == checkpoint_schedule(graph, forward_nodes(graph)) == checkpoint_all(graph)


def assert_cheapest_fitting(graph: Graph, chosen: Schedule, candidates: list[Schedule], budget: int) -> None:
    result = simulate(graph, chosen)
    others = [simulate(graph, c) for c in candidates]
    fitting = [o for o in others if o.fits(budget)]
    if fitting:
        assert result.fits(budget)
        assert result.total_cost <= min(o.total_cost for o in fitting)
    else:
        assert result.peak <= min(o.peak for o in others)


@fast
@given(st.one_of(training_graphs(), inference_graphs()), st.floats(0.0, 1.0))
def test_budgeted_chen_is_cheapest_among_its_candidates(graph: Graph, fraction: float) -> None:
    budget = int(graph.lower_bound + fraction * (input_order_peak(graph) - graph.lower_bound))
    kinds = ("ap", "linearized")
    sqrtn = [chen_sqrtn(graph, kind) for kind in kinds]
    greedy = [s for kind in kinds for s in chen_greedy_sweep(graph, kind)]
    assert_cheapest_fitting(graph, BASELINES["chen-sqrtn"](graph, budget), sqrtn, budget)
    assert_cheapest_fitting(graph, BASELINES["chen-greedy"](graph, budget), greedy, budget)
    assert_cheapest_fitting(graph, BASELINES["ap-greedy"](graph, budget), list(chen_greedy_sweep(graph, "ap")), budget)
    # Greedy with huge segments is checkpoint-all, so the sweep fits whenever checkpoint-all does.
    if simulate(graph, checkpoint_all(graph)).fits(budget):
        assert simulate(graph, BASELINES["chen-greedy"](graph, budget)).fits(budget)


@fast
@given(chain_graphs(), st.floats(0.0, 1.0))
def test_budgeted_griewank_is_cheapest_among_slot_counts(graph: Graph, fraction: float) -> None:
    budget = int(graph.lower_bound + fraction * (input_order_peak(graph) - graph.lower_bound))
    candidates = [griewank(graph, s) for s in range(max_useful_slots(chain_of(graph)) + 1)]
    assert_cheapest_fitting(graph, griewank_budget(graph, budget), candidates, budget)
    assert forward_mask(graph).sum() == chain_of(graph).length


@fast
@given(st.one_of(training_graphs(), inference_graphs()), st.floats(0.0, 1.0))
def test_knapsack_is_cheapest_among_its_saved_sets(graph: Graph, fraction: float) -> None:
    """Every sequence the sweep draws is valid; the choice is the cheapest fitting one; saving all costs nothing."""
    budget = int(graph.lower_bound + fraction * (input_order_peak(graph) - graph.lower_bound))
    candidates = [sequence_schedule(graph, sequence) for sequence in knapsack_sequences(graph)]
    assert_cheapest_fitting(graph, BASELINES["knapsack"](graph, budget), candidates, budget)
    if simulate(graph, checkpoint_all(graph)).fits(budget):
        assert simulate(graph, BASELINES["knapsack"](graph, budget)).total_cost == pytest.approx(graph.total_cost)


def test_saved_set_recomputes_each_dropped_value_once_in_the_backward_pass() -> None:
    """A chain f0 -> f1 -> f2 -> loss with backward b2 <- b1 <- b0 reading f2, f1, f0: saving only f0 drops f1 and
    f2 after their last forward reader; the backward recomputes f2 (from f1 recomputed from f0) once each."""
    from remat_models.core.graph import Node, NodeKind

    B = NodeKind.BACKWARD
    nodes = [Node("f0", 1, 4), Node("f1", 1, 4), Node("f2", 1, 4), Node("loss", 1, 1, kind=NodeKind.LOSS)]
    nodes += [Node("b2", 1, 4, kind=B), Node("b1", 1, 4, kind=B), Node("b0", 1, 4, kind=B)]
    edges = [("f0", "f1"), ("f1", "f2"), ("f2", "loss"), ("loss", "b2"), ("f2", "b2"), ("b2", "b1"), ("f1", "b1")]
    edges += [("b1", "b0"), ("f0", "b0")]
    graph = Graph(nodes, edges)
    sequence = [graph.names[v] for v in saved_set_sequence(graph, [graph.index["f0"]])]
    assert sequence == ["f0", "f1", "f2", "loss", "f1", "f2", "b2", "b1", "b0"]
    everything = saved_set_sequence(graph, forward_nodes(graph))
    assert [graph.names[v] for v in everything] == ["f0", "f1", "f2", "loss", "b2", "b1", "b0"]
