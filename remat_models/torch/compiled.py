"""``torch.compile`` with our save-set plan: a partitioner that tags the joint graph, then PyTorch partitions it.

AOTAutograd hands the partitioner the decomposed joint forward+backward graph. :func:`partition` turns it
into a Graph (:mod:`remat_models.torch.joint`), chooses the saved forward values with the save-set search
(:mod:`remat_models.heuristics.saveset`), writes the choice as ``node.meta["recompute"] = MUST_SAVE /
MUST_RECOMPUTE`` and calls PyTorch's ``min_cut_rematerialization_partition``, which honours the tags; the
forward/backward order it emits is then simulated on the Graph (its peak is ``SavePlan.emitted_peak``).
Random ops are always saved (never redrawn), and keep their eager kernels: the decompositions used here
leave them alone (inductor: ``fallback_random``), so dropout masks are eager's under the same seed.
"""

from __future__ import annotations

import functools
import logging
import operator
import types
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch
from torch import fx, nn
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.backends.debugging import get_nop_func
from torch._functorch.partitioners import get_default_op_list, min_cut_rematerialization_partition
from torch._inductor.custom_graph_pass import CustomPartitionerFn
from torch.utils._python_dispatch import any_torch_dispatch_mode_on_stack
from torch.utils.checkpoint import CheckpointPolicy

from remat_models.core.graph import Graph
from remat_models.core.limits import check_time_limit
from remat_models.core.schedule import Compute, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError, RematError, SolverError
from remat_models.formulations import formulation_names, get_formulation
from remat_models.heuristics.recompute import forward_mask, saved_set_sequence, sequence_score
from remat_models.heuristics.saveset import SaveSet, saveset_schedule, saveset_search
from remat_models.planning.methods import parse_method_name
from remat_models.planning.plan import plan
from remat_models.torch.api import extract
from remat_models.torch.joint import FLOPS_PER_BYTE, JointGraph, as_partitioned, joint_graph
from remat_models.torch.ops import is_random
from remat_models.torch.plan_cache import DEFAULT, CacheDir, PlanCache
from remat_models.torch.save_budget import SaveBudget, eager_peak, undone
from remat_models.torch.schedule_partition import SchedulePlan, partition_schedule
from remat_models.torch.trace import LossFn, as_tensors, check_trainable

log = logging.getLogger(__name__)

Backend = Literal["inductor", "aot_eager"]
BACKENDS: tuple[Backend, ...] = ("inductor", "aot_eager")
SAVE_SET_HEURISTIC = "saveset"  # the heuristic; the exact ones: formulations declaring ``chooses_save_sets``


@dataclass(frozen=True)
class SavePlan:
    """One partition: its budget (bytes), the saved FX node names, and the plan's peaks and cost on the joint Graph.

    ``predicted_peak`` is the search's (unsaved values recomputed when first needed); ``emitted_peak`` and
    ``cost`` are the simulator's on the forward/backward order PyTorch's partitioner emitted (what runs).
    """

    budget: int
    saved: tuple[str, ...]
    predicted_peak: int
    emitted_peak: int
    cost: float
    joint: JointGraph = field(repr=False)

    @property
    def fits(self) -> bool:
        """Whether the order that runs stays within the budget."""
        return self.emitted_peak <= self.budget


def tag(joint: JointGraph, saved: np.ndarray) -> None:
    """Write the save set as recompute tags on the forward FX nodes (views follow their storages' owners)."""
    keep = set(saved.tolist())
    for node in joint.forward:
        owners = joint.owners[node]
        impure = is_random(node) or node.target is torch.ops.aten.copy_.default
        mine = node.name in joint.index or node.target is operator.getitem  # a view is free to recompute
        saves = impure or (mine and bool(owners) and owners <= keep)
        node.meta["recompute"] = CheckpointPolicy.MUST_SAVE if saves else CheckpointPolicy.MUST_RECOMPUTE


def save_set_methods() -> list[str]:
    """The methods that choose save sets: the heuristic, then each formulation declaring ``chooses_save_sets``."""
    exact = [name for name in formulation_names() if get_formulation(name).chooses_save_sets]
    return [SAVE_SET_HEURISTIC, *exact]


