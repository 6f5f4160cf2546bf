"""A partitioner that emits any schedule of the joint graph as PyTorch's forward and backward FX graphs.

The joint module AOTAutograd hands the partitioner is rewritten in the schedule's order: each Compute step
becomes a copy of its op (a recomputation is another copy, read by the steps after it), views are derived
anew after their sources are recomputed. The schedule splits after its last forward output: the steps
before it are the forward graph, the rest the backward graph, and the values the backward reads from the
forward are saved (PyTorch's ``_extract_fwd_bwd_modules`` builds both graphs, as its own partitioners do).
Offload and Prefetch steps (plans under a transfer model) are copies to the host and back. FX frees each
value after its last use, so the order that runs is the schedule's steps with last-use frees
(:func:`last_use_frees`); it is simulated after every partition (``SchedulePlan.emitted_peak``). Random
ops are not recomputable in the Graph and chained in program order (:func:`remat_models.torch.joint.joint_graph`
with ``ordered``), so no plan redraws a dropout mask and draws keep eager's order.

Before planning, the joint module gets the traced graph's treatment of multi-output ops (a Graph node frees
its outputs together): convolution backwards are split into their input and parameter gradients
(:func:`split_gradients`), a dropout's output is derived from its mask, so it can be freed and recomputed
(:func:`~remat_models.torch.split.rederive_dropout`), and outputs that outlive the others are copied into
their own nodes (:func:`~remat_models.torch.split.share_outputs`).
Kernels' scratch buffers on the CPU are measured into the Graph's workspace (:func:`with_workspace`).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import operator
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import fx
from torch._functorch.partitioners import _extract_fwd_bwd_modules

from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Free, FreeHost, Offload, Prefetch, Schedule, Step, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import InvalidScheduleError, SolverError, UnsupportedConstructError
from remat_models.planning.plan import PlanResult
from remat_models.torch.api import cached_plan
from remat_models.torch.joint import FLOPS_PER_BYTE, JointGraph, as_partitioned, joint_graph
from remat_models.torch.plan_cache import PlanCache
from remat_models.torch.save_budget import SaveBudget
from remat_models.torch.split import mask_position, rederive_dropout, share_outputs, split_by_mask, used_outputs
from remat_models.torch.workspace import measured_workspace

log = logging.getLogger(__name__)
STEP_KEY = "remat_step"  # meta key of an emitted op: the Compute, Offload or Prefetch step it runs


@dataclass(frozen=True)
class SchedulePlan:
    """One partition from a schedule: the plan, and the simulator's peak and cost of the order emitted."""

    budget: int
    method: str
    planned_peak: int  # the plan's schedule, simulated
    emitted_peak: int  # the emitted forward + backward order, simulated with last-use frees
    cost: float
    recomputations: int  # Compute steps beyond one per computed node
    offloads: int  # Offload steps (host copies; each read back by a Prefetch)
    result: PlanResult = field(repr=False)
    joint: JointGraph = field(repr=False)

    @property
    def fits(self) -> bool:
        """Whether the order that runs stays within the budget."""
        return self.emitted_peak <= self.budget


def emitted_steps(*modules: fx.GraphModule) -> list[Compute | Offload | Prefetch]:
    """The Compute, Offload and Prefetch steps the emitted modules run, in order (a recomputation appears again)."""
    return [n.meta[STEP_KEY] for m in modules for n in m.graph.nodes if n.op == "call_function" and STEP_KEY in n.meta]


def last_use_frees(graph: Graph, steps: Sequence[Compute | Offload | Prefetch]) -> Schedule:
    """``steps`` with the frees FX code makes: each value dropped after its last use.

    A device value goes after its last read (a Compute reading it, or its Offload) before it is produced again
    (or right after it is produced, if nothing reads it), unless it is a graph output; a host copy after its
    last Prefetch. With Computes only this is :func:`eager_frees`.
    """
    outputs = set(graph.outputs.tolist())
    after: dict[int, list[Step]] = defaultdict(list)
    device: dict[int, int] = {}  # value -> step of its last read in its current lifetime
    host: dict[int, int] = {}
    for k, step in enumerate(steps):
        v = step.node
        if isinstance(step, Compute):
            for u in graph.preds(v).tolist():
                device[u] = k
        if isinstance(step, (Compute, Prefetch)) and v in device:
            after[device.pop(v)].append(Free(v))
        if isinstance(step, Offload) and v in host:
            after[host.pop(v)].append(FreeHost(v))
        device[v] = k
        if not isinstance(step, Compute):
            host[v] = k
    for v, k in device.items():
        if v not in outputs:
            after[k].append(Free(v))
    for v, k in host.items():
        after[k].append(FreeHost(v))
    return Schedule(tuple(s for k, step in enumerate(steps) for s in (step, *after[k])))


