"""Node costs: FLOPs from torch.utils.flop_counter (default) or measured op times on a device."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
from torch import fx
from torch.utils.flop_counter import (
    FlopCounterMode,
    flop_registry,
    sdpa_backward_flop_count,
    sdpa_flop_count,
    shape_wrapper,
)

from remat_models.errors import ConfigurationError
from remat_models.torch.ops import tensors_of

log = logging.getLogger(__name__)

CostModel = Literal["flops", "time"]
COST_MODELS: tuple[CostModel, ...] = ("flops", "time")


def _sdpa(query: Any, key: Any, value: Any, *_: Any, **__: Any) -> int:
    return sdpa_flop_count(query, key, value)


def _sdpa_backward(grad_out: Any, query: Any, key: Any, value: Any, *_: Any, **__: Any) -> int:
    return sdpa_backward_flop_count(grad_out, query, key, value)


# CPU flash attention has no formula in torch.utils.flop_counter (the CUDA kernels have): the same counts (shapes in)
EXTRA_FLOP_FORMULAS: dict[Any, Callable[..., int]] = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_backward,
}


def flop_counter() -> FlopCounterMode:
    """A ``FlopCounterMode`` (no display) that also counts CPU flash attention."""
    return FlopCounterMode(display=False, custom_mapping=EXTRA_FLOP_FORMULAS)


def flop_cost(node: fx.Node) -> float:
    """FLOPs of a matmul/conv/attention op; for any other op, the elements it writes (a memory-bound proxy)."""
    packet = getattr(node.target, "overloadpacket", None)
    formula = flop_registry.get(packet) or _EXTRA.get(packet)
    if formula is not None:
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda source: source.meta.get("val"))
        return float(formula(*args, out_val=node.meta.get("val"), **kwargs))
    return float(sum(t.numel() for t in tensors_of(node.meta.get("val"))))


_EXTRA = {packet: shape_wrapper(formula) for packet, formula in EXTRA_FLOP_FORMULAS.items()}


def check_cost_model(name: str) -> CostModel:
    """Validate a cost model name."""
    if name not in COST_MODELS:
        raise ConfigurationError(f"unknown cost model {name!r}; choose one of {', '.join(COST_MODELS)}")
    return name  # type: ignore[return-value]


def time_op(node: fx.Node, args: Sequence[object], kwargs: dict[str, object], repeats: int) -> float:
    """Median seconds of ``repeats`` runs of one op on real tensors (synchronising CUDA)."""
    cuda = any(t.is_cuda for t in tensors_of((args, kwargs)))
    samples = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        node.target(*args, **kwargs)
        if cuda:
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return samples[len(samples) // 2]
