"""A Schedule of a traced step turned into straight-line code once: an ``fx.GraphModule``, no interpreter.

Every Compute becomes a call of the node's ATen op (a recomputation is a second call); views and
tuple items are derived once while their sources stay resident (anew after a Free). A value's last
reference goes at its Free: FX's code generator drops every variable after its last use, and where
a Free comes later than that (a Compute in between), a no-op ``keep_until_free`` call placed at the
Free keeps the value alive until then. So the code holds what the simulator counts, step by step,
and runs the same kernels in the same order as the interpreter (gradients bit-identical to eager
autograd). Schedules with Offload/Prefetch steps or alternative implementations run in the
interpreter (``supports``).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

from remat_models.core.schedule import Compute, Free, Schedule
from remat_models.errors import InvalidScheduleError
from remat_models.torch.executor import buffer_write_backs
from remat_models.torch.mapping import Role, TorchGraph

log = logging.getLogger(__name__)


def keep_until_free(*values: Any) -> None:
    """No-op: the last use of values whose Free comes after a later Compute."""


def supports(schedule: Schedule) -> bool:
    """Whether ``schedule`` has only Compute (default implementation) and Free steps."""
    return all(isinstance(step, Free) or (isinstance(step, Compute) and step.impl == 0) for step in schedule.steps)


class _Builder:
    """Emits the FX graph of one schedule."""

    def __init__(self, torch_graph: TorchGraph) -> None:
        self.tg = torch_graph
        self.graph = fx.Graph()
        self.fixed: dict[fx.Node, fx.Node] = {}
        self.resident: dict[int, list[fx.Node | None] | fx.Node] = {}  # graph node -> its value (items if a tuple)
        self.used_at: dict[int, int] = {}  # graph node -> Compute count when last read
        self.computes = 0
        self.derived: dict[fx.Node, tuple[Any, frozenset[int]]] = {}  # inlined node -> (its value, graph nodes read)
        for node in torch_graph.traced.module.graph.nodes:
            if node.op == "placeholder":
                self.fixed[node] = self.graph.placeholder(node.name)
            elif node.op == "get_attr":
                self.fixed[node] = self.graph.get_attr(node.target)

    def value(self, node: fx.Node) -> Any:
        """The FX value of an original node: fixed, resident, or derived (inlined views and items)."""
        if node in self.fixed:
            return self.fixed[node]
        if self.tg.roles[node] is not Role.INLINE:
            return self._resident(node)
        if node.target is operator.getitem and self.tg.roles.get(node.args[0]) is Role.COMPUTE:
            return self._resident(node.args[0])[node.args[1]]
        if node not in self.derived:  # derived once while its sources stay resident (views cost dispatches)
            args, kwargs = fx.node.map_arg((node.args, node.kwargs), self.value)
            self.derived[node] = (self.graph.call_function(node.target, args, kwargs), self._sources(node))
        value, sources = self.derived[node]
        for v in sources:
            self.used_at[v] = self.computes
        return value

    def _sources(self, node: fx.Node) -> frozenset[int]:
        """Graph nodes an inlined node is derived from."""
        found: set[int] = set()
        for source in node.all_input_nodes:
            if source in self.fixed:
                continue
            if self.tg.roles[source] is Role.INLINE:
                found |= self._sources(source)
            else:
                found.add(self.tg.graph.index[source.name])
        return frozenset(found)

    def _resident(self, node: fx.Node) -> Any:
        v = self.tg.graph.index[node.name]
        if v not in self.resident:
            raise InvalidScheduleError(f"{node.name!r} is read but not resident")
        self.used_at[v] = self.computes
        return self.resident[v]

    def compute(self, v: int) -> None:
        """Emit graph node v's op; keep only the outputs something reads."""
        self.computes += 1
        node = self.tg.fx_nodes[v]
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), self.value)
        if self.tg.roles[node] is Role.WRITE_BACK:
            call = self.graph.call_function(
                torch.ops.aten.clone.default, (args[1],), {"memory_format": torch.contiguous_format}
            )
        else:
            call = self.graph.call_function(node.target, args, kwargs)
        kept = self.tg.kept_outputs.get(node)
        if isinstance(node.meta.get("val"), (tuple, list)):
            flags = kept if kept is not None else (True,) * len(node.meta["val"])
            self.resident[v] = [
                self.graph.call_function(operator.getitem, (call, k)) if keep else None for k, keep in enumerate(flags)
            ]
        else:
            self.resident[v] = call
        self.used_at[v] = self.computes

    def free(self, v: int) -> None:
        """Drop graph node v's value; if a Compute ran since its last read, reference it here (its last use)."""
        value = self.resident.pop(v)
        self.derived = {node: entry for node, entry in self.derived.items() if v not in entry[1]}
        if self.used_at.pop(v) < self.computes:
            items = [item for item in value if item is not None] if isinstance(value, list) else [value]
            self.graph.call_function(keep_until_free, tuple(items))

    def output(self) -> None:
        """Return the loss, the parameter gradients and the new buffer values."""
        tg = self.tg
        grads = tuple(None if g is None else self.value(g) for g in tg.grad_nodes)
        buffers = tuple(self._resident(tg.fx_nodes[v]) for v, _ in buffer_write_backs(tg))
        self.graph.output((self.value(tg.loss_node), grads, buffers))


class GeneratedStep:
    """``step(fixed) -> (loss, grads, buffer values)`` running ``schedule`` as generated code (``.module.code``)."""

    def __init__(self, torch_graph: TorchGraph, schedule: Schedule) -> None:
        if not supports(schedule):
            raise InvalidScheduleError("the generated step runs Compute (default implementation) and Free steps only")
        builder = _Builder(torch_graph)
        for step in schedule.steps:
            if isinstance(step, Compute):
                builder.compute(step.node)
            else:
                builder.free(step.node)
        builder.output()
        self.module = fx.GraphModule(torch_graph.traced.module, builder.graph)
        self.buffer_names = [name for _, name in buffer_write_backs(torch_graph)]
        log.debug("generated %d steps into %d FX nodes", len(schedule), len(builder.graph.nodes))

    def __call__(
        self, fixed: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor | None, ...], dict[str, torch.Tensor]]:
        """Run the step on the fixed tensors (placeholder order): loss, gradients, new buffer values."""
        with torch.no_grad():
            loss, grads, buffers = self.module(*fixed)
        return loss, grads, dict(zip(self.buffer_names, buffers, strict=True))