class _Emitter:
    """Rewrites a joint module in a schedule's order (see the module docstring)."""

    def __init__(self, module: fx.GraphModule, joint: JointGraph) -> None:
        self.joint = joint
        self.graph = fx.Graph()
        self.placeholders = {n: self.graph.node_copy(n) for n in module.graph.nodes if n.op == "placeholder"}
        self.current: dict[int, fx.Node] = {}  # Graph node -> its latest computation (or prefetch)
        self.host: dict[int, fx.Node] = {}  # Graph node -> its latest host copy
        self.items: dict[int, dict[int, fx.Node]] = {}  # Graph node of a multi-output op -> its getitems
        self.derived: dict[fx.Node, tuple[fx.Node, tuple[fx.Node, ...]]] = {}  # view -> (new node, its inputs)

    def value(self, node: fx.Node) -> fx.Node:
        """The emitted node standing for original ``node`` now: a placeholder, a computation, or a derived view."""
        if node in self.placeholders:
            return self.placeholders[node]
        v = self.joint.index.get(node.name)
        if v is not None:
            if v not in self.current:
                raise InvalidScheduleError(f"{node.name!r} is read but not computed")
            return self.current[v]
        source = node.args[0] if node.target is operator.getitem else None
        if isinstance(source, fx.Node) and source.name in self.joint.index:
            return self.items[self.joint.index[source.name]][node.args[1]]  # type: ignore[index]
        inputs = tuple(self.value(n) for n in node.all_input_nodes)
        found = self.derived.get(node)
        if found is None or found[1] != inputs:
            found = (self.graph.node_copy(node, self.value), inputs)
            self.derived[node] = found
        return found[0]

    def step(self, step: Step) -> None:
        """Emit a Compute, Offload or Prefetch step (frees are the code's own, at last use)."""
        if isinstance(step, Compute):
            self.compute(step.node)
        elif isinstance(step, (Offload, Prefetch)):
            self.copy(step)

    def copy(self, step: Offload | Prefetch) -> None:
        """An Offload copies the value to the host; a Prefetch copies the host copy back to the device.

        Across devices the copy is ``prims.device_put`` (``aten._to_copy`` is decomposed before inductor
        lowers a graph, so it has no lowering); on the CPU a ``clone``.
        """
        v = step.node
        item = self._only_output(v)
        if isinstance(step, Offload):
            source = self.current[v] if item is None else self.items[v][item]
        else:
            source = self.host[v]
        val = self.joint.fx_nodes[v].meta["val"]
        val = val if item is None else val[item]
        device = torch.device("cpu") if isinstance(step, Offload) else val.device
        if device == val.device:  # CPU: the host tier is the same memory; a copy that inductor lowers too
            new = self.graph.call_function(torch.ops.aten.clone.default, (source,))
        else:
            new = self.graph.call_function(torch.ops.prims.device_put.default, (source, device))
        with val.fake_mode:
            new.meta["val"] = val.to(device, copy=True)
        new.meta[STEP_KEY] = step
        if isinstance(step, Offload):
            self.host[v] = new
        elif item is None:
            self.current[v] = new
        else:
            self.items[v][item] = new

    def _only_output(self, v: int) -> int | None:
        """The one output read of multi-output op v (its Graph value; a dropout's mask), None for other ops."""
        if v not in self.items:
            return None
        used = used_outputs(self.joint.fx_nodes[v])
        if len(used) != 1:
            raise UnsupportedConstructError(f"offloading {self.joint.graph.names[v]!r}: an op with several outputs")
        return next(iter(used))

    def compute(self, v: int) -> None:
        """Emit Graph node v's op, reading the current values of its inputs."""
        node = self.joint.fx_nodes[v]
        new = self.graph.node_copy(node, self.value)
        new.meta[STEP_KEY] = Compute(v)
        self.current[v] = new
        values = node.meta.get("val")
        if isinstance(values, (tuple, list)):
            self.items[v] = {}
            for k, item in enumerate(values):
                self.items[v][k] = getitem = self.graph.call_function(operator.getitem, (new, k))
                getitem.meta["val"] = item


