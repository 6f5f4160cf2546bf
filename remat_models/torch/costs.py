"""Node costs: FLOPs from torch.utils.flop_counter (default) or measured op times on a device."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Literal

import torch
from torch import fx
from torch.utils.flop_counter import flop_registry

from remat_models.errors import ConfigurationError
from remat_models.torch.mapping import tensors_of

log = logging.getLogger(__name__)

CostModel = Literal["flops", "time"]
COST_MODELS: tuple[CostModel, ...] = ("flops", "time")


def flop_cost(node: fx.Node) -> float:
    """FLOPs of a matmul/conv/attention op; for any other op, the elements it writes (a memory-bound proxy)."""
    target = node.target
    formula = flop_registry.get(getattr(target, "overloadpacket", None))
    if formula is not None:
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda source: source.meta.get("val"))
        return float(formula(*args, out_val=node.meta.get("val"), **kwargs))
    return float(sum(t.numel() for t in tensors_of(node.meta.get("val"))))


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
