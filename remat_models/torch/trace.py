"""Trace one training step (forward, loss, backward) of an nn.Module into a functional ATen FX graph."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import NotImplementedType
from typing import Any

import torch
from torch import fx, nn
from torch.func import functional_call, functionalize
from torch.fx.experimental.proxy_tensor import make_fx

from remat_models.errors import GraphError, InputTypeError
from remat_models.torch.guards import check_writes, dtype_checks
from remat_models.torch.ops import is_impure
from remat_models.torch.split import share_outputs, split_by_mask, undefine_masked_outputs

log = logging.getLogger(__name__)

LossFn = Callable[..., torch.Tensor]
aten = torch.ops.aten


def _batch_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | NotImplementedType:
    """native_batch_norm with its hidden running-stats mutation made explicit (same CPU/CUDA kernels).

    Training with running stats: the functional op plus ``copy_``s into the buffers. Evaluation: the
    running stats normalise, nothing is updated, and the statistics saved for the backward are empty
    (as eager's kernel returns them; the backward reads the running stats). Without running stats
    (InstanceNorm, ``track_running_stats=False``) nothing is hidden: the op is recorded as it is.
    """
    if running_mean is None or running_var is None:
        return NotImplemented
    if not training:
        out = aten._native_batch_norm_legit_no_training.default(
            x, weight, bias, running_mean, running_var, momentum, eps
        )[0]
        return out, running_mean.new_empty((0,)), running_var.new_empty((0,))
    out, mean, rstd, new_mean, new_var = aten._native_batch_norm_legit_functional.default(
        x, weight, bias, running_mean, running_var, training, momentum, eps
    )
    running_mean.copy_(new_mean)
    running_var.copy_(new_var)
    return out, mean, rstd


# native_batch_norm's schema hides that it updates the running stats (this makes functionalization see it);
# matmuls and convolutions get their dtypes checked (see torch/guards.py).
_DECOMPOSITIONS = {aten.native_batch_norm.default: _batch_norm, **dtype_checks()}


@dataclass(frozen=True)
class TensorSpec:
    """Shape, dtype and device of one example tensor (the traced graph is specialised to them)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorSpec:
        """Describe ``tensor``."""
        return cls(tuple(tensor.shape), tensor.dtype, tensor.device)


@dataclass(frozen=True)
class TracedStep:
    """A functional joint graph whose placeholders are params, buffers, inputs, targets (in that order).

    Its outputs are ``(loss, *model_outputs, *gradients)``; a gradient is None for an unused parameter.
    """

    module: fx.GraphModule
    param_names: tuple[str, ...]
    buffer_names: tuple[str, ...]
    input_specs: tuple[TensorSpec, ...]
    target_specs: tuple[TensorSpec, ...]
    n_model_outputs: int
    training: bool
    name: str

    @property
    def n_fixed(self) -> int:
        """Number of placeholders (everything that is fixed memory)."""
        return len(self.param_names) + len(self.buffer_names) + len(self.input_specs) + len(self.target_specs)


def as_tensors(value: torch.Tensor | Sequence[torch.Tensor] | None, what: str) -> tuple[torch.Tensor, ...]:
    """Normalise a tensor, a sequence of tensors or None to a tuple of tensors."""
    if value is None:
        return ()
    items = (value,) if isinstance(value, torch.Tensor) else tuple(value)
    for item in items:
        if not isinstance(item, torch.Tensor):
            raise GraphError(f"{what} must be tensors, got {type(item).__name__}")
    return items


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (the rest, e.g. debugging advice, stays on the exception)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def describe(value: Any) -> str:
    """A value's type and name (or short repr) for error messages: ``function '<lambda>'``."""
    name = getattr(value, "__qualname__", None)
    return f"{type(value).__name__} {name!r}" if isinstance(name, str) else f"{type(value).__name__} {value!r:.60}"


def output_tensors(value: Any, path: str = "output") -> tuple[torch.Tensor, ...]:
    """The tensors of a model's output structure (pytree leaves), in order, each once.

    Tensors, tuples/lists (named tuples too), dicts and mappings (transformers' ``ModelOutput``) and
    dataclasses nest freely; None, numbers, strings and booleans are skipped (not graph values).
    """
    found: dict[int, torch.Tensor] = {}

    def visit(item: Any, where: str) -> None:
        if isinstance(item, torch.Tensor):
            found.setdefault(id(item), item)
        elif item is None or isinstance(item, (bool, int, float, str)):
            return
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                visit(sub, f"{where}[{key!r}]")
        elif isinstance(item, (tuple, list)):
            for k, sub in enumerate(item):
                visit(sub, f"{where}[{k}]")
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            for field in dataclasses.fields(item):
                visit(getattr(item, field.name), f"{where}.{field.name}")
        else:
            raise GraphError(
                f"model {where} is a {type(item).__name__}: outputs must be tensors, or tuples, lists, dicts, "
                "dataclasses or ModelOutputs of them"
            )

    visit(value, path)
    return tuple(found.values())


def check_trainable(model: object) -> None:
    """Refuse anything but a module with a parameter that requires grad (else there is no backward to plan)."""
    if not isinstance(model, nn.Module):
        raise InputTypeError(f"expected an nn.Module as the model, got {describe(model)}")
    if not any(p.requires_grad for p in model.parameters()):
        raise GraphError(
            f"{type(model).__name__} has no parameter that requires grad: a training step of it computes no "
            "gradient, so there is no backward to plan (give it parameters, or call requires_grad_())"
        )


def trace_step(
    model: nn.Module,
    example_inputs: torch.Tensor | Sequence[torch.Tensor],
    loss_fn: LossFn,
    example_targets: torch.Tensor | Sequence[torch.Tensor] | None = None,
    *,
    name: str = "",
) -> TracedStep:
    """Trace ``loss_fn(model(*inputs), *targets)`` and its parameter gradients with fake tensors.

    The model may return a tensor or any structure of them (see :func:`output_tensors`); ``loss_fn``
    receives it as the model returns it, and the graph's model outputs are its tensors.

    Two passes of ``make_fx(tracing_mode="fake")``: the first records the joint ATen graph in program
    order (autograd runs under the tracer, so backward ops follow the loss); the second re-traces it
    under ``torch.func.functionalize`` so in-place ops become out-of-place and buffer mutations become
    trailing ``copy_`` write-backs. Masked multi-output ops are split in between; outputs of the other
    multi-output ops that outlive the rest are then copied into their own nodes (see
    :mod:`remat_models.torch.split`). No real data flows through the model.
    """
    check_trainable(model)
    if not callable(loss_fn):
        raise InputTypeError(f"loss_fn must be callable, got {describe(loss_fn)}")
    inputs = as_tensors(example_inputs, "example inputs")
    targets = as_tensors(example_targets, "example targets")
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    param_names, buffer_names = tuple(params), tuple(buffers)
    n_p, n_b, n_i = len(param_names), len(buffer_names), len(inputs)
    n_outputs: list[int] = []

    def step(*flat: torch.Tensor) -> tuple[Any, ...]:
        """Forward, loss and parameter gradients over flat placeholders."""
        p = dict(zip(param_names, flat[:n_p], strict=True))
        b = dict(zip(buffer_names, flat[n_p : n_p + n_b], strict=True))
        out = functional_call(model, (p, b), tuple(flat[n_p + n_b : n_p + n_b + n_i]))
        outs = output_tensors(out)
        loss = loss_fn(out, *flat[n_p + n_b + n_i :])  # the model's own output structure
        if not isinstance(loss, torch.Tensor):
            raise GraphError(f"loss_fn must return a scalar tensor, got {type(loss).__name__}")
        if loss.dim() != 0:
            raise GraphError(
                f"loss_fn must return a scalar tensor, got shape {list(loss.shape)}: "
                "reduce it (e.g. .mean(), or reduction='mean')"
            )
        trainable = [t for t in p.values() if t.requires_grad]
        grads = iter(torch.autograd.grad(loss, trainable, allow_unused=True))
        n_outputs.append(len(outs))
        return (loss, *outs, *(next(grads) if t.requires_grad else None for t in p.values()))

    flat = [*params.values(), *buffers.values(), *inputs, *targets]
    read_only = [  # what each placeholder is called if an op writes into it; None: a buffer, which may change
        *(f"parameter {name!r}" for name in param_names),
        *(None for _ in buffer_names),
        *(f"input {k} ({t.dtype} {list(t.shape)})" for k, t in enumerate(inputs)),
        *(f"target {k} ({t.dtype} {list(t.shape)})" for k, t in enumerate(targets)),
    ]
    try:
        joint = make_fx(step, tracing_mode="fake", decomposition_table=_DECOMPOSITIONS)(*flat)
        placeholders = [node for node in joint.graph.nodes if node.op == "placeholder"]
        check_writes(joint.graph, {node: what for node, what in zip(placeholders, read_only, strict=True) if what})
        split_by_mask(joint)
        with torch.no_grad():
            functional = make_fx(functionalize(joint, remove="mutations"), tracing_mode="fake")(*flat)
    except GraphError:
        raise
    except Exception as exc:  # tracing failures come as many exception types (data-dependent control flow, ...)
        raise GraphError(f"cannot trace a training step of {type(model).__name__}: {one_line(exc)}") from exc
    functional.graph.eliminate_dead_code(is_impure_node=is_impure)
    share_outputs(functional)
    undefine_masked_outputs(functional)
    log.info("traced %s: %d FX nodes", type(model).__name__, len(functional.graph.nodes))
    return TracedStep(
        module=functional,
        param_names=param_names,
        buffer_names=buffer_names,
        input_specs=tuple(TensorSpec.of(t) for t in inputs),
        target_specs=tuple(TensorSpec.of(t) for t in targets),
        n_model_outputs=n_outputs[0],
        training=model.training,
        name=name or type(model).__name__,
    )
