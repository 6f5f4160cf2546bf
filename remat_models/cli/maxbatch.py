"""`remat max-batch`: the largest batch within a memory size under a cost cap (Checkmate section 6.4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from remat_models.cli.console import EXIT_NO_SCHEDULE, make_console
from remat_models.core.batch import BatchScaling
from remat_models.core.graph import Graph
from remat_models.core.units import parse_size
from remat_models.errors import ConfigurationError
from remat_models.io import read_graph, write_schedule
from remat_models.io.atomic import check_output
from remat_models.planning.maxbatch import METHODS, MaxBatchResult, max_batch

console = make_console()
errors = make_console(stderr=True)


def max_batch_command(
    graph_path: Annotated[Path, typer.Argument(help="Graph JSON (own format or networkx node-link).")],
    memory: Annotated[str, typer.Option("--memory", "-M", help="Device memory: bytes or units ('16GB').")],
    file_batch: Annotated[
        int, typer.Option("--file-batch", help="Batch size the graph file was exported at (its sizes are per batch).")
    ],
    fixed: Annotated[
        str, typer.Option("--fixed", help="Bytes constant in the batch the file does not carry (e.g. parameters).")
    ] = "0",
    formulation: Annotated[
        str | None, typer.Option("--formulation", "-f", help="Exact base: checkmate (default) or moccasin.")
    ] = None,
    heuristic: Annotated[
        str | None,
        typer.Option("--heuristic", help="Heuristic: checkpoint-all, chen-sqrtn, chen-greedy, griewank, fastsa."),
    ] = None,
    backend: Annotated[str | None, typer.Option("--backend", help="Solver (default: the formulation's).")] = None,
    method: Annotated[str, typer.Option("--method", help=f"{' | '.join(METHODS)}.")] = "auto",
    cap_factor: Annotated[
        float, typer.Option("--cap-factor", help="Cost cap: total + (factor - 1) x forward cost (2: one extra pass).")
    ] = 2.0,
    cap_kinds: Annotated[
        str, typer.Option("--cap-kinds", help="Node kinds counted as the forward pass, e.g. forward,loss.")
    ] = "forward",
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="Seconds for the whole search (bisection: split over probes).")
    ] = None,
    init: Annotated[
        str,
        typer.Option(
            "--init",
            help="Warm start: a heuristic's best batch; auto (default): the fast baselines' best; none: none.",
        ),
    ] = "auto",
    seed: Annotated[int, typer.Option("--seed", help="Solver / FastSA seed.")] = 0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the schedule (at the batch) here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
    option_pairs: Annotated[
        list[str] | None, typer.Option("--option", "-O", help="Formulation option key=value (repeatable), e.g. -O C=3.")
    ] = None,
) -> None:
    """Largest batch that fits --memory with at most one extra forward pass (--cap-factor); exit 3 if none."""
    if out is not None:
        check_output(out, [graph_path])
    if heuristic is not None and (formulation or backend or option_pairs):
        raise ConfigurationError("--heuristic runs by bisection on the simulator: no --formulation/--backend/-O/--init")
    raw = read_graph(graph_path)
    graph = BatchScaling.proportional(raw, file_batch, parse_size(fixed)).attach(raw)
    limit = parse_size(memory)
    options = _options(option_pairs)
    result = max_batch(
        graph,
        limit,
        method=method,
        heuristic=heuristic,
        formulation=formulation,
        backend=backend,
        cap_factor=cap_factor,
        cap_kinds=[kind.strip() for kind in cap_kinds.split(",") if kind.strip()],
        time_limit=time_limit,
        seed=seed,
        options=options,
        init=None if init == "none" else init,
    )
    _report(result, graph, graph_path, file_batch, f"memory: {memory} -> [bold]{limit:,}[/bold] B", out, as_json)


def _report(
    result: MaxBatchResult, graph: Graph, path: Path, file_batch: int, memory: str, out: Path | None, as_json: bool
) -> None:
    """Print the result (a table, or one JSON object), write the schedule at its batch; exit 3 if no batch fits.

    No batch fits: there is no schedule, and an existing ``out`` is left as it was.
    """
    if as_json:
        console.out(json.dumps({"graph": str(path), "file_batch": file_batch, **result.summary()}), highlight=False)
    else:
        console.print(memory)
        console.print(_table(path.name, result))
    if out is not None and result.schedule is not None:
        write_schedule(out, result.schedule, graph.at_batch(result.batch), metadata=result.summary())
        if not as_json:
            console.print(f"wrote {out}")
    if result.interrupted_by is not None:  # exit 128 + the signal's number, as a shell reports it
        line = f"interrupted ({result.interrupted_by.name}): max batch stopped early; shown is the largest batch found"
        errors.print(line, markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(128 + result.interrupted_by)
    if result.batch < 1:
        errors.print(f"error: {result.base} fits no batch within {result.memory:,} B under the cap: {result.status}")
        raise typer.Exit(EXIT_NO_SCHEDULE)


def _table(name: str, result: MaxBatchResult) -> Table:
    table = Table(title=f"max batch of {name} ({result.base}, {result.method})", show_header=False)
    rows = [
        ("batch", f"{result.batch:,}"),
        ("upper bound", "-" if result.upper_bound is None else f"{result.upper_bound:,}"),
        ("status", result.status),
        ("peak at batch", "-" if result.peak is None else f"{result.peak:,} B"),
        ("total cost", "-" if result.total_cost is None else f"{result.total_cost:,.6g}"),
        ("cost cap", f"{result.cap:,.6g}"),
        ("per-sample peak", "-" if result.per_sample_peak is None else f"{result.per_sample_peak:,} B"),
        ("checkpoint-all batch", f"{result.lower_limit:,}"),
        ("lower-bound limit", f"{result.upper_limit:,}"),
        ("probes", f"{len(result.probes)}"),
        ("wall time", f"{result.wall_time:.2f} s"),
    ]
    for label, value in rows:
        table.add_row(label, value)
    return table


def _options(pairs: list[str] | None) -> dict[str, object] | None:
    """``key=value`` pairs as a mapping; values are JSON numbers/booleans where they parse, else strings."""
    options: dict[str, object] = {}
    for pair in pairs or []:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ConfigurationError(f"-O takes key=value, got {pair!r}")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value.strip()
    return options or None
