"""The generated training step with nothing recomputed vs eager ``loss.backward()`` on the zoo models (CPU).

For every model of ``examples/zoo.py`` (GPT-2, BERT, LLaMA, ViT, ResNet; the transformers once with
the zoo's eager attention and once with ``sdpa``) and size: FLOPs of one step
(``torch.utils.flop_counter`` plus CPU flash attention, ours / eager), gradients bit-identical to
eager's, median step time of the generated step and of the interpreter over eager's (one thread,
eager and ours alternating within one run), and the generated step's measured peak (profiler memory
events above the pre-step baseline) vs predicted. ``--flops-only`` (for ``bench``, too large to run
here) counts FLOPs on fake tensors and times nothing.

  nice -n 5 .venv/bin/python benchmarks/compiled_step.py --sizes tiny,small
  nice -n 5 .venv/bin/python benchmarks/compiled_step.py --sizes bench --flops-only
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.func import functional_call

import remat_models.torch as rt
from remat_models.core.schedule import input_order_schedule
from remat_models.torch.costs import flop_counter
from remat_models.torch.validate import profiled_peak

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("remat_example_zoo", ROOT / "examples" / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
sys.modules["remat_example_zoo"] = zoo
_spec.loader.exec_module(zoo)



def build(name: str, size: str, attention: str) -> zoo.Example:
    """A zoo model (seeded: two calls give identical weights and batches) with the given attention."""
    example = zoo.ZOO[name](size=size)
    if attention != "eager":
        example.model.set_attn_implementation(attention)
    return example


def eager_step(example: zoo.Example) -> None:
    """Forward, loss and ``loss.backward()``."""
    example.loss_fn(example.model(example.inputs), example.targets).backward()


def flops(fn: Callable[[], Any]) -> int:
    """FLOPs ``fn`` runs."""
    with flop_counter() as counter:
        fn()
    return counter.get_total_flops()


def fake_flops(example: zoo.Example, step: rt.RematStep) -> tuple[int, int]:
    """(eager, ours) FLOPs on fake tensors (nothing is allocated; for sizes too large to run)."""
    mode = FakeTensorMode()
    fixed = rt.fixed_tensors(example.model, step.torch_graph.traced, example.inputs, example.targets)
    fake = [mode.from_tensor(t) for t in fixed]
    params = {n: mode.from_tensor(p) for n, p in example.model.named_parameters()}
    buffers = {n: mode.from_tensor(b) for n, b in example.model.named_buffers()}
    x, y = mode.from_tensor(example.inputs), mode.from_tensor(example.targets)

    def eager() -> None:
        loss = example.loss_fn(functional_call(example.model, (params, buffers), (x,)), y)
        torch.autograd.grad(loss, [p for p in params.values() if p.requires_grad])

    with mode:
        return flops(eager), flops(lambda: step.generated.module(*fake))


def medians(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median seconds of each function, run alternately ``repeats`` times (after one warm-up each)."""
    samples: dict[str, list[float]] = {key: [] for key in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for key, fn in fns.items():
            started = time.perf_counter()
            fn()
            samples[key].append(time.perf_counter() - started)
    return {key: statistics.median(values) for key, values in samples.items()}


def measure(name: str, size: str, attention: str, repeats: int, flops_only: bool) -> str:
    """One table row."""
    ours_ex, eager_ex = build(name, size, attention), build(name, size, attention)
    torch_graph = rt.extract(ours_ex.model, ours_ex.inputs, ours_ex.loss_fn, ours_ex.targets, name=name)
    step = rt.RematStep(ours_ex.model, torch_graph, input_order_schedule(torch_graph.graph))
    interpreter = rt.RematStep(ours_ex.model, torch_graph, step.schedule, compiled=False)
    label = f"| {name} | {size} | {attention} | {torch_graph.graph.n} |"
    if flops_only:
        eager_flops, our_flops = fake_flops(ours_ex, step)
        return f"{label} {our_flops / eager_flops:.4f} | | | | |"

    def ours() -> None:
        ours_ex.model.zero_grad(set_to_none=True)
        step(ours_ex.inputs, ours_ex.targets)

    def interpreted() -> None:
        ours_ex.model.zero_grad(set_to_none=True)
        interpreter(ours_ex.inputs, ours_ex.targets)

    def eager() -> None:
        eager_ex.model.zero_grad(set_to_none=True)
        eager_step(eager_ex)

    eager_flops, our_flops = flops(eager), flops(ours)
    same = all(
        (a.grad is None and b.grad is None)
        or (a.grad is not None and b.grad is not None and torch.equal(a.grad, b.grad))
        for a, b in zip(ours_ex.model.parameters(), eager_ex.model.parameters(), strict=True)
    )
    ours_ex.model.zero_grad(set_to_none=True)
    measured = profiled_peak(lambda: step(ours_ex.inputs, ours_ex.targets))
    times = medians({"eager": eager, "ours": ours, "interpreter": interpreted}, repeats)
    return (
        f"{label} {our_flops / eager_flops:.4f} | {'yes' if same else 'NO'} | "
        f"{times['eager'] * 1e3:.2f} ms | {times['ours'] / times['eager']:.3f} | "
        f"{times['interpreter'] / times['eager']:.3f} | {measured:,} / {step.predicted_peak:,} |"
    )


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="tiny,small")
    parser.add_argument("--models", default=",".join(zoo.ZOO))
    parser.add_argument("--attention", default="eager,sdpa", help="attention implementations of the transformers")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--flops-only", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, {args.repeats} alternating repeats")
    print(
        "| model | size | attention | nodes | FLOPs ours/eager | grads bit-identical | eager step "
        "| generated / eager | interpreter / eager | generated peak measured / predicted (B) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        for name in args.models.split(","):
            for attention in args.attention.split(",") if name != "resnet" else ["eager"]:
                print(measure(name, size, attention, args.repeats, args.flops_only), flush=True)


if __name__ == "__main__":
    main()
