"""Recompute-only vs paging (the ``paging`` plug-in) on the shared graphs at fractions of the input-order peak.

Usage: python benchmarks/offload_table.py [--graphs cm1_fcn8_vgg_train,cm2_resnet50_train,vgg16_train]
       [--fractions 0.7,0.6,0.5] [--speeds 0.1,1.0] [--formulation moccasin] [--backend cpsat]
       [--time-limit 120] [--init HEURISTIC] [--out rows.jsonl]

A speed s sets both bandwidths to ``total output bytes / (s * total compute cost)``: copying every value
out (or in) once costs s times the graph's total compute. Prints a markdown table (docs/offload.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from remat_models.core.schedule import input_order_peak
from remat_models.core.transfer import TransferModel
from remat_models.errors import BudgetInfeasibleError, RematError
from remat_models.extensions import Paging
from remat_models.io import read_graph
from remat_models.planning.plan import plan

SHARED = Path(__file__).resolve().parents[2] / "shared" / "graphs"


def run(graph, budget: int, args, speed: float | None) -> dict:
    """One solve: recompute-only (speed None) or with paging at ``speed``."""
    row: dict = {"graph": graph.name, "budget": budget, "speed": speed}
    extensions = []
    if speed is not None:
        bw = float(graph.mem.sum()) / (speed * float(graph.cost.sum()))
        row["bw"] = bw
        extensions = [Paging(TransferModel(out_bw=bw, in_bw=bw))]
    started = time.perf_counter()
    try:
        result = plan(
            graph, budget, formulation=args.formulation, backend=args.backend, extensions=extensions,
            time_limit=args.time_limit, init=args.init,
        )
    except BudgetInfeasibleError as error:
        row.update(status="below lower bound", lower_bound=error.lower_bound)
        return row
    except RematError as error:  # e.g. no schedule within the budget
        row.update(status=type(error).__name__, error=str(error))
        return row
    sim = result.simulation
    row.update(status=result.details.get("solver_status", result.status.value), wall_s=time.perf_counter() - started)
    if sim is not None:
        row.update(
            fits=sim.peak <= budget, peak=sim.peak, tdi=sim.tdi, recomputations=sim.recomputations,
            transfer_share=100 * sim.transfer_cost / float(graph.cost.sum()), offloads=sim.offloads,
            prefetches=sim.prefetches, host_peak=sim.host_peak,
        )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", default="cm1_fcn8_vgg_train,cm2_resnet50_train,vgg16_train")
    parser.add_argument("--fractions", default="0.7,0.6,0.5")
    parser.add_argument("--speeds", default="0.1,1.0")
    parser.add_argument("--formulation", default="moccasin")
    parser.add_argument("--backend", default="cpsat")
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--init", default=None, help="warm start from this heuristic (e.g. chen-greedy)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    speeds = [float(s) for s in args.speeds.split(",")]
    print("| graph | budget | plan | status | TDI % | transfers % of compute | offloads / prefetches | host peak | "
          "peak | time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.graphs.split(","):
        graph = read_graph(SHARED / f"{name}.json")
        reference = input_order_peak(graph)
        for fraction in (float(f) for f in args.fractions.split(",")):
            budget = int(fraction * reference)
            for speed in [None, *speeds]:
                row = run(graph, budget, args, speed)
                if args.out is not None:
                    with args.out.open("a") as handle:
                        handle.write(json.dumps(row) + "\n")
                label = "recompute only" if speed is None else f"paging, all values once = {speed:g} x compute"
                if "peak" not in row:
                    dashes = " - |" * 6
                    print(f"| {name} | {fraction:.0%} | {label} | {row['status']} |{dashes}", flush=True)
                    continue
                gib = 2**30
                print(
                    f"| {name} | {fraction:.0%} | {label} | {row['status']}{'' if row['fits'] else ' (over)'} | "
                    f"{row['tdi']:.2f} | {row['transfer_share']:.2f} | {row['offloads']} / {row['prefetches']} | "
                    f"{row['host_peak'] / gib:.2f} GiB | {row['peak'] / gib:.2f} GiB | {row['wall_s']:.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
