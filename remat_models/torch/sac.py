"""Eager selective activation checkpointing (``torch.utils.checkpoint``) from a save-set plan.

:func:`sac_plan` traces the training step (:func:`remat_models.torch.extract`), chooses the saved forward
values with the save-set search and turns the choice into a policy for
``create_selective_checkpoint_contexts``: the k-th call of an op in the checkpointed forward is saved iff
the k-th call of that op in the traced forward is (in-place ops count as their functional forms, views
are recomputed, random ops always saved). The region is the model's whole forward, or one region per
block (``blocks=``: submodules, or a predicate on their qualified names), each replayed by ``checkpoint``
when the backward first reaches it; the plan is searched under that replay model
(:class:`~remat_models.heuristics.saveset.Regions`)::

    plan = sac_plan(model, inputs, loss_fn, targets, activation_budget=0.5, blocks=list(model.blocks))
    loss_fn(checkpointed(model, plan)(inputs), targets).backward()  # each block under checkpoint(block, ...)

An op the trace does not show at that place (another order, an output of another shape) is saved, so a
mismatch costs memory, never correctness; ``SacPlan.unmatched`` counts them per step.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import SAC_IGNORED_OPS, CheckpointPolicy, create_selective_checkpoint_contexts

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.heuristics.recompute import forward_mask
from remat_models.heuristics.saveset import NO_REGION, Regions, replay_sequence, saveset_schedule, saveset_search
from remat_models.torch.api import extract
from remat_models.torch.mapping import Role, TorchGraph
from remat_models.torch.ops import is_random, tensors_of
from remat_models.torch.save_budget import SaveBudget, eager_peak, undone
from remat_models.torch.trace import LossFn, as_tensors

log = logging.getLogger(__name__)

MIN_GAIN = 0.01
"""A plan runs eagerly unless its predicted peak is this share of eager's activation bytes below eager's: a
checkpointed region costs its replay's time (on the zoo ResNet, 1.6 x eager's step for 0.05 % less memory)."""

EAGER_FORMS = {
    "_native_batch_norm_legit_functional": ("native_batch_norm", 3),  # training: eager updates the buffers in place
    "_native_batch_norm_legit_no_training": ("native_batch_norm", 3),
}
"""Traced functional op -> (the op eager dispatches instead, how many of the traced outputs it returns)."""

Shapes = tuple[tuple[int, ...], ...]
Key = tuple[str, Shapes, int]  # (op name without an in-place suffix, output shapes, occurrence of those two)
Decision = tuple[bool, Shapes]  # (save?, output shapes)
Blocks = Sequence[nn.Module] | Callable[[str], bool]


def op_name(op: Any) -> str:
    """An op's name with in-place ops named as their functional form (``relu_`` -> ``relu``)."""
    packet = getattr(op, "overloadpacket", op)
    name = getattr(packet, "__name__", str(packet))
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _traced_key(seen: dict[tuple[str, Shapes], int], node: Any) -> Key:
    """The :data:`Key` of a traced op call as eager's dispatch shows it (:data:`EAGER_FORMS`)."""
    name, shapes = op_name(node.target), _shapes(node.meta.get("val"))
    if name in EAGER_FORMS:
        name, count = EAGER_FORMS[name]
        shapes = shapes[:count]
    return _key(seen, name, shapes)


def writes(op: Any) -> bool:
    """Whether ``op`` writes into an argument (an in-place op: SAC cannot cache its output)."""
    schema = getattr(op, "_schema", None)
    return schema is not None and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _shapes(value: Any) -> Shapes:
    return tuple(tuple(t.shape) for t in tensors_of(value))


def _key(seen: dict[tuple[str, Shapes], int], name: str, shapes: Shapes) -> Key:
    """The next call of op ``name`` with outputs of ``shapes``: counted per (name, shapes) in ``seen``.

    Counting per shape keeps calls of one op on tensors of different shapes apart where eager orders them
    otherwise than the trace (HF GPT-2's ``expand``/``clone`` around its attention matmuls).
    """
    signature = (name, shapes)
    key = (name, shapes, seen[signature])
    seen[signature] += 1
    return key


