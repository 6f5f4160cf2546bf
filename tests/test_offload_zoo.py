"""Offload at real sizes (issue 25): auto with a transfer model, the zoo benchmark's rows, remat compare --transfer."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from offload_cases import c1_graph, c1_transfer

from remat_models.core.schedule import simulate
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.three_way import three_way
from remat_models.io import write_graph
from remat_models.planning.plan import plan

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("remat_offload_zoo_bench", ROOT / "benchmarks" / "offload_zoo.py")
assert _spec is not None and _spec.loader is not None
offload_zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(offload_zoo)

# auto with a transfer model hands its members' schedules to the offload worker at the last 30 % of the limit,
# and that worker's three-way search gets what is left of it less a second: a worker still importing under
# load got nothing (at 8 s) and returned its recompute-only start. At 20 s the search gets its seconds; on
# this 4-node graph every member reports within seconds and auto returns then, not at the limit. (The plain
# plan(c1_graph(), 9, "auto", transfer=c1_transfer(), time_limit=20) is conftest's c1_auto_offload.)
OFFLOAD_LIMIT = 20.0


def remat(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "remat_models.cli.app", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env={"PATH": "", "COLUMNS": "200"}, check=False)


def test_auto_with_a_transfer_model_is_never_costlier_than_its_recompute_only_members(c1_auto_offload) -> None:
    graph, transfer = c1_graph(), c1_transfer()
    result = c1_auto_offload  # plan(graph, 9, "auto", transfer=transfer, time_limit=20): conftest
    simulation = simulate(graph, result.schedule, transfer)  # the simulator's own verdict, not the run's
    assert simulation.peak <= 9 and simulation.total_cost == pytest.approx(result.simulation.total_cost)
    members = result.details["portfolio"]
    assert {"three-way", "knapsack", "chen-greedy"} <= {m["method"] for m in members}
    fitting = [m["total_cost"] for m in members if m["peak"] is not None and m["peak"] <= 9]
    assert simulation.total_cost <= min(fitting) + 1e-9
    recompute_only = plan(graph, 9, "auto", time_limit=3)
    assert recompute_only.simulation.total_cost == pytest.approx(23.0)  # the recompute-only optimum at B=9
    assert simulation.total_cost == pytest.approx(17.0)  # paging a pays: the paging optimum
    assert simulation.total_cost < recompute_only.simulation.total_cost


def test_three_way_starts_from_every_warm_start_and_returns_none_costlier() -> None:
    graph, transfer = c1_graph(), c1_transfer()
    inits = [BASELINES["checkpoint-all"](graph, 9), BASELINES["chen-greedy"](graph, 9)]  # peak 12; cost 23
    costs = [simulate(graph, init, transfer) for init in inits]
    assert costs[0].peak > 9 and costs[1].peak <= 9 and costs[1].total_cost == pytest.approx(23.0)
    found = three_way(graph, 9, transfer, time_limit=5, inits=inits)
    result = simulate(graph, found.schedule, transfer)
    assert result.peak <= 9 and result.total_cost == pytest.approx(17.0) == found.simulation.total_cost
    assert found.plans_tried >= len(inits)
    at_once = three_way(graph, 9, transfer, time_limit=0, inits=inits)  # no time to shave: the best warm start
    assert at_once.schedule is inits[1] and at_once.plans_tried == len(inits)


def test_the_zoo_benchmark_rows_are_single_calls_within_the_limit() -> None:
    args = argparse.Namespace(time_limit=OFFLOAD_LIMIT, flops=1e3)  # 25e6 or 450e6 B/s
    rows = offload_zoo.run(c1_graph(), 0.75, args)  # budget 9 of the input-order peak 12
    assert [r["plan"] for r in rows] == [
        "recompute only (auto)",
        *(f"{label}, {link}" for link in offload_zoo.LINKS for label in ("auto with offload", "three-way")),
    ]
    assert all(r["budget"] == 9 and r["fits"] and r["in_time"] for r in rows)
    assert all(r["seconds"] <= 1.1 * args.time_limit + 2 for r in rows)
    recompute, offloading = rows[0], [r for r in rows if r["plan"].startswith("auto with offload")]
    assert recompute["moved_bytes"] == 0 and recompute["tdi"] == pytest.approx(100 * 10 / 13)
    for row in offloading:
        assert row["no_costlier"] and row["tdi"] < recompute["tdi"]
        assert row["moved_bytes"] == 8 and row["offloads"] == row["prefetches"] == 1  # a out and back in
    below = offload_zoo.run(c1_graph(), 0.5, args)  # 6 B < the lower bound 9
    assert below == [{"graph": "c1", "fraction": 0.5, "budget": 6, "lower_bound": 9, "plan": "any",
                      "status": "below lower bound"}]  # fmt: skip
    assert "below lower bound" in offload_zoo.table(rows + below)


def test_remat_compare_passes_the_transfer_model_to_every_method(tmp_path) -> None:
    graph_path = tmp_path / "c1.json"
    write_graph(c1_graph(), graph_path)
    methods = "chen-greedy,three-way,checkmate/highs,auto"
    limit = str(OFFLOAD_LIMIT)
    done = remat("compare", graph_path, "-b", "9", "--methods", methods, "--transfer", "bw=2", "--time-limit", limit)
    assert done.returncode == 0, done.stderr
    assert "skipped" not in done.stderr
    rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if line.count("│") > 2}
    for name in ("three-way", "checkmate/highs", "auto"):  # paging a: cost 17 of compute 13 (the paging optimum)
        assert "30.77" in rows[name], done.stdout
    assert "76.92" in rows["chen-greedy"]  # a recompute-only plan, simulated under the model: cost 23


@pytest.mark.parametrize(
    ("value", "message"),
    [("bw=fast", "is not a number"), ("speed=3", "unknown transfer option 'speed'"), ("mode=overlap", "bandwidth")],
)
def test_remat_compare_refuses_a_bad_transfer_value(tmp_path, value: str, message: str) -> None:
    graph_path = tmp_path / "c1.json"
    write_graph(c1_graph(), graph_path)
    done = remat("compare", graph_path, "-b", "9", "--methods", "three-way", "--transfer", value)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "┃" not in done.stdout  # no table