def emit(
    module: fx.GraphModule, joint: JointGraph, schedule: Schedule, num_fwd_outputs: int
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """The forward and backward modules running ``schedule`` of ``joint`` (a Graph of ``module``)."""
    if any(isinstance(step, Compute) and step.impl for step in schedule):
        raise UnsupportedConstructError("the compiled route runs default implementations only")
    output = next(n for n in module.graph.nodes if n.op == "output")
    outputs = list(output.args[0])
    emitter = _Emitter(module, joint)
    owners = {v for o in outputs[:num_fwd_outputs] for v in joint.owners.get(o, ())}
    steps = list(schedule)
    first = {}  # each forward output's first computation: the forward returns it (a recomputation is the backward's)
    for k, step in enumerate(steps):
        if isinstance(step, Compute) and step.node in owners:
            first.setdefault(step.node, k)
    split = max(first.values(), default=-1) + 1
    for step in steps[:split]:
        emitter.step(step)
    forward_outputs = [emitter.value(o) if isinstance(o, fx.Node) else o for o in outputs[:num_fwd_outputs]]
    forward_nodes = set(emitter.graph.nodes)
    emitter.derived.clear()  # the backward derives its own views: a saved value is a computation or an input
    for step in steps[split:]:
        emitter.step(step)
    backward_outputs = [emitter.value(o) if isinstance(o, fx.Node) else o for o in outputs[num_fwd_outputs:]]
    new_output = emitter.graph.output([*forward_outputs, *backward_outputs])
    new_output.meta = copy.copy(output.meta)
    saved: dict[fx.Node, None] = {}
    readers = [n for n in emitter.graph.nodes if n not in forward_nodes and n.op == "call_function"]
    for node in [*(i for n in readers for i in n.all_input_nodes), *backward_outputs]:
        if node in forward_nodes and not node.name.startswith("tangents"):
            saved[node] = None
    for node in emitter.graph.nodes:  # no op moves across the split (PyTorch would copy one whose inputs are saved)
        if node.op == "call_function":
            node.meta["partitioner_tag"] = "must_be_in_forward" if node in forward_nodes else "must_be_in_backward"
    joint_module = fx.GraphModule(module, emitter.graph)
    return _extract_fwd_bwd_modules(joint_module, list(saved), [], num_fwd_outputs=num_fwd_outputs)


def split_gradients(module: fx.GraphModule) -> int:
    """Split each convolution backward computing both an input and parameter gradients in two; return how many.

    A Graph node frees its outputs together, so a weight gradient (an output, kept to the end) would pin its
    input gradient (the largest value of a convolution's backward) to the end in the plan, as the traced
    graph's :func:`~remat_models.torch.split.split_by_mask` avoids; the parts share no work. Each part's
    fake value is its getitems' values (None where masked off).
    """
    split = split_by_mask(module)
    for node in module.graph.nodes:
        mask_at = mask_position(node) if split and node.op == "call_function" else None
        if mask_at is not None and "val" not in node.meta:
            items = {user.args[1]: user.meta["val"] for user in node.users if user.target is operator.getitem}
            node.meta["val"] = tuple(items.get(k) for k in range(len(node.args[mask_at])))
    return split


def with_workspace(joint: JointGraph) -> JointGraph:
    """``joint`` with each op's measured scratch bytes (:func:`measured_workspace`) added to its Graph workspace."""
    scratch = np.array(measured_workspace(joint.fx_nodes), dtype=np.int64)
    if not scratch.any():
        return joint
    log.info("kernel workspace: %d ops, up to %d B", int((scratch > 0).sum()), int(scratch.max()))
    return dataclasses.replace(joint, graph=joint.graph.replaced(workspace=joint.graph.workspace + scratch))


def partition_schedule(
    module: fx.GraphModule,
    joint_inputs: Sequence[object],
    *,
    save_budget: SaveBudget,
    num_fwd_outputs: int,
    method: str,
    cache: PlanCache,
    record: Callable[[SchedulePlan], None] | None = None,
    flops_per_byte: float = FLOPS_PER_BYTE,
    time_limit: float | None = None,
    transfer: TransferModel | None = None,
    **kwargs: Any,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Plan the joint graph of ``module`` with ``method`` within ``save_budget`` and emit the schedule.

    With a ``transfer`` model the plan may offload values: Offload and Prefetch steps become copies to the
    host and back (:meth:`_Emitter.copy`), in order on the compute stream.
    """
    as_partitioned(module)
    split_gradients(module)
    rederive_dropout(module)
    share_outputs(module)
    joint = with_workspace(joint_graph(module, num_fwd_outputs, flops_per_byte=flops_per_byte, ordered=True))
    graph = joint.graph
    given = parse_budget(save_budget.budget, graph) if save_budget.activation is None else None  # type: ignore[arg-type]
    extra = {} if transfer is None else {"transfer": transfer}
    result = cached_plan(
        graph,
        given,
        save_budget.activation,
        method,
        time_limit=time_limit,
        cache=cache,
        allow_over_budget=True,
        eager=save_budget.eager,
        **extra,
    )
    if result.schedule is None or result.simulation is None:
        raise SolverError(f"{result.method} returned no schedule ({result.status.value})")
    forward, backward = emit(module, joint, result.schedule, num_fwd_outputs)
    order = emitted_steps(forward, backward)
    emitted = simulate(graph, last_use_frees(graph, order), transfer)
    computes = [step.node for step in order if isinstance(step, Compute)]
    plan = SchedulePlan(
        budget=result.budget,
        method=result.method,
        planned_peak=result.simulation.peak,
        emitted_peak=emitted.peak,
        cost=emitted.total_cost,
        recomputations=len(computes) - len(set(computes)),
        offloads=sum(isinstance(step, Offload) for step in order),
        result=result,
        joint=joint,
    )
    log.info(
        "schedule partition (%s): budget %d B, plan %d B, emitted order %d B, %d recomputations, %d offloads",
        plan.method,
        plan.budget,
        plan.planned_peak,
        plan.emitted_peak,
        plan.recomputations,
        plan.offloads,
    )
    if not plan.fits:
        log.warning("the emitted order peaks at %d B, over the budget of %d B", plan.emitted_peak, plan.budget)
    if record is not None:
        record(plan)
    return forward, backward
