"""Checks on the ops of a traced step that the fake-tensor trace does not make itself.

Fake tensors carry no data, and some meta kernels skip checks the real kernels make (``addmm`` takes
an int64 input with float32 weights), so such a step would trace, plan, and fail only when run. And
functionalization turns an in-place write into an input into a write-back the executor cannot
perform. Both are refused while tracing, naming the op.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import fx
from torch._ops import OpOverload, OpOverloadPacket
from torch.multiprocessing.reductions import StorageWeakRef

from remat_models.errors import GraphError

aten = torch.ops.aten

# Matmul and convolution kernels take all their tensors in one dtype (their meta kernels may not check).
SAME_DTYPE_OPS: tuple[OpOverloadPacket, ...] = (
    aten.mm,
    aten.addmm,
    aten.bmm,
    aten.baddbmm,
    aten.addbmm,
    aten.mv,
    aten.addmv,
    aten.dot,
    aten.vdot,
    aten.addr,
    aten.convolution,
    aten._convolution,
)


def storage_key(tensor: torch.Tensor) -> StorageWeakRef:
    """Identity of a tensor's storage (valid for real and fake tensors)."""
    return StorageWeakRef(tensor.untyped_storage())


def _bound(op: OpOverload, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    """(schema argument, value) of every argument a call of ``op`` passes."""
    schema = op._schema.arguments
    return [*zip(schema, args, strict=False), *((a, kwargs[a.name]) for a in schema if a.name in kwargs)]


def _tensors(value: Any) -> list[Any]:
    """The tensors (or FX nodes) of one argument: itself, or the items of a list of them."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _dtype_check(op: OpOverload) -> Callable[..., Any]:
    """A decomposition-table entry for ``op``: GraphError if its tensors mix dtypes, else trace ``op`` as it is."""

    def check(*args: Any, **kwargs: Any) -> Any:
        tensors = [
            (argument.name, t)
            for argument, value in _bound(op, args, kwargs)
            for t in _tensors(value)
            if isinstance(t, torch.Tensor)
        ]
        if len({t.dtype for _, t in tensors}) > 1:
            found = ", ".join(f"{name} {t.dtype} {list(t.shape)}" for name, t in tensors)
            raise GraphError(f"{op} mixes dtypes ({found}); cast the inputs to the parameters' dtype")
        return NotImplemented

    return check


def dtype_checks() -> dict[OpOverload, Callable[..., Any]]:
    """Decomposition-table entries for ``make_fx`` checking the dtypes of every overload of SAME_DTYPE_OPS."""
    overloads = [getattr(packet, name) for packet in SAME_DTYPE_OPS for name in packet.overloads()]
    return {op: _dtype_check(op) for op in overloads}


def check_writes(graph: fx.Graph, read_only: Mapping[fx.Node, str]) -> None:
    """GraphError if an op of ``graph`` writes in place into a ``read_only`` placeholder (named by the mapping)."""
    owners = {storage_key(node.meta["val"]): what for node, what in read_only.items()}
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        for argument, value in _bound(node.target, node.args, node.kwargs):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            for source in _tensors(value):
                tensor = source.meta.get("val") if isinstance(source, fx.Node) else None
                written = owners.get(storage_key(tensor)) if isinstance(tensor, torch.Tensor) else None
                if written is not None:
                    raise GraphError(
                        f"{node.target} writes {written} in place; a planned step cannot mutate its inputs or "
                        "parameters: use the out-of-place op or clone the tensor first"
                    )
