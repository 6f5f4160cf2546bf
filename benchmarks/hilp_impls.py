"""Hierarchical H-ILP with ``leaf=monet`` choosing implementations per cluster, against the default view (docs/hilp.md).

Graphs: the example training graphs with ``monet_table.py``'s synthetic implementation table (in-place and fast
algorithm variants, no aux values). Per budget (fractions of the input-order peak), all on HiGHS, re-simulated on
the graph with its table:

- ``impls``: ``plan(..., "hilp", leaf=monet, partition=true)``: MONeT's leaf solves choose implementations;
- ``default-view``: what ``leaf=monet`` ran before: the hierarchy on the default view, then the greedy chooser;
- ``monet``: flat MONeT on the whole graph (the reference; its status says whether it is proven).

    python benchmarks/hilp_impls.py [--graphs chain32,unet,transformer2] [--budget 0.9,0.8,0.7] [--time-limit 30]
"""

from __future__ import annotations

import argparse
import time

from monet_table import GRAPHS, synthetic_impls

from remat_models.core.schedule import Compute, input_order_peak, simulate
from remat_models.io import read_graph
from remat_models.planning.default_view import plan_default_view
from remat_models.planning.plan import plan

HILP = {"partition": True, "leaf": "monet"}


def _row(graph, budget: int, method: str, limit: float) -> str:
    started = time.perf_counter()
    if method == "impls":
        result = plan(graph, budget, "hilp", options=HILP, time_limit=limit, allow_over_budget=True)
    elif method == "default-view":

        def plan_view(view):
            return plan(view, budget, "hilp", options=HILP, time_limit=limit, allow_over_budget=True)

        result = plan_default_view(graph, budget, plan_view, greedy=True, allow_over_budget=True)
    else:
        result = plan(graph, budget, "monet", time_limit=limit, allow_over_budget=True)
    wall = time.perf_counter() - started
    if result.schedule is None:
        return f"{method}: no schedule ({wall:.0f} s)"
    sim = simulate(graph, result.schedule)
    other = sum(1 for s in result.schedule.steps if isinstance(s, Compute) and s.impl)
    status = f", {result.outcome.status.value}" if method == "monet" and result.outcome is not None else ""
    fits = "" if sim.fits(budget) else " OVER"
    return f"{method}: TDI {sim.tdi:.2f} % ({wall:.0f} s{status}, {other} non-default steps){fits}"


def main() -> None:
    """Print one line per graph, budget and method."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", default="chain32,unet,transformer2")
    parser.add_argument("--budget", default="0.9,0.8,0.7")
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--methods", default="impls,default-view,monet")
    args = parser.parse_args()
    for name in args.graphs.split(","):
        graph = synthetic_impls(read_graph(GRAPHS[name]))
        for fraction in (float(f) for f in args.budget.split(",")):
            budget = int(fraction * input_order_peak(graph))
            for method in args.methods.split(","):
                print(f"{name} {fraction:.0%} {_row(graph, budget, method, args.time_limit)}", flush=True)


if __name__ == "__main__":
    main()
