"""Moccasin (CP-SAT) on the paper's graphs at 90 % and 80 % of the input-order peak, next to Table 3.

Usage: .venv/bin/python benchmarks/moccasin_bench.py [--time-limit 60] [--workers N] [--C 2] [--order input]
       [--graphs DIR] [--only rl_g1_n100 ...] [--out results.jsonl]
Prints a Markdown table (ours next to the Moccasin rows of moccasin_table3.csv) and writes one JSON line per run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from pathlib import Path

from remat_models.core.schedule import input_order_peak
from remat_models.formulations.moccasin.formulation import solve_moccasin
from remat_models.io.files import read_graph

SHARED = Path(os.environ.get("REMAT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
GRAPHS = [
    "rl_g1_n100",
    "rl_g2_n250",
    "rl_g3_n500",
    "rl_g4_n1000",
    "cm1_fcn8_vgg_train",
    "cm2_resnet50_train",
]
FRACTIONS = (0.9, 0.8)


def reference_rows() -> dict[tuple[str, int], dict[str, str]]:
    """Moccasin rows of Table 3 keyed by (file stem, index of the budget: 0 = 90 %, 1 = 80 %)."""
    rows: dict[tuple[str, int], dict[str, str]] = {}
    seen: dict[str, int] = {}
    with open(SHARED / "reference" / "moccasin_table3.csv", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["method"] != "moccasin":
                continue
            stem = row["file"].removesuffix(".json")
            rows[stem, seen.get(stem, 0)] = row
            seen[stem] = seen.get(stem, 0) + 1
    return rows


def fmt(value: float | None, spec: str) -> str:
    """Format a number or a dash."""
    return "-" if value is None else format(value, spec)


def main() -> None:
    """Run the sweep and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--C", type=int, default=2)
    parser.add_argument("--order", choices=["input", "free"], default="input")
    parser.add_argument("--graphs", type=Path, default=SHARED / "graphs")
    parser.add_argument("--only", nargs="*", default=GRAPHS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    reference = reference_rows()
    print(f"time limit {args.time_limit:g} s, workers {args.workers}, C={args.C}, order={args.order}")
    print("| graph | M | ours TDI % | ours peak | ours time to best (s) | status | wall (s) ", end="")
    print("| paper TDI % | paper peak | paper time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for stem in args.only:
        graph = read_graph(args.graphs / f"{stem}.json")
        peak = input_order_peak(graph)
        for index, fraction in enumerate(FRACTIONS):
            budget = int(fraction * peak)
            started = time.perf_counter()
            result = solve_moccasin(
                graph, budget, C=args.C, order=args.order, time_limit=args.time_limit, workers=args.workers
            )
            wall = time.perf_counter() - started
            ref = reference.get((stem, index), {})
            print(
                f"| {stem} | {budget:,} ({fraction:.0%}) | {fmt(result.tdi, '.2f')} | {fmt(result.peak, ',')} | "
                f"{fmt(result.time_to_best, '.1f')} | {result.status.value} | {wall:.1f} | "
                f"{ref.get('tdi_percent') or '-'} | {ref.get('peak_mem') or '-'} {ref.get('budget_unit', '')} | "
                f"{ref.get('time_to_best_s') or '-'} |",
                flush=True,
            )
            if args.out is not None:
                record = {"graph": stem, "fraction": fraction, **result.summary(), "bench_wall_s": wall}
                with open(args.out, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
