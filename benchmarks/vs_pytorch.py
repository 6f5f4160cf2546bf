"""Side by side with PyTorch: a training step of zoo models, eager vs torch.compile's activation budget vs ours.

Systems, at activation budgets 1, 0.75, 0.5, 0.25, 0.1, 0 (PyTorch's and ours mean different things: see
docs/torch.md): ``eager`` (plain autograd); ``pytorch`` (``torch.compile`` with
``torch._functorch.config.activation_memory_budget``, min-cut partitioner + knapsack); ``ours-compile``
(``remat_models.torch.compile(method="saveset")``: our save set as recompute tags, PyTorch's partitioner);
``ours-matched`` (the same, with ``budget=`` the bytes PyTorch's plan measured at that budget: the
head-to-head); ``ours-schedule`` (``rt.compile``'s default, ``method="auto"``: the schedule emitted as it is,
``--method`` for another); ``ours-sac`` (eager autograd with ``torch.utils.checkpoint`` on the default
regions, the model's repeated blocks, and our selective-checkpointing policy); ``ours-executor``
(``remat_models.torch.plan(activation_budget=b, method=...)``: the schedule run by our executor, as generated
code, no torch.compile; the same ``--method``). The compiled
systems use the same backend (``--backend``: ``aot_eager`` = inductor's decompositions without inductor,
PyTorch's ``aot_eager_decomp_partition``; or ``inductor``).

Same instrument for all: peak = allocator-level live bytes of one step above the pre-step baseline (CPU:
the profiler's memory events, ``profile_memory=True``); FLOPs of every op run (:class:`CompiledFlops`); median step
time over ``--repeats`` steps, interleaved with eager steps (the ratio is of the two medians, so load on a
shared machine cancels); the largest gradient difference from eager under the same seed.

After the table it prints issue 33's done-when, criterion by criterion, with every miss
(:mod:`vs_pytorch_criteria`; ``--replot FILE`` for an earlier run's rows).

  nice -n 5 .venv/bin/python benchmarks/vs_pytorch.py -o vs_pytorch.jsonl --plot vs_pytorch.png
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch._functorch import config as functorch_config
from torch.utils.flop_counter import FlopCounterMode, _FlopCounterMode
from vs_pytorch_criteria import criteria
from vs_pytorch_pairs import Pair, pairs_table, run_pairs

import remat_models.torch as rt
from remat_models.torch.validate import profiled_peak

BUDGETS = (1.0, 0.75, 0.5, 0.25, 0.1, 0.0)
SEED = 1234
MIB = 2**20
ZOO_FILE = Path(__file__).resolve().parents[1] / "examples" / "zoo.py"
SYSTEMS = ("pytorch", "ours-matched", "ours-compile", "ours-schedule", "ours-sac", "ours-executor")
DROPOUT = 0.1  # the "-dropout" variants set every nn.Dropout to this and train


@dataclass
class Row:
    """One measured (model, system, budget)."""

    model: str
    system: str
    budget: float | None
    peak: int
    flops: int
    seconds: float  # median step time
    eager_seconds: float  # median eager step time, steps interleaved with this system's (load drifts cancel)
    grad_error: float
    predicted: int | None = None


def load_zoo() -> Any:
    """examples/zoo.py as a module (its ``mid`` size: bench-ish shapes that run in seconds on one CPU thread)."""
    spec = importlib.util.spec_from_file_location("remat_example_zoo", ZOO_FILE)
    zoo = importlib.util.module_from_spec(spec)
    sys.modules["remat_example_zoo"] = zoo
    spec.loader.exec_module(zoo)
    return zoo


def build(zoo: Any, name: str) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, Callable[..., torch.Tensor]]:
    """A zoo model at the mid size (``NAME-dropout``: dropout active), in training mode."""
    base, _, dropout = name.partition("-")
    model, inputs, targets, loss_fn = zoo.ZOO[base](size="mid")
    if dropout:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = DROPOUT
    model.train()
    return model, inputs, targets, loss_fn


class _CountedThrough(_FlopCounterMode):
    """``FlopCounterMode``'s dispatch mode, one that dynamo compiles through."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """Let dynamo run compiled code under this mode."""
        return True


class CompiledFlops(FlopCounterMode):
    """FLOPs of the ops a step runs, compiled steps included.

    Dynamo skips a frame run under a dispatch mode and then skips its code for good (pytorch#190286): under a
    plain ``FlopCounterMode`` a compiled step ran eagerly, then and in every later step (the tables before the
    tenth session timed eager steps as the compiled systems'). A mode that ignores compile internals is compiled
    through and sees the ATen ops ``aot_eager``'s graphs run (inductor's kernels are invisible to it).
    """

    def __enter__(self) -> CompiledFlops:
        self.flop_counts.clear()
        self.mod_tracker.__enter__()
        self.mode = _CountedThrough(self)
        self.mode.__enter__()
        return self


