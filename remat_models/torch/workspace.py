"""Kernel scratch: bytes an op allocates and frees inside its call, measured on the CPU for a Graph's workspace.

A Graph node's workspace is held only while it runs. CPU convolutions (im2col and mkldnn buffers),
batch-norm backward and inductor's max-pool prims (ATen ops inside) allocate such scratch, which the traced
and joint graphs do not show; :func:`measured_workspace` runs each distinct call once on real zeros under the
profiler and reads it off the allocator's events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import fx
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

WORKSPACE_OPS = frozenset(  # ops with scratch buffers on the CPU
    ("aten::convolution", "aten::convolution_backward", "aten::native_batch_norm_backward",
     "prims::_low_memory_max_pool_with_offsets", "prims::_low_memory_max_pool_offsets_to_indices")
)  # fmt: skip


def _has_scratch(node: fx.Node) -> bool:
    """Whether ``node`` calls one of :data:`WORKSPACE_OPS`."""
    return isinstance(node.target, torch._ops.OpOverload) and node.target.name() in WORKSPACE_OPS


def _fake_args(node: fx.Node) -> tuple[Any, Any]:
    """The fake values of a call's arguments and keyword arguments."""
    return fx.node.map_arg((node.args, node.kwargs), lambda source: source.meta.get("val"))


def _signature(node: fx.Node) -> str:
    """The op and the shapes, strides, dtypes and devices of its tensor arguments (the rest as they are)."""

    def describe(value: object) -> object:
        if isinstance(value, torch.Tensor):
            return (tuple(value.shape), value.stride(), value.dtype, value.device)
        return value

    return repr((node.target, pytree.tree_map(describe, _fake_args(node))))


def _real(value: object) -> object:
    """A zero tensor shaped, strided and typed as the fake tensor ``value``; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=value.device).zero_()
    return value


def measured_workspace(nodes: Sequence[fx.Node]) -> list[int]:
    """Scratch bytes each CPU op of :data:`WORKSPACE_OPS` in ``nodes`` allocates and frees; 0 for the rest.

    Each distinct call (op, argument shapes and strides) runs once on real zeros (outside any fake mode) under
    the profiler: its scratch is the peak of its memory events above the start minus what it leaves allocated
    (its outputs). Other devices are not measured (0).
    """
    calls: dict[str, fx.Node] = {}
    for node in nodes:
        tensors = [t for t in pytree.tree_leaves(_fake_args(node)) if isinstance(t, torch.Tensor)]
        if _has_scratch(node) and all(t.device.type == "cpu" for t in tensors):
            calls.setdefault(_signature(node), node)
    if not calls:
        return [0] * len(nodes)
    keys = {key: f"remat_workspace_{k}" for k, key in enumerate(calls)}
    with unset_fake_temporarily(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        for key, node in calls.items():
            args, kwargs = pytree.tree_map(_real, _fake_args(node))
            with record_function(keys[key]):
                outputs = node.target(*args, **kwargs)
            del outputs
    events = profiler.profiler.kineto_results.events()
    memory = sorted((e for e in events if e.name() == "[memory]" and e.device_type() == DeviceType.CPU), key=_start)
    spans = {e.name(): (e.start_ns(), e.end_ns()) for e in events if e.name() in keys.values()}
    scratch: dict[str, int] = {}
    for key, label in keys.items():
        begin, end = spans[label]
        live = peak = 0
        for event in (e for e in memory if begin <= e.start_ns() <= end):
            live += event.nbytes()
            peak = max(peak, live)
        scratch[key] = peak - live
    return [scratch.get(_signature(node), 0) if _has_scratch(node) else 0 for node in nodes]


def _start(event: Any) -> int:
    return int(event.start_ns())
