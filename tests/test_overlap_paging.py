"""Exact overlap-mode offloading (``paging-overlap`` on Checkmate): bounds, backends, heuristics, serial paging."""

from __future__ import annotations

from dataclasses import replace

import pytest
from checkmate_graphs import budgets, random_dag, tiny_unet
from offload_cases import c1_graph, c1_transfer
from test_offload_three_way import frozen_chain

from remat_models.core.schedule import FreeHost, Schedule, input_order_schedule, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.extensions import Paging
from remat_models.extensions.overlap_paging import OverlapPaging
from remat_models.extensions.registry import make_extension
from remat_models.formulations import get_formulation
from remat_models.formulations.solving import build_for_backend
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.heuristics.fastsa import fastsa
from remat_models.heuristics.three_way import three_way
from remat_models.io.generators import linear_chain, random_layered
from remat_models.planning.plan import PlanStatus, plan

LIMIT = 10.0  # seconds: these solves take under one; the warm start's least-peak search scales with it (60: 10-25 s)


def overlap(bw: float, **options: object) -> TransferModel:
    """Both directions at ``bw`` bytes per cost unit, overlapped with compute (``latency``, ``host``: as the CLI)."""
    return TransferModel.from_options({"bw": bw, "mode": "overlap", **options})


def solve(graph, budget, transfer, backend="highs", **options):
    """The exact overlap optimum (``options`` go to OverlapPaging); the simulator checks its schedule."""
    result = plan(graph, budget, formulation="checkmate", backend=backend, allow_over_budget=True,
                  extensions=[OverlapPaging(transfer, **options)], time_limit=LIMIT)  # fmt: skip
    if result.status is PlanStatus.NO_SCHEDULE_IN_MODEL:  # then serial paging finds nothing either
        serial = Paging(replace(transfer, mode="serial"), **options)
        assert plan(graph, budget, formulation="checkmate", backend=backend, allow_over_budget=True,
                    extensions=[serial]).status is PlanStatus.NO_SCHEDULE_IN_MODEL  # fmt: skip
        return result
    assert result.status is PlanStatus.WITHIN_BUDGET
    simulation = simulate(graph, result.schedule, transfer)
    assert simulation.total_cost == pytest.approx(result.simulation.total_cost)
    assert simulation.total_cost <= result.details["objective"] + 1e-6  # the objective bounds the makespan
    assert simulation.peak <= budget and simulation.peak <= result.details["model_peak"] + 1e-6
    return result


def test_fast_links_hide_every_transfer() -> None:
    # forward values that cannot be recomputed: only offloading fits; at 1e9 B per unit it costs nothing
    graph = frozen_chain(4)
    fast = solve(graph, 4, overlap(1e9))
    assert fast.simulation.offloads > 0
    assert fast.details["objective"] == pytest.approx(graph.total_cost, abs=1e-6)
    assert fast.simulation.total_cost == pytest.approx(graph.total_cost, abs=1e-6)
    slow = solve(graph, 4, overlap(0.25))  # 4 units per copy: some are exposed
    assert slow.simulation.total_cost > graph.total_cost + 1
    # spec C1 at B=9: recompute-only costs 23; a fast link pages a and costs a's single computation only
    assert solve(c1_graph(), 9, overlap(1e9)).details["objective"] == pytest.approx(13.0, abs=1e-6)


def test_spec_c1_overlaps_the_serial_schedule() -> None:
    # serial paging: 17 (t_out = t_in = 2 added); overlapped, the offload hides behind b, the prefetch waits: 16
    result = solve(c1_graph(), 9, c1_transfer(mode="overlap"))
    assert result.details["objective"] == pytest.approx(16.0) == result.simulation.total_cost
    assert result.simulation.offloads == result.simulation.prefetches == 1


CASES = [  # graph, budget, bandwidth: transfer times are whole cost units, so CP-SAT rounds nothing
    ("c1", c1_graph, 9, 2.0),
    ("c1-slow", c1_graph, 9, 0.5),
    ("chain4", lambda: linear_chain(4), 3, 1.0),
    ("chain4-slow", lambda: linear_chain(4), 4, 0.5),
    ("frozen4", lambda: frozen_chain(4), 4, 1.0),
    ("unet", tiny_unet, 14, 1.0),
]


