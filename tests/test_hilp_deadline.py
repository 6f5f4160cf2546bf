"""Issue 24: every phase of the hierarchical solve checks the deadline; a late solve returns its warm start."""

from __future__ import annotations

import pytest

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.formulations.hilp import warm
from remat_models.formulations.hilp.partition import PartitionOptions, PartitionTimeUp, h_partition
from remat_models.formulations.hilp.solver import HierarchicalSolver
from remat_models.formulations.hilp.warm import fitting_starts
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
