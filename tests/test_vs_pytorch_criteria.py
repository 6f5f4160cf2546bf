"""The done-when of benchmarks/vs_pytorch.py: partners of the head-to-head pairs, and pairs over the table's times."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from vs_pytorch_criteria import criteria
from vs_pytorch_pairs import Pair, partners


def row(system: str, budget: float | None, peak: int, seconds: float, predicted: int | None = None) -> SimpleNamespace:
    """A table row of model ``m`` (eager's median 1 s)."""
    return SimpleNamespace(
        model="m", system=system, budget=budget, peak=peak, seconds=seconds, eager_seconds=1.0, predicted=predicted
    )


ROWS = [
    row("eager", None, 100, 1.0),
    row("pytorch", 1.0, 90, 0.95),
    row("pytorch", 0.5, 70, 0.90),
    row("ours-schedule", 1.0, 100, 1.02, 100),
    row("ours-schedule", 0.75, 85, 1.00, 85),
    row("ours-schedule", 0.5, 65, 0.99, 65),
    row("ours-schedule", 0.0, 50, 1.00, 50),
]


def lines_about(lines: list[str], name: str) -> list[str]:
    """The criterion's line and its misses."""
    start = next(i for i, line in enumerate(lines) if line.startswith(name))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return lines[start:end]


def test_partners_are_ours_at_one_and_ours_just_below_each_pytorch_peak() -> None:
    assert partners(ROWS, "m") == [(1.0, 1.0, None), (1.0, None, 88), (0.5, None, 68)]


def test_without_pairs_the_cells_decide_and_miss_on_noise() -> None:
    lines = criteria(ROWS)
    assert lines_about(lines, "time at b = 1") == ["time at b = 1 within 1.05 x PyTorch's: 0/1", "  miss: m: 1.074 x"]
    assert lines_about(lines, "PyTorch points dominated")[0] == "PyTorch points dominated in peak and time: 0/2"


def test_paired_times_replace_the_cells_they_cover() -> None:
    pairs = [
        Pair("m", 1.0, 1.0, None, 90, 100, 0.97, 15),
        Pair("m", 1.0, None, 88, 90, 85, 0.98, 15),
        Pair("m", 0.5, None, 68, 70, 65, 1.01, 15),  # slower in the pair: not dominated
    ]
    lines = criteria(ROWS, pairs)
    assert lines_about(lines, "time at b = 1") == ["time at b = 1 within 1.05 x PyTorch's: 1/1"]
    dominated = lines_about(lines, "PyTorch points dominated")
    assert dominated[0] == "PyTorch points dominated in peak and time: 1/2"
    assert dominated[1:] == ["  miss: m b=0.5: ours within 68 B, 0.929 x its peak at 1.010 x its time (paired)"]


def test_a_point_no_pair_dominates_falls_to_cells_clearly_faster() -> None:
    """PyTorch's 0.5 (peak 70 at 0.90 x): the pair ties it; a cell of ours at 60 B counts only at <= 0.9 x its time."""
    pairs = [Pair("m", 0.5, None, 68, 70, 65, 1.01, 15)]
    for seconds, dominated in ((0.81, True), (0.85, False)):
        rows = [*ROWS, row("ours-executor", 0.5, 60, seconds, 60)]
        lines = lines_about(criteria(rows, pairs), "PyTorch points dominated")
        assert any(line.startswith("  miss: m b=0.5") for line in lines) is not dominated
        if dominated:
            assert "m b=0.5" not in "".join(lines)


def test_compiled_flops_counts_what_a_compiled_step_runs_and_leaves_it_compiled() -> None:
    """The table's FLOPs: a recomputing plan's compiled step counts more than eager's; the step stays compiled."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from vs_pytorch import CompiledFlops

    import remat_models.torch as rt
    from remat_models.torch.validate import profiled_peak

    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(*[layer for _ in range(6) for layer in (nn.Linear(64, 64), nn.Tanh())], nn.Linear(64, 8))
    inputs, targets = torch.randn(256, 64), torch.randn(256, 8)
    loss_fn = nn.functional.mse_loss
    step = rt.compile(
        model, inputs, loss_fn, targets, activation_budget=0.0, backend="aot_eager", method="chen-greedy",
        cache_dir=None,
    )  # fmt: skip
    with FlopCounterMode(display=False) as eager:
        loss_fn(model(inputs), targets).backward()
    before = profiled_peak(lambda: step(inputs, targets).backward())
    with CompiledFlops(display=False) as compiled:
        step(inputs, targets).backward()
    assert step.plan.recomputations > 0 and compiled.get_total_flops() > eager.get_total_flops()
    assert profiled_peak(lambda: step(inputs, targets).backward()) == before  # still the plan, not eager's
