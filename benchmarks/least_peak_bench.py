"""The least peak the ``least-peak`` search reaches in 10 s against each baseline's least peak, on the zoo graphs.

    nice -n 5 .venv/bin/python benchmarks/least_peak_bench.py --time-limit 10
    nice -n 5 .venv/bin/python benchmarks/least_peak_bench.py --models "" --files /work/shared/graphs/rl_g3_n500.json

Per graph: the least peak of each baseline (its lowest-peak schedule: each run at budget 0), of FastSA with
the peak as objective (``--fastsa`` seconds, 0 to skip) and of least-peak in ``--time-limit`` seconds, as % of
the input-order peak (the graph's lower bound beside), TDI and seconds; then the warm start of an exact solve
(``initial_schedule(graph, budget, "auto", time_limit=10)``) at a budget 0.1 % of the input-order peak above
the least peak found: whether it fits and how long it took; then ``plan(..., "auto", time_limit=10)`` at that
budget (fits or over, TDI, the member chosen, wall seconds). A markdown table on stdout.

With ``--above`` (issue #31: every budget above the least peak fits within 10 s) a second table instead: per
graph the least peak found in ``--time-limit`` seconds (% of the input-order peak, seconds), then ``plan(...,
"auto", time_limit=--auto-limit)`` at each budget of ``--above`` (``+0.1``: that many points above the least
peak; ``20``: 20 % of the input-order peak; budgets at or below the least peak are skipped): fits or over, TDI,
wall seconds; with ``--cli`` also ``remat solve GRAPH -b BUDGET --time-limit LIMIT`` (method auto) in a
process of its own, timed from its start to its exit. The load average is printed before each row:

    nice -n 5 .venv/bin/python benchmarks/least_peak_bench.py --above +0.1,+0.5,+1,20,25 --cli
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, SimulationResult, input_order_peak, simulate
from remat_models.errors import RematError
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.fastsa import fastsa
from remat_models.heuristics.least_peak import least_peak_search
from remat_models.heuristics.saveset import saveset
from remat_models.io import read_graph, read_schedule
from remat_models.planning.plan import plan
from remat_models.planning.warm_start import initial_schedule

ZOO = Path(__file__).resolve().parent / "zoo"
MODELS = ("gpt2", "bert", "llama", "vit", "resnet")
RIVALS: dict[str, Callable[[Graph, int], Schedule]] = {
    "checkpoint-all": BASELINES["checkpoint-all"],
    "chen-sqrtn": BASELINES["chen-sqrtn"],
    "chen-greedy": BASELINES["chen-greedy"],
    "griewank": BASELINES["griewank"],
    "knapsack": BASELINES["knapsack"],
    "saveset": saveset,
}


def timed(run: Callable[[], Schedule], graph: Graph) -> tuple[int, float, float] | None:
    """(peak, TDI, seconds) of the schedule ``run`` returns; None if it refuses the graph."""
    started = time.perf_counter()
    try:
        schedule = run()
    except RematError:
        return None
    seconds = time.perf_counter() - started
    result = simulate(graph, schedule)
    return result.peak, result.tdi, seconds


def row(path: Path, time_limit: float, fastsa_seconds: float) -> list[str]:
    """One table row: the graph, its bound, each method's least peak, least-peak's and the warm start's."""
    graph = read_graph(path)
    reference = input_order_peak(graph)

    def share(peak: int) -> str:
        return f"{100 * peak / reference:.1f}"

    cells = [f"{path.stem.removeprefix('zoo_')} ({graph.n})", share(graph.lower_bound)]
    for rival in RIVALS.values():
        found = timed(lambda rival=rival: rival(graph, 0), graph)  # type: ignore[misc]
        cells.append("-" if found is None else share(found[0]))
    if fastsa_seconds > 0:
        found = timed(lambda: fastsa(graph, 0, time_limit=fastsa_seconds, objective="memory").schedule, graph)
        cells.append("-" if found is None else f"{share(found[0])} (TDI {found[1]:.0f})")
    least = least_peak_search(graph, time_limit=time_limit)
    tdi = simulate(graph, least.schedule).tdi
    cells.append(f"**{share(least.peak)}** (TDI {tdi:.0f}, {least.wall_time:.1f} s, from {least.start})")
    budget = least.peak + reference // 1000
    started = time.perf_counter()
    start = initial_schedule(graph, budget, "auto", time_limit=10)
    seconds = time.perf_counter() - started
    fits = start is not None and simulate(graph, start.schedule).peak <= budget
    cells.append(f"{share(budget)}: {'fits' if fits else 'none'} ({seconds:.1f} s)")
    started = time.perf_counter()
    planned = plan(graph, budget, "auto", time_limit=10, allow_over_budget=True)
    seconds = time.perf_counter() - started
    result = simulate(graph, planned.schedule)
    fits = result.peak <= budget
    chosen = planned.details.get("chosen", "?")
    cells.append(f"{'fits' if fits else 'over'}: TDI {result.tdi:.1f}, {chosen} ({seconds:.1f} s)")
    return cells


