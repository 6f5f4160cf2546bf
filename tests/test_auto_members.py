"""``auto``'s members by graph size and transfer model: H-ILP as the exact member, the offload planner's worker."""

from __future__ import annotations

import os

import pytest
from offload_cases import c1_graph, c1_transfer
from test_offload_three_way import check

from remat_models.core.schedule import input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.io.generators import transformer
from remat_models.planning.plan import PlanStatus, plan
from remat_models.planning.portfolio import AutoOptions, _exact_members


def test_the_exact_member_follows_the_graph_size() -> None:
    opts = AutoOptions()
    assert _exact_members(opts.checkmate_nodes, opts) == ["checkmate", "moccasin"]
    assert _exact_members(opts.checkmate_nodes + 1, opts) == ["moccasin"]
    assert _exact_members(opts.hilp_nodes, opts) == ["moccasin"]
    assert _exact_members(opts.hilp_nodes + 1, opts) == ["hilp", "moccasin"]
    with pytest.raises(ConfigurationError, match="hilp_nodes"):
        plan(c1_graph(), 9, "auto", options={"hilp_nodes": -1})


def test_above_hilp_nodes_the_exact_worker_runs_hilp_from_the_portfolio() -> None:
    """H-ILP starts from the cheaper of its own start and the portfolio's best (the fallbacks at least)."""
    graph = transformer(22)  # 500+ nodes: the exact worker asks for the portfolio's best after its own start
    budget = int(0.5 * input_order_peak(graph))
    # 30 s: the exact worker runs H-ILP only if 1 s + 20 % of the limit are left after its own start, which took
    # 9 s (+ 3-4 s of imports) at load 4 and H-ILP never ran at 20 s; at low load this returns after ~20 s
    result = plan(graph, budget, "auto", time_limit=30, options={"hilp_nodes": 100, "restart_patience": 2})
    assert result.status == PlanStatus.WITHIN_BUDGET
    checked = simulate(graph, result.schedule)
    assert checked.peak <= budget
    members = {m["method"]: m for m in result.details["portfolio"]}
    assert "hilp/highs" in members  # then Moccasin's windows from the best so far, if time is left
    start = members["warm start"]  # the exact worker's own start is a member: auto never returns above it
    assert start["process"] == members["hilp/highs"]["process"] and checked.total_cost <= start["total_cost"]
    if "moccasin/cpsat" in members:
        moccasin = members["moccasin/cpsat"]
        assert moccasin["peak"] <= budget and moccasin["total_cost"] <= members["hilp/highs"]["total_cost"]
    hilp = members["hilp/highs"]
    assert hilp["process"] not in (os.getpid(), members["fastsa"]["process"])  # the exact worker
    fallbacks = [members[n]["total_cost"] for n in ("knapsack", "chen-greedy") if members[n]["peak"] <= budget]
    assert hilp["peak"] <= budget and hilp["total_cost"] <= min(fallbacks)  # never above its start
    fitting = [m["total_cost"] for m in result.details["portfolio"] if m["peak"] is not None and m["peak"] <= budget]
    assert checked.total_cost == min(fitting)


def test_the_offload_planner_runs_in_its_own_worker_and_never_costs_more(c1_auto_offload) -> None:
    graph, transfer = c1_graph(), c1_transfer()
    result = c1_auto_offload  # plan(graph, 9, "auto", transfer=transfer, time_limit=20): conftest
    check(graph, 9, result.schedule, transfer)
    members = result.details["portfolio"]
    processes = {m["method"]: m["process"] for m in members}
    offload = processes["three-way"]
    assert offload != os.getpid() and offload not in {p for name, p in processes.items() if name != "three-way"}
    costs = [simulate(graph, result.schedule, transfer).total_cost]
    costs += [m["total_cost"] for m in members if m["peak"] is not None and m["peak"] <= 9]
    assert costs[0] == min(costs) == pytest.approx(17.0)  # three-way's optimum (spec C1), below the members'
