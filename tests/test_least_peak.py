"""The least-peak search: never above a baseline's least peak, never below the brute force's, always simulated."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from checkmate_graphs import random_dag, tiny_graphs, tiny_unet

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Free, Schedule, input_order_peak, input_order_schedule, simulate
from remat_models.heuristics import least_peak as lp
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.heuristics.least_peak import least_peak, least_peak_search
from remat_models.heuristics.registry import run_heuristic
from remat_models.heuristics.saveset import saveset
from remat_models.io import linear_chain, random_layered, read_graph, transformer, unet
from remat_models.planning.warm_start import initial_schedule

ZOO = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo"
RIVALS = {
    "checkpoint-all": BASELINES["checkpoint-all"],
    "chen-greedy": BASELINES["chen-greedy"],
    "chen-sqrtn": BASELINES["chen-sqrtn"],
    "knapsack": BASELINES["knapsack"],
    "saveset": saveset,
}


def generated() -> list[Graph]:
    """Generated graphs of a few dozen to a few hundred nodes."""
    return [linear_chain(30), random_layered(60, seed=2), unet(3), transformer(2)]


def exact_least_peak(graph: Graph) -> int:
    """The least peak of any schedule (brute force, bisection on the budget)."""
    low, high = graph.lower_bound - 1, simulate(graph, input_order_schedule(graph)).peak
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if exhaustive_optimum(graph, middle) is not None else (middle, high)
    return high


@pytest.mark.parametrize("graph", generated(), ids=lambda g: g.name)
def test_no_baseline_reaches_a_lower_peak(graph: Graph) -> None:
    found = least_peak_search(graph, time_limit=3)
    result = simulate(graph, found.schedule)
    assert (result.peak, result.total_cost) == (found.peak, pytest.approx(found.cost))
    assert found.peak >= graph.lower_bound
    for name, rival in RIVALS.items():
        assert found.peak <= simulate(graph, rival(graph, 0)).peak, name


def test_zoo_graph_below_every_baseline() -> None:
    graph = read_graph(ZOO / "zoo_bert.json")
    found = least_peak_search(graph, time_limit=5)
    assert simulate(graph, found.schedule).peak == found.peak
    assert found.peak <= min(simulate(graph, rival(graph, 0)).peak for rival in RIVALS.values())


TINY = [*tiny_graphs(), tiny_unet(), *(random_dag(8, seed, workspace=True) for seed in (0, 1, 3))]


@pytest.mark.parametrize("graph", TINY, ids=lambda g: g.name)
def test_matches_the_brute_force_on_tiny_graphs(graph: Graph) -> None:
    found = least_peak_search(graph, time_limit=2)
    assert simulate(graph, found.schedule).peak == found.peak == exact_least_peak(graph)


@pytest.mark.parametrize("seed", range(6))
def test_never_below_the_brute_force(seed: int) -> None:
    graph = random_dag(8, seed, workspace=True, fixed=True)
    assert least_peak_search(graph, time_limit=2).peak >= exact_least_peak(graph)


@pytest.mark.parametrize("graph", [unet(3), linear_chain(30), transformer(2)], ids=lambda g: g.name)
def test_fits_every_budget_it_claims(graph: Graph) -> None:
    """Training graphs (on random-layered ones a shorter search under load can stop above: docs/performance.md)."""
    least = least_peak_search(graph, time_limit=3)
    top = simulate(graph, input_order_schedule(graph)).peak
    for budget in (0, least.peak - 1, least.peak, (least.peak + top) // 2, top):
        found = least_peak_search(graph, budget, time_limit=3)
        result = simulate(graph, found.schedule)
        assert (result.peak, result.total_cost) == (found.peak, pytest.approx(found.cost))
        if budget > least.peak or budget == least.peak == graph.lower_bound:  # at the bound: no FastSA, no chance
            assert result.peak <= budget
        if budget < graph.lower_bound:
            assert result.peak > budget
        assert not unread_computations(graph, found.schedule)  # the cheapening leaves none behind
    assert simulate(graph, least_peak(graph, top, time_limit=3)).total_cost == pytest.approx(graph.total_cost)


def unread_computations(graph: Graph, schedule: Schedule) -> list[int]:
    """Nodes computed and then freed (or left at the end, not an output) before any computation read them."""
    inputs: list[list[int]] = [[] for _ in range(graph.n)]
    for u, v in graph.edges.tolist():
        inputs[v].append(u)
    read: dict[int, bool] = {}  # resident node -> whether a computation has read it since it was computed
    unread = []
    for step in schedule:
        if isinstance(step, Compute):
            read.update((u, True) for u in inputs[step.node] if u in read)
            read[step.node] = False
        elif isinstance(step, Free) and not read.pop(step.node):
            unread.append(step.node)
    return unread + [v for v, was_read in read.items() if not was_read and v not in set(graph.outputs.tolist())]


def test_budget_just_above_the_least_peak_gets_a_warm_start() -> None:
    graph = read_graph(ZOO / "zoo_vit.json")
    least = least_peak_search(graph, time_limit=5).peak
    budget = least + 1
    assert all(simulate(graph, BASELINES[name](graph, budget)).peak > budget for name in ("chen-greedy", "knapsack"))
    start = initial_schedule(graph, budget, "auto", time_limit=10)
    assert start is not None and start.simulation is not None
    assert simulate(graph, start.schedule).peak == start.simulation.peak <= budget


def test_registered_as_a_heuristic() -> None:
    graph = unet(3)
    schedule, details = run_heuristic("least-peak", graph, 0, time_limit=2)
    assert simulate(graph, schedule).peak == details["peak"]


def test_keeps_its_time_limit() -> None:
    graph = random_layered(400, seed=1)  # no backward pass: the descents do not stall within a second
    started = time.perf_counter()
    found = least_peak_search(graph, time_limit=1.0)
    assert time.perf_counter() - started <= 1.1 * 1.0 + 2.0
    assert simulate(graph, found.schedule).peak == found.peak


@pytest.mark.parametrize("graph", [unet(3), transformer(2), random_layered(60, seed=2)], ids=lambda g: g.name)
def test_each_trial_scored_as_the_whole_sequence_would_be(graph: Graph) -> None:
    """The descent scores a recomputation from tables of the unchanged sequence: exactly as rescoring all of it."""
    sequences = lp._Sequences(graph)
    sizes = (sequences.mem, sequences.workspace, graph.fixed_mem)
    csr = (graph.pred_ptr, graph.pred_idx, graph.position)
    slot, mark = np.full(graph.n, -1, np.int64), np.zeros(graph.n, np.bool_)
    seq = sequences.prune(np.asarray(BASELINES["chen-greedy"](graph, 0).compute_sequence(), np.int64))
    trials = 0
    for _ in range(4):  # a few descent steps: later sequences hold recomputations
        free_at = sequences.frees(seq)
        for step in sorted({sequences.score(seq)[1], seq.size // 3, seq.size // 2}):
            tables = lp._step_tables(seq, free_at, step, graph.pred_ptr, graph.pred_idx, sizes)
            resident = np.flatnonzero((free_at[:step] > step) | (free_at[:step] < 0))
            for q in resident[sequences.recomputable[seq[resident]]]:
                at = tables[6][seq[q]]
                closure = lp._closure(free_at, at, seq[q], csr, (tables[3], tables[4]), sequences.recomputable, mark)
                for block in (np.array([seq[q]]), closure):
                    trial = np.concatenate([seq[:at], block, seq[at:]])
                    expected = sequences.score(trial)[0][:2]
                    scored = lp._trial_profile(seq, free_at, q, block, tables, *csr[:2], sizes, slot)
                    assert scored == expected
                    trials += 1
        assert not mark.any() and (slot == -1).all()
        found = sequences.descend_step(seq, *sequences.score(seq))
        if found is None:
            break
        seq = found[0]
    assert trials >= 20


def test_zoo_resnet_fits_just_above_its_least_peak() -> None:
    """ResNet's least peak is one start's long descent (chen-greedy's): with a budget just above, it fits first."""
    graph = read_graph(ZOO / "zoo_resnet.json")
    least = least_peak_search(graph, time_limit=6).peak
    budget = least + input_order_peak(graph) // 1000
    found = least_peak_search(graph, budget, time_limit=20)
    assert simulate(graph, found.schedule).peak == found.peak <= budget


def test_the_other_starts_fit_more_cheaply() -> None:
    """ResNet at 25 %: the first start to fit (the lowest) has recomputed more than the save-set search's needs."""
    graph = read_graph(ZOO / "zoo_resnet.json")
    budget = input_order_peak(graph) // 4
    first = least_peak_search(graph, budget, time_limit=20, more_fits=0)
    cheapest = least_peak_search(graph, budget, time_limit=20)
    assert simulate(graph, first.schedule).peak <= budget and simulate(graph, cheapest.schedule).peak <= budget
    assert simulate(graph, cheapest.schedule).total_cost < simulate(graph, first.schedule).total_cost


def test_a_baseline_start_runs_only_in_time() -> None:
    graph = transformer(2)
    given: dict[str, object] = {}
    lp._baseline_starts(graph, 0, given, until=time.perf_counter())  # the first runs in any case
    assert list(given) == ["chen-sqrtn"]
    lp._baseline_starts(graph, 0, given, until=time.perf_counter() + 60)
    assert list(given) == list(lp.STARTS)


@pytest.mark.parametrize("graph", generated(), ids=lambda g: g.name)
def test_cheapened_drops_recomputations_within_the_budget(graph: Graph) -> None:
    """Chen's greedy at 60 % recomputes more than the budget needs: the rest goes, the schedule still fits."""
    budget = int(0.6 * input_order_peak(graph))
    schedule = BASELINES["chen-greedy"](graph, budget)
    before = simulate(graph, schedule)
    after_schedule = lp.cheapened(graph, schedule, budget, 5.0)
    if before.peak > budget:  # Chen's greedy misses the budget: nothing to cheapen
        assert after_schedule is schedule
        return
    after = simulate(graph, after_schedule)  # also checks every dependency
    assert after.peak <= budget and after.total_cost <= before.total_cost
    assert after.recomputations < before.recomputations or after_schedule is schedule
    assert lp.cheapened(graph, schedule, before.peak - 1, 5.0) is schedule  # over its budget: left as it is


def test_cheapened_saves_cost_on_a_chain() -> None:
    graph = linear_chain(30)
    budget = int(0.6 * input_order_peak(graph))
    schedule = BASELINES["chen-greedy"](graph, budget)
    after = simulate(graph, lp.cheapened(graph, schedule, budget, 5.0))
    assert after.peak <= budget and after.total_cost < simulate(graph, schedule).total_cost