@pytest.mark.parametrize(("case", "make", "budget", "bw"), CASES, ids=[c[0] for c in CASES])
def test_highs_and_cpsat_agree_and_overlap_never_costs_more_than_serial(case, make, budget, bw) -> None:
    graph = make()
    highs = solve(graph, budget, overlap(bw), "highs")
    cpsat = solve(graph, budget, overlap(bw), "cpsat")
    assert highs.solver_status.value == cpsat.solver_status.value == "optimal_in_model"
    assert highs.details["objective"] == pytest.approx(cpsat.details["objective"], abs=1e-6)
    serial = plan(graph, budget, formulation="checkmate", backend="highs", time_limit=LIMIT,
                  extensions=[Paging(TransferModel(out_bw=bw, in_bw=bw))])  # fmt: skip
    assert highs.details["objective"] <= serial.details["objective"] + 1e-6
    # the serial optimum's schedule, overlapped, is one the overlap model covers: it costs no less
    assert highs.details["objective"] <= simulate(graph, serial.schedule, overlap(bw)).total_cost + 1e-6


HEURISTIC_CASES = [("chain4", lambda: linear_chain(4), 3, 12.0), ("chain6", lambda: linear_chain(6), 4, 13.0)]


@pytest.mark.parametrize(("case", "make", "budget", "optimum"), HEURISTIC_CASES, ids=[c[0] for c in HEURISTIC_CASES])
def test_exact_is_no_worse_than_fastsa_with_fetches_and_three_way(case, make, budget, optimum) -> None:
    graph, transfer = make(), overlap(1.0)
    exact = solve(graph, budget, transfer)
    assert exact.solver_status.value == "optimal_in_model"
    found = fastsa(graph, budget, seed=0, time_limit=1.0, transfer=transfer).schedule
    heuristics = [simulate(graph, found, transfer), three_way(graph, budget, transfer, time_limit=1.0).simulation]
    for simulation in heuristics:
        if simulation.peak <= budget:
            assert exact.simulation.total_cost <= simulation.total_cost + 1e-6
    assert exact.simulation.total_cost == pytest.approx(optimum)  # docs/offload.md's table


def test_without_pageable_values_the_makespan_is_the_staged_brute_force_optimum() -> None:
    graph = random_dag(7, 1)
    for budget in budgets(graph, 4)[1:]:  # the lowest has no staged schedule
        truth = exhaustive_optimum(graph, budget, "staged")
        result = solve(graph, budget, overlap(1.0), nodes=[])
        assert truth is not None and result.details["objective"] == pytest.approx(truth.cost)


SWEEP = [("layered8", lambda: random_layered(8, seed=2)), ("dag7", lambda: random_dag(7, 1)), ("unet", tiny_unet)]


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
@pytest.mark.parametrize(("name", "make"), SWEEP, ids=[s[0] for s in SWEEP])
def test_every_schedule_fits_and_costs_at_most_the_objective(name, make, backend) -> None:
    graph = make()
    transfers = (overlap(0.25, latency=0.5), overlap(4.0), overlap(1.0, host=int(graph.mem.max())))
    for budget, transfer in zip(budgets(graph, 3), transfers, strict=False):  # each budget with one link
        solve(graph, budget, transfer, backend)  # fractional times: CP-SAT rounds them up, still a bound


def test_the_warm_start_meets_every_row() -> None:
    graph = linear_chain(4)
    for backend in ("highs", "cpsat"):
        built = build_for_backend(graph, 6, "checkmate", backend, None, [OverlapPaging(overlap(1.0))])
        hints = get_formulation("checkmate").hints(built, input_order_schedule(graph))
        assert built.model.check(hints) == []
        assert built.model.objective_value(hints) == pytest.approx(graph.total_cost)
    # a paged warm start: the serial optimum's schedule (its transfers sit between stages), clocks and all
    graph, transfer = c1_graph(), c1_transfer()
    serial = plan(graph, 9, formulation="checkmate", backend="highs", extensions=[Paging(transfer)]).schedule
    built = build_for_backend(graph, 9, "checkmate", "cpsat", None, [OverlapPaging(replace(transfer, mode="overlap"))])
    hints = get_formulation("checkmate").hints(built, serial)
    assert built.model.check(hints) == []
    assert built.model.objective_value(hints) == 16.0 == simulate(graph, serial, built.applied[0].transfer).total_cost
    with pytest.raises(InvalidScheduleError, match="only offloads and prefetches between stages"):
        get_formulation("checkmate").hints(built, Schedule.of([*serial.steps, FreeHost(0)]))


def test_options_names_and_errors() -> None:
    extension = make_extension("paging-overlap:bw=2,host=64")
    assert isinstance(extension, OverlapPaging)
    assert extension.transfer == overlap(2.0, host=64)
    assert OverlapPaging(overlap(2.0), nodes="a;b").nodes == ("a", "b")
    with pytest.raises(ConfigurationError, match="overlap transfers"):
        OverlapPaging(TransferModel(out_bw=2, in_bw=2))
    with pytest.raises(ConfigurationError, match="paging-overlap"):
        Paging(overlap(2.0))
    with pytest.raises(ConfigurationError, match="does not support 'moccasin'"):
        plan(c1_graph(), 9, formulation="moccasin", extensions=[OverlapPaging(overlap(2.0))])
