"""Head-to-head step times for ``vs_pytorch.py``: each PyTorch point against one of ours, steps interleaved.

The table's time cells are each system's median over its own steps, divided by eager's median over steps
interleaved with them. Two systems' cells are then measured minutes apart, and on a shared machine their ratio
drifted by 5-10 % between runs of the same code. A pair runs PyTorch's compiled step and ours alternately,
both compiled beforehand, and takes the median of the per-step ratios (ours / PyTorch's), so load drifts cancel
within each pair. Peaks are measured again in the pair, the same way as in the table.

Partners (``rt.compile``, ``method``): at b = 1 ours at activation budget 1 (the speed criterion); at every b,
ours within :data:`MATCH_SHARE` of the peak PyTorch's point measured in the table, in bytes (the plan that
recomputes least below it, where the table's budgets may land far below: on GPT-2 with dropout ours at b = 0
measured 1.13 x the time of PyTorch's b = 0.5, which peaked 4 % higher).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch._functorch import config as functorch_config

import remat_models.torch as rt
from remat_models.errors import RematError
from remat_models.torch.validate import profiled_peak

MATCH_SHARE = 0.98
"""Ours is planned within this share of PyTorch's measured peak: our measured peaks are within 1 % (or 0.2 MiB)
of the plan's."""


@dataclass
class Pair:
    """PyTorch's compiled step at ``theirs_budget`` against ours at ``ours_budget``, steps interleaved."""

    model: str
    theirs_budget: float
    ours_budget: float | None  # an activation budget, or None: ``ours_bytes``
    ours_bytes: int | None
    theirs_peak: int
    ours_peak: int
    ratio: float  # median over interleaved steps of (our step's seconds / PyTorch's)
    repeats: int
    kind: str = "pair"

    def ours(self) -> str:
        """Our budget: ``b=...`` or bytes."""
        return f"b={self.ours_budget}" if self.ours_bytes is None else f"{self.ours_bytes:,} B"

    def dominates(self) -> bool:
        """Ours below PyTorch's point in both peak and time."""
        return self.ours_peak < self.theirs_peak and self.ratio < 1.0


def partners(rows: Sequence[Any], model: str) -> list[tuple[float, float | None, int | None]]:
    """(PyTorch's budget, our activation budget, our bytes) pairs of ``model``'s PyTorch rows: b = 1 against ours
    at activation budget 1, and each point against ours within :data:`MATCH_SHARE` of its measured peak."""
    found: list[tuple[float, float | None, int | None]] = []
    for theirs in (r for r in rows if r.model == model and r.system == "pytorch"):
        if theirs.budget == 1.0:
            found.append((1.0, 1.0, None))
        found.append((theirs.budget, None, int(MATCH_SHARE * theirs.peak)))
    return found


def measure_pair(
    model: torch.nn.Module, losses: tuple[Callable[..., torch.Tensor], ...], batch: tuple[Any, ...], repeats: int
) -> tuple[int, int, float]:
    """Both peaks and the median per-step time ratio (ours / theirs) of ``losses`` = (theirs, ours), alternating."""
    steps = [lambda loss=loss: loss(*batch).backward() for loss in losses]
    for step in steps:
        model.zero_grad(set_to_none=True)
        step()
    peaks = []
    for step in steps:
        model.zero_grad(set_to_none=True)
        peaks.append(profiled_peak(step))
    ratios = []
    for _ in range(repeats):
        seconds = []
        for step in steps:
            model.zero_grad(set_to_none=True)
            started = time.perf_counter()
            step()
            seconds.append(time.perf_counter() - started)
        ratios.append(seconds[1] / seconds[0])
    return peaks[0], peaks[1], statistics.median(ratios)


def run_pairs(
    name: str,
    model: torch.nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[..., torch.Tensor],
    rows: Sequence[Any],
    backend: str,
    repeats: int,
    method: str = "auto",
) -> list[Pair]:
    """The head-to-head of every PyTorch point of ``name`` in ``rows`` against its partner (:func:`partners`)."""
    pytorch_backend = "aot_eager_decomp_partition" if backend == "aot_eager" else "inductor"
    pairs = []
    for theirs_budget, ours_budget, ours_bytes in partners(rows, name):
        torch._dynamo.reset()
        budget = dict(activation_budget=ours_budget) if ours_bytes is None else dict(budget=ours_bytes)
        try:
            ours = rt.compile(model, inputs, loss_fn, targets, **budget, method=method, backend=backend, cache_dir=None)
        except RematError as error:  # no plan of ours within those bytes: the point stays undominated
            print(f"{name}: no plan of ours for PyTorch b={theirs_budget}: {error}", flush=True)
            continue
        with functorch_config.patch(activation_memory_budget=theirs_budget):  # theirs compiles and runs under it
            theirs = torch.compile(lambda x, y: loss_fn(model(x), y), backend=pytorch_backend)
            measured = measure_pair(model, (theirs, ours), (inputs, targets), repeats)
        pairs.append(Pair(name, theirs_budget, ours_budget, ours_bytes, *measured, repeats))
        print(f"{name}: PyTorch b={theirs_budget} vs ours {budget}: {measured[2]:.3f} x time", flush=True)
    return pairs


def pairs_table(pairs: Sequence[Pair], eager_peaks: dict[str, int]) -> str:
    """Markdown: each pair's budgets, peaks as multiples of eager's, and the time ratio."""
    lines = [
        "| model | PyTorch b | its peak | ours within | our peak | time, ours / PyTorch's |",
        "|---|---|---|---|---|---|",
    ]
    for p in pairs:
        eager = eager_peaks[p.model]
        lines.append(
            f"| {p.model} | {p.theirs_budget} | {p.theirs_peak / eager:.3f} | {p.ours()} | "
            f"{p.ours_peak / eager:.3f} | {p.ratio:.3f} |"
        )
    return "\n".join(lines)
