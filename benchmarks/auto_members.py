"""``auto`` on the zoo graphs with each member's report: which member won, and what each one found.

Usage: python benchmarks/auto_members.py [--cases bert@0.5,vit@0.25] [--time-limit 60] [--out rows.jsonl]
                                         [-O hilp_nodes=100]

A case is ``MODEL@FRACTION`` (``benchmarks/zoo/zoo_MODEL.json``, the budget a fraction of its input-order
peak). One ``plan(graph, budget, "auto")`` call per case; the schedule is re-simulated. Prints one line per
case: TDI %, the member chosen, the wall time, then each member's time (s) and TDI % (``over`` when its
schedule exceeds the budget). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from remat_models.core.schedule import input_order_peak, simulate
from remat_models.io import read_graph
from remat_models.planning.plan import plan

ZOO = Path(__file__).parent / "zoo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="bert@0.5,gpt2@0.5,llama@0.5,resnet@0.5,vit@0.5,vit@0.25")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=None, help="also append the rows as JSON lines")
    parser.add_argument("-O", dest="options", action="append", default=[], help="an auto option, key=value")
    args = parser.parse_args()
    options = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.options)}
    for case in args.cases.split(","):
        model, fraction = case.split("@")
        graph = read_graph(ZOO / f"zoo_{model}.json")
        budget = int(input_order_peak(graph) * float(fraction))
        started = time.perf_counter()
        result = plan(graph, budget, "auto", time_limit=args.time_limit, allow_over_budget=True, options=options)
        wall, sim = time.perf_counter() - started, simulate(graph, result.schedule)
        base = sim.total_cost / (1 + sim.tdi / 100)  # the graph's compute cost: TDI of a member's cost
        members = [
            (m["method"], m["seconds"], None if m["peak"] is None else m["total_cost"] / base * 100 - 100, m["peak"])
            for m in result.details["portfolio"]
        ]
        listed = ", ".join(
            f"{name} {seconds or 0:.1f} s " + ("none" if tdi is None else "over" if peak > budget else f"{tdi:.4f}")
            for name, seconds, tdi, peak in members
        )
        print(f"{case} n={graph.n}: {sim.tdi:.4f} % ({result.details['chosen']}), {wall:.1f} s; {listed}", flush=True)
        if args.out is not None:
            row = {"case": case, "n": graph.n, "tdi": sim.tdi, "fits": sim.peak <= budget, "wall_s": wall}
            with args.out.open("a") as f:
                f.write(json.dumps({**row, "chosen": result.details["chosen"], "members": members}) + "\n")


if __name__ == "__main__":
    main()
