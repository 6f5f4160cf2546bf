"""Run a Schedule of a traced step on real tensors, tracking live storage bytes at every compute step."""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import fx

from remat_models.core.schedule import (
    TRANSFER_STEPS,
    Compute,
    Free,
    FreeHost,
    Offload,
    Prefetch,
    Schedule,
    SimulationResult,
    simulate,
)
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.torch.copy_engine import CopyEngine, check_engine, copy_engine_for
from remat_models.torch.costs import time_op
from remat_models.torch.host import host_bytes
from remat_models.torch.mapping import Role, TorchGraph, size_model, tensors_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepResult:
    """Loss, parameter gradients (None where unused), new buffer values, and live bytes per step."""

    loss: torch.Tensor
    grads: tuple[torch.Tensor | None, ...]
    buffer_updates: dict[str, torch.Tensor]
    timeline: np.ndarray = field(repr=False)  # live bytes above fixed memory at each step (-1 if not tracked)
    host_peak: int = 0  # largest bytes held in the host dict (offloaded copies)

    @property
    def peak(self) -> int:
        """Largest live bytes (above fixed memory) at any compute step."""
        return int(self.timeline.max()) if self.timeline.size else 0


class _Live:
    """Bytes of the storages the executor holds, deduplicated by storage, with reference counts."""

    def __init__(self, device: torch.device, exclude: Sequence[torch.Tensor] = ()) -> None:
        self.nbytes = size_model(device)
        self.fixed = set(self.keys(list(exclude)))
        self.counts: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.total = 0

    @staticmethod
    def keys(value: Any) -> dict[int, int]:
        """Storage pointer -> storage bytes of every tensor in ``value`` (zero-byte storages skipped)."""
        found = {}
        for tensor in tensors_of(value):
            storage = tensor.untyped_storage()
            if storage.nbytes():
                found[storage.data_ptr()] = storage.nbytes()
        return found

    def with_new(self, value: Any) -> int:
        """Live bytes if ``value`` were added (the output being produced counts)."""
        fresh = [n for k, n in self.keys(value).items() if k not in self.counts and k not in self.fixed]
        return self.total + sum(self.nbytes(n) for n in fresh)

    def add(self, value: Any) -> list[int]:
        """Hold ``value``; return its storage keys for the matching ``remove``."""
        keys = {k: n for k, n in self.keys(value).items() if k not in self.fixed}
        for key, size in keys.items():
            if key not in self.counts:
                self.counts[key] = 0
                self.sizes[key] = self.nbytes(size)
                self.total += self.sizes[key]
            self.counts[key] += 1
        return list(keys)

    def remove(self, keys: list[int]) -> None:
        """Release what ``add`` returned."""
        for key in keys:
            self.counts[key] -= 1
            if not self.counts[key]:
                del self.counts[key]
                self.total -= self.sizes.pop(key)


