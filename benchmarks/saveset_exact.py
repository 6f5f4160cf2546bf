"""The save-set heuristic against the exact save-set formulation on HiGHS and CP-SAT, across each graph's range.

    nice -n 5 .venv/bin/python benchmarks/saveset_exact.py --graphs transformer:1,transformer:2 --time-limit 60

For each graph, budgets at shares of the span the heuristic reaches (its least peak .. saving everything);
each cell: the plan's simulated total cost and peak (bytes over the budget flagged), the solver's status and
seconds. Both solvers start from the heuristic's schedule (``init``); a solve that returns nothing is "-".
"""

from __future__ import annotations

import argparse
import time

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph
from remat_models.core.schedule import simulate
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.saveset import saveset_range, saveset_schedule, saveset_search
from remat_models.io.generators import linear_chain, transformer

GENERATORS = {"transformer": transformer, "linear_chain": linear_chain}
SHARES = (0.0, 0.25, 0.5, 0.75)


def graph_of(spec: str) -> Graph:
    """``NAME:SIZE`` of a generator (``transformer:2`` is two layers)."""
    name, _, size = spec.partition(":")
    return GENERATORS[name](int(size))


def cell(graph: Graph, budget: int, backend: str, init: object, time_limit: float) -> str:
    started = time.perf_counter()
    outcome = solve_model(graph, budget, "saveset-exact", backend, init=init, limits=SolveLimits(time_limit=time_limit))
    seconds = time.perf_counter() - started
    if outcome.schedule is None:
        return f"- ({outcome.status.value}, {seconds:.1f} s)"
    result = simulate(graph, outcome.schedule)
    over = f", {result.peak - budget:+,} B over" if result.peak > budget else ""
    return f"{result.total_cost:,.0f}{over} ({outcome.status.value}, {seconds:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="transformer:1,transformer:2")
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    print("| graph | share | budget (B) | heuristic cost | exact, highs | exact, cpsat |")
    print("|---|---|---|---|---|---|")
    for spec in args.graphs.split(","):
        graph = graph_of(spec)
        least, most = saveset_range(graph)
        for share in SHARES:
            budget = least + int(share * (most - least))
            found = saveset_search(graph, budget)
            init = saveset_schedule(graph, found.saved)
            highs, cpsat = (cell(graph, budget, b, init, args.time_limit) for b in ("highs", "cpsat"))
            print(f"| {graph.name} | {share} | {budget:,} | {found.cost:,.0f} | {highs} | {cpsat} |")


if __name__ == "__main__":
    main()
