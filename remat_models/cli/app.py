"""The `remat` command: graph tools, simulation and planning, with rich output."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from remat_models.bench.clock import method_time_limit
from remat_models.cli.bench import bench_app
from remat_models.cli.console import (
    EXIT_ERROR,
    EXIT_NO_SCHEDULE,
    EXIT_SOLVER_ERROR,
    discard_stdout,
    make_console,
    planning_status,
)
from remat_models.cli.maxbatch import max_batch_command
from remat_models.cli.options import (
    AllowanceOption,
    ApproxOption,
    BackendOption,
    ForceOption,
    FormulationOption,
    ImplsOption,
    InitOption,
    IterationsOption,
    MethodOption,
    OptionOption,
    OrderOption,
    RetentionOption,
    ScheduleOutOption,
    SeedOption,
    SolverOptionOption,
    TimeLimitOption,
    TransferOption,
    UnpartitionedOption,
    WindowsOption,
    WithOption,
    WorkersOption,
    collect_options,
    shortcut_flags,
    solver_options,
    transfer_model,
)
from remat_models.cli.torch_commands import from_torch, validate
from remat_models.core.budget import check_budget, parse_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import BudgetExceededError, BudgetInfeasibleError, ConfigurationError, RematError
from remat_models.extensions.registry import make_extensions
from remat_models.formulations import DEFAULT_FORMULATION, get_formulation
from remat_models.io import GENERATORS, read_graph, read_schedule, write_graph, write_schedule
from remat_models.io.atomic import check_output
from remat_models.io.generators import MAX_NODES
from remat_models.planning.bounds import cost_lower_bound, peak_lower_bound
from remat_models.planning.methods import DEFAULT_METHOD, MethodRef, all_methods, resolve_method
from remat_models.planning.plan import BOUND_NODES, PlanResult, PlanStatus, methods, parse_method_name, plan

app = typer.Typer(help="Tensor rematerialization planning.", no_args_is_help=True, add_completion=False)
graph_app = typer.Typer(help="Inspect, convert and generate graphs.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")
app.add_typer(bench_app, name="bench")
graph_app.command("from-torch")(from_torch)
app.command("validate")(validate)
app.command("max-batch")(max_batch_command)
console = make_console()
errors = Console(stderr=True)

GraphPath = Annotated[Path, typer.Argument(help="Graph JSON (own format or networkx node-link).")]
BudgetOption = Annotated[str, typer.Option("--budget", "-b", help="Bytes, '11.3GiB', '80%' or '0.8'.")]


@app.callback()
def _configure(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False) -> None:
    """Warnings (and with ``-v`` the ``remat_models`` progress messages) go to stderr.

    The handler's own level filters too: the planning status line lowers the ``remat_models`` logger
    to INFO while it runs, and those messages must reach the status line only, not stderr.
    """
    level = logging.INFO if verbose else logging.WARNING
    handler = RichHandler(console=errors, show_path=False, level=level)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", handlers=[handler])
    logging.getLogger("remat_models").setLevel(level)


def _resolve_budget(graph: Graph, text: str) -> int:
    budget = parse_budget(text, graph)
    console.print(f"budget: {text} -> [bold]{budget:,}[/bold] B")
    return budget


@graph_app.command("info")
def graph_info(path: GraphPath) -> None:
    """Size, total cost, input-order peak and the lower bounds on any schedule's peak (the step's, the proven one)."""
    graph = read_graph(path)
    peak_bound = peak_lower_bound(graph) if graph.n <= BOUND_NODES else None  # what plan() refuses below
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
        ("budget lower bound", f"{graph.lower_bound:,} B (largest step, end state)"),
        ("peak lower bound", "-" if peak_bound is None else f"{peak_bound.value:,} B ({peak_bound.proof})"),
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
    check_output(target, [source])
    graph = read_graph(source)
    write_graph(graph, target, fmt=fmt)
    console.print(f"wrote {target} ({fmt}, {graph.n} nodes, {graph.m} edges)")


@graph_app.command("generate")
def graph_generate(
    kind: Annotated[str, typer.Argument(help=f"One of: {', '.join(GENERATORS)}.")],
    output: Annotated[Path, typer.Option("--out", "-o", help="Output file.")],
    size: Annotated[
        int, typer.Option("--size", "-n", help=f"Main size parameter (graphs of at most {MAX_NODES:,} nodes).")
    ] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (>= 0).")] = 0,
) -> None:
    """Generate a synthetic graph (linear chain, random layered, U-Net-like, transformer-like)."""
    if kind not in GENERATORS:
        raise ConfigurationError(f"unknown generator {kind!r}; choose one of {', '.join(GENERATORS)}")
    check_output(output)
    graph = GENERATORS[kind].build(size=size, seed=seed)
    write_graph(graph, output)
    console.print(f"wrote {output} ({graph.name}: {graph.n} nodes, {graph.m} edges)")


@app.command("simulate")
def simulate_command(
    graph_path: GraphPath,
    plan_path: Annotated[Path, typer.Argument(help="Schedule JSON written by `remat solve --out`.")],
    budget: Annotated[str | None, typer.Option("--budget", "-b", help="Also check against a budget.")] = None,
    transfer: TransferOption = None,
) -> None:
    """Simulate a schedule: peak memory, cost, TDI, recomputations (and transfers with --transfer)."""
    graph = read_graph(graph_path)
    schedule = read_schedule(plan_path, graph)
    result = simulate(graph, schedule, transfer_model(transfer))
    reference = input_order_peak(graph)
    table = Table(title=f"{plan_path.name} on {graph_path.name}", show_header=False)
    table.add_row("steps", f"{len(schedule):,}")
    share = f"{result.peak / reference:.1%}" if reference else "-"  # a graph whose nodes all hold 0 B: no share
    table.add_row("peak", f"{result.peak:,} B ({share} of input order)")
    table.add_row("total cost", f"{result.total_cost:,.6g}")
    table.add_row("TDI", f"{result.tdi:.2f} %")
    table.add_row("recomputations", f"{result.recomputations:,}")
    if transfer is not None:
        moves = f"{result.offloads} offloads, {result.prefetches} prefetches"
        table.add_row("transfer cost", f"{result.transfer_cost:,.6g} ({moves})")
        table.add_row("host peak", f"{result.host_peak:,} B")
    console.print(table)
    if budget is not None:
        limit = _resolve_budget(graph, budget)
        if not result.fits(limit):
            raise BudgetExceededError(
                f"peak {result.peak:,} B exceeds the budget {limit:,} B", peak=result.peak, budget=limit
            )


def _results_table(title: str, results: list[PlanResult]) -> Table:
    table = Table(title=title)
    columns = ("method", "status", "peak (B)", "peak/ref", "TDI %", "bound TDI %", "gap %", "proved by", "recomp.")
    for column in (*columns, "time (s)"):
        justify = "left" if column in ("method", "status", "proved by") else "right"
        table.add_column(column, justify=justify, overflow="fold")  # a narrow terminal wraps, never cuts digits
    labels = {PlanStatus.WITHIN_BUDGET: "[green]fits[/green]", PlanStatus.OVER_BUDGET: "[red]over budget[/red]"}
    for result in results:
        sim = result.simulation
        table.add_row(
            result.method,
            labels.get(result.status, f"[red]{result.status.value}[/red]"),
            "-" if sim is None else f"{sim.peak:,}",
            "-" if sim is None else f"{result.peak_fraction:.1%}",
            "-" if sim is None else f"{sim.tdi:.2f}",
            *_bound_cells(result),
            "-" if sim is None else f"{sim.recomputations:,}",
            f"{result.wall_time:.3f}",
        )
    return table


def _bound_cells(result: PlanResult) -> tuple[str, str, str]:
    """The lower bound on cost (TDI %), the plan's gap to it (%) and what proved it; '-' where there is none."""
    bound, gap = result.lower_bound, result.lower_bound_gap
    if bound is None:
        return "-", "-", "-"
    return f"{bound.tdi:.2f}", "-" if gap is None else f"{100 * gap:.2f}", bound.proof