def above_budgets(spec: str, least: float) -> list[tuple[str, float]]:
    """(label, % of the input-order peak) of each budget of ``spec`` above ``least`` (% as well)."""
    budgets = []
    for item in spec.split(","):
        share = least + float(item) if item.startswith("+") else float(item)
        if share > least:
            budgets.append((item if item.startswith("+") else f"{item} %", share))
    return budgets


def solve_cli(graph: Graph, path: Path, budget: int, time_limit: float) -> tuple[SimulationResult | None, float]:
    """(simulation or None, wall seconds) of ``remat solve PATH -b BUDGET --time-limit LIMIT`` (method auto)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "schedule.json"
        command = [sys.executable, "-m", "remat_models.cli.app", "solve", str(path), "-b", str(budget)]
        command += ["--time-limit", f"{time_limit:g}", "-o", str(out)]
        started = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        seconds = time.perf_counter() - started
        return (simulate(graph, read_schedule(out, graph)) if out.exists() else None), seconds


def above_row(path: Path, time_limit: float, auto_limit: float, spec: str, cli: bool) -> list[str]:
    """One row of the ``--above`` table: the least peak, then ``auto`` at each budget above it."""
    graph = read_graph(path)
    reference = input_order_peak(graph)
    least = least_peak_search(graph, time_limit=time_limit)
    share = 100 * least.peak / reference
    cells = [f"{path.stem.removeprefix('zoo_')} ({graph.n})", f"{share:.2f} ({least.wall_time:.1f} s)"]
    for label, percent in above_budgets(spec, share):
        budget = int(reference * percent / 100)
        started = time.perf_counter()
        planned = plan(graph, budget, "auto", time_limit=auto_limit, allow_over_budget=True)
        seconds = time.perf_counter() - started
        result = simulate(graph, planned.schedule)
        cell = (
            f"{label} ({percent:.2f}): {'fits' if result.peak <= budget else 'over'}, {result.tdi:.1f}, {seconds:.1f} s"
        )
        if cli:
            solved, wall = solve_cli(graph, path, budget, auto_limit)
            fits = "none" if solved is None else ("fits" if solved.peak <= budget else "over")
            cell += f"; CLI {fits}, {0.0 if solved is None else solved.tdi:.1f}, {wall:.1f} s"
        cells.append(cell)
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="zoo models, comma-separated")
    parser.add_argument("--files", default="", help="more graph files, comma-separated")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds for least-peak")
    parser.add_argument("--fastsa", type=float, default=10.0, help="seconds for FastSA (peak objective; 0: skip)")
    parser.add_argument("--above", default="", help="budgets for auto: +points above the least peak, or %%")
    parser.add_argument("--auto-limit", type=float, default=10.0, help="seconds for auto (with --above)")
    parser.add_argument("--cli", action="store_true", help="with --above: also remat solve in its own process")
    args = parser.parse_args()
    paths = [ZOO / f"zoo_{model}.json" for model in args.models.split(",") if model]
    paths += [Path(file) for file in args.files.split(",") if file]
    if args.above:
        limits = f"least peak {args.time_limit:g} s (%, s) | auto at {args.auto_limit:g} s"
        print(f"| model (nodes) | {limits}: budget (%), fits, TDI %, wall |")
        print("|---|---:|---|")
        for path in paths:
            load = os.getloadavg()[0]
            cells = above_row(path, args.time_limit, args.auto_limit, args.above, args.cli)
            print(f"| {cells[0]} | {cells[1]} | {'; '.join(cells[2:])} (load {load:.1f}) |", flush=True)
        return
    header = ["model (nodes)", "lower bound", *RIVALS]
    if args.fastsa > 0:
        header.append(f"FastSA {args.fastsa:g} s")
    header += [f"least-peak {args.time_limit:g} s", "warm start just above", "auto just above, 10 s"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if k == 0 else "---:" for k in range(len(header))) + "|")
    for path in paths:
        print("| " + " | ".join(row(path, args.time_limit, args.fastsa)) + " |", flush=True)


if __name__ == "__main__":
    main()