def grads_after(model: torch.nn.Module, step: Callable[[], Any]) -> list[torch.Tensor | None]:
    """Gradients of one step under the fixed seed."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(SEED)
    step()
    return [None if p.grad is None else p.grad.clone() for p in model.parameters()]


def measure(
    model: torch.nn.Module,
    step: Callable[[], Any],
    eager: Callable[[], Any],
    reference: list[torch.Tensor | None] | None,
    repeats: int,
) -> tuple[int, int, float, float, float]:
    """Peak bytes, FLOPs, median seconds of ``step`` and of ``eager`` (interleaved), largest gradient difference."""

    def fresh() -> None:
        model.zero_grad(set_to_none=True)
        step()

    fresh()  # warm-up (compiles)
    grads = grads_after(model, step)
    error = 0.0
    if reference is not None:
        error = max(
            (float((g - r).abs().max()) for g, r in zip(grads, reference, strict=True) if g is not None), default=0.0
        )
    model.zero_grad(set_to_none=True)
    peak = profiled_peak(step)
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for run, times in zip((step, eager), samples, strict=True):
            model.zero_grad(set_to_none=True)
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
    seconds, eager_seconds = (statistics.median(times) for times in samples)
    model.zero_grad(set_to_none=True)
    with CompiledFlops(display=False) as counter:  # last: no mode before the times
        step()
    return peak, counter.get_total_flops(), seconds, eager_seconds, error


def run_model(
    zoo: Any,
    name: str,
    backend: str,
    repeats: int,
    budgets: tuple[float, ...],
    systems: tuple[str, ...] = SYSTEMS,
    method: str = "auto",
    pair_repeats: int = 0,
) -> list[Row | Pair]:
    """Every system at every budget on one model (``ours-schedule``, ``ours-executor``: ``method``'s schedule).

    Then, with ``pair_repeats``, each PyTorch point against its partner of ours, steps interleaved
    (:mod:`vs_pytorch_pairs`).
    """
    model, inputs, targets, loss_fn = build(zoo, name)

    def eager() -> None:
        loss_fn(model(inputs), targets).backward()

    reference = grads_after(model, eager)
    rows = [Row(name, "eager", None, *measure(model, eager, eager, None, repeats))]

    def add(system: str, budget: float, step: Callable[[], Any], predicted: int | None = None) -> None:
        rows.append(Row(name, system, budget, *measure(model, step, eager, reference, repeats), predicted))

    pytorch_backend = "aot_eager_decomp_partition" if backend == "aot_eager" else "inductor"
    for budget in budgets:
        done = len(rows)
        matched = None
        if "pytorch" in systems:
            torch._dynamo.reset()
            with functorch_config.patch(activation_memory_budget=budget):
                theirs = torch.compile(lambda x, y: loss_fn(model(x), y), backend=pytorch_backend)
                add("pytorch", budget, lambda c=theirs: c(inputs, targets).backward())
            matched = rows[-1].peak  # ours within the bytes PyTorch's plan measured at this budget
        compiled = {
            "ours-matched": dict(budget=matched, method="saveset"),
            "ours-compile": dict(activation_budget=budget, method="saveset"),
            "ours-schedule": dict(activation_budget=budget, method=method),
        }
        for system, settings in compiled.items():
            if system in systems and (system != "ours-matched" or matched is not None):
                torch._dynamo.reset()
                ours = rt.compile(model, inputs, loss_fn, targets, backend=backend, cache_dir=None, **settings)
                add(system, budget, lambda c=ours: c(inputs, targets).backward(), ours.plan and ours.plan.emitted_peak)
        if "ours-sac" in systems:
            plan = rt.sac_plan(model, inputs, loss_fn, targets, activation_budget=budget)
            checkpointed = rt.checkpointed(model, plan)
            predicted = plan.predicted_peak - plan.torch_graph.fixed_mem  # the traced Graph counts the fixed memory
            add("ours-sac", budget, lambda r=checkpointed: loss_fn(r(inputs), targets).backward(), predicted)
        if "ours-executor" in systems:
            step = rt.plan(model, inputs, loss_fn, targets, activation_budget=budget, method=method, cache_dir=None)
            add("ours-executor", budget, lambda s=step: s(inputs, targets), step.predicted_peak)
        cells = [f"{r.system} {r.peak / MIB:.1f} (predicted {(r.predicted or 0) / MIB:.1f})" for r in rows[done:]]
        print(f"{name} b={budget}: {', '.join(cells)} MiB", flush=True)
    if not pair_repeats:
        return rows
    return [*rows, *run_pairs(name, model, inputs, targets, loss_fn, rows, backend, pair_repeats, method)]


def read_rows(text: str) -> list[Row | Pair]:
    """The rows and pairs of an ``-o`` file."""
    records = [json.loads(line) for line in text.splitlines()]
    return [Pair(**r) if r.get("kind") == "pair" else Row(**r) for r in records]


def report(rows: list[Row | Pair], budgets: tuple[float, ...]) -> str:
    """The table, the head-to-head pairs (if any), and the done-when."""
    table_rows = [r for r in rows if isinstance(r, Row)]
    pairs = [r for r in rows if isinstance(r, Pair)]
    parts = [table(table_rows, budgets)]
    if pairs:
        eager_peaks = {r.model: r.peak for r in table_rows if r.system == "eager"}
        parts.append("Head to head, steps interleaved:\n" + pairs_table(pairs, eager_peaks))
    return "\n\n".join([*parts, "\n".join(criteria(table_rows, pairs))])


def table(rows: list[Row], budgets: tuple[float, ...]) -> str:
    """Markdown: per model and system, peak / FLOPs / time as multiples of eager's, and the gradient error."""
    lines = [
        "| model | system | " + " | ".join(f"b = {b}" for b in budgets) + " | max grad diff |",
        "|---|---|" + "---|" * (len(budgets) + 1),
    ]
    for model in dict.fromkeys(r.model for r in rows):
        eager = next(r for r in rows if r.model == model and r.system == "eager")
        lines.append(
            f"| {model} | eager: {eager.peak / MIB:.1f} MiB, {eager.flops / 1e9:.2f} GFLOP, "
            f"{eager.seconds * 1e3:.0f} ms |" + " |" * (len(budgets) + 1)
        )
        for system in SYSTEMS:
            mine = {r.budget: r for r in rows if r.model == model and r.system == system}
            if not mine:
                continue
            cells = [
                f"{r.peak / eager.peak:.2f} / {r.flops / eager.flops:.2f} / {r.seconds / r.eager_seconds:.2f}"
                for r in (mine[b] for b in budgets)
            ]
            error = max(r.grad_error for r in mine.values())
            lines.append(f"| {model} | {system} | " + " | ".join(cells) + f" | {error:.1e} |")
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    """Measured peak vs FLOPs (top) and vs step time (bottom), x eager, one curve per system, a column per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r.model for r in rows))
    figure, axes = plt.subplots(2, len(names), figsize=(4 * len(names), 7), squeeze=False)
    for column, model in enumerate(names):
        eager = next(r for r in rows if r.model == model and r.system == "eager")
        for system, marker in zip(SYSTEMS, "osD^vP", strict=True):
            mine = sorted((r for r in rows if r.model == model and r.system == system), key=lambda r: -(r.budget or 0))
            peaks = [r.peak / eager.peak for r in mine]
            axes[0][column].plot(peaks, [r.flops / eager.flops for r in mine], marker=marker, label=system)
            axes[1][column].plot(peaks, [r.seconds / r.eager_seconds for r in mine], marker=marker, label=system)
        for row, what in enumerate(("FLOPs", "step time")):
            axes[row][column].axvline(1.0, color="grey", linewidth=0.5)
            axes[row][column].set(title=model, xlabel="peak (x eager)", ylabel=f"{what} (x eager)")
        axes[0][column].legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,gpt2-dropout,bert,llama,vit,resnet")
    parser.add_argument("--backend", choices=("aot_eager", "inductor"), default="aot_eager")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"of {', '.join(SYSTEMS)}")
    parser.add_argument("--method", default="auto", help="the planner of ours-schedule")
    parser.add_argument(
        "--pairs", type=int, default=15, help="interleaved steps of each PyTorch point against ours (0: none)"
    )
    parser.add_argument("-o", "--output", type=Path, help="JSON lines of every row")
    parser.add_argument("--plot", type=Path, help="PNG of peak vs FLOPs and vs time")
    parser.add_argument("--replot", type=Path, help="read the rows of an earlier -o file instead of measuring")
    parser.add_argument(
        "--pairs-from", type=Path, help="measure only the pairs (--pairs steps), against an earlier -o file's rows"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    budgets = tuple(float(b) for b in args.budgets.split(","))
    zoo = load_zoo()
    if args.replot:
        rows = read_rows(args.replot.read_text())
        if args.plot:
            plot([r for r in rows if isinstance(r, Row)], args.plot)
        print(report(rows, budgets))
        return
    earlier = [r for r in read_rows(args.pairs_from.read_text()) if isinstance(r, Row)] if args.pairs_from else []
    rows: list[Row | Pair] = list(earlier)
    systems = tuple(args.systems.split(","))
    for name in args.models.split(","):  # results are written after each model
        if earlier:
            model, inputs, targets, loss_fn = build(zoo, name)
            rows += run_pairs(name, model, inputs, targets, loss_fn, earlier, args.backend, args.pairs, args.method)
        else:
            rows += run_model(zoo, name, args.backend, args.repeats, budgets, systems, args.method, args.pairs)
        if args.output:
            args.output.write_text("".join(json.dumps(asdict(r)) + "\n" for r in rows))
        if args.plot:
            plot([r for r in rows if isinstance(r, Row)], args.plot)
        print(f"backend {args.backend}; cells: peak / FLOPs / time, each x eager")
        print(report(rows, budgets), flush=True)


if __name__ == "__main__":
    main()