def _bounds_line(result: PlanResult) -> str | None:
    """One line on the lower bounds that hold for every schedule of the graph (None when none was computed)."""
    cost, peak = result.lower_bound, result.peak_lower_bound
    if cost is None and peak is None:
        return None
    parts = []
    if cost is not None:
        gap = result.lower_bound_gap
        gap_text = "" if gap is None else f", gap {100 * gap:.2f} %"
        parts.append(f"cost >= {cost.value:,.6g} (TDI {cost.tdi:.2f} %; {cost.proof}{gap_text})")
    if peak is not None:
        parts.append(f"peak >= {peak.value:,} B ({peak.proof})")
    return "lower bounds for every schedule: " + "; ".join(parts)


def _solver_table(result: PlanResult) -> Table | None:
    """Solver numbers (objective, bound, gap, times) when a formulation produced the plan.

    The solver's bound and gap hold for its own model only (one topological order, capped recomputations, a
    window): the bounds for every schedule are :func:`_bounds_line`'s.
    """
    keys = [
        ("solver_status", "solver status"),
        ("objective", "objective"),
        ("bound", "model bound (its model only)"),
        ("gap", "model gap"),
        ("solver_message", "solver message"),
        ("time_to_first_s", "time to first (s)"),
        ("lp_status", "LP status"),
        ("lp_bound", "LP bound (staged)"),
        ("candidates", "rounded candidates"),
        ("lowest_peak", "lowest rounded peak (B)"),
    ]
    rows = [(label, result.details[key]) for key, label in keys if result.details.get(key) is not None]
    if not rows:
        return None
    table = Table(show_header=False)
    for label, value in rows:
        table.add_row(label, _number(value))
    return table


