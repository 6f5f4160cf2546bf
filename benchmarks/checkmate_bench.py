"""Checkmate MILP (per backend) and LP rounding on the paper graphs at 90 % / 80 % of the input-order peak.

Usage: python benchmarks/checkmate_bench.py [--graphs a.json,b.json] [--backends highs,cpsat,gurobi]
       [--fractions 0.9,0.8] [--time-limit 600] [--workers 2] [--out results.json]

Prints one row per (graph, budget, method) next to the Checkmate rows of moccasin_table3.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

from remat_models.backends import SolveLimits
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.errors import RematError
from remat_models.formulations.checkmate.rounding import lp_rounding
from remat_models.formulations.solving import solve_model
from remat_models.io import read_graph

SHARED = Path(__file__).resolve().parents[2] / "shared"
GRAPHS = "vgg16_train.json,cm1_fcn8_vgg_train.json,rl_g1_n100.json"


def published(file: str) -> list[dict[str, str]]:
    """Checkmate rows of Moccasin's Table 3 for one graph file."""
    with open(SHARED / "reference" / "moccasin_table3.csv") as handle:
        return [r for r in csv.DictReader(handle) if r["file"] == file and r["method"].startswith("checkmate")]


def run_exact(graph, budget, backend, limits) -> dict:
    started = time.perf_counter()
    outcome = solve_model(graph, budget, "checkmate", backend, limits=limits)
    row = {"method": f"milp/{backend}", "status": outcome.status.value, "wall_s": time.perf_counter() - started}
    row.update(objective=outcome.objective, bound=outcome.bound, build_s=outcome.build_time)
    row["time_to_best_s"] = outcome.trajectory[-1][0] if outcome.trajectory else None
    if outcome.schedule is not None:
        sim = simulate(graph, outcome.schedule)
        row.update(tdi=sim.tdi, peak=sim.peak)
    return row


def run_rounding(graph, budget, limits) -> dict:
    started = time.perf_counter()
    outcome = lp_rounding(graph, budget, allowance=0.1, limits=limits)
    fits = outcome.simulation is not None and outcome.simulation.fits(budget)
    row = {"method": "lp-rounding(eps=0.1)", "status": "within_budget" if fits else "over_budget"}
    row.update(wall_s=time.perf_counter() - started, lp_bound=outcome.bound, candidates=outcome.details["candidates"])
    if outcome.simulation is not None:
        row.update(tdi=outcome.simulation.tdi, peak=outcome.simulation.peak)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default=GRAPHS)
    parser.add_argument("--backends", default="highs,cpsat")
    parser.add_argument("--fractions", default="0.9,0.8")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-rounding", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    limits = SolveLimits(time_limit=args.time_limit, workers=args.workers)
    rows = []
    for file in args.graphs.split(","):
        graph = read_graph(SHARED / "graphs" / file)
        peak = input_order_peak(graph)
        for fraction in (float(f) for f in args.fractions.split(",")):
            budget = int(fraction * peak)
            methods = [b for b in args.backends.split(",") if b] + ([] if args.no_rounding else ["rounding"])
            for method in methods:
                try:
                    if method == "rounding":
                        result = run_rounding(graph, budget, limits)
                    else:
                        result = run_exact(graph, budget, method, limits)
                except RematError as error:  # e.g. a size-limited Gurobi license
                    result = {"method": method, "status": "error", "error": str(error)}
                row = {"graph": file, "fraction": fraction, "budget": budget, **result}
                rows.append(row)
                print(json.dumps(row), flush=True)
        for ref in published(file):
            print("published:", json.dumps(ref), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
