"""Issue 24: every phase of the hierarchical solve checks the deadline; a late solve returns its warm start."""

from __future__ import annotations

import time

import pytest

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.formulations.hilp import partition, solver, warm
from remat_models.formulations.hilp.formulation import HILP
from remat_models.formulations.hilp.partition import PartitionOptions, PartitionTimeUp, h_partition
from remat_models.formulations.hilp.solver import HierarchicalSolver
from remat_models.formulations.hilp.warm import fitting_starts
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.baselines import knapsack_baseline
from remat_models.io import transformer

GRAPH = transformer(4)
BUDGET = int(0.6 * input_order_peak(GRAPH))
OPTIONS = {"nb_peak": 2, "nb_save": 2, "warm": False}


def test_the_partition_stops_between_rounds_once_its_deadline_passed() -> None:
    options = PartitionOptions(max_leaf=4, max_top=8)
    assert h_partition(GRAPH, options, deadline=None).rounds >= 1
    with pytest.raises(PartitionTimeUp):
        h_partition(GRAPH, options, deadline=0.0)


def test_a_solve_past_its_limit_in_the_partition_returns_the_warm_start_as_no_schedule(monkeypatch) -> None:
    start = knapsack_baseline(GRAPH, BUDGET)
    monkeypatch.setattr("remat_models.formulations.hilp.solver.h_partition", _late_partition)
    result = HierarchicalSolver(GRAPH, BUDGET, "highs", OPTIONS, SolveLimits(time_limit=5)).run(start)
    assert result.status is SolveStatus.NO_SOLUTION and result.returned_warm_start
    assert result.reason == "the time limit passed in H-Partition" and result.ilps == 0
    assert result.schedule is start and simulate(GRAPH, result.schedule).fits(BUDGET)


def _late_partition(graph: object, options: object, deadline: float | None) -> None:  # stands in for h_partition
    raise PartitionTimeUp("late")


def test_past_the_options_deadline_clusters_get_base_options_and_the_top_is_still_solved() -> None:
    start = knapsack_baseline(GRAPH, BUDGET)
    late = HierarchicalSolver(
        GRAPH, BUDGET, "highs", {**OPTIONS, "options_time_limit": 1e-9}, SolveLimits(time_limit=30)
    )
    result = late.run(start)
    labels = [label for label, _, _ in result.ilp_times]
    assert labels and all(label.startswith("top") for label in labels)  # no option ILP ran
    assert result.top_status in ("optimal", "feasible")
    sim = simulate(GRAPH, result.schedule)
    assert sim.fits(BUDGET) and sim.total_cost == pytest.approx(result.objective)
    assert result.objective <= simulate(GRAPH, start).total_cost * (1 + 1e-9)
    full = HierarchicalSolver(GRAPH, BUDGET, "highs", OPTIONS, SolveLimits(time_limit=30)).run(start)
    assert any(label.startswith("cluster") for label, _, _ in full.ilp_times)  # unbound: option ILPs run


def test_fastsa_is_skipped_when_its_setup_would_overrun_its_share_and_an_init_fits(monkeypatch) -> None:
    start = knapsack_baseline(GRAPH, BUDGET)
    assert len(fitting_starts(GRAPH, BUDGET, start, time_limit=5.0)) == 2  # FastSA's schedule joins the init
    monkeypatch.setattr(warm, "FASTSA_SETUP_SECONDS_PER_NODE", 1.0)  # far more than 15 % of 5 s
    starts = fitting_starts(GRAPH, BUDGET, start, time_limit=5.0)
    assert [s.schedule for s in starts] == [start]
    assert len(fitting_starts(GRAPH, BUDGET, None, time_limit=5.0)) == 1  # without an init FastSA still runs


def test_the_partition_stops_inside_a_round_once_its_deadline_passed(monkeypatch) -> None:
    """A round on a large graph takes most of a second (9,607 nodes); the clock is read while it proposes and merges
    candidates, not only between rounds. Here one round suffices, and a clock that moves on at every read passes
    the deadline after the round started: before, the round finished and the partition was returned."""
    options = PartitionOptions(max_leaf=4, max_top=10_000)
    assert h_partition(GRAPH, options).rounds == 0  # already small enough: no round, no clock
    options = PartitionOptions(max_leaf=4, max_top=len(_forward(GRAPH)) - 1)
    assert h_partition(GRAPH, options).rounds == 1
    ticks = iter(range(1_000_000))
    monkeypatch.setattr(partition.time, "perf_counter", lambda: float(next(ticks)))
    monkeypatch.setattr(partition, "CHECK_EVERY", 1)  # a small graph: read the clock at every candidate
    with pytest.raises(PartitionTimeUp, match="in a round"):
        h_partition(GRAPH, options, deadline=0.5)  # the check before the round reads 0, the next one 1


def _forward(graph) -> list[int]:
    return [v for v in range(graph.n) if partition.forward_mask(graph)[v]]


def test_a_solve_past_its_limit_after_the_partition_starts_no_other_phase(monkeypatch) -> None:
    """The partition ends after the limit: nothing else runs (before, W sets, local graphs, induced options and the
    top clusters' options were built first, 4.8 s on the 9,607-node transformer), and the warm start is returned."""
    start = knapsack_baseline(GRAPH, BUDGET)
    real = solver.h_partition

    def slow(graph, options, deadline):  # the real partition, returned just after the deadline
        result = real(graph, options, deadline)
        while time.perf_counter() <= deadline:
            time.sleep(0.01)
        return result

    calls: list[str] = []
    monkeypatch.setattr(solver, "h_partition", slow)
    monkeypatch.setattr(solver, "backward_sets", lambda *args: calls.append("backward_sets"))
    result = HierarchicalSolver(GRAPH, BUDGET, "highs", OPTIONS, SolveLimits(time_limit=0.3)).run(start)
    assert calls == []
    assert result.status is SolveStatus.NO_SOLUTION and result.returned_warm_start and result.ilps == 0
    assert result.reason == "the time limit passed before the top level" and result.schedule is start


def test_a_limit_below_the_hierarchys_least_time_builds_nothing_on_a_large_graph() -> None:
    """Above 1,000 nodes ``least_seconds`` covers the phases before the first ILP (partition, W sets, local graphs,
    induced options) and the top's least time: a 5 s limit on the 9,607-node transformer left H-ILP 1.8 s after the
    warm start, which it overran by 1.4 s to return the warm start. Now the solve is not started."""
    big = transformer(48)  # 1,159 nodes
    assert big.n >= 1000 and HILP.least_seconds(GRAPH) is None
    budget = int(0.6 * input_order_peak(big))
    needed = HILP.least_seconds(big)
    outcome = solve_model(big, budget, "hilp", limits=SolveLimits(time_limit=0.9 * needed))
    assert outcome.status is SolveStatus.NO_SOLUTION and "build_skipped" in outcome.details
