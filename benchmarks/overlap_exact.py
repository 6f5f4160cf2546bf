"""Exact overlap-mode offloading (``paging-overlap``) vs FastSA with fetch units, three-way and serial paging.

Usage: python benchmarks/overlap_exact.py [--time-limit 60] [--heuristic-time 5] [--backend highs] [--out rows.jsonl]

Graphs: linear_chain(4), linear_chain(6) and a one-layer transformer (64 tokens, hidden 64), each at two
budgets (lower bound + a fraction of the way to the input-order peak) and two links (a transfer of an average
value costs ``speed`` times an average compute). Every schedule is simulated in overlap mode; "serial" is the
serial paging optimum (its own cost: transfers added), whose schedule warm-starts the exact solve. Prints a
markdown table (docs/offload.md).
"""

from __future__ import annotations

import argparse
import json
import time

from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.core.transfer import TransferModel
from remat_models.extensions.overlap_paging import OverlapPaging
from remat_models.extensions.paging import Paging
from remat_models.heuristics.fastsa import fastsa
from remat_models.heuristics.three_way import three_way
from remat_models.io.generators import linear_chain, transformer
from remat_models.planning.plan import plan

GRAPHS = {
    "chain4": lambda: linear_chain(4),
    "chain6": lambda: linear_chain(6),
    "transformer1": lambda: transformer(1, batch=1, seq=64, hidden=64, heads=2, vocab=256),
}
FRACTIONS = (0.5, 0.25)  # of the way from the graph's lower bound to its input-order peak
SPEEDS = (1.0, 4.0)  # transfer of an average value / an average compute


def run(graph: Graph, fraction: float, speed: float, args: argparse.Namespace) -> dict:
    """One cell of the table: the four methods on one graph, budget and link."""
    budget = graph.lower_bound + int(fraction * (input_order_peak(graph) - graph.lower_bound))
    bw = float(graph.mem.mean()) / (speed * float(graph.cost.mean()))
    overlap = TransferModel(out_bw=bw, in_bw=bw, mode="overlap")
    serial = TransferModel(out_bw=bw, in_bw=bw)
    row: dict = {"graph": graph.name, "n": graph.n, "fraction": fraction, "budget": budget, "speed": speed}
    ser = plan(graph, budget, formulation="checkmate", backend=args.backend, extensions=[Paging(serial)],
               time_limit=args.time_limit, allow_over_budget=True)  # fmt: skip
    row["serial"] = ser.simulation.total_cost
    row["serial_in_overlap"] = simulate(graph, ser.schedule, overlap).total_cost
    started = time.perf_counter()  # warm-started from the serial optimum's schedule (its transfers sit at stage starts)
    exact = plan(graph, budget, formulation="checkmate", backend=args.backend, extensions=[OverlapPaging(overlap)],
                 time_limit=args.time_limit, allow_over_budget=True, init=ser.schedule)  # fmt: skip
    row["exact_s"] = time.perf_counter() - started
    row["exact"] = exact.simulation.total_cost
    row["exact_objective"] = exact.details.get("objective")
    row["exact_status"] = str(exact.solver_status.value if exact.solver_status else exact.status.value)
    row["exact_fits"] = exact.simulation.peak <= budget
    found = fastsa(graph, budget, seed=0, time_limit=args.heuristic_time, transfer=overlap).schedule
    sim = simulate(graph, found, overlap)
    row["fastsa"] = sim.total_cost if sim.peak <= budget else None
    way = three_way(graph, budget, overlap, time_limit=args.heuristic_time, inits=[found])
    row["three_way"] = way.simulation.total_cost if way.simulation.peak <= budget else None
    return row


def table(rows: list[dict]) -> str:
    """The markdown table of the rows."""
    lines = [
        "| graph | n | budget | speed | exact overlap (objective, status, s) | FastSA+fetch | three-way | serial |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:

        def cost(value: float | None) -> str:
            return "over budget" if value is None else f"{value:.4g}"

        exact = f"{r['exact']:.4g} ({r['exact_objective']:.4g}, {r['exact_status']}, {r['exact_s']:.1f})"
        lines.append(
            f"| {r['graph']} | {r['n']} | {r['fraction']:.0%} ({r['budget']}) | {r['speed']:g} | {exact} | "
            f"{cost(r['fastsa'])} | {cost(r['three_way'])} | {r['serial']:.4g} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per exact solve")
    parser.add_argument("--heuristic-time", type=float, default=5.0, help="seconds for FastSA and for three-way")
    parser.add_argument("--backend", default="highs")
    parser.add_argument("--out", default=None, help="write the rows as JSON lines")
    args = parser.parse_args()
    rows = []
    for make in GRAPHS.values():
        graph = make()
        for fraction in FRACTIONS:
            for speed in SPEEDS:
                rows.append(run(graph, fraction, speed, args))
                print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in rows)
    print(table(rows))


if __name__ == "__main__":
    main()
