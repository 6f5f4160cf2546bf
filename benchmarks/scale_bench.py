"""Time and peak RSS of the heuristics against graph size (chains and generated transformers).

Usage:
  python benchmarks/scale_bench.py [--graphs chain:1000,chain:10000,...] [--methods chen-greedy,...]
                                   [--budget 0.5] [--repeats 3] [--timeout 300]

A graph is ``chain:N`` (Checkmate's training chain with N nodes, i.e. ``linear_chain(N // 2)``) or
``transformer:L`` (the generator's decoder with L layers, about 24 L nodes), or a graph JSON path.
Each (graph, method) runs in its own process (so peak RSS is that run's): the method is run once to
warm up (numba compilation / cache load), then ``--repeats`` times; the median wall time is printed,
with the peak RSS of the process, the schedule's peak against the budget and its TDI. The last column
is the time ratio to the previous, smaller graph of the same family, next to the node ratio: the
scaling of one run. Methods: the registry's heuristics (``chen-greedy``, ``griewank``, ``fastsa`` ...)
and ``staged-greedy`` (Moccasin's start). No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_GRAPHS = "chain:1000,chain:10000,chain:20000,chain:200000,transformer:40,transformer:400,transformer:800"
DEFAULT_METHODS = "checkpoint-all,chen-sqrtn,chen-greedy,griewank"


def build_graph(spec: str):
    """The graph named by ``spec`` (see the module docstring)."""
    from remat_models.io import read_graph
    from remat_models.io.generators import linear_chain, transformer

    family, _, size = spec.partition(":")
    if family == "chain":
        return linear_chain(int(size) // 2)
    if family == "transformer":
        return transformer(int(size))
    return read_graph(Path(spec))


def run_method(method: str, graph, budget: int, time_limit: float):
    """Schedule of ``method`` on ``graph`` at ``budget``."""
    if method == "staged-greedy":
        from remat_models.heuristics.staged_greedy import staged_greedy

        return staged_greedy(graph, budget)
    from remat_models.heuristics.registry import HEURISTICS, run_heuristic

    limit = time_limit if HEURISTICS[method].configurable else None
    return run_heuristic(method, graph, budget, time_limit=limit)[0]


def child(spec: str, method: str, fraction: float, repeats: int, time_limit: float) -> dict:
    """Measure one (graph, method) in this process."""
    from remat_models.core.schedule import input_order_peak, simulate
    from remat_models.errors import GraphError

    graph = build_graph(spec)
    budget = int(fraction * input_order_peak(graph))
    row = {"graph": spec, "n": graph.n, "method": method, "budget": budget}
    try:
        run_method(method, graph, budget, time_limit)  # warm-up: numba compilation or cache load
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            schedule = run_method(method, graph, budget, time_limit)
            times.append(time.perf_counter() - started)
    except GraphError as error:
        return {**row, "error": str(error)[:60]}
    result = simulate(graph, schedule)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {**row, "seconds": statistics.median(times), "rss": rss, "peak": result.peak, "tdi": result.tdi}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS)
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--budget", type=float, default=0.5, help="fraction of the input-order peak")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per (graph, method) process")
    parser.add_argument("--time-limit", type=float, default=10.0, help="for methods that take one (fastsa)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--child", nargs=2, metavar=("GRAPH", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.budget, args.repeats, args.time_limit)))
        return
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(f"budget {args.budget:.0%} of the input-order peak, median of {args.repeats} runs after a warm-up")
    header = f"{'graph':<18}{'n':>8} {'method':<18}{'seconds':>9}{'RSS MiB':>9}{'peak/budget':>12}{'TDI %':>8}"
    print(header + "  time ratio (node ratio)")
    rows, previous = [], {}
    for method in args.methods.split(","):
        for spec in args.graphs.split(","):
            command = [sys.executable, __file__, "--child", spec, method, "--budget", str(args.budget)]
            command += ["--repeats", str(args.repeats), "--time-limit", str(args.time_limit)]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, check=True)
                row = json.loads(done.stdout.strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                row = {"graph": spec, "n": 0, "method": method, "error": f"over {args.timeout:.0f} s"}
            except subprocess.CalledProcessError as error:
                row = {"graph": spec, "n": 0, "method": method, "error": error.stderr.strip().splitlines()[-1][:60]}
            rows.append(row)
            print(_format(row, previous))
            sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def _format(row: dict, previous: dict) -> str:
    """One table line; remembers the row as the previous one of its family and method."""
    lead = f"{row['graph']:<18}{row['n']:>8} {row['method']:<18}"
    if "error" in row:
        return lead + f"  {row['error']}"
    line = lead + f"{row['seconds']:>9.3f}{row['rss'] / 2**20:>9.0f}{row['peak'] / row['budget']:>12.3f}"
    line += f"{row['tdi']:>8.1f}"
    key = (row["graph"].partition(":")[0], row["method"])
    if key in previous:
        before = previous[key]
        line += f"  {row['seconds'] / before['seconds']:.1f}x ({row['n'] / before['n']:.1f}x)"
    previous[key] = row
    return line


if __name__ == "__main__":
    main()
