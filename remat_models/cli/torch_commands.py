"""`remat graph from-torch` and `remat validate`: the PyTorch front end on the command line."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer
from rich.table import Table

from remat_models.cli.console import make_console
from remat_models.cli.options import TimeLimitOption
from remat_models.core.limits import check_count
from remat_models.errors import BackendUnavailableError, RematError
from remat_models.planning.methods import DEFAULT_METHOD

console = make_console()

ExampleSpec = Annotated[
    str, typer.Argument(help="FILE.py:NAME, a function returning (model, inputs, targets, loss_fn).")
]
BatchOption = Annotated[int | None, typer.Option("--batch", help="Batch size (>= 1) passed to NAME(batch=...).")]
DEVICE_HELP = "cpu, cuda, cuda:N, mps...: a device torch finds here"


def _torch_front_end() -> ModuleType:
    """Import remat_models.torch.validate, or say how to install torch."""
    try:
        import remat_models.torch.validate as front_end
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the PyTorch front end needs torch ({exc}); install it with: pip install 'remat_models[torch]'"
        ) from exc
    return front_end


def from_torch(
    spec: ExampleSpec,
    output: Annotated[Path, typer.Option("--out", "-o", help="Graph JSON to write.")],
    batch: BatchOption = None,
    cost: Annotated[str, typer.Option("--cost", help="flops | time (measured on --device)")] = "flops",
    device: Annotated[str, typer.Option("--device", help=DEVICE_HELP)] = "cpu",
    impls: Annotated[
        bool, typer.Option("--impls", help="Attach alternative implementations (input-activated ReLU backward).")
    ] = False,
) -> None:
    """Trace one training step of a PyTorch model (fake tensors) and write its graph."""
    from remat_models.io import write_graph
    from remat_models.io.atomic import check_output

    check_output(output, [spec.rpartition(":")[0]])  # before the (slow) trace; never over the example file
    front_end = _torch_front_end()
    from remat_models.torch import extract

    front_end.resolve_device(device)  # before the example is built
    model, inputs, targets, loss_fn = front_end.load_example(spec, batch)
    model, inputs, targets = front_end.to_device(model, inputs, targets, device)
    torch_graph = extract(model, inputs, loss_fn, targets, cost=cost, name=spec.rpartition(":")[2])
    if impls:
        from remat_models.torch.impl_ops import attach_impls

        torch_graph = attach_impls(torch_graph)
    graph = torch_graph.graph
    write_graph(graph, output)
    console.print(
        f"wrote {output} ({graph.name}: {graph.n} nodes, {graph.m} edges, fixed memory {graph.fixed_mem:,} B, "
        f"cost: {cost})"
    )


def validate(
    spec: ExampleSpec,
    budget: Annotated[str, typer.Option("--budget", "-b", help="Bytes, '11.3GiB', '50%' or '0.5'.")] = "50%",
    method: Annotated[str, typer.Option("--method", "-m", help="Planning method (default auto).")] = DEFAULT_METHOD,
    device: Annotated[str, typer.Option("--device", help=DEVICE_HELP)] = "cpu",
    batch: BatchOption = None,
    repeats: Annotated[int, typer.Option("--repeats", help="Timing repeats (median).")] = 5,
    time_limit: TimeLimitOption = None,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="Plan cache folder (default: the user's cache folder).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Plan anew and store nothing.")] = False,
) -> None:
    """Run a planned training step against plain autograd: predicted vs measured memory, gradients, time.

    Planning takes 5 s by default for methods with a time limit (``--time-limit`` for more); the plan is
    cached (``--cache-dir``, ``--no-cache``) and reused by the next run with the same graph, budget and method.
    """
    front_end = _torch_front_end()
    check_count(repeats, "repeats")
    front_end.resolve_device(device)  # before the example is built
    model, inputs, targets, loss_fn = front_end.load_example(spec, batch)
    cache = False if no_cache else (cache_dir or True)
    report = front_end.validate(
        model,
        inputs,
        targets,
        loss_fn,
        budget=budget,
        method=method,
        device=device,
        repeats=repeats,
        time_limit=time_limit,
        cache_dir=cache,
    )
    table = Table(title=f"{spec} on {report.device} ({method}, budget {budget} -> {report.budget:,} B)")
    table.add_column("quantity", overflow="fold")
    table.add_column("value", justify="right", overflow="fold")
    table.add_row("predicted peak (activations, above fixed)", f"{report.predicted:,} B")
    table.add_row("measured peak", f"{report.measured:,} B")
    table.add_row("measured - predicted", f"{report.error:+,} B")
    if report.eager_measured is not None:
        table.add_row("plain autograd peak", f"{report.eager_measured:,} B")
    table.add_row("gradients", "bit-identical" if report.grads_equal else f"max |diff| {report.max_grad_error:.3g}")
    table.add_row("plain autograd step", f"{report.eager_seconds * 1e3:.2f} ms")
    table.add_row("executor, input order (no remat)", f"{report.input_order_seconds * 1e3:.2f} ms")
    table.add_row("executor, planned", f"{report.remat_seconds * 1e3:.2f} ms")
    table.add_row("time overhead vs plain autograd", f"{report.overhead:+.1f} %")
    console.print(table)
    if not report.within_tolerance:
        raise RematError(f"measured peak {report.measured:,} B is not within 1 % or 1 MiB of {report.predicted:,} B")
