"""Benchmark simulate() and eager_frees() on a long schedule of rl_g4_n1000 (the input order repeated).

Usage: python benchmarks/simulate_bench.py [--graphs DIR] [--passes K] [--repeats R]
Prints medians over R runs; no timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from remat_models.core.schedule import eager_frees, simulate
from remat_models.io import read_graph

DEFAULT_GRAPHS = Path(os.environ.get("REMAT_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "graphs"


def _median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", type=Path, default=DEFAULT_GRAPHS)
    parser.add_argument("--passes", type=int, default=100, help="how many times the input order is repeated")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    graph = read_graph(args.graphs / "rl_g4_n1000.json")
    sequence = np.tile(graph.order, args.passes)
    schedule = eager_frees(graph, sequence)
    result = simulate(graph, schedule)
    eager_s = _median_seconds(lambda: eager_frees(graph, sequence), args.repeats)
    simulate_s = _median_seconds(lambda: simulate(graph, schedule), args.repeats)
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(f"graph rl_g4_n1000: n={graph.n} m={graph.m}; schedule: {args.passes} passes, {len(schedule):,} steps")
    print(f"peak {result.peak:,}, TDI {result.tdi:.1f} %")
    print(f"eager_frees: median {eager_s * 1e3:.1f} ms ({len(sequence) / eager_s / 1e6:.2f} M computes/s)")
    print(f"simulate:    median {simulate_s * 1e3:.1f} ms ({len(schedule) / simulate_s / 1e6:.2f} M steps/s)")


if __name__ == "__main__":
    main()
