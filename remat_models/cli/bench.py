"""`remat bench run | report | plot`: sweeps of isolated runs, tables against published numbers, plots."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from remat_models.cli.console import make_console
from remat_models.errors import ConfigurationError, OutputError
from remat_models.io.atomic import check_not_input

if TYPE_CHECKING:
    from remat_models.bench.sweep import Sweep

bench_app = typer.Typer(help="Benchmark sweeps, reports against published tables, plots.", no_args_is_help=True)
plot_app = typer.Typer(help="Plots (PNG and SVG) from results or schedules.", no_args_is_help=True)
bench_app.add_typer(plot_app, name="plot")
console = make_console()
progress_console = Console(stderr=True)

ResultsPath = Annotated[Path, typer.Argument(help="Results file (JSON Lines) written by `remat bench run`.")]
StemOption = Annotated[Path, typer.Option("--out", "-o", help="Output path without suffix (.png and .svg written).")]


@bench_app.command("run")
def run_command(
    sweep_file: Annotated[Path | None, typer.Argument(help="Sweep file (.toml, .yaml); or use the options.")] = None,
    graph: Annotated[list[str] | None, typer.Option("--graph", "-g", help="Graph file or name (repeat).")] = None,
    budget: Annotated[
        list[str] | None, typer.Option("--budget", "-b", help="'90%', '0.8', '11.3GiB' (repeat).")
    ] = None,
    method: Annotated[
        list[str] | None,
        typer.Option("--method", "-m", help="NAME, FORMULATION/BACKEND, checkmate/lp-rounding, module:function."),
    ] = None,
    seeds: Annotated[str, typer.Option("--seeds", help="Comma-separated seeds.")] = "0",
    time_limit: Annotated[float, typer.Option("--time-limit", help="Per-run time limit (s).")] = 60.0,
    grace: Annotated[float, typer.Option("--grace", help="Seconds past the limit before the kill.")] = 30.0,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Results file (default bench_results/NAME.jsonl).")
    ] = None,
    graphs_dir: Annotated[Path | None, typer.Option("--graphs", help="Folder of graph files.")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Runs at a time (local pool).")] = 1,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler, tcp://HOST:PORT.")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="Only these groups of the sweep file.")] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Rerun errors, crashes, timeouts.")] = False,
    schedules: Annotated[Path | None, typer.Option("--schedules", help="Also write each schedule here.")] = None,
    allow_code: Annotated[
        bool,
        typer.Option(
            "--allow-code", help="Let the sweep file run code it names (plug-in methods, extension files or modules)."
        ),
    ] = False,
) -> None:
    """Run a sweep (skipping runs already in the results file), each run in its own process."""
    from remat_models.bench.pools import make_pool, run_sweep
    from remat_models.bench.store import check_results_file
    from remat_models.bench.sweep import expand

    sweep = _sweep(sweep_file, graph, budget, method, seeds, time_limit, grace, allow_code)
    results = out or Path("bench_results") / f"{sweep.name}.jsonl"
    if results.is_dir():
        raise ConfigurationError(f"results path {results} is a folder")
    runs = expand(sweep, graphs_dir=graphs_dir, schedule_dir=schedules, only=group)
    check_not_input(results, [*([sweep_file] if sweep_file else []), *sorted({run.graph_path for run in runs})])
    check_results_file(results)  # never appended to a plan, a graph or any other file
    statuses: Counter[str] = Counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=progress_console, transient=False) as progress:
        task = progress.add_task(f"sweep {sweep.name}", total=len(runs))

        def started(pending: int, skipped: int) -> None:
            progress.update(task, total=pending, description=f"sweep {sweep.name} ({skipped} already done)")

        def finished(record: dict[str, Any]) -> None:
            statuses[record["status"]] += 1
            label = f"{record['method']} on {record['graph_file']} at {record['budget_spec']}: {record['status']}"
            progress.update(task, advance=1, description=label)

        with _signals_interrupt() as received:
            try:
                run_sweep(
                    runs,
                    results,
                    make_pool(jobs, scheduler),
                    retry_failed=retry_failed,
                    on_start=started,
                    on_record=finished,
                )
            except KeyboardInterrupt:
                _interrupted(received[0] if received else signal.SIGINT, statuses, results)
    summary = ", ".join(f"{status} {count}" for status, count in statuses.most_common()) or "nothing to run"
    console.print(f"{len(runs)} runs in the sweep; this time: {summary}; results in {results}")


def _sweep(
    sweep_file: Path | None,
    graph: list[str] | None,
    budget: list[str] | None,
    method: list[str] | None,
    seeds: str,
    time_limit: float,
    grace: float,
    allow_code: bool = False,
) -> Sweep:
    """The sweep of a file, or of the --graph/--budget/--method options (one or the other)."""
    from remat_models.bench.sweep import load_sweep, sweep_from_options

    if sweep_file is not None and (graph or budget or method):
        raise ConfigurationError("give a sweep file or --graph/--budget/--method, not both")
    if sweep_file is not None:
        return load_sweep(sweep_file, allow_code=allow_code)
    if not (graph and budget and method):
        raise ConfigurationError("without a sweep file, give --graph, --budget and --method (each repeatable)")
    return sweep_from_options(graph, budget, method, seeds=_seeds(seeds), time_limit=time_limit, grace=grace)


def _interrupted(signum: signal.Signals, statuses: Counter[str], results: Path) -> None:
    """Say what the interrupted sweep recorded and exit 128 + the signal's number (130 SIGINT, 143 SIGTERM)."""
    summary = ", ".join(f"{status} {count}" for status, count in statuses.most_common()) or "no run recorded"
    line = f"interrupted ({signum.name}): {summary}; results in {results}"
    progress_console.print(line, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(128 + signum)


@contextmanager
def _signals_interrupt() -> Iterator[list[signal.Signals]]:
    """While inside, SIGINT and SIGTERM raise KeyboardInterrupt (a sweep stops, recording its killed runs).

    Yields the signals received, in order (empty for a KeyboardInterrupt raised otherwise).
    """
    received: list[signal.Signals] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signal.Signals(signum))
        raise KeyboardInterrupt

    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    handled = [signum for signum, handler in previous.items() if handler not in (signal.SIG_IGN, None)]
    for signum in handled:
        signal.signal(signum, on_signal)
    try:
        yield received
    finally:
        for signum in handled:
            signal.signal(signum, previous[signum])