@dataclass
class SacPlan:
    """A save-set plan of a model's forward as a selective-checkpointing policy."""

    torch_graph: TorchGraph = field(repr=False)
    budget: int
    saved: frozenset[int]  # Graph node indices
    predicted_peak: int
    blocks: list[nn.Module] = field(repr=False)  # the checkpointed regions (none: the step runs as in eager)
    regions: Regions = field(repr=False)  # the Graph's nodes per checkpointed block
    decisions: list[dict[Key, Decision]] = field(repr=False)  # per block, keyed by occurrence in the block
    mutated: list[set[Key]] = field(repr=False)  # per block: outputs written in place later in eager, never cached
    unmatched: int = 0  # ops of the latest step the trace did not show at their place (saved)
    candidates: list[nn.Module] = field(default_factory=list, repr=False)  # the regions the search was given
    restored: list[list[str]] = field(default_factory=list, repr=False)  # per block: buffers its forward writes

    def policy(self, block: int = 0) -> Callable[..., CheckpointPolicy]:
        """A policy function for one checkpointed forward of ``blocks[block]`` (it counts the op calls it sees)."""
        seen: dict[tuple[str, Shapes], int] = defaultdict(int)
        decisions, mutated = self.decisions[block], self.mutated[block]

        def decide(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            key = _key(seen, op_name(op), _shapes(ctx.op_output))
            decision = decisions.get(key)
            if key in mutated or writes(op):
                return CheckpointPolicy.PREFER_RECOMPUTE
            if decision is None or decision[1] != key[1]:
                self.unmatched += any(t.numel() for t in tensors_of(ctx.op_output))  # empty outputs cost nothing
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.MUST_SAVE if decision[0] else CheckpointPolicy.PREFER_RECOMPUTE

        return decide

    def context_fn(self, block: int = 0) -> tuple[Any, Any]:
        """``context_fn`` for ``torch.utils.checkpoint.checkpoint(blocks[block], ..., use_reentrant=False)``.

        The replay restores the buffers the block's forward writes as it ends: a replayed batch norm would
        otherwise update its running statistics (and count its batches) a second time.
        """
        caching, cached = create_selective_checkpoint_contexts(self.policy(block))
        return caching, _restoring(cached, self.blocks[block], self.restored[block])


@contextmanager
def _restoring(context: Any, block: nn.Module, names: list[str]) -> Iterator[None]:
    """``context``, with the buffers ``names`` of ``block`` (and the RNG state) put back when it ends."""
    with undone(block, names), context:
        yield


def _kept_for_backward(graph: Graph, saved: np.ndarray, regions: Regions | None) -> frozenset[int]:
    """The saved values read after the forward pass (SAC holds every value it saves till its region's backward)."""
    sequence = replay_sequence(graph, saved, regions=regions)
    later = np.zeros(graph.n, dtype=bool)
    later[sequence[int(np.count_nonzero(~graph.of_kind(NodeKind.BACKWARD))) :]] = True
    source, target = graph.edges[:, 0], graph.edges[:, 1]
    read_later = np.zeros(graph.n, dtype=bool)
    read_later[source[later[target]]] = True
    return frozenset(np.intersect1d(np.flatnonzero(read_later), saved).tolist())


def _forward_keys(torch_graph: TorchGraph) -> dict[Any, Key]:
    """FX node -> (op, occurrence) for every op call of the traced forward."""
    graph = torch_graph.graph
    forward = {torch_graph.fx_nodes[v] for v in graph.of_kind(NodeKind.FORWARD).nonzero()[0].tolist()}
    nodes = list(torch_graph.traced.module.graph.nodes)
    end = max((k for k, node in enumerate(nodes) if node in forward), default=-1)
    counts: dict[tuple[str, Shapes], int] = defaultdict(int)
    keys = {}
    for node in nodes[: end + 1]:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        keys[node] = _traced_key(counts, node)
    return keys


def _decisions(torch_graph: TorchGraph, keys: dict[Any, Key], saved: frozenset[int]) -> dict[Key, Decision]:
    """(op, occurrence) -> (saved?, output shapes) for every op call of the traced forward."""
    graph = torch_graph.graph
    index = {node: v for v, node in enumerate(torch_graph.fx_nodes)}
    decisions = {}
    for node, key in keys.items():
        compute = torch_graph.roles[node] is Role.COMPUTE
        save = is_random(node) or (compute and (index[node] in saved or not graph.recomputable[index[node]]))
        decisions[key] = (save, key[1])  # the shapes eager's op returns
    return decisions


class _MutationRecorder(TorchDispatchMode):
    """Records which op calls (by :data:`Key`) return a tensor that a later in-place op writes into.

    Also the block (index into ``blocks``, :data:`NO_REGION` outside them) running each op call.
    """

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.seen: dict[tuple[str, Shapes], int] = defaultdict(int)
        self.made_by: dict[int, list[Key]] = defaultdict(list)  # storage address -> the op calls returning it
        self.mutated: set[Key] = set()
        self.calls: list[tuple[Key, int]] = []  # every op call, in order, with its block
        self.active = [NO_REGION]
        self.hooks = [
            handle
            for k, block in enumerate(blocks)
            for handle in (
                block.register_forward_pre_hook(lambda *_, k=k: self.active.append(k)),
                block.register_forward_hook(self._leave),
            )
        ]

    def _leave(self, *_: Any) -> None:
        """Forward hook: the block returned (returns None, so its output stands)."""
        self.active.pop()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in SAC_IGNORED_OPS:
            return out
        if writes(func):
            for value in tensors_of((args, kwargs)):
                self.mutated.update(self.made_by.get(value.untyped_storage().data_ptr(), ()))
        key = _key(self.seen, op_name(func), _shapes(out))
        self.calls.append((key, self.active[-1]))
        for tensor in tensors_of(out):
            self.made_by[tensor.untyped_storage().data_ptr()].append(key)
        return out


def _recorded(model: nn.Module, inputs: Any, blocks: list[nn.Module]) -> _MutationRecorder:
    """One eager forward, recorded: outputs later written in place (SAC must not save those), ops per block."""
    recorder = _MutationRecorder(blocks)
    try:
        with undone(model), recorder:
            model(*as_tensors(inputs, "inputs"))
    finally:
        for handle in recorder.hooks:
            handle.remove()
    return recorder


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The children of the ``ModuleList``/``Sequential`` of two or more same-class modules with the most parameters.

    A transformer's layers (``transformer.h``, ``encoder.layer``, ``model.layers``), a ResNet's stages; ``[]``
    where the model has no such list.
    """
    best: list[nn.Module] = []
    most = 0
    for module in model.modules():
        children = list(module.children())
        if not isinstance(module, (nn.ModuleList, nn.Sequential)) or len(children) < 2:
            continue
        if len({type(child) for child in children}) > 1:
            continue
        size = sum(p.numel() for child in children for p in child.parameters())
        if size > most:
            best, most = children, size
    return best


def finer_blocks(blocks: list[nn.Module]) -> list[nn.Module]:
    """Each block replaced by its own :func:`repeated_blocks` where it has some (a ResNet stage's conv layers)."""
    return [inner for block in blocks for inner in (repeated_blocks(block) or [block])]


def candidate_levels(model: nn.Module) -> list[list[nn.Module]]:
    """The candidate region sets without ``blocks=``: the repeated blocks and, where it differs, one level finer."""
    coarse = repeated_blocks(model) or [model]
    fine = finer_blocks(coarse)
    return [coarse] if len(fine) == len(coarse) else [coarse, fine]


def _blocks(model: nn.Module, blocks: Blocks) -> list[nn.Module]:
    """The named submodules as candidate regions (checked: inside the model, disjoint, named once)."""
    named = dict(model.named_modules())
    if callable(blocks) and not isinstance(blocks, nn.Module):
        chosen = [module for name, module in named.items() if name and blocks(name)]
    else:
        chosen = list(blocks)
    owned = {id(module) for module in named.values()}
    strangers = [type(b).__name__ for b in chosen if not isinstance(b, nn.Module) or id(b) not in owned]
    if strangers:
        raise ConfigurationError(f"blocks must be submodules of the model, got {', '.join(strangers)}")
    if not chosen:
        raise ConfigurationError("blocks= names no submodule of the model")
    for block in chosen:
        inner = [b for b in chosen if b is not block and any(b is m for m in block.modules())]
        if inner:
            raise ConfigurationError(f"block {type(inner[0]).__name__} lies inside block {type(block).__name__}")
    if len({id(b) for b in chosen}) < len(chosen):
        raise ConfigurationError("blocks= names a submodule twice")
    return chosen


def _per_block(
    recorder: _MutationRecorder, decisions: dict[Key, Decision], count: int
) -> tuple[list[dict[Key, Decision]], list[set[Key]], dict[Key, int]]:
    """Decisions and mutated outputs per block, re-keyed by occurrence in the block; each op call's block."""
    local: list[dict[Key, Decision]] = [{} for _ in range(count)]
    mutated: list[set[Key]] = [set() for _ in range(count)]
    seen: list[dict[tuple[str, Shapes], int]] = [defaultdict(int) for _ in range(count)]
    block_of = {}
    for key, block in recorder.calls:
        block_of[key] = block
        if block == NO_REGION:
            continue
        mine = _key(seen[block], key[0], key[1])
        if key in decisions:
            local[block][mine] = decisions[key]
        if key in recorder.mutated:
            mutated[block].add(mine)
    return local, mutated, block_of


def sac_plan(
    model: nn.Module,
    inputs: Any,
    loss_fn: LossFn,
    targets: Any = None,
    *,
    budget: str | int | float | None = None,
    activation_budget: float | None = None,
    blocks: Blocks | None = None,
) -> SacPlan:
    """Trace the step, choose the save set within the budget (see :class:`SaveBudget`), return its policy.

    ``blocks``: the regions to checkpoint one by one (submodules of ``model``, or a predicate on their
    qualified names, e.g. ``lambda name: name.startswith("blocks.")``); default: the model's repeated blocks
    (:func:`repeated_blocks`), else the whole model, or one level finer (:func:`finer_blocks`), whichever
    plan peaks lower. ``activation_budget`` 1 is eager's peak (simulated on the trace), 0 the least the
    search reaches with these regions. Only the regions whose plan drops a value
    the backward reads are checkpointed (the others run as in eager: a checkpointed region replays its
    uncached ops even when everything the backward reads is cached), and none where the plan's peak is less
    than :data:`MIN_GAIN` below eager's: then the plan runs eagerly (``blocks`` empty).
    """
    torch_graph = extract(model, inputs, loss_fn, targets)
    levels = candidate_levels(model) if blocks is None else [_blocks(model, blocks)]
    plans = [_plan_in(torch_graph, model, inputs, chosen, budget, activation_budget) for chosen in levels]
    best = min(plans, key=lambda plan: plan.predicted_peak)  # the coarser on a tie: fewer regions replayed
    if len(plans) > 1:
        peaks = [plan.predicted_peak for plan in plans]
        log.info("SAC: %d candidate regions (predicted peaks by level, coarse first: %s)", len(best.candidates), peaks)
    return best


def _plan_in(
    torch_graph: TorchGraph,
    model: nn.Module,
    inputs: Any,
    chosen: list[nn.Module],
    budget: str | int | float | None,
    activation_budget: float | None,
) -> SacPlan:
    """The plan with ``chosen`` as the candidate regions."""
    graph = torch_graph.graph
    save_budget = SaveBudget(budget, activation_budget, eager_peak(graph))
    keys = _forward_keys(torch_graph)
    recorder = _recorded(model, inputs, chosen)
    _, _, block_of = _per_block(recorder, {}, len(chosen))
    label = np.full(graph.n, NO_REGION, dtype=np.int64)
    for v, node in enumerate(torch_graph.fx_nodes):
        if node in keys:
            label[v] = block_of.get(keys[node], NO_REGION)
    candidates = Regions.of(graph, label)
    bytes_ = save_budget.resolve(graph, replay=True, regions=candidates)
    choice = saveset_search(graph, bytes_, replay=True, regions=candidates)
    active = _dropping(graph, choice.saved, candidates)
    saved, regions, peak = _settled(graph, choice.saved, candidates, active)
    eager = input_order_peak(graph)
    if active and eager - peak < MIN_GAIN * (eager - graph.fixed_mem):  # too little gain for a replay: eagerly
        active = []
        saved, regions, peak = _settled(graph, choice.saved, candidates, active)
    decisions, mutated, _ = _per_block(recorder, _decisions(torch_graph, keys, saved), len(chosen))
    picked = [chosen[k] for k in active]
    written = _written_buffers(torch_graph)
    prefix = {id(module): f"{name}." if name else "" for name, module in model.named_modules()}
    restored = [[name for name, _ in block.named_buffers() if prefix[id(block)] + name in written] for block in picked]
    return SacPlan(
        torch_graph,
        bytes_,
        saved,
        peak,
        picked,
        regions,
        [decisions[k] for k in active],
        [mutated[k] for k in active],
        candidates=chosen,
        restored=restored,
    )


def _written_buffers(torch_graph: TorchGraph) -> frozenset[str]:
    """Qualified names of the buffers the traced step writes (its write-back nodes' targets)."""
    traced = torch_graph.traced
    slots = {node: k for k, node in enumerate(n for n in traced.module.graph.nodes if n.op == "placeholder")}
    first = len(traced.param_names)
    written = (slots[node.args[0]] - first for node, role in torch_graph.roles.items() if role is Role.WRITE_BACK)
    return frozenset(traced.buffer_names[k] for k in written if 0 <= k < len(traced.buffer_names))


def _dropping(graph: Graph, saved: np.ndarray, regions: Regions) -> list[int]:
    """The regions (sorted) where the save set drops an internal value that the backward reads."""
    dropped = forward_mask(graph) & graph.recomputable & regions.internal
    dropped[saved] = False
    source, target = graph.edges[:, 0], graph.edges[:, 1]
    read = np.zeros(graph.n, dtype=bool)
    read[source[graph.of_kind(NodeKind.BACKWARD)[target]]] = True
    return sorted(set(regions.label[dropped & read].tolist()))


def _settled(
    graph: Graph, saved: np.ndarray, regions: Regions, active: list[int]
) -> tuple[frozenset[int], Regions, int]:
    """Only the ``active`` regions checkpointed (renumbered in order; the rest save all): cached set, regions, peak."""
    renumber = np.full(int(regions.label.max(initial=NO_REGION)) + 2, NO_REGION, dtype=np.int64)
    renumber[np.array(active, dtype=np.int64)] = np.arange(len(active))
    label = renumber[regions.label]  # NO_REGION (-1) indexes the last entry: NO_REGION
    kept = np.zeros(graph.n, dtype=bool)
    kept[saved] = True
    kept |= forward_mask(graph) & (label == NO_REGION)
    settled = Regions.of(graph, label)
    cached = _kept_for_backward(graph, np.flatnonzero(kept), settled)  # SAC holds what it saves: what is read later
    schedule = saveset_schedule(graph, np.array(sorted(cached), dtype=np.int64), regions=settled)
    return cached, settled, simulate(graph, schedule).peak


@contextmanager
def _checkpointing(plan: SacPlan) -> Iterator[None]:
    """Each block's ``forward`` runs under ``checkpoint`` with its policy while the context is open."""
    own = [block.__dict__.get("forward") for block in plan.blocks]
    try:
        for k, block in enumerate(plan.blocks):
            block.forward = functools.partial(  # type: ignore[method-assign]
                torch.utils.checkpoint.checkpoint,
                block.forward,
                use_reentrant=False,
                context_fn=functools.partial(plan.context_fn, k),
            )
        yield
    finally:
        for block, forward in zip(plan.blocks, own, strict=True):
            if forward is None:
                block.__dict__.pop("forward", None)
            else:
                block.forward = forward  # type: ignore[method-assign]


def checkpointed(model: nn.Module, plan: SacPlan) -> Callable[..., Any]:
    """``model`` with each of the plan's blocks run through ``checkpoint`` with its policy.

    A drop-in for ``model(*inputs)``; ``plan.unmatched`` counts the latest call's ops not found in the trace.
    """

    def run(*inputs: torch.Tensor) -> Any:
        plan.unmatched = 0
        with _checkpointing(plan):
            return model(*inputs)

    return run