def _number(value: object) -> str:
    """A table cell: floats to 6 digits ('-' for infinity and NaN), integers with separators."""
    if isinstance(value, float):
        return f"{value:,.6g}" if math.isfinite(value) else "-"
    return f"{value:,}" if isinstance(value, int) else str(value)


@app.command("bound")
def bound_command(
    graph_path: GraphPath,
    budget: BudgetOption,
    time_limit: Annotated[float, typer.Option("--time-limit", help="Seconds for the cost bound's search.")] = 1.0,
    transfer: TransferOption = None,
) -> None:
    """Lower bounds only: the least total cost (TDI) any schedule within the budget has, and the least peak."""
    graph = read_graph(graph_path)
    limit = _resolve_budget(graph, budget)
    model = transfer_model(transfer)
    peak = peak_lower_bound(graph, model, time_limit=time_limit)
    table = Table(title=f"lower bounds on {graph_path.name}", show_header=False)
    table.add_row("peak", f"{peak.value:,} B ({peak.fraction:.1%} of input order; {peak.proof})")
    if limit < peak.value:
        console.print(table)
        raise BudgetInfeasibleError(
            f"budget {limit:,} B is below the peak lower bound {peak.value:,} B ({peak.proof})",
            budget=limit,
            lower_bound=peak.value,
        )
    cost = cost_lower_bound(graph, limit, time_limit=time_limit, transfer=model)
    table.add_row("total cost", f"{cost.value:,.6g} (TDI {cost.tdi:.2f} %; {cost.proof})")
    console.print(table)


