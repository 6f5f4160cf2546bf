"""Validate a plan on a device: predicted vs measured activation memory, gradients, time overhead."""

from __future__ import annotations

import importlib.util
import inspect
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from remat_models.core.limits import check_count
from remat_models.core.schedule import input_order_schedule
from remat_models.errors import ConfigurationError, GraphError
from remat_models.planning.methods import DEFAULT_METHOD
from remat_models.torch.api import RematStep, Tensors, plan
from remat_models.torch.plan_cache import DEFAULT, CacheDir
from remat_models.torch.trace import LossFn, as_tensors, one_line

log = logging.getLogger(__name__)

MIB = 2**20


def _takes_batch(builder: Callable[..., Any]) -> bool:
    """Whether ``builder(batch=...)`` binds (a ``batch`` parameter or ``**kwargs``)."""
    try:
        parameters = inspect.signature(builder).parameters.values()
    except (TypeError, ValueError):  # no signature to read: let the call decide
        return True
    return any((p.name == "batch" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD for p in parameters)


def load_example(spec: str, batch: int | None = None) -> tuple[nn.Module, Tensors, Tensors | None, LossFn]:
    """Call ``NAME(batch=...)`` from ``path/to/file.py:NAME``; it returns (model, inputs, targets, loss_fn).

    ConfigurationError for a batch below 1, a file that does not import, a NAME that is no function,
    takes no ``batch`` (when one is given) or raises.
    """
    if batch is not None:
        check_count(batch, "batch")
    path_text, _, name = spec.rpartition(":")
    path = Path(path_text)
    if not path_text or not name or not path.is_file():
        raise ConfigurationError(f"expected FILE.py:NAME with an existing file, got {spec!r}")
    module_name = f"_remat_example_{path.stem}"
    loader = importlib.util.spec_from_file_location(module_name, path)
    if loader is None or loader.loader is None:
        raise ConfigurationError(f"cannot import {path}")
    module = importlib.util.module_from_spec(loader)
    sys.modules[module_name] = module
    try:
        loader.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise ConfigurationError(f"cannot import {path}: {one_line(exc)}") from exc
    builder: Callable[..., Sequence[Any]] | None = getattr(module, name, None)
    if builder is None:
        raise ConfigurationError(f"{path} defines no {name!r}")
    if not callable(builder):
        raise ConfigurationError(f"{spec} is a {type(builder).__name__}, not a function")
    if batch is not None and not _takes_batch(builder):
        raise ConfigurationError(f"{spec} takes no 'batch' argument; leave out --batch or give {name} one")
    try:
        built = builder() if batch is None else builder(batch=batch)
    except Exception as exc:
        raise ConfigurationError(f"{spec} raised {one_line(exc)}") from exc
    if not isinstance(built, Sequence) or len(built) != 4:
        what = f"{len(built)} items" if isinstance(built, Sequence) else type(built).__name__
        raise GraphError(f"{spec} must return (model, inputs, targets, loss_fn), got {what}")
    model, inputs, targets, loss_fn = built
    return model, inputs, targets, loss_fn


def available_devices() -> list[str]:
    """``cpu`` and every device of the accelerator torch finds here (``cuda:0``, ...)."""
    found = ["cpu"]
    if torch.accelerator.is_available():
        kind = torch.accelerator.current_accelerator()
        found += [f"{kind.type}:{k}" for k in range(torch.accelerator.device_count())] if kind is not None else []
    return found


def resolve_device(device: str) -> torch.device:
    """``device`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``...) as a torch.device; ConfigurationError if unusable here."""
    available = available_devices()
    try:
        target = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigurationError(f"unknown device {device!r}; available here: {', '.join(available)}") from exc
    if target.type != "cpu" and (str(target) if target.index is not None else f"{target.type}:0") not in available:
        raise ConfigurationError(f"device {device!r} is not available here; available: {', '.join(available)}")
    return target


def to_device(
    model: nn.Module, inputs: Tensors, targets: Tensors | None, device: str
) -> tuple[nn.Module, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Move a model and its batch to ``device`` (ConfigurationError if it is unknown or not available here)."""
    target = resolve_device(device)
    moved = tuple(t.to(target) for t in as_tensors(inputs, "inputs"))
    return model.to(target), moved, tuple(t.to(target) for t in as_tensors(targets, "targets"))


@dataclass(frozen=True)
class Validation:
    """Predicted vs measured peak activation bytes (above fixed memory), gradient agreement, times."""

    device: str
    budget: int
    predicted: int
    measured: int
    eager_measured: int | None  # plain autograd's peak (CUDA allocator statistics; CPU: profiler memory events)
    grads_equal: bool
    max_grad_error: float
    remat_seconds: float
    eager_seconds: float
    input_order_seconds: float

    @property
    def error(self) -> int:
        """Measured minus predicted bytes."""
        return self.measured - self.predicted

    @property
    def within_tolerance(self) -> bool:
        """Measured within 1 % or 1 MiB of predicted."""
        return abs(self.error) <= max(0.01 * self.predicted, MIB)

    @property
    def overhead(self) -> float:
        """Time overhead of the planned step over plain autograd, in %."""
        return 100.0 * (self.remat_seconds / self.eager_seconds - 1.0)


def _eager_step(model: nn.Module, inputs: Tensors, targets: Tensors | None, loss_fn: LossFn) -> torch.Tensor:
    """One plain autograd step: forward, loss, backward."""
    loss = loss_fn(model(*as_tensors(inputs, "inputs")), *as_tensors(targets, "targets"))
    loss.backward()
    return loss.detach()


def _timed(fn: Callable[[], Any], device: torch.device, repeats: int) -> float:
    """Median wall time of ``fn`` over ``repeats`` runs (CUDA synchronised)."""
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _cuda_peak(fn: Callable[[], Any], device: torch.device) -> int:
    """Peak bytes allocated above what was allocated before ``fn`` ran."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def profiled_peak(fn: Callable[[], Any]) -> int:
    """Peak CPU bytes allocated above the start while ``fn`` runs, from the profiler's memory events."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        fn()
    events = profiler.profiler.kineto_results.events()
    allocations = [e for e in events if e.name() == "[memory]" and e.device_type() == DeviceType.CPU]
    live = peak = 0
    for event in sorted(allocations, key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def validate(
    model: nn.Module,
    inputs: Tensors,
    targets: Tensors | None,
    loss_fn: LossFn,
    *,
    budget: str | int | float = "50%",
    method: str = DEFAULT_METHOD,
    device: str = "cpu",
    repeats: int = 3,
    time_limit: float | None = None,
    cache_dir: CacheDir = DEFAULT,
) -> Validation:
    """Plan on ``device``, run once against plain autograd, measure memory and time (median of ``repeats``).

    Peaks are allocator-level bytes above the pre-step baseline: CUDA's ``max_memory_allocated``, on CPU
    the profiler's memory events (:func:`profiled_peak`), of the generated step and of plain autograd.
    ``time_limit`` and ``cache_dir`` go to :func:`remat_models.torch.api.plan`.
    """
    check_count(repeats, "repeats")
    target = resolve_device(device)
    model, inputs, targets = to_device(model, inputs, targets, device)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    step = plan(
        model, inputs, loss_fn, targets, budget=budget, method=method, time_limit=time_limit, cache_dir=cache_dir
    )

    def restore() -> None:
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)

    restore()
    rng = torch.random.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if target.type == "cuda" else None  # dropout on the device draws here
    peak_of: Callable[[Callable[[], Any]], int] = (
        (lambda fn: _cuda_peak(fn, target)) if target.type == "cuda" else profiled_peak
    )
    eager_measured = peak_of(lambda: _eager_step(model, inputs, targets, loss_fn))
    reference = [p.grad.clone() if p.grad is not None else None for p in model.parameters()]
    restore()
    torch.random.set_rng_state(rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state_all(cuda_rng)
    measured = peak_of(lambda: step(inputs, targets))
    errors = [
        float((p.grad - g).abs().max()) if g is not None and p.grad is not None and g.numel() else 0.0
        for p, g in zip(model.parameters(), reference, strict=True)
    ]
    equal = all(
        (g is None and p.grad is None) or (g is not None and p.grad is not None and torch.equal(p.grad, g))
        for p, g in zip(model.parameters(), reference, strict=True)
    )
    baseline = RematStep(model, step.torch_graph, input_order_schedule(step.torch_graph.graph))

    def eager() -> None:
        model.zero_grad(set_to_none=True)
        _eager_step(model, inputs, targets, loss_fn)

    def remat() -> None:
        model.zero_grad(set_to_none=True)
        step(inputs, targets)

    def in_order() -> None:
        model.zero_grad(set_to_none=True)
        baseline(inputs, targets)

    times = [_timed(fn, target, repeats) for fn in (remat, eager, in_order)]
    restore()
    return Validation(
        device=str(target),
        budget=step.plan_result.budget if step.plan_result else 0,
        predicted=step.predicted_peak,
        measured=measured,
        eager_measured=eager_measured,
        grads_equal=equal,
        max_grad_error=max(errors, default=0.0),
        remat_seconds=times[0],
        eager_seconds=times[1],
        input_order_seconds=times[2],
    )
