"""The `remat` command: graph tools, simulation and planning, with rich output."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from remat_models.budget import check_budget, parse_budget
from remat_models.errors import ConfigurationError, RematError
from remat_models.graph import Graph
from remat_models.io import GENERATORS, read_graph, read_schedule, write_graph, write_schedule
from remat_models.planner import PlanResult, methods, plan
from remat_models.schedule import input_order_peak, simulate

app = typer.Typer(help="Tensor rematerialization planning.", no_args_is_help=True, add_completion=False)
graph_app = typer.Typer(help="Inspect, convert and generate graphs.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")
console = Console()
errors = Console(stderr=True)

GraphPath = Annotated[Path, typer.Argument(help="Graph JSON (own format or networkx node-link).")]
BudgetOption = Annotated[str, typer.Option("--budget", "-b", help="Bytes, '11.3GiB', '80%' or '0.8'.")]


@app.callback()
def _configure(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=errors, show_path=False)],
    )


def _resolve_budget(graph: Graph, text: str) -> int:
    budget = parse_budget(text, graph)
    console.print(f"budget: {text} -> [bold]{budget:,}[/bold] B")
    return budget


@graph_app.command("info")
def graph_info(path: GraphPath) -> None:
    """Size, total cost, input-order peak and the budget lower bound of a graph."""
    graph = read_graph(path)
    kinds: dict[str, int] = {}
    for kind in graph.kind:
        kinds[kind.value] = kinds.get(kind.value, 0) + 1
    table = Table(title=f"{path.name} ({graph.name})", show_header=False)
    for label, value in [
        ("nodes", f"{graph.n:,}"),
        ("edges", f"{graph.m:,}"),
        ("kinds", ", ".join(f"{k}: {c}" for k, c in sorted(kinds.items()))),
        ("outputs", f"{graph.outputs.size:,}"),
        ("total cost", f"{graph.total_cost:,.6g}"),
        ("fixed memory", f"{graph.fixed_mem:,} B"),
        ("input-order peak", f"{input_order_peak(graph):,} B"),
        ("budget lower bound", f"{graph.lower_bound:,} B"),
        ("hash", graph.content_hash[:16]),
    ]:
        table.add_row(label, value)
    console.print(table)


@graph_app.command("convert")
def graph_convert(
    source: GraphPath,
    target: Annotated[Path, typer.Argument(help="Output file.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="remat | node-link")] = "remat",
) -> None:
    """Convert a graph between the project's format and networkx node-link JSON."""
    graph = read_graph(source)
    write_graph(graph, target, fmt=fmt)
    console.print(f"wrote {target} ({fmt}, {graph.n} nodes, {graph.m} edges)")


@graph_app.command("generate")
def graph_generate(
    kind: Annotated[str, typer.Argument(help=f"One of: {', '.join(GENERATORS)}.")],
    output: Annotated[Path, typer.Option("--out", "-o", help="Output file.")],
    size: Annotated[int, typer.Option("--size", "-n", help="Main size parameter (see --help of each).")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
) -> None:
    """Generate a synthetic graph (linear chain, random layered, U-Net-like, transformer-like)."""
    if kind not in GENERATORS:
        raise ConfigurationError(f"unknown generator {kind!r}; choose one of {', '.join(GENERATORS)}")
    graph = GENERATORS[kind].build(size=size, seed=seed)
    write_graph(graph, output)
    console.print(f"wrote {output} ({graph.name}: {graph.n} nodes, {graph.m} edges)")


@app.command("simulate")
def simulate_command(
    graph_path: GraphPath,
    plan_path: Annotated[Path, typer.Argument(help="Schedule JSON written by `remat solve --out`.")],
    budget: Annotated[str | None, typer.Option("--budget", "-b", help="Also check against a budget.")] = None,
) -> None:
    """Simulate a schedule: peak memory, cost, TDI, recomputations."""
    graph = read_graph(graph_path)
    schedule = read_schedule(plan_path, graph)
    result = simulate(graph, schedule)
    reference = input_order_peak(graph)
    table = Table(title=f"{plan_path.name} on {graph_path.name}", show_header=False)
    table.add_row("steps", f"{len(schedule):,}")
    table.add_row("peak", f"{result.peak:,} B ({result.peak / reference:.1%} of input order)")
    table.add_row("total cost", f"{result.total_cost:,.6g}")
    table.add_row("TDI", f"{result.tdi:.2f} %")
    table.add_row("recomputations", f"{result.recomputations:,}")
    console.print(table)
    if budget is not None:
        limit = _resolve_budget(graph, budget)
        if not result.fits(limit):
            raise RematError(f"peak {result.peak:,} B exceeds the budget {limit:,} B")


def _results_table(title: str, results: list[PlanResult]) -> Table:
    table = Table(title=title)
    for column in ("method", "status", "peak (B)", "peak/ref", "TDI %", "recomp.", "time (s)"):
        table.add_column(column, justify="left" if column in ("method", "status") else "right")
    for result in results:
        fits = result.status.value == "within_budget"
        table.add_row(
            result.method,
            "[green]fits[/green]" if fits else "[red]over budget[/red]",
            f"{result.simulation.peak:,}",
            f"{result.peak_fraction:.1%}",
            f"{result.simulation.tdi:.2f}",
            f"{result.simulation.recomputations:,}",
            f"{result.wall_time:.3f}",
        )
    return table


@app.command("solve")
def solve_command(
    graph_path: GraphPath,
    budget: BudgetOption,
    method: Annotated[str, typer.Option("--method", "-m", help="Planning method.")] = "chen-greedy",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the schedule JSON here.")] = None,
) -> None:
    """Plan a graph under a budget with one method; exit 3 if the schedule does not fit."""
    graph = read_graph(graph_path)
    limit = _resolve_budget(graph, budget)
    result = plan(graph, limit, method)
    console.print(_results_table(f"{graph_path.name} at {limit:,} B", [result]))
    if out is not None:
        write_schedule(out, result.schedule, graph, metadata=result.metadata())
        console.print(f"wrote {out}")
    if result.status.value != "within_budget":
        errors.print(f"error: {method} found no schedule within {limit:,} B (best peak {result.simulation.peak:,} B)")
        raise typer.Exit(3)


@app.command("compare")
def compare_command(
    graph_path: GraphPath,
    budget: BudgetOption,
    method_names: Annotated[
        str | None, typer.Option("--methods", help="Comma-separated methods (default: all).")
    ] = None,
) -> None:
    """Run several methods on one graph and budget and print one table."""
    graph = read_graph(graph_path)
    limit = _resolve_budget(graph, budget)
    check_budget(graph, limit)
    chosen = method_names.split(",") if method_names else list(methods())
    results = []
    with console.status("planning") as status:
        for name in chosen:
            status.update(f"planning with {name}")
            try:
                results.append(plan(graph, limit, name.strip()))
            except RematError as error:
                if len(chosen) == 1:
                    raise
                errors.print(f"{name}: skipped: {error}", highlight=False, markup=False)
    console.print(_results_table(f"{graph_path.name} at {limit:,} B", results))


def main() -> None:
    """Console entry point: library errors become one line on stderr and exit status 1."""
    try:
        app()
    except RematError as error:
        errors.print(f"error: {error}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
