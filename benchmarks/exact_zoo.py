"""Exact paths against the heuristics on the zoo graphs (issue #31): TDI % per method at 50 % and 25 %, one run each.

Heuristics: knapsack, chen-greedy, saveset, rotor (milliseconds to seconds) and FastSA (the time limit). Exact paths,
each
with the same time limit covering its warm start: ``-f moccasin`` and ``-f checkmate`` (windows of a start above
their ``window_nodes``), ``-f hilp``, and ``auto``. Every schedule is simulated here again; "over" marks one over
the budget, "none" no schedule.

  python benchmarks/exact_zoo.py --time-limit 60 > table.md      # about 55 min on the 2-core machine
  python benchmarks/exact_zoo.py --graphs gpt2 --budgets 50% --methods moccasin,auto --time-limit 30
  python benchmarks/exact_zoo.py --graphs qwen2.json,distilbert.json --budgets 50%,30%   # graph files (held out)
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from remat_models.core.budget import parse_budget
from remat_models.core.schedule import simulate
from remat_models.errors import RematError
from remat_models.io import read_graph
from remat_models.planning.plan import plan

ZOO = Path(__file__).parent / "zoo"
HEURISTICS = ("knapsack", "chen-greedy", "saveset", "rotor", "fastsa")
EXACT = ("moccasin", "checkmate", "hilp", "auto")


def run(graph_path: Path, budget_text: str, method: str, time_limit: float) -> tuple[str, float]:
    """One method's TDI cell (``"none"``, ``"over"`` or the TDI) and its wall time."""
    graph = read_graph(graph_path)
    budget = parse_budget(budget_text, graph)
    started = time.perf_counter()
    try:
        if method in EXACT and method != "auto":
            result = plan(graph, budget, formulation=method, time_limit=time_limit, allow_over_budget=True)
        else:
            timed = method in ("fastsa", "auto")
            result = plan(graph, budget, method, time_limit=time_limit if timed else None, allow_over_budget=True)
    except RematError as error:
        logging.warning("%s %s %s: %s", graph_path.stem, budget_text, method, error)
        return "none", time.perf_counter() - started
    seconds = time.perf_counter() - started
    if result.schedule is None:
        return "none", seconds
    checked = simulate(graph, result.schedule)
    return (f"{checked.tdi:.3f}" if checked.peak <= budget else "over"), seconds


def main() -> None:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="gpt2,bert,llama,vit,resnet", help="zoo names or graph JSON files")
    parser.add_argument("--budgets", default="50%,25%")
    parser.add_argument("--methods", default=",".join(HEURISTICS + EXACT))
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    methods = args.methods.split(",")
    print("| graph (nodes) | budget | " + " | ".join(methods) + " | slowest exact s |")
    print("|---|---|" + "---:|" * (len(methods) + 1))
    for name in args.graphs.split(","):
        path = Path(name) if name.endswith(".json") else ZOO / f"zoo_{name}.json"
        name, nodes = path.stem.removeprefix("zoo_"), read_graph(path).n
        for budget in args.budgets.split(","):
            cells, slowest = [], 0.0
            for method in methods:
                cell, seconds = run(path, budget, method, args.time_limit)
                cells.append(cell)
                if method in EXACT:
                    slowest = max(slowest, seconds)
            print(f"| {name} ({nodes}) | {budget} | " + " | ".join(cells) + f" | {slowest:.1f} |", flush=True)


if __name__ == "__main__":
    main()