@bench_app.command("report")
def report_command(
    results: ResultsPath,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output folder (default RESULTS_report).")] = None,
    reference: Annotated[Path | None, typer.Option("--reference", help="Folder of published CSVs.")] = None,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Also draw progress and trade-off plots.")] = True,
    title: Annotated[str, typer.Option("--title", help="Report title.")] = "",
) -> None:
    """Markdown and CSV tables in the papers' layouts with the published numbers beside ours, and plots."""
    from remat_models.bench.paths import default_reference_dir
    from remat_models.bench.reference import NO_REFERENCE, load_reference
    from remat_models.bench.report import build_tables, write_report

    folder = out or results.with_name(f"{results.stem}_report")
    _check_report_folder(folder, results)
    records = _records(results)
    reference_dir: Path | None = reference or default_reference_dir()
    if reference is None and not reference_dir.is_dir():  # a fresh clone: no shared folder beside it
        note = f"note: no published numbers ({reference_dir} is absent; pass --reference FOLDER)"
        progress_console.print(note, markup=False, highlight=False)
        reference_dir = None
    written = write_report(records, folder, reference_dir, plots=plots, title=title or f"Benchmarks: {results.name}")
    tables = build_tables(records, NO_REFERENCE if reference_dir is None else load_reference(reference_dir))
    console.print(_rich(tables["all_runs"]))
    console.print(f"wrote {', '.join(str(p) for p in written)}")


@plot_app.command("progress")
def plot_progress_command(results: ResultsPath, out: StemOption) -> None:
    """Objective against time per method (Moccasin Fig. 1/5), one panel per graph and budget."""
    from remat_models.bench.plots import plot_progress

    _check_plot_stem(out, [results])
    console.print(f"wrote {', '.join(map(str, plot_progress(_records(results), out)))}")


@plot_app.command("tradeoff")
def plot_tradeoff_command(results: ResultsPath, out: StemOption) -> None:
    """Cost increase against budget per method (FastSA Fig. 9), one panel per graph."""
    from remat_models.bench.plots import plot_tradeoff

    _check_plot_stem(out, [results])
    console.print(f"wrote {', '.join(map(str, plot_tradeoff(_records(results), out)))}")


@plot_app.command("timeline")
def plot_timeline_command(
    graph_path: Annotated[Path, typer.Argument(help="Graph JSON.")],
    schedule_paths: Annotated[list[Path], typer.Argument(help="Schedule JSON files (remat solve --out, --schedules).")],
    out: StemOption,
    budget: Annotated[str | None, typer.Option("--budget", "-b", help="Draw this budget line.")] = None,
) -> None:
    """Memory in use at every step of each schedule, beside the input order."""
    from remat_models.bench.plots import plot_timeline
    from remat_models.core.budget import parse_budget
    from remat_models.io import read_graph, read_schedule

    _check_plot_stem(out, [graph_path, *schedule_paths])
    graph = read_graph(graph_path)
    schedules = [(path.stem, read_schedule(path, graph)) for path in schedule_paths]
    limit = None if budget is None else parse_budget(budget, graph)
    console.print(f"wrote {', '.join(map(str, plot_timeline(graph, schedules, limit, out)))}")


REPORT_SUFFIXES = (".md", ".csv", ".png", ".svg")  # what `remat bench report` writes into its folder


def _check_report_folder(folder: Path, results: Path) -> None:
    """Refuse a report folder that is the results file, or holds it under a name the report may write."""
    check_not_input(folder, [results])
    if results.resolve().parent == folder.resolve() and results.suffix in REPORT_SUFFIXES:
        raise OutputError(f"results file {results} lies in the report folder {folder}, where it may be overwritten")


def _check_plot_stem(stem: Path, inputs: list[Path]) -> None:
    """Refuse a plot stem whose .png or .svg file is one of the inputs."""
    for suffix in (".png", ".svg"):
        check_not_input(stem.with_suffix(suffix), inputs)


def _records(path: Path) -> list[dict[str, Any]]:
    from remat_models.bench.store import read_records

    if not path.is_file():
        raise ConfigurationError(f"results file {path} does not exist")
    records = read_records(path)
    if not records:
        raise ConfigurationError(f"results file {path} holds no complete record")
    return records


def _seeds(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise ConfigurationError(f"--seeds takes comma-separated integers, got {text!r}") from error


def _rich(table: Any) -> Table:
    """A bench Table as a rich Table (Markdown formatting of each cell)."""
    view = Table(title=table.title)
    for column in table.columns:
        view.add_column(column.header, overflow="fold")  # a narrow terminal wraps cells, never cuts them
    for cells in table.formatted_rows():
        view.add_row(*cells)
    return view
