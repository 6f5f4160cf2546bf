"""Fingerprint the schedules of every deterministic method, to compare two versions of this package.

    python benchmarks/behaviour_check.py -o new.jsonl            # this checkout
    PYTHONPATH=/path/to/other/checkout python benchmarks/behaviour_check.py -o old.jsonl
    python benchmarks/behaviour_check.py --diff old.jsonl new.jsonl

Each row: graph, budget, method, status, peak, total cost and a hash of the schedule's steps. Methods run where
their result does not depend on timing: the baselines, FastSA bounded by iterations (not time), and exact
solves on graphs they finish well within the limit (single-threaded). Only the public paths are used
(``remat_models.planner``, ``remat_models.budget``, ``remat_models.io``), which every version has.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("REMAT_SHARED", ROOT.parent / "shared"))
GRAPHS = [
    *sorted((ROOT / "examples/graphs").glob("*.json")),
    SHARED / "graphs/cm1_fcn8_vgg_train.json",
    SHARED / "graphs/rl_g1_n100.json",
]
BUDGETS = ["90%", "80%", "70%"]
HEURISTICS = [
    "checkpoint-all", "chen-sqrtn", "chen-greedy", "ap-sqrtn", "ap-greedy", "linearized-sqrtn",
    "linearized-greedy", "griewank", "knapsack",
]  # fmt: skip
SOLVER_LIMIT = 60.0  # seconds; a solve that reaches it may differ between runs (the diff shows which)
SOLVERS = [
    {"formulation": "checkmate", "backend": "highs"},
    {"formulation": "checkmate", "approx": "lp-rounding"},
    {"formulation": "moccasin", "backend": "cpsat", "options": {"C": 2, "order": "input"}},
]


def fingerprints() -> list[dict[str, object]]:
    """One row per (graph, budget, method)."""
    from remat_models.budget import parse_budget
    from remat_models.io import read_graph
    from remat_models.planner import plan

    rows = []
    for path in GRAPHS:
        graph = read_graph(path)
        for text in BUDGETS:
            budget = parse_budget(text, graph)
            runs: list[tuple[str, dict[str, object]]] = [(name, {"method": name}) for name in HEURISTICS]
            fastsa = {"method": "fastsa", "options": {"iterations": (200_000, 20_000)}, "time_limit": 600}
            runs.append(("fastsa", fastsa))
            for spec in SOLVERS:
                label = f"{spec['formulation']}/{spec.get('backend') or spec.get('approx')}"
                runs.append((label, {**spec, "time_limit": SOLVER_LIMIT}))
            for label, arguments in runs:
                try:
                    result = plan(graph, budget, allow_over_budget=True, **arguments)  # type: ignore[arg-type]
                except Exception as error:  # a failure is a behaviour too: record its type
                    rows.append({"graph": graph.name, "budget": text, "method": label, "error": type(error).__name__})
                    continue
                sim = result.simulation
                steps = "" if result.schedule is None else repr(result.schedule.steps)
                rows.append(
                    {
                        "graph": graph.name,
                        "budget": text,
                        "method": label,
                        "status": result.status.value,
                        "peak": None if sim is None else sim.peak,
                        "total_cost": None if sim is None else round(sim.total_cost, 9),
                        "schedule_sha": hashlib.sha256(steps.encode()).hexdigest()[:16],
                    }
                )
                print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def diff(old_path: Path, new_path: Path) -> int:
    """Print the rows that differ; exit status 1 if any does."""
    key = lambda row: (row["graph"], row["budget"], row["method"])  # noqa: E731
    old = {key(r): r for r in map(json.loads, old_path.read_text().splitlines())}
    new = {key(r): r for r in map(json.loads, new_path.read_text().splitlines())}
    changed = [k for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
    for k in changed:
        print(f"{k}: {old.get(k)} -> {new.get(k)}")
    same_schedule = sum(1 for k in old.keys() & new.keys() if old[k].get("schedule_sha") == new[k].get("schedule_sha"))
    print(f"{len(old.keys() & new.keys())} rows in both, {same_schedule} with the same schedule, {len(changed)} differ")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path)
    parser.add_argument("--diff", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = parser.parse_args()
    if args.diff:
        return diff(*args.diff)
    rows = fingerprints()
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
