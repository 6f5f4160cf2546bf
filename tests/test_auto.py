"""The ``auto`` portfolio and the default warm start (``init="auto"``) of exact solves."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from checkmate_graphs import budgets, tiny_unet

from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.heuristics.baselines import BASELINES
from remat_models.io import linear_chain, write_graph
from remat_models.io.generators import transformer
from remat_models.planning.plan import PlanStatus, parse_method_name, plan
from remat_models.planning.warm_start import INIT_FASTSA_NODES, WARM_BASELINES, auto_init, fast_baselines


def test_auto_returns_the_best_member_with_a_bound() -> None:
    graph, budget = members_run()
    assert parse_method_name("auto").method == "auto"
    result = plan(graph, budget, "auto", time_limit=30)  # returns early: FastSA, then Checkmate optimal
    assert result.status == PlanStatus.WITHIN_BUDGET
    checked = simulate(graph, result.schedule)
    assert checked.peak <= budget
    members = result.details["portfolio"]
    assert {m["method"] for m in members} >= {"chen-greedy", "knapsack", "fastsa"}
    fitting = [m["total_cost"] for m in members if m["peak"] is not None and m["peak"] <= budget]
    assert checked.total_cost == min(fitting)  # never worse than a member of the same run
    assert result.details["bound"] is None or result.details["bound"] <= checked.total_cost + 1e-6
    in_caller = {"chen-greedy", "knapsack", "least-peak"}  # the fallbacks, planned in this process meanwhile
    assert {m["process"] for m in members if m["method"] in in_caller} == {os.getpid()}
    worker_processes = {m["process"] for m in members if m["method"] not in in_caller}
    assert len(worker_processes) == 2 and os.getpid() not in worker_processes  # FastSA and the exact solve


def test_auto_from_a_script_without_a_main_guard_returns_within_its_limit(tmp_path) -> None:
    """The workers are fresh interpreters: a script calling auto at top level is not re-run by them."""
    graph = tiny_unet()
    path = tmp_path / "g.json"
    write_graph(graph, path)
    script = tmp_path / "plan_it.py"
    script.write_text(
        "from remat_models.io import read_graph\n"
        "from remat_models.planning.plan import plan\n"
        f"graph = read_graph({str(path)!r})\n"
        f"result = plan(graph, {budgets(graph)[0]}, 'auto', time_limit=10)\n"
        "print('RESULT', result.status.value, result.simulation.peak, len(result.details['portfolio']))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert len(lines) == 1  # printed once: the workers did not import the script
    _, status, peak, members = lines[0]
    assert status == "within_budget" and int(peak) <= budgets(graph)[0] and int(members) >= 2


def test_exact_solves_start_from_a_fitting_heuristic_by_default() -> None:
    graph = tiny_unet()
    budget = budgets(graph)[0]
    found = auto_init(graph, budget)
    greedy = simulate(graph, BASELINES["chen-greedy"](graph, budget))
    assert found is not None
    start = found.schedule
    assert simulate(graph, start).total_cost == found.simulation.total_cost and found.simulation.peak <= budget
    assert simulate(graph, start).total_cost <= greedy.total_cost
    warm = plan(graph, budget, formulation="checkmate", backend="cpsat", time_limit=5)
    assert warm.details["init"] == "auto" and warm.details["warm_start"]
    assert simulate(graph, warm.schedule).total_cost <= simulate(graph, start).total_cost
    cold = plan(graph, budget, formulation="checkmate", backend="cpsat", time_limit=5, init="none")
    assert not cold.details["warm_start"]


def test_the_warm_start_keeps_to_its_share_of_the_time_limit() -> None:
    """Past its deadline only the cheapest baseline runs (there is always one), and no FastSA."""
    graph = transformer(22)
    assert graph.n >= INIT_FASTSA_NODES  # the size at which the default warm start adds FastSA
    budget = simulate(graph, BASELINES["chen-sqrtn"](graph, 10**15)).peak
    sqrtn = BASELINES["chen-sqrtn"](graph, budget)
    every = fast_baselines(graph, budget)
    assert list(every) == list(WARM_BASELINES)
    assert list(fast_baselines(graph, budget, deadline=time.perf_counter())) == ["chen-sqrtn"]
    found = auto_init(graph, budget, time_limit=1e-6)  # its share is over before the first baseline ends
    assert found is not None and found.schedule == sqrtn
    assert simulate(graph, found.schedule).peak <= budget
    longer = auto_init(graph, budget, time_limit=10)  # every baseline, then FastSA for what is left of 3 s
    assert longer is not None and longer.simulation.total_cost <= found.simulation.total_cost
    assert simulate(graph, longer.schedule).peak <= budget


@pytest.mark.parametrize("init", ["fastsa", None])
def test_heuristics_reject_a_warm_start_but_accept_the_default(init) -> None:
    graph = tiny_unet()
    budget = input_order_peak(graph)
    if init is None:
        assert plan(graph, budget, "chen-greedy", init="none").status == PlanStatus.WITHIN_BUDGET
    else:
        with pytest.raises(Exception, match="init and solver options apply to formulations"):
            plan(graph, budget, "chen-greedy", init=init)


def test_auto_options_are_its_dataclass_fields_checked_before_anything_runs() -> None:
    graph, budget = members_run()
    with pytest.raises(ConfigurationError, match=r"unknown auto option\(s\) \['bogus'\]"):
        plan(graph, budget, "auto", options={"bogus": 1})
    with pytest.raises(ConfigurationError, match="wait_share is a share in"):
        plan(graph, budget, "auto", options={"wait_share": 0})
    result = plan(graph, budget, "auto", time_limit=20, options={"checkmate_nodes": 0, "restart_patience": 1})
    assert simulate(graph, result.schedule).peak <= budget
    members = {m["method"] for m in result.details["portfolio"]}
    assert not any(m.startswith("checkmate") for m in members)  # the graph is above checkmate_nodes
    assert any(m.startswith("moccasin") for m in members)


def members_run() -> tuple[Graph, int]:
    """A graph and budget where auto's members report: the fallbacks do not fit, and the lower bound (17) is below
    the optimum (18), which Checkmate proves in about a second (where a fallback meets the bound, auto stops at once).
    """
    return linear_chain(6), 4