def check_method(method: str) -> str:
    """``method`` if it chooses save sets (``saveset``, ``saveset-exact[/BACKEND]``), else ConfigurationError."""
    methods = save_set_methods()
    if method.partition("/")[0] not in methods:
        exact = " or ".join(f"{name}[/BACKEND]" for name in methods[1:])
        raise ConfigurationError(f"save-set method {method!r}: choose {SAVE_SET_HEURISTIC} or {exact}")
    return method


def partitioner_view(joint: JointGraph) -> Graph:
    """The joint Graph with the ops PyTorch's partitioner never recomputes (matmuls, convolutions) not recomputable."""
    graph, ops = joint.graph, get_default_op_list()
    banned = np.array([ops.is_compute_intensive(node) for node in joint.fx_nodes], dtype=bool)
    return graph.with_recomputable(graph.recomputable & ~banned)


def choose_save_set(graph: Graph, budget: int, method: str = "saveset") -> SaveSet:
    """The heuristic's save set or, for ``saveset-exact[/BACKEND]``, the exact one (warm-started by the heuristic's).

    The exact model grows with the square of the graph: meant for small joint graphs. Where it finds nothing
    within the budget, the heuristic's plan stands.
    """
    found = saveset_search(graph, budget)
    if check_method(method) == SAVE_SET_HEURISTIC:
        return found
    result = plan(graph, budget, method, init=saveset_schedule(graph, found.saved), allow_over_budget=True)
    if result.schedule is None or result.simulation is None or result.simulation.peak > budget:
        return found
    computed = np.bincount([s.node for s in result.schedule if isinstance(s, Compute)], minlength=graph.n)
    saved = np.flatnonzero(forward_mask(graph) & (computed == 1))
    peak, cost = sequence_score(graph, saved_set_sequence(graph, saved))
    return SaveSet(saved, peak, cost)


def _cached_save_set(
    cache: PlanCache, key: dict[str, Any], graph: Graph, budget: int | None, top: int | None = None
) -> tuple[SaveSet, int] | None:
    """The save set stored under ``key`` and its budget, if it saves forward values and simulates within budget.

    ``budget``: bytes; None (an activation budget) takes the stored bytes, at most ``top`` (activation budget
    1's bytes; None: the save-everything peak).
    """
    payload = cache.load(key)
    if payload is None:
        return None
    forward = forward_mask(graph)
    try:
        index = {name: v for v, name in enumerate(graph.names)}
        saved = np.array(sorted(index[str(name)] for name in payload["saved"]), dtype=np.int64)
        limit = budget if budget is not None else int(payload["budget"])
        if not forward[saved].all():
            raise ValueError("it saves values that are not forward values")
        simulation = simulate(graph, saveset_schedule(graph, saved))
        most = top if top is not None else simulate(graph, saveset_schedule(graph, np.flatnonzero(forward))).peak
    except (RematError, KeyError, TypeError, ValueError) as error:
        cache.reject(key, f"not a save set of this graph: {error}")
        return None
    if not simulation.fits(limit) or (budget is None and limit > most):
        cache.reject(key, f"its peak {simulation.peak:,} B is over the budget {limit:,} B")
        return None
    log.info("plan cache: reusing the save set of %d values within %d B", saved.size, limit)
    return SaveSet(saved, simulation.peak, simulation.total_cost), limit


def _save_set(joint: JointGraph, save_budget: SaveBudget, method: str, cache: PlanCache) -> tuple[SaveSet, int]:
    """The save set of ``joint`` within ``save_budget`` and the budget's bytes: from the cache, else planned."""
    graph = joint.graph
    given = save_budget.resolve(graph) if save_budget.activation is None else None
    activation, eager = save_budget.activation, save_budget.eager
    key = cache.key(
        kind="save-set",
        graph=graph.content_hash,
        budget=given,
        activation=activation,
        eager=eager,
        method=method,
        span="planned graph",  # activation budgets span the graph the method plans (exact: the partitioner's view)
    )
    planned = graph if method == SAVE_SET_HEURISTIC else partitioner_view(joint)
    span = save_budget.span(planned) if given is None else None  # 0: the least of the graph planned
    found = _cached_save_set(cache, key, graph, given, None if span is None else span[1])
    if found is not None:
        return found
    budget = given if span is None else save_budget.share(*span)
    choice = choose_save_set(planned, budget, method)
    log.info("save-set partition: planned %d saved values with %s", choice.saved.size, method)
    if choice.peak <= budget:
        cache.store(key, {"saved": [graph.names[v] for v in choice.saved], "budget": budget})
    return choice, budget


