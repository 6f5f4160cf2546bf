"""Eager selective activation checkpointing (``torch.utils.checkpoint``) from a save-set plan.

:func:`sac_plan` traces the training step (:func:`remat_models.torch.extract`), chooses the saved forward
values with the save-set search and turns the choice into a policy for
``create_selective_checkpoint_contexts``: the k-th call of an op in the checkpointed forward is saved iff
the k-th call of that op in the traced forward is (in-place ops count as their functional forms, views
are recomputed, random ops always saved). The region is the model's whole forward::

    plan = sac_plan(model, inputs, loss_fn, targets, activation_budget=0.5)
    out = checkpoint(model, inputs, use_reentrant=False, context_fn=plan.context_fn)

An op the trace does not show at that place (another order, an output of another shape) is saved, so a
mismatch costs memory, never correctness; ``SacPlan.unmatched`` counts them per step.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import SAC_IGNORED_OPS, CheckpointPolicy, create_selective_checkpoint_contexts

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, simulate
from remat_models.heuristics.saveset import saveset_schedule, saveset_search
from remat_models.torch.api import extract
from remat_models.torch.mapping import Role, TorchGraph
from remat_models.torch.ops import is_random, tensors_of
from remat_models.torch.save_budget import SaveBudget, undone
from remat_models.torch.trace import LossFn, as_tensors

Key = tuple[str, int]  # (op name without an in-place suffix, occurrence in the forward)


def op_name(op: Any) -> str:
    """An op's name with in-place ops named as their functional form (``relu_`` -> ``relu``)."""
    packet = getattr(op, "overloadpacket", op)
    name = getattr(packet, "__name__", str(packet))
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def writes(op: Any) -> bool:
    """Whether ``op`` writes into an argument (an in-place op: SAC cannot cache its output)."""
    schema = getattr(op, "_schema", None)
    return schema is not None and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _shapes(value: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(t.shape) for t in tensors_of(value))


@dataclass
class SacPlan:
    """A save-set plan of a model's forward as a selective-checkpointing policy."""

    torch_graph: TorchGraph = field(repr=False)
    budget: int
    saved: frozenset[int]  # Graph node indices
    predicted_peak: int
    decisions: dict[Key, tuple[bool, tuple[tuple[int, ...], ...]]] = field(repr=False)  # (save?, output shapes)
    mutated: set[Key] = field(repr=False)  # outputs written in place later in eager: never cached
    unmatched: int = 0  # ops of the latest step the trace did not show at their place (saved)

    def policy(self) -> Callable[..., CheckpointPolicy]:
        """A policy function for one checkpointed forward (it counts the op calls it sees)."""
        seen: dict[str, int] = defaultdict(int)
        self.unmatched = 0

        def decide(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            name = op_name(op)
            key = (name, seen[name])
            seen[name] += 1
            decision = self.decisions.get(key)
            if key in self.mutated or writes(op):
                return CheckpointPolicy.PREFER_RECOMPUTE
            if decision is None or decision[1] != _shapes(ctx.op_output):
                self.unmatched += 1
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.MUST_SAVE if decision[0] else CheckpointPolicy.PREFER_RECOMPUTE

        return decide

    def context_fn(self) -> tuple[Any, Any]:
        """``context_fn`` for ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``."""
        return create_selective_checkpoint_contexts(self.policy())


def _kept_for_backward(graph: Graph, saved: np.ndarray) -> frozenset[int]:
    """The saved values still resident when the backward pass starts (SAC holds every value it saves till then)."""
    resident: set[int] = set()
    for step in saveset_schedule(graph, saved, replay=True):
        if isinstance(step, Compute) and graph.kind[step.node] == NodeKind.BACKWARD:
            break
        resident.symmetric_difference_update((step.node,))
    return frozenset(resident & set(saved.tolist()))


def _decisions(torch_graph: TorchGraph, saved: frozenset[int]) -> dict[Key, tuple[bool, tuple[tuple[int, ...], ...]]]:
    """(op, occurrence) -> (saved?, output shapes) for every op call of the traced forward."""
    graph = torch_graph.graph
    index = {node: v for v, node in enumerate(torch_graph.fx_nodes)}
    forward = {torch_graph.fx_nodes[v] for v in graph.of_kind(NodeKind.FORWARD).nonzero()[0].tolist()}
    nodes = list(torch_graph.traced.module.graph.nodes)
    end = max((k for k, node in enumerate(nodes) if node in forward), default=-1)
    counts: dict[str, int] = defaultdict(int)
    decisions = {}
    for node in nodes[: end + 1]:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        name = op_name(node.target)
        compute = torch_graph.roles[node] is Role.COMPUTE
        save = is_random(node) or (compute and (index[node] in saved or not graph.recomputable[index[node]]))
        decisions[(name, counts[name])] = (save, _shapes(node.meta.get("val")))
        counts[name] += 1
    return decisions


class _MutationRecorder(TorchDispatchMode):
    """Records which op calls (by :data:`Key`) return a tensor that a later in-place op writes into."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, int] = defaultdict(int)
        self.made_by: dict[int, list[Key]] = defaultdict(list)  # storage address -> the op calls returning it
        self.mutated: set[Key] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in SAC_IGNORED_OPS:
            return out
        if writes(func):
            for value in tensors_of((args, kwargs)):
                self.mutated.update(self.made_by.get(value.untyped_storage().data_ptr(), ()))
        name = op_name(func)
        key = (name, self.seen[name])
        self.seen[name] += 1
        for tensor in tensors_of(out):
            self.made_by[tensor.untyped_storage().data_ptr()].append(key)
        return out


def _mutated(model: nn.Module, inputs: Any) -> set[Key]:
    """Op calls of one eager forward whose outputs are later written in place (SAC must not save those)."""
    with undone(model), _MutationRecorder() as recorder:
        model(*as_tensors(inputs, "inputs"))
    return recorder.mutated


def sac_plan(
    model: nn.Module,
    inputs: Any,
    loss_fn: LossFn,
    targets: Any = None,
    *,
    budget: str | int | float | None = None,
    activation_budget: float | None = None,
) -> SacPlan:
    """Trace the step, choose the save set within the budget (see :class:`SaveBudget`), return its policy."""
    save_budget = SaveBudget(budget, activation_budget)
    torch_graph = extract(model, inputs, loss_fn, targets)
    bytes_ = save_budget.resolve(torch_graph.graph, replay=True)
    choice = saveset_search(torch_graph.graph, bytes_, replay=True)
    graph = torch_graph.graph
    saved = _kept_for_backward(graph, choice.saved)  # SAC holds what it saves: only what the backward reads
    peak = simulate(graph, saveset_schedule(graph, np.array(sorted(saved), dtype=np.int64), replay=True)).peak
    return SacPlan(torch_graph, bytes_, saved, peak, _decisions(torch_graph, saved), _mutated(model, inputs))


def checkpointed(model: nn.Module, plan: SacPlan) -> Callable[..., Any]:
    """``model`` called through ``checkpoint`` with the plan's policy (a drop-in for ``model(*inputs)``)."""

    def run(*inputs: torch.Tensor) -> Any:
        return torch.utils.checkpoint.checkpoint(model, *inputs, use_reentrant=False, context_fn=plan.context_fn)

    return run

