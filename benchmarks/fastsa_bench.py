"""FastSA benchmarks: mutation attempts per second, and the FastSA paper's Table 1 (RL 1-4, CM 1-2 at 90/80/70 %).

    .venv/bin/python benchmarks/fastsa_bench.py throughput [--attempts 4000000]
    .venv/bin/python benchmarks/fastsa_bench.py attempts [--graphs llama transformer:800] [--runs 3]
    .venv/bin/python benchmarks/fastsa_bench.py table [--seeds 5] [--iterations 20000000,2000000]
        [--time-limit SECONDS | paper | paper*0.5] [--fill-time] [--restarts 1]

``attempts`` times the annealing kernel alone (stage 2's: plain nodes from the input order, with and
without fetch units of an NVLink-like link, at 25 % of the input-order peak) and the set-up of a
``fastsa`` run (grouping, stage 2's state allocated up front, stage 1's state), medians of ``--runs``
in one process. A graph is a zoo model name (benchmarks/zoo) or ``transformer:L`` (the generator's).

The table prints, per graph and budget, the median over seeds of the cost increase (TDI %) and the peak
as % of the input-order peak, with the seeds meeting the budget, next to the published FastSA row.
Graphs are read from $REMAT_SHARED/graphs (default ../shared/graphs).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak
from remat_models.core.transfer import TransferModel
from remat_models.heuristics.fastsa import FastSAOptions, fastsa, warmup
from remat_models.heuristics.fastsa import _kernels as kernels
from remat_models.heuristics.fastsa.grouping import plain_units
from remat_models.heuristics.fastsa.solver import _Stage, _stage_one_units, _with_fetches
from remat_models.heuristics.fastsa.state import SAState
from remat_models.io import read_graph
from remat_models.io.generators import transformer

SHARED = Path(os.environ.get("REMAT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
TABLE_GRAPHS = [
    ("RL 1", "rl_g1_n100.json"),
    ("RL 2", "rl_g2_n250.json"),
    ("RL 3", "rl_g3_n500.json"),
    ("RL 4", "rl_g4_n1000.json"),
    ("CM 1", "cm1_fcn8_vgg_train.json"),
    ("CM 2", "cm2_resnet50_train.json"),
]


def throughput(attempts: int, graph_file: str, fraction: float, spacing: int) -> None:
    """Attempts per second of the annealing kernel on plain nodes from the input order (one core)."""
    started = time.perf_counter()
    compile_time = warmup()
    print(f"compile/load time {compile_time:.2f}s (process start to warm: {time.perf_counter() - started:.2f}s)")
    graph = read_graph(SHARED / "graphs" / graph_file)
    budget = int(fraction * input_order_peak(graph))
    for logaddexp in (False, True):
        state = SAState(graph, plain_units(graph), graph.order, spacing=spacing, logaddexp=logaddexp)
        stage = _Stage(state, FastSAOptions(logaddexp=logaddexp), budget=budget, stage=2)
        h = 1e-3 * stage.initial_objective
        stage.set_temperatures(h, h * 1e-4, attempts)
        wall, cpu = time.perf_counter(), time.process_time()
        stage.run(attempts, deadline=float("inf"))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        counters = stage.counters
        print(
            f"{graph_file} T={state.size} tree={'logaddexp+max' if logaddexp else 'max'}: {attempts} attempts, "
            f"{attempts / cpu / 1e6:.2f}M/s per CPU second ({attempts / wall / 1e6:.2f}M/s wall), "
            f"valid {counters[kernels.C_VALID] / attempts:.1%}, accepted {counters[kernels.C_ACCEPTED] / attempts:.2%}"
        )


def _graph(spec: str) -> Graph:
    """A zoo model by name, or ``transformer:L`` from the generator."""
    family, _, size = spec.partition(":")
    if family == "transformer":
        return transformer(int(size))
    return read_graph(Path(__file__).resolve().parent / "zoo" / f"zoo_{spec}.json")


def attempts(specs: list[str], n_attempts: int, runs: int) -> None:
    """Median kernel attempts/s without and with fetch units, and median set-up seconds of a fastsa run."""
    print(f"compile/load time {warmup():.2f}s")
    for spec in specs:
        graph = _graph(spec)
        budget = int(0.25 * input_order_peak(graph))
        bandwidth, latency = 450e9 / 400e12, 5e-6 * 400e12  # offload_zoo's NVLink-like link, in FLOP units
        link = TransferModel(out_bw=bandwidth, in_bw=bandwidth, out_latency=latency, in_latency=latency, mode="overlap")
        for label, transfer in (("recompute only", None), ("with fetch units", link)):
            options = FastSAOptions(transfer=transfer)
            units = _with_fetches(graph, plain_units(graph), options)
            rates, cpu_rates, valid = [], [], []
            for seed in range(runs):
                state = SAState(graph, units, units.of_nodes(graph.order))
                stage = _Stage(state, options, budget=budget, stage=2, key=(seed, 0))
                h = options.reheat * stage.initial_objective
                stage.set_temperatures(h, h * options.final_ratio, n_attempts)
                wall, cpu = time.perf_counter(), time.process_time()
                stage.run(n_attempts, deadline=float("inf"))
                rates.append(n_attempts / (time.perf_counter() - wall))
                cpu_rates.append(n_attempts / (time.process_time() - cpu))
                valid.append(stage.counters[kernels.C_VALID] / n_attempts)
            print(
                f"{spec} ({graph.n} nodes, T={state.size}) {label}: median {statistics.median(rates):.3g} attempts/s "
                f"of {[f'{r:.3g}' for r in rates]} ({statistics.median(cpu_rates):.3g} per CPU second), "
                f"valid {statistics.median(valid):.0%}",
                flush=True,
            )
        steps: dict[str, list[float]] = {"grouping": [], "stage 2 state": [], "stage 1 state": []}
        for _ in range(runs):
            mark = time.perf_counter()
            units, sequence = _stage_one_units(graph, budget, FastSAOptions())
            steps["grouping"].append(time.perf_counter() - mark)
            mark = time.perf_counter()
            expanded = units.expand(sequence)  # as fastsa allocates stage 2's state
            big = SAState(graph, plain_units(graph), expanded, capacity=16 * np.bincount(expanded, minlength=graph.n))
            steps["stage 2 state"].append(time.perf_counter() - mark)
            mark = time.perf_counter()
            SAState(graph, units, sequence)
            steps["stage 1 state"].append(time.perf_counter() - mark)
            del big
        print(f"{spec} set-up (median s): " + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in steps.items()))


def _published() -> dict[tuple[str, int], dict[str, str]]:
    with open(SHARED / "reference" / "fastsa_table1.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row["method"] == "fastsa"]
    return {(row["file"], int(row["budget_percent"])): row for row in rows}


def _time_limit(option: str, paper: dict[str, str]) -> float | None:
    """Per-run limit: none, a number of seconds, or ``paper[*SCALE]`` (the published time of the line, scaled)."""
    if not option:
        return None
    if option.startswith("paper"):
        scale = float(option.partition("*")[2] or 1.0)
        return scale * float(paper["time_s"]) if paper.get("time_s") else None
    return float(option)


def table(args: argparse.Namespace) -> None:
    """Median over seeds of CI % and memory % per graph and budget, beside the published FastSA row."""
    warmup()
    published = _published()
    iterations = tuple(int(x) for x in args.iterations.split(",")) if args.iterations else None
    rows = []
    print(f"{'graph':6} {'B%':>3} | {'CI%':>6} {'mem%':>6} {'met':>5} {'time s':>7} | paper: CI% mem% s", flush=True)
    for label, file in TABLE_GRAPHS:
        if args.graphs and label.replace(" ", "").lower() not in args.graphs:
            continue
        graph = read_graph(SHARED / "graphs" / file)
        reference = input_order_peak(graph)
        for percent in args.budgets:
            budget = reference * percent // 100
            runs = []
            paper = published.get((file, percent), {})
            limit = _time_limit(args.time_limit, paper)
            for seed in range(args.seeds):
                options = {"fill_time": args.fill_time, "restarts": args.restarts}
                result = fastsa(graph, budget, seed=seed, iterations=iterations, time_limit=limit, **options)
                runs.append(
                    {
                        "seed": seed,
                        "ci": result.simulation.tdi,
                        "mem": 100 * result.peak / reference,
                        "met": result.met_budget,
                        "time": result.wall_time,
                        "iterations": list(result.iterations),
                    }
                )
            row = {
                "graph": label,
                "file": file,
                "budget_percent": percent,
                "ci_median": statistics.median(r["ci"] for r in runs),
                "mem_median": statistics.median(r["mem"] for r in runs),
                "met": sum(r["met"] for r in runs),
                "time_median": statistics.median(r["time"] for r in runs),
                "time_limit": limit,
                "paper_ci": paper.get("cost_increase_percent", ""),
                "paper_mem": paper.get("mem_percent", ""),
                "paper_time": paper.get("time_s", ""),
                "runs": runs,
            }
            rows.append(row)
            print(
                f"{label:6} {percent:>3} | {row['ci_median']:6.2f} {row['mem_median']:6.1f} "
                f"{row['met']:>2}/{len(runs):<2} "
                f"{row['time_median']:7.1f} | paper: {row['paper_ci']:>5} {row['paper_mem']:>5} {row['paper_time']:>5}",
                flush=True,
            )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    speed = sub.add_parser("throughput")
    speed.add_argument("--attempts", type=int, default=4_000_000)
    speed.add_argument("--graph", default="rl_g4_n1000.json")
    speed.add_argument("--budget", type=float, default=0.8, help="fraction of the input-order peak")
    speed.add_argument("--spacing", type=int, default=FastSAOptions().spacing)
    rate = sub.add_parser("attempts")
    rate.add_argument("--graphs", nargs="+", default=["llama", "transformer:800"])
    rate.add_argument("--attempts", type=int, default=2_000_000)
    rate.add_argument("--runs", type=int, default=3)
    tab = sub.add_parser("table")
    tab.add_argument("--seeds", type=int, default=5)
    tab.add_argument("--iterations", default="", help="N1,N2 (default the paper's 20000000,2000000)")
    tab.add_argument("--time-limit", default="", help="seconds, or paper[*SCALE]: the published time of each line")
    tab.add_argument("--fill-time", action="store_true", help="stage 2 anneals until the time limit")
    tab.add_argument("--restarts", type=int, default=1, help="independent runs per seed sharing the time limit")
    tab.add_argument("--budgets", type=int, nargs="+", default=[90, 80, 70])
    tab.add_argument("--graphs", nargs="*", default=[], help="e.g. rl1 cm2 (default all)")
    tab.add_argument("--out", default="")
    args = parser.parse_args(argv)
    np.set_printoptions(precision=3)
    if args.mode == "throughput":
        throughput(args.attempts, args.graph, args.budget, args.spacing)
    elif args.mode == "attempts":
        attempts(args.graphs, args.attempts, args.runs)
    else:
        table(args)


if __name__ == "__main__":
    sys.exit(main())