@app.command("solve")
def solve_command(
    graph_path: GraphPath,
    budget: BudgetOption,
    method: MethodOption = None,
    formulation: FormulationOption = None,
    backend: BackendOption = None,
    approx: ApproxOption = None,
    time_limit: TimeLimitOption = None,
    init: InitOption = None,
    unpartitioned: UnpartitionedOption = False,
    allowance: AllowanceOption = None,
    retention: RetentionOption = None,
    order: OrderOption = None,
    iterations: IterationsOption = None,
    seed: SeedOption = 0,
    workers: WorkersOption = 1,
    out: ScheduleOutOption = None,
    force: ForceOption = False,
    extension_specs: WithOption = None,
    option_pairs: OptionOption = None,
    solver_option_pairs: SolverOptionOption = None,
    impls: ImplsOption = "on",
    transfer: TransferOption = None,
    windows: WindowsOption = None,
) -> None:
    """Plan a graph under a budget with a heuristic or a solver; exit 3 if no schedule fits, 4 if the solver failed."""
    if out is not None:
        check_output(out, [graph_path])  # fail now, not after a long solve
    graph = read_graph(graph_path)
    limit = _resolve_budget(graph, budget)
    if formulation is None and (backend or approx):
        raise ConfigurationError("--backend and --approx need --formulation")
    ref = resolve_method(method, formulation, backend, approx)
    if not ref.is_solver and (init or extension_specs or solver_option_pairs):
        raise ConfigurationError("--init, --with and --solver-option need --formulation")
    if not ref.is_solver and windows is not None:
        raise ConfigurationError("--windows/--whole need --formulation")
    flags = shortcut_flags(unpartitioned, allowance, retention, order, iterations)
    options = collect_options(ref, flags, option_pairs)
    limit_text = "" if time_limit is None else f", time limit {time_limit:g} s"
    method_limit = method_time_limit(time_limit)  # the start-up counts: the command holds 1.1 x limit + 2 s
    with planning_status(errors, f"planning {graph.name} ({graph.n:,} nodes) with {ref.label}{limit_text}"):
        result = plan(
            graph,
            limit,
            ref,
            time_limit=method_limit,
            init=init or "auto",
            options=options,
            extensions=make_extensions(extension_specs),
            seed=seed,
            workers=workers,
            allow_over_budget=True,
            impls=_impls_flag(impls),
            solver_options=solver_options(solver_option_pairs),
            transfer=transfer_model(transfer),
            windows=windows,
        )
    if method_limit != time_limit:
        result.details["method_time_limit"] = method_limit  # the start-up took the rest of --time-limit's allowance
    _report(result, graph, f"{graph_path.name} at {limit:,} B", out, force)


