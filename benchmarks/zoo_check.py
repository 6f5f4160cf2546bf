"""Read a ``remat bench`` results file: the zoo sweep's TDI table and two of its claims, as Markdown tables.

Usage:
  python benchmarks/zoo_check.py bench_results/zoo.jsonl [bench_results/zoo_rerun.jsonl ...]

With several files, a run of a later file replaces the same (graph, budget, method, seed) of an earlier one.

0. TDI % per graph, budget and method (or why no schedule fits: over budget with its peak fraction,
   none found in time, budget below the lower bound).
1. Time limits: every run's whole process (``elapsed_s``: interpreter start, graph read, warm start,
   build, solve, decode) against ``1.1 * time_limit + 2`` seconds; the slowest run of each method.
2. ``auto`` against the best single method of the same sweep, per graph and budget: the cheapest
   schedule within the budget (TDI %), and which method gave it.
Nothing is asserted; the tables are printed.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def load(path: Path) -> list[dict]:
    """The records of a results file (one JSON object per line)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def time_limit_table(records: list[dict]) -> list[str]:
    """One row per method: runs, runs over the allowance, slowest run (seconds and limit)."""
    by_method: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_method[record["method"]].append(record)
    rows = [
        "| method | runs | over 1.1 x limit + 2 s | slowest run (s) | limit (s) | statuses |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for method, runs in by_method.items():
        over = [r for r in runs if r["elapsed_s"] > 1.1 * r["time_limit"] + 2]
        slowest = max(runs, key=lambda r: r["elapsed_s"])
        statuses = ", ".join(sorted({r["status"] for r in runs}))
        cells = [method, str(len(runs)), str(len(over)), f"{slowest['elapsed_s']:.1f}", f"{slowest['time_limit']:g}"]
        rows.append(f"| {' | '.join(cells)} | {statuses} |")
    return rows


def auto_table(records: list[dict]) -> list[str]:
    """Per (graph, budget): auto's TDI against the best other method's (within the budget)."""
    cases: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in records:
        cases[(record["graph"], record["budget_spec"])].append(record)
    rows = [
        "| graph | budget | auto TDI % | best other TDI % | best other method | auto s |",
        "|---|---|---:|---:|---|---:|",
    ]
    for (graph, budget), runs in sorted(cases.items()):
        fitting = [r for r in runs if r["status"] == "within_budget"]
        auto = next((r for r in runs if r["method"] == "auto"), None)
        others = [r for r in fitting if r["method"] != "auto"]
        best = min(others, key=lambda r: r["total_cost"], default=None)
        auto_tdi = (
            f"{auto['tdi']:.2f}" if auto and auto["status"] == "within_budget" else (auto or {}).get("status", "-")
        )
        best_tdi = f"{best['tdi']:.2f}" if best else "none fits"
        auto_s = f"{auto['elapsed_s']:.1f}" if auto else "-"
        rows.append(f"| {graph} | {budget} | {auto_tdi} | {best_tdi} | {best['method'] if best else '-'} | {auto_s} |")
    return rows


def _cell(record: dict | None) -> str:
    """TDI % within the budget, else why not (over budget, none in time, infeasible budget, not applicable)."""
    if record is None:
        return "-"
    status, error = record["status"], record.get("error_type") or ""
    if status == "within_budget":
        return f"{record['tdi']:.2f}"
    if status == "over_budget":
        return f"over ({100 * record['peak_fraction']:.0f} %)"
    if status == "no_schedule":
        return "none"
    if "BudgetInfeasible" in error:
        return "below bound"
    return f"{status}: {error}" if error else status


def method_table(records: list[dict]) -> list[str]:
    """Per (graph, budget) one row, per method one column: TDI % or why there is no fitting schedule."""
    methods = list(dict.fromkeys(r["method"] for r in records))
    cases: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for record in records:
        cases[(record["graph"], record["budget_spec"])][record["method"]] = record
    rows = ["| graph | budget | " + " | ".join(methods) + " |", "|---|---|" + "---:|" * len(methods)]
    for (graph, budget), runs in sorted(cases.items()):
        rows.append(f"| {graph} | {budget} | " + " | ".join(_cell(runs.get(m)) for m in methods) + " |")
    return rows


def merged(paths: list[Path]) -> list[dict]:
    """The records of every file; a later file's run replaces an earlier one of the same case."""
    by_case: dict[tuple, dict] = {}
    for path in paths:
        for record in load(path):
            by_case[(record["graph"], record["budget_spec"], record["method"], record["seed"])] = record
    return list(by_case.values())


def main() -> None:
    """Print the three tables for the results files given as arguments."""
    records = merged([Path(arg) for arg in sys.argv[1:]])
    print("\n".join(method_table(records)))
    print()
    print("\n".join(time_limit_table(records)))
    print()
    print("\n".join(auto_table(records)))


if __name__ == "__main__":
    main()