class Executor:
    """Executes schedules of one TorchGraph; ``run`` takes the fixed tensors in placeholder order."""

    def __init__(self, torch_graph: TorchGraph) -> None:
        self.tg = torch_graph
        self.placeholders = [n for n in torch_graph.traced.module.graph.nodes if n.op == "placeholder"]
        self.constants = {
            n: getattr(torch_graph.traced.module, n.target)
            for n in torch_graph.traced.module.graph.nodes
            if n.op == "get_attr"
        }

    def check(self, schedule: Schedule, transfer: TransferModel | None = None) -> SimulationResult:
        """Simulate ``schedule`` on the graph (raises InvalidScheduleError if it is not valid for it).

        Without ``transfer``, a schedule with Offload/Prefetch steps is checked under a unit-bandwidth
        model with unlimited host memory (validity does not depend on transfer times).
        """
        if transfer is None and any(isinstance(step, TRANSFER_STEPS) for step in schedule.steps):
            transfer = TransferModel(out_bw=1.0, in_bw=1.0)
        return simulate(self.tg.graph, schedule, transfer)

    def run(
        self,
        schedule: Schedule,
        fixed: Sequence[torch.Tensor],
        *,
        track: bool = True,
        transfer: TransferModel | None = None,
        copies: CopyEngine | None = None,
    ) -> StepResult:
        """Compute, free, recompute, offload and prefetch as ``schedule`` says; return loss, gradients, live bytes.

        Offloaded values go to a host dict (CPU tensors; pinned, non-blocking copies from CUDA). ``copies``
        runs the transfers (``torch/copy_engine.py``); by default copy streams on CUDA when ``transfer`` is
        in ``overlap`` mode, else copies on the compute stream.
        """
        if transfer is not None and not isinstance(transfer, TransferModel):
            raise ConfigurationError(f"transfer must be a TransferModel or None, got {transfer!r}")
        self.check(schedule, transfer)
        tg = self.tg
        if len(fixed) != len(self.placeholders):
            raise InvalidScheduleError(f"expected {len(self.placeholders)} fixed tensors, got {len(fixed)}")
        values: dict[fx.Node, Any] = dict(zip(self.placeholders, fixed, strict=True))
        values.update(self.constants)
        env: dict[int, Any] = {}
        held: dict[int, list[int]] = {}
        device = _device_of(fixed)
        live = _Live(device, exclude=fixed)
        host: dict[int, Any] = {}
        host_in_use = host_peak = 0
        timeline = np.full(len(schedule), -1, dtype=np.int64)
        copies = copy_engine_for(device, transfer) if copies is None else check_engine(copies, device)
        with torch.no_grad():
            try:
                for k, step in enumerate(schedule.steps):
                    v = step.node
                    if isinstance(step, Compute):
                        value = self._compute(v, values, env, step.impl, copies)
                        if track:  # the kernel's scratch was live while it ran, as the Graph's workspace says
                            timeline[k] = live.with_new(value) + tg.scratch[v]
                        value = self._keep(v, value)
                        env[v] = value
                        if track:
                            held[v] = live.add(value)
                    elif isinstance(step, Free):
                        copies.free(v)
                        del env[v]
                        if track:
                            live.remove(held.pop(v))
                            timeline[k] = live.total
                    elif isinstance(step, Prefetch):
                        env[v] = copies.prefetch(v, host[v])
                        if track:
                            held[v] = live.add(env[v])
                            timeline[k] = live.total
                    elif isinstance(step, Offload):
                        host[v] = copies.offload(v, env[v])
                        host_in_use += host_bytes(host[v])
                        host_peak = max(host_peak, host_in_use)
                        if track:
                            timeline[k] = live.total
                    elif isinstance(step, FreeHost):
                        copies.free_host(v, host[v])
                        host_in_use -= host_bytes(host.pop(v))
                        if track:
                            timeline[k] = live.total
            finally:
                copies.finish()
            loss = self._value(tg.loss_node, values, env)
            grads = tuple(None if g is None else self._value(g, values, env) for g in tg.grad_nodes)
            updates = self._write_backs(values, env)
        timeline.setflags(write=False)
        return StepResult(loss=loss, grads=grads, buffer_updates=updates, timeline=timeline, host_peak=host_peak)

    def measure_times(self, fixed: Sequence[torch.Tensor], repeats: int = 3) -> dict[fx.Node, float]:
        """Median run time of every Graph node's op in the input order (RNG state restored afterwards)."""
        graph = self.tg.graph
        values: dict[fx.Node, Any] = dict(zip(self.placeholders, fixed, strict=True))
        values.update(self.constants)
        env: dict[int, Any] = {}
        times: dict[fx.Node, float] = {}
        devices = [t.device for t in fixed if t.is_cuda]
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            for v in graph.order.tolist():
                node = self.tg.fx_nodes[v]
                args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda a: self._value(a, values, env))
                times[node] = time_op(node, args, kwargs, repeats)
                env[v] = self._keep(v, self._compute(v, values, env))
        return times

    def _compute(
        self, v: int, values: dict[fx.Node, Any], env: dict[int, Any], impl: int = 0, copies: CopyEngine | None = None
    ) -> Any:
        """Run Graph node v's op (implementation ``impl``, see ``torch/impl_ops.py``) on its inputs' current values."""
        if impl:
            from remat_models.torch.impl_ops import run_impl

            return run_impl(self.tg, v, impl, lambda a: self._value(a, values, env, copies))
        node = self.tg.fx_nodes[v]
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda a: self._value(a, values, env, copies))
        if self.tg.roles[node] is Role.WRITE_BACK:
            return args[1].clone(memory_format=torch.contiguous_format)
        return node.target(*args, **kwargs)

    def _keep(self, v: int, value: Any) -> Any:
        """Drop the outputs nobody reads (they were the step's workspace)."""
        kept = self.tg.kept_outputs.get(self.tg.fx_nodes[v])
        if kept is None or all(kept):
            return value
        if not isinstance(value, (tuple, list)):
            return None
        return type(value)(item if keep else None for item, keep in zip(value, kept, strict=True))

    def _value(
        self, node: fx.Node, values: dict[fx.Node, Any], env: dict[int, Any], copies: CopyEngine | None = None
    ) -> Any:
        """The current value of an FX node: fixed, resident, or re-derived (inlined views).

        A resident value is read through ``copies`` (which waits for its prefetch), when given.
        """
        if node in values:
            return values[node]
        role = self.tg.roles[node]
        if role is Role.INLINE:
            args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda a: self._value(a, values, env, copies))
            if node.target is operator.getitem:
                return args[0][args[1]]
            return node.target(*args, **kwargs)
        v = self.tg.graph.index[node.name]
        if v not in env:
            raise InvalidScheduleError(f"{node.name!r} is read but not resident")
        if copies is not None:
            copies.read(v)
        return env[v]

    def _write_backs(self, values: dict[fx.Node, Any], env: dict[int, Any]) -> dict[str, torch.Tensor]:
        """New values of mutated buffers, by buffer name."""
        return {name: env[v] for v, name in buffer_write_backs(self.tg)}


def buffer_write_backs(torch_graph: TorchGraph) -> list[tuple[int, str]]:
    """(graph node, buffer name) of every write-back; InvalidScheduleError if one writes into an input."""
    traced = torch_graph.traced
    n_params = len(traced.param_names)
    placeholders = [n for n in traced.module.graph.nodes if n.op == "placeholder"]
    found = []
    for v, node in enumerate(torch_graph.fx_nodes):
        if torch_graph.roles[node] is Role.WRITE_BACK:
            slot = placeholders.index(node.args[0])
            if not n_params <= slot < n_params + len(traced.buffer_names):
                raise InvalidScheduleError(f"{node.name!r} mutates an input, which is not supported")
            found.append((v, traced.buffer_names[slot - n_params]))
    return found


def _device_of(fixed: Sequence[torch.Tensor]) -> torch.device:
    """Device of the first fixed tensor (CPU if there is none)."""
    return fixed[0].device if fixed else torch.device("cpu")
