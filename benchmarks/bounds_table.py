"""Lower bounds (planning/bounds.py) on every zoo graph at 50 % and 25 %, beside the fast baselines' plans.

Usage: python benchmarks/bounds_table.py [--time-limit 5] [--fastsa 0] [--least-peak 0] [--graphs GRAPH ...]
       python benchmarks/bounds_table.py --checkmate 60 [--budgets 90%,70%,50%] --graphs GRAPH ...

Prints a markdown table: the cost bound (TDI %) and what proved it (method and pivot), the best plan of
chen-greedy, knapsack, the save-set search and rotor (and FastSA and least-peak given seconds) within the budget
and its gap to the bound; then the peak bound against the least peak that chen-greedy, knapsack and least-peak
(given seconds) reach when asked for the peak bound itself. Every schedule is simulated; a bound above a plan
stops the script.

With ``--checkmate SECONDS`` (graphs up to ~200 nodes): per graph and budget, Checkmate (its default backend)
within that limit beside the bound (``--time-limit`` seconds): its status (``optimal_in_model`` where it proves its
own model's optimum: one topological order, which not every schedule follows), its plan, the bound and the gap.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import SimulationResult, input_order_peak, simulate
from remat_models.heuristics.registry import run_heuristic
from remat_models.io import read_graph
from remat_models.planning.bounds import lower_bounds, peak_lower_bound

ROOT = Path(__file__).resolve().parents[1]
FRACTIONS = ("50%", "25%")


def _plans(
    graph: Graph,
    budget: int,
    seconds: dict[str, float],
    names: tuple[str, ...] = ("chen-greedy", "knapsack", "saveset", "rotor"),
) -> list[tuple[str, SimulationResult]]:
    """(method, simulation) of each of ``names`` and of the timed heuristics given seconds in ``seconds``."""
    found = []
    for name in (*names, *(name for name, limit in seconds.items() if limit)):
        schedule, _ = run_heuristic(name, graph, budget, **({"time_limit": seconds[name]} if name in seconds else {}))
        found.append((name, simulate(graph, schedule)))
    return found


def checkmate_rows(graphs: list[Path], fractions: list[str], seconds: float, bound_seconds: float) -> list[str]:
    """Markdown rows: Checkmate's plan within ``seconds`` against the cost bound, per graph and budget."""
    from remat_models.planning.plan import plan

    rows = []
    for path in graphs:
        graph = read_graph(path)
        for fraction in fractions:
            budget = parse_budget(fraction, graph)
            started = time.perf_counter()
            peak, cost = lower_bounds(graph, budget, time_limit=bound_seconds)
            bound_s = time.perf_counter() - started
            head = f"| {graph.name} | {graph.n:,} | {fraction}"
            if cost is None:
                rows.append(f"{head} | below the peak bound ({peak.proof}) | - | - | - | {bound_s:.2f} |")
                continue
            result = plan(graph, budget, formulation="checkmate", time_limit=seconds, allow_over_budget=True)
            sim = result.simulation
            status = str(result.solver_status)
            if sim is None or sim.peak > budget:
                rows.append(f"{head} | {cost.tdi:.3f} ({cost.proof}) | {status} | none fits | - | {bound_s:.2f} |")
                continue
            assert sim.total_cost >= cost.value * (1 - 1e-9), (graph.name, fraction, sim.total_cost, cost)
            gap = 100 * (sim.total_cost - cost.value) / sim.total_cost
            rows.append(
                f"{head} | {cost.tdi:.3f} ({cost.proof}) | {status} | {sim.tdi:.3f} | {gap:.3f} | {bound_s:.2f} |"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=5.0, help="seconds for each bound")
    parser.add_argument("--fastsa", type=float, default=0.0, help="FastSA seconds per budget (0: not run)")
    parser.add_argument("--least-peak", type=float, default=0.0, help="least-peak seconds per budget (0: not run)")
    parser.add_argument("--graphs", nargs="*", type=Path, default=sorted((ROOT / "benchmarks" / "zoo").glob("*.json")))
    parser.add_argument("--checkmate", type=float, default=0.0, help="Checkmate seconds per budget (see above)")
    parser.add_argument("--budgets", default="90%,70%,50%", help="budgets of the --checkmate table")
    args = parser.parse_args()
    if args.checkmate:
        print("| graph | nodes | budget | cost bound: TDI % (proved by) | Checkmate status | Checkmate TDI % | gap % "
              "| bound s |")
        print("|---|---:|---:|---|---|---:|---:|---:|")
        print("\n".join(checkmate_rows(args.graphs, args.budgets.split(","), args.checkmate, args.time_limit)))
        return
    cost_rows, peak_rows = [], []
    timed = {"fastsa": args.fastsa, "least-peak": args.least_peak}
    for path in args.graphs:
        graph = read_graph(path)
        reference = input_order_peak(graph)
        for fraction in FRACTIONS:
            budget = parse_budget(fraction, graph)
            started = time.perf_counter()
            peak, cost = lower_bounds(graph, budget, time_limit=args.time_limit)
            seconds = time.perf_counter() - started
            if cost is None:
                cost_rows.append(
                    f"| {graph.name} | {graph.n:,} | {fraction} | below the peak bound {peak.value:,} B "
                    f"({peak.proof}) | - | - | {seconds:.2f} |"
                )
                continue
            fitting = [(name, sim) for name, sim in _plans(graph, budget, timed) if sim.peak <= budget]
            if fitting:
                name, best = min(fitting, key=lambda item: item[1].total_cost)
                assert best.total_cost >= cost.value * (1 - 1e-9), (graph.name, fraction, best, cost)
                plan = f"{best.tdi:.2f} ({name})"
                gap = f"{100 * (best.total_cost - cost.value) / best.total_cost:.2f}"
            else:
                plan, gap = "none fits", "-"
            cost_rows.append(
                f"| {graph.name} | {graph.n:,} | {fraction} | {cost.tdi:.2f} ({cost.proof}) | {plan} | {gap} "
                f"| {seconds:.2f} |"
            )
        peak = peak_lower_bound(graph, time_limit=args.time_limit)
        lowest = _plans(graph, peak.value, {"least-peak": args.least_peak}, ("chen-greedy", "knapsack"))
        least = min((sim.peak, name) for name, sim in lowest)
        assert least[0] >= peak.value
        peak_rows.append(
            f"| {graph.name} | {peak.value:,} ({peak.fraction:.1%}, {peak.proof}) | {least[0]:,} "
            f"({least[0] / reference:.1%}, {least[1]}) | {100 * (least[0] - peak.value) / least[0]:.1f} |"
        )
    print("| graph | nodes | budget | cost bound: TDI % (proved by) | best plan: TDI % (method) | gap % | bound s |")
    print("|---|---:|---:|---|---|---:|---:|")
    print("\n".join(cost_rows))
    print()
    print("| graph | peak bound, B (% of input order, method) | least peak found, B (%, method) | gap % |")
    print("|---|---|---|---:|")
    print("\n".join(peak_rows))


if __name__ == "__main__":
    main()