def partition(
    module: fx.GraphModule,
    joint_inputs: Sequence[object],
    *,
    save_budget: SaveBudget,
    num_fwd_outputs: int,
    flops_per_byte: float = FLOPS_PER_BYTE,
    record: Callable[[SavePlan], None] | None = None,
    method: str = "saveset",
    cache: PlanCache | None = None,
    **kwargs: Any,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Plan the save set of ``module`` within ``save_budget`` (by ``method``, or from ``cache``), tag it, partition."""
    as_partitioned(module)
    joint = joint_graph(module, num_fwd_outputs, flops_per_byte=flops_per_byte)
    choice, budget = _save_set(joint, save_budget, method, cache or PlanCache(None))
    tag(joint, choice.saved)
    forward, backward = min_cut_rematerialization_partition(
        module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs
    )
    emitted = simulate(joint.graph, joint.emitted_schedule(forward, backward))
    saved = tuple(joint.graph.names[v] for v in choice.saved)
    plan = SavePlan(budget, saved, choice.peak, emitted.peak, emitted.total_cost, joint)
    log.info("save-set partition: budget %d B, search %d B, emitted order %d B", budget, choice.peak, emitted.peak)
    if emitted.peak > budget:
        log.warning("the partitioner's order peaks at %d B, over the budget of %d B", emitted.peak, budget)
    if record is not None:
        record(plan)
    return forward, backward


class SaveSetPartitioner(CustomPartitionerFn):
    """Inductor's ``custom_partitioner_fn`` with one budget (a fresh cache key per instance).

    A save-set ``method`` (:func:`save_set_methods`) partitions with :func:`partition` (PyTorch's partitioner
    honouring our tags); any other method's schedule is emitted as it is
    (:func:`remat_models.torch.schedule_partition.partition_schedule`).
    """

    def __init__(
        self,
        save_budget: SaveBudget,
        record: Callable[[Any], None] | None = None,
        method: str = "saveset",
        cache: PlanCache | None = None,
        time_limit: float | None = None,
        transfer: TransferModel | None = None,
    ) -> None:
        self.save_budget = save_budget
        self.time_limit = time_limit
        self.transfer = transfer
        self.record = record
        self.method = method
        self.saves = method.partition("/")[0] in save_set_methods()
        if not self.saves:
            parse_method_name(method)  # an unknown name fails here, not inside torch.compile
        elif transfer is not None:
            raise ConfigurationError(f"{method} chooses save sets and never offloads; a transfer model needs another")
        self.cache = cache or PlanCache(None)
        self.key = uuid.uuid4().hex

    def __call__(
        self, gm: fx.GraphModule, joint_inputs: Sequence[object], **kwargs: Any
    ) -> tuple[fx.GraphModule, fx.GraphModule]:
        """Partition ``gm`` by the save set or the schedule of ``method``."""
        settings = dict(save_budget=self.save_budget, record=self.record, method=self.method, cache=self.cache)
        if self.saves:
            return partition(gm, joint_inputs, **settings, **kwargs)
        extra = dict(time_limit=self.time_limit, transfer=self.transfer)
        return partition_schedule(gm, joint_inputs, **extra, **settings, **kwargs)

    def uuid(self) -> str:
        """Inductor's cache key: one per partitioner, so a cached graph of another plan is never reused."""
        return self.key


GELU_OPS = frozenset((torch.ops.aten.gelu.default, torch.ops.aten.gelu_backward.default))
"""Decomposed, GELU's forward and backward keep several activation-sized temporaries alive: the zoo ViT's least
joint-graph peak was 11.57 MB with them decomposed, 8.37 MB without (the traced graph's: 8.38 MB)."""
MAX_POOL_OPS = frozenset(
    (torch.ops.aten.max_pool2d_with_indices.default, torch.ops.aten.max_pool2d_with_indices_backward.default)
)
"""Decomposed, max pool runs inductor's low-memory prims, whose ATen fallbacks (``aot_eager``) take scratch: 3.6 MB
on the zoo ResNet's stem, which set its joint graph's step bound (4.98 MB; kept whole 3.15 MB, and its least
peak found fell from 4.98 to 3.43 MB, below the traced graph's 4.37 MB above its fixed memory). Kept whole on
the schedule route only: PyTorch's partitioner (the save-set route) saves the decomposition's int8 offsets, the
whole op's int64 indices (the zoo ResNet's save-set route measured 0.95 x eager's peak with max pool whole, 0.85 x
decomposed)."""
KEPT_OPS = GELU_OPS | MAX_POOL_OPS
"""Ops kept whole (inductor lowers them itself, or falls back to their ATen kernels): :data:`GELU_OPS` on both
routes, :data:`MAX_POOL_OPS` on the schedule route."""


def _decompositions(kept: frozenset[Any]) -> dict[Any, Any]:
    """Inductor's decompositions without those of random ops and of ``kept`` (ops run whole), for both backends.

    Random ops keep their eager kernels, which draw eager's numbers (inductor: ``fallback_random``).
    ``torch._inductor.lowering`` is imported for them: the max-pool decomposition reads it, and in a process
    that has not imported it (aot_eager only) a ResNet failed with "module 'torch._inductor' has no attribute
    'lowering'".
    """
    import torch._inductor.lowering
    from torch._inductor.decomposition import select_decomp_table

    table = select_decomp_table().items()
    random = torch.Tag.nondeterministic_seeded
    return {op: fn for op, fn in table if op not in kept and random not in getattr(op, "tags", ())}


@functools.cache
def _register_kept_fallbacks() -> None:
    """Lower :data:`KEPT_OPS` to their ATen kernels in inductor, explicitly.

    Left to inductor's implicit fallback, an op that has a decomposition fails when the environment sets ``CI``
    ("make_fallback(aten.gelu.default): a decomposition exists, we should switch to it"). The registration is
    process-wide and harmless elsewhere: other compiles decompose these ops before lowering.
    """
    from torch._inductor.lowering import lowerings, make_fallback

    for op in KEPT_OPS:
        if op not in lowerings:
            make_fallback(op, warn=False, override_decomp=True)


def save_set_backend(
    partitioner: SaveSetPartitioner, backend: Backend, options: dict[str, Any] | None = None
) -> Callable[..., Any]:
    """A ``torch.compile`` backend partitioning with ``partitioner``: inductor (config ``options``) or AOTAutograd.

    AOTAutograd runs no compiler (``aot_eager``); both decompose with :func:`_decompositions`, keeping the
    partitioner's ops whole (:data:`KEPT_OPS` for schedules, :data:`GELU_OPS` for save sets).
    """
    decompositions = _decompositions(GELU_OPS if partitioner.saves else KEPT_OPS)
    if backend == "inductor":
        from torch._inductor.compile_fx import compile_fx

        _register_kept_fallbacks()
        patches = {**(options or {}), "custom_partitioner_fn": partitioner}
        return functools.partial(compile_fx, config_patches=patches, decompositions=decompositions)
    nop = get_nop_func()  # as PyTorch's aot_eager_decomp_partition: boxed, so saved values die at their last use
    return aot_autograd(
        fw_compiler=nop,
        bw_compiler=nop,
        decompositions=decompositions,
        partition_fn=lambda gm, inputs, **kw: partitioner(gm, inputs, compiler="inductor", **kw),
    )


class CompiledStep:
    """``loss = step(inputs, targets)`` runs the compiled forward and loss; ``loss.backward()`` the planned backward."""

    def __init__(
        self,
        model: nn.Module,
        loss_fn: LossFn,
        save_budget: SaveBudget,
        backend: Backend = "inductor",
        method: str = "saveset",
        cache_dir: CacheDir = DEFAULT,
        time_limit: float | None = None,
        transfer: TransferModel | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ConfigurationError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        self.model = model
        self.plans: list[SavePlan | SchedulePlan] = []
        self.partitioner = SaveSetPartitioner(
            save_budget, self.plans.append, method, PlanCache(cache_dir), check_time_limit(time_limit), transfer
        )

        def step(*args: torch.Tensor, n_inputs: int) -> torch.Tensor:
            return loss_fn(model(*args[:n_inputs]), *args[n_inputs:])

        # A code object of its own: dynamo caches compiled graphs per code object, so another CompiledStep of
        # the same shapes would reuse this one's partition, and past dynamo's recompile limit run eagerly.
        step = types.FunctionType(step.__code__.replace(), step.__globals__, step.__name__, None, step.__closure__)
        self.eager = step
        backend_fn = save_set_backend(self.partitioner, backend, {"fallback_random": True})
        self.compiled = torch.compile(step, backend=backend_fn, dynamic=False)  # a plan per shape

    @property
    def plan(self) -> SavePlan | SchedulePlan | None:
        """The plan of the latest partition (None before the first call compiles)."""
        return self.plans[-1] if self.plans else None

    def __call__(self, inputs: Any, targets: Any = None) -> torch.Tensor:
        """The loss of one batch (call ``.backward()`` on it).

        Under a dispatch mode dynamo does not compile through (``FlopCounterMode``, ...) the call runs eagerly:
        dynamo would skip the step there and then for good, every later call eager (pytorch#190286).
        """
        xs, ys = as_tensors(inputs, "inputs"), as_tensors(targets, "targets")
        if self.plans and any_torch_dispatch_mode_on_stack():
            log.warning("a torch dispatch mode is active: this step runs eagerly, not the plan (later steps do)")
            return self.eager(*xs, *ys, n_inputs=len(xs))
        loss = self.compiled(*xs, *ys, n_inputs=len(xs))
        if not self.plans:
            raise SolverError("torch.compile ran the step without partitioning it (dynamo fell back to eager)")
        return loss


def compile(
    model: nn.Module,
    example_inputs: Any,
    loss_fn: LossFn,
    targets: Any = None,
    *,
    budget: str | int | float | None = None,
    activation_budget: float | None = None,
    backend: Backend = "inductor",
    method: str = "auto",
    cache_dir: CacheDir = DEFAULT,
    time_limit: float | None = None,
    transfer: TransferModel | None = None,
) -> CompiledStep:
    """Compile a training step that runs our plan of its joint graph within the budget.

    Compiles on the example batch at once (one forward, its RNG draws and buffer updates undone), so
    ``step.plan`` tells the plan and peaks before training starts. ``method``: ``saveset`` (the heuristic)
    or ``saveset-exact[/BACKEND]`` (the exact formulation, for small joint graphs) choose a save set that
    PyTorch's partitioner runs (``SavePlan``); any other method of ``remat methods`` (``auto``, the default,
    ``checkmate/highs``, ``chen-greedy``, ...) plans a schedule that is emitted as it is, recomputations
    included (``SchedulePlan``; planning within ``time_limit``, default ``api.PLAN_SECONDS``; with a
    ``transfer`` model its Offload/Prefetch steps are host copies in the graph). The plan is stored in
    ``cache_dir`` (:mod:`remat_models.torch.plan_cache`; default the user's cache folder, None: no cache),
    keyed by the joint graph's hash, the budget, the method and the versions, and a later process compiling
    the same step reuses it once validated (logged "plan cache: reusing ...") instead of planning.
    ``activation_budget`` spans the least peak the method reaches (0) up to eager autograd's peak, simulated
    on the step traced here (1; lower where saving every value peaks lower), on every method.
    """
    save_budget = SaveBudget(budget, activation_budget)  # checked before tracing
    check_trainable(model)  # else dynamo runs the step eagerly and nothing is partitioned
    if activation_budget is not None:  # its 1 is capped by eager's peak, simulated on the traced step
        save_budget = replace(save_budget, eager=eager_peak(extract(model, example_inputs, loss_fn, targets).graph))
    step = CompiledStep(model, loss_fn, save_budget, backend, method, cache_dir, time_limit, transfer)
    with undone(model), torch.enable_grad():
        step(example_inputs, targets)
    return step
