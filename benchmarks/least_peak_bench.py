"""The least peak the ``least-peak`` search reaches in 10 s against each baseline's least peak, on the zoo graphs.

    nice -n 5 .venv/bin/python benchmarks/least_peak_bench.py --time-limit 10
    nice -n 5 .venv/bin/python benchmarks/least_peak_bench.py --models "" --files /work/shared/graphs/rl_g3_n500.json

Per graph: the least peak of each baseline (its lowest-peak schedule: each run at budget 0), of FastSA with
the peak as objective (``--fastsa`` seconds, 0 to skip) and of least-peak in ``--time-limit`` seconds, as % of
the input-order peak (the graph's lower bound beside), TDI and seconds; then the warm start of an exact solve
(``initial_schedule(graph, budget, "auto", time_limit=10)``) at a budget 0.1 % of the input-order peak above
the least peak found: whether it fits and how long it took; then ``plan(..., "auto", time_limit=10)`` at that
budget (fits or over, TDI, the member chosen, wall seconds). A markdown table on stdout.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, input_order_peak, simulate
from remat_models.errors import RematError
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.fastsa import fastsa
from remat_models.heuristics.least_peak import least_peak_search
from remat_models.heuristics.saveset import saveset
from remat_models.io import read_graph
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="zoo models, comma-separated")
    parser.add_argument("--files", default="", help="more graph files, comma-separated")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds for least-peak")
    parser.add_argument("--fastsa", type=float, default=10.0, help="seconds for FastSA (peak objective; 0: skip)")
    args = parser.parse_args()
    header = ["model (nodes)", "lower bound", *RIVALS]
    if args.fastsa > 0:
        header.append(f"FastSA {args.fastsa:g} s")
    header += [f"least-peak {args.time_limit:g} s", "warm start just above", "auto just above, 10 s"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if k == 0 else "---:" for k in range(len(header))) + "|")
    paths = [ZOO / f"zoo_{model}.json" for model in args.models.split(",") if model]
    paths += [Path(file) for file in args.files.split(",") if file]
    for path in paths:
        print("| " + " | ".join(row(path, args.time_limit, args.fastsa)) + " |", flush=True)


if __name__ == "__main__":
    main()