def _report(result: PlanResult, graph: Graph, title: str, out: Path | None, force: bool) -> None:
    """Print the result (and the solver's numbers), write the schedule; exit 130/143, 3 or 4 as ``_failure`` says.

    An interrupted or over-budget schedule is written to a new file but replaces an existing one only
    with ``force``. Interrupted before it found any schedule: one line on stderr, nothing else.
    """
    if result.interrupted_by is not None and result.schedule is None:
        line = f"interrupted ({result.interrupted_by.name}): {result.method} stopped before it found a schedule"
        errors.print(line + ("; nothing written" if out is not None else ""), markup=False, highlight=False)
        raise typer.Exit(128 + result.interrupted_by)
    console.print(_results_table(title, [result]))
    bounds = _bounds_line(result)
    if bounds is not None:
        console.print(bounds, markup=False, highlight=False, soft_wrap=True)
    solver = _solver_table(result)
    if solver is not None:
        console.print(solver)
    failure = _failure(result)
    kept = False
    if out is not None and result.schedule is not None:
        metadata = result.metadata()
        if write_schedule(out, result.schedule, graph, metadata=metadata, replace=force or failure is None):
            console.print(f"wrote {out}")
        else:
            kept = True
    if failure is None:
        return
    code, message, what = failure
    errors.print(message, markup=False, highlight=False, soft_wrap=True)
    if kept:
        kept_line = f"kept the old {out}: the new schedule is {what} (--force replaces it)"
        errors.print(kept_line, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _failure(result: PlanResult) -> tuple[int, str, str] | None:
    """Exit status, stderr line and a short description of an interrupted, failed or unfit result; None if fine."""
    if result.interrupted_by is not None:  # exit 128 + the signal's number, as a shell reports it
        name = result.interrupted_by.name
        message = f"interrupted ({name}): {result.method} stopped early; shown is the best it had found"
        return 128 + result.interrupted_by, message, "from an interrupted run"
    if result.status is PlanStatus.SOLVER_ERROR:
        why = result.details.get("solver_message") or "no reason given"
        kept = "" if result.schedule is None else "; shown is the warm start"
        message = f"error: {result.method}: the solver failed: {why}{kept}"
        return EXIT_SOLVER_ERROR, message, "from a failed solve"
    if result.status is not PlanStatus.WITHIN_BUDGET:
        peak = "" if result.simulation is None else f" (best peak {result.simulation.peak:,} B)"
        message = f"error: {result.method} found no schedule within {result.budget:,} B: {result.status.value}{peak}"
        if result.status is PlanStatus.NO_SCHEDULE_IN_MODEL:
            message += " (its model holds none; that proves nothing about the budget: try another method)"
        return EXIT_NO_SCHEDULE, message, "over budget"
    return None


def _impls_flag(text: str) -> bool:
    if text not in ("on", "off"):
        raise ConfigurationError(f"--impls takes on or off, got {text!r}")
    return text == "on"


EXPORT_FORMATS = ("lp", "mps", "mzn")


@app.command("export")
def export_command(
    graph_path: GraphPath,
    budget: BudgetOption,
    output: Annotated[Path, typer.Option("--out", "-o", help="Model file to write.")],
    formulation: Annotated[
        str, typer.Option("--formulation", "-f", help="Model (default: the registry's default).")
    ] = DEFAULT_FORMULATION,
    fmt: Annotated[str | None, typer.Option("--format", help="lp | mps | mzn (default: the file's suffix).")] = None,
    unpartitioned: UnpartitionedOption = False,
    retention: RetentionOption = None,
    order: OrderOption = None,
    extension_specs: WithOption = None,
    option_pairs: OptionOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing companion file (the .dzn beside an .mzn).")
    ] = False,
) -> None:
    """Write a formulation's model to an .lp / .mps / .mzn file (integral memory for .mzn; its data in .dzn)."""
    from remat_models.backends.export import check_companions, export
    from remat_models.formulations.base import build_extended

    chosen = fmt or output.suffix.lstrip(".")
    if chosen not in EXPORT_FORMATS:
        raise ConfigurationError(f"unknown export format {chosen!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    if output.suffix != f".{chosen}":
        raise ConfigurationError(f"output {output} does not end in .{chosen}")
    check_output(output, [graph_path])
    check_companions(output, [graph_path], force=force)  # keep.dzn beside keep.mzn: kept unless --force
    graph = read_graph(graph_path)
    limit = _resolve_budget(graph, budget)
    check_budget(graph, limit)
    flags = shortcut_flags(unpartitioned, None, retention, order)
    options = collect_options(MethodRef(formulation=formulation), flags, option_pairs)
    extensions = make_extensions(extension_specs)  # the solve chain's build: integral memory for MiniZinc's .mzn
    built = build_extended(get_formulation(formulation), graph, limit, options, extensions, integral=chosen == "mzn")
    export(built.model, output, force=force, inputs=[graph_path])
    console.print(f"wrote {output} ({built.model.num_cols:,} variables, {built.model.num_rows:,} rows)")


@app.command("compare")
def compare_command(
    graph_path: GraphPath,
    budget: BudgetOption,
    method_names: Annotated[
        str | None,
        typer.Option(
            "--methods", help="Comma-separated heuristics and FORMULATION/BACKEND pairs (default: all heuristics)."
        ),
    ] = None,
    time_limit: Annotated[float, typer.Option("--time-limit", help="Per solver run, seconds.")] = 60.0,
    extension_specs: WithOption = None,
    transfer: TransferOption = None,
) -> None:
    """Run several methods on one graph and budget and print one table (``--with`` applies to formulations).

    ``--transfer`` goes to every method as ``remat solve`` gives it (TDI then includes exposed transfers).
    """
    graph = read_graph(graph_path)
    limit = _resolve_budget(graph, budget)
    check_budget(graph, limit)
    model = transfer_model(transfer)
    everything = [name for name in methods() if name != "auto"]  # auto runs the others: name it to compare it
    chosen = [name.strip() for name in method_names.split(",")] if method_names is not None else everything
    if not chosen or not all(chosen):
        raise ConfigurationError(f"--methods {method_names!r} names an empty method; give NAME[,NAME...]")
    for name in chosen:  # a misspelt name fails before anything runs (a method failing later is skipped)
        parse_method_name(name)
    results = []
    with console.status("planning") as status:
        for name in chosen:
            status.update(f"planning with {name}")
            try:
                results.append(_plan_named(graph, limit, name, time_limit, extension_specs, model))
            except RematError as error:
                if len(chosen) == 1:
                    raise
                errors.print(f"{name}: skipped: {error}", highlight=False, markup=False)
    console.print(_results_table(f"{graph_path.name} at {limit:,} B", results))


def _plan_named(
    graph: Graph, budget: int, name: str, time_limit: float, specs: list[str] | None, transfer: TransferModel | None
) -> PlanResult:
    """A heuristic by name, or ``formulation[/backend|/approximation]`` within ``time_limit``, given ``transfer``."""
    ref = parse_method_name(name)
    limit = time_limit if ref.takes_time_limit else None
    extensions = make_extensions(specs) if ref.is_solver else ()
    return plan(graph, budget, ref, time_limit=limit, extensions=extensions, allow_over_budget=True, transfer=transfer)


@app.command("backends")
def backends_command() -> None:
    """Solver backends: which are usable here, and how to install the others."""
    from remat_models.backends import available

    found = available()
    table = Table(title="solver backends")
    for column in ("backend", "here", "how to install"):
        table.add_column(column)
    for name in sorted([*found, *found.missing]):
        table.add_row(name, "usable" if name in found else "missing", found.missing.get(name, ""))
    console.print(table)


@app.command("methods")
def methods_command() -> None:
    """Every planning method, whether it takes a time limit, and its options (from its options dataclass)."""
    table = Table(title="planning methods (--method NAME, -f FORMULATION [--backend B | --approx A])")
    for column in ("method", "kind", "time limit", "options (-O key=value)"):
        table.add_column(column)
    for ref in all_methods():
        kind = "approximation" if ref.approx else "formulation" if ref.formulation else "heuristic"
        kind = "portfolio (default)" if ref.method == DEFAULT_METHOD else kind
        table.add_row(ref.label, kind, "yes" if ref.takes_time_limit else "no", ", ".join(ref.option_names()) or "-")
    console.print(table)


def main() -> None:
    """Console entry point: library errors become one line on stderr and exit status 1 (3: over budget).

    A failed write on stdout (a full disk, ``> /dev/full``) is such an error (an OutputError from the
    console); a reader that closed stdout (``| head``) ends the command quietly with status 1.
    """
    try:
        app()
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):  # printed and written: end now, without the teardown
            _end_now(done.code or 0)
        raise
    except BudgetExceededError as error:
        _fail(error, EXIT_NO_SCHEDULE)
    except RematError as error:
        _fail(error, EXIT_ERROR)
    except BrokenPipeError:
        discard_stdout()  # the interpreter's last flush of stdout must not fail again
        sys.exit(1)


def _end_now(code: int) -> None:
    """Exit with ``code`` without the interpreter's teardown: collecting a large solver model (Pyomo's, CVXPY's)
    took seconds after an interrupted run had printed and written its result, and the teardown of any command
    (numba, OR-Tools, HiGHS modules) 0.15 s unloaded, 1.1 s at load 8: of the 2.5 s a 5 s limit may take past it.
    Where standard output cannot be flushed, it returns: the ordinary exit reports a full disk, a closed pipe ends.
    """  # noqa: D205
    try:
        sys.stdout.flush()
    except Exception:
        return
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def _fail(error: RematError, code: int) -> None:
    """Print ``error`` as one line on stderr and exit with ``code``."""
    errors.print(f"error: {error}", highlight=False, markup=False, soft_wrap=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
