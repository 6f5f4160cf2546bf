"""Per-block selective activation checkpointing (``rt.sac_plan(..., blocks=...)``) vs eager on zoo models.

Each transformer layer (the ``--blocks`` predicate on qualified module names) runs under its own
``torch.utils.checkpoint`` with the save-set plan's policy; also the default regions (``blocks=None``: the
model's repeated blocks) and the whole-model region (``blocks=[model]``) for comparison. Only regions whose
plan drops a value the backward reads are checkpointed (``regions`` counts them). Measured as in
``vs_pytorch.py`` (same functions): peak live bytes of one step above the pre-step baseline (profiler memory
events), FLOPs (``FlopCounterMode``), median step time interleaved with eager steps, the largest gradient
difference from eager under the same seed; plus the plan's budget and predicted peak above the fixed memory
(params, inputs), as the measured peak is.

  nice -n 5 .venv/bin/python benchmarks/sac_blocks.py --models gpt2-dropout --budgets 1,0.5,0
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

import torch
from vs_pytorch import MIB, build, grads_after, load_zoo, measure

import remat_models.torch as rt

LAYERS = r"(transformer\.h|bert\.encoder\.layer|model\.layers|vit\.encoder\.layer)\.\d+"


HEADER = (
    "| model | regions | b | budget (MiB) | predicted (MiB) | peak x eager | FLOPs x eager | time x eager "
    "| max grad diff |\n|---|---|---|---|---|---|---|---|---|"
)


def run_model(zoo: Any, name: str, pattern: re.Pattern[str], budgets: list[float], repeats: int) -> None:
    """Print eager's row, then per-block and whole-model regions at each budget, for one zoo model."""
    model, inputs, targets, loss_fn = build(zoo, name)

    def eager() -> None:
        loss_fn(model(inputs), targets).backward()

    reference = grads_after(model, eager)
    peak, flops, seconds, _, _ = measure(model, eager, eager, None, repeats)
    print(f"| {name} | eager: {peak / MIB:.1f} MiB, {flops / 1e9:.2f} GFLOP, {seconds * 1e3:.0f} ms | | | | | | | |")
    choices = (("per block", lambda n: pattern.fullmatch(n) is not None), ("default", None), ("whole model", [model]))
    for regions, blocks in choices:
        for budget in budgets:
            plan = rt.sac_plan(model, inputs, loss_fn, targets, activation_budget=budget, blocks=blocks)
            fixed = plan.torch_graph.fixed_mem
            run = rt.checkpointed(model, plan)

            def step(run: Callable[..., Any] = run) -> None:
                loss_fn(run(inputs), targets).backward()

            got, got_flops, got_seconds, eager_seconds, error = measure(model, step, eager, reference, repeats)
            print(
                f"| {name} | {regions} ({len(plan.blocks)}) | {budget} | {(plan.budget - fixed) / MIB:.1f} | "
                f"{(plan.predicted_peak - fixed) / MIB:.1f} | {got / peak:.2f} | {got_flops / flops:.2f} | "
                f"{got_seconds / eager_seconds:.2f} | {error:.1e} |",
                flush=True,
            )


def main() -> None:
    """Measure eager, per-block, default and whole-model regions at each budget; print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2-dropout")
    parser.add_argument("--budgets", default="1,0.5,0")
    parser.add_argument("--blocks", default=LAYERS, help="regex: modules whose full name matches are the blocks")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    zoo = load_zoo()
    print(HEADER)
    for name in args.models.split(","):
        run_model(zoo, name, re.compile(args.blocks), [float(b) for b in args.budgets.split(",")], args.repeats)


if __name__ == "__main__":
    main()
