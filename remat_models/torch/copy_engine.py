"""How the executor runs Offload/Prefetch/FreeHost: on the compute stream, or on copy streams beside it.

``SyncCopies`` copies on the current stream (the CPU path; on CUDA, pinned and non-blocking, ordered by
the one stream). ``StreamCopies`` is the simulator's ``overlap`` model (``core/transfer.py``) on CUDA:
one copy stream per direction, ordered against the compute stream by events only:

- ``Offload(v)``: the out stream waits for an event recorded on the compute stream (v is computed) and
  for v's prefetch if one is in flight, copies into fresh pinned host memory, records ``saved[v]``.
- ``Free(v)``: the compute stream waits for ``saved[v]`` (and v's prefetch) before the executor drops v.
  The caching allocator hands a freed block to later work on the stream that allocated it (compute) at
  once, so this wait is what keeps the block from being overwritten while the copy reads it. It is the
  model's own rule (a free waits for the copies of its value in flight) and costs no device memory;
  ``record_stream`` would instead keep the block out of the pool until the copy ends, so allocations
  meanwhile take fresh memory that the model does not have.
- ``Prefetch(v)``: the device storage is allocated while the compute stream is current (the block is
  the compute stream's), then the in stream waits for an event recorded after that allocation (earlier
  compute work on the block is done) and for ``saved[v]``, copies, records ``ready[v]``.
- a compute that reads v (``read``), ``Free(v)`` and ``Offload(v)`` wait for ``ready[v]`` first.
- ``FreeHost(v)``: the compute stream waits for ``saved[v]`` (the model's rule); the pinned buffer is
  kept until the last copy that touched it has completed (polled with ``Event.query``), so it is never
  released while a copy is in flight. ``finish`` waits for everything left at the end of a run.

Streams, events and "make this stream current" come from a ``StreamApi`` (``StreamApi.cuda(device)``),
so the ordering can be checked without a GPU (``tests/test_copy_engine.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch

from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError
from remat_models.torch.host import move_value

HOST = torch.device("cpu")


class SyncCopies:
    """Copies on the current stream, in schedule order (the executor's CPU path)."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = as_device(device)

    def offload(self, v: int, value: Any) -> Any:
        """The host copy of ``value``."""
        return move_value(value, HOST)

    def prefetch(self, v: int, host: Any) -> Any:
        """A device copy of the host value ``host``."""
        return move_value(host, self.device)

    def read(self, v: int) -> None:
        """Called before a compute reads the device value of node v."""

    def free(self, v: int) -> None:
        """Called before the executor drops the device value of node v."""

    def free_host(self, v: int, host: Any) -> None:
        """Called when the executor drops the host copy ``host`` of node v."""

    def finish(self) -> None:
        """Called at the end of a run, before its results are read."""


@dataclass(frozen=True)
class StreamApi:
    """What ``StreamCopies`` needs of a device's streams and events (CUDA's, or a checker's)."""

    compute: Any  # the stream the executor computes on (current while it runs)
    new_stream: Callable[[], Any]  # a stream with wait_event(event)
    new_event: Callable[[], Any]  # an event with record(stream), query(), synchronize()
    use: Callable[[Any], AbstractContextManager[Any]]  # makes a stream current for the ops inside
    pin: bool  # host buffers in pinned memory

    @classmethod
    def cuda(cls, device: torch.device | str) -> StreamApi:
        """The current CUDA stream of ``device`` computes; copy streams are new; pinned host buffers."""
        device = as_device(device)
        if device.type != "cuda" or not torch.cuda.is_available():
            raise ConfigurationError(f"copy streams need a CUDA device, got {device}")
        return cls(
            compute=torch.cuda.current_stream(device),
            new_stream=lambda: torch.cuda.Stream(device),
            new_event=torch.cuda.Event,
            use=torch.cuda.stream,
            pin=True,
        )


class StreamCopies:
    """Offloads on an out stream, prefetches on an in stream, ordered by events (see the module docstring)."""

    def __init__(self, device: torch.device | str, api: StreamApi | None = None) -> None:
        self.device = as_device(device)
        self.api = StreamApi.cuda(self.device) if api is None else api
        self.compute = self.api.compute
        self.out_stream = self.api.new_stream()
        self.in_stream = self.api.new_stream()
        self.saved: dict[int, Any] = {}  # offload done, per host copy (a prefetch waits for it)
        self.unsaved: dict[int, Any] = {}  # offloads the compute stream has not waited for yet
        self.ready: dict[int, Any] = {}  # prefetches the compute stream has not waited for yet
        self.last: dict[int, Any] = {}  # the last copy that touched each host copy
        self.retiring: list[tuple[Any, Any]] = []  # (event, host value) dropped at FreeHost, in flight

    def offload(self, v: int, value: Any) -> Any:
        """Copy ``value`` to pinned host memory on the out stream, after the compute stream's work so far."""
        self.out_stream.wait_event(self._mark(self.compute))
        if v in self.ready:
            self.out_stream.wait_event(self.ready[v])
        with self.api.use(self.out_stream):
            host = move_value(value, HOST, self._copy_out)
        self.saved[v] = self.unsaved[v] = self.last[v] = self._mark(self.out_stream)
        self._retire()
        return host

    def prefetch(self, v: int, host: Any) -> Any:
        """Copy ``host`` into compute-stream memory on the in stream, after v's offload."""
        self.in_stream.wait_event(self.saved[v])
        value = move_value(host, self.device, self._copy_in)
        self.ready[v] = self.last[v] = self._mark(self.in_stream)
        self._retire()
        return value

    def read(self, v: int) -> None:
        """The compute stream waits for v's prefetch before its first read."""
        if (event := self.ready.pop(v, None)) is not None:
            self.compute.wait_event(event)

    def free(self, v: int) -> None:
        """The compute stream waits for v's copies in flight before the executor drops it."""
        self.read(v)
        if (event := self.unsaved.pop(v, None)) is not None:
            self.compute.wait_event(event)

    def free_host(self, v: int, host: Any) -> None:
        """The compute stream waits for v's offload; the buffer lives until its last copy is done."""
        if (event := self.unsaved.pop(v, None)) is not None:
            self.compute.wait_event(event)
        del self.saved[v]
        self.retiring.append((self.last.pop(v), host))
        self._retire()

    def finish(self) -> None:
        """The compute stream waits for every copy in flight; the host waits before dropping host buffers."""
        for event in (*self.ready.values(), *self.unsaved.values()):
            self.compute.wait_event(event)
        for event in (*self.last.values(), *(event for event, _ in self.retiring)):
            event.synchronize()
        for state in (self.saved, self.unsaved, self.ready, self.last):
            state.clear()
        self.retiring.clear()

    def _copy_out(self, storage: torch.UntypedStorage) -> torch.UntypedStorage:
        """A host copy of ``storage`` (the out stream is current)."""
        target = torch.empty(storage.nbytes(), dtype=torch.uint8, device=HOST, pin_memory=self.api.pin)
        target.copy_(_bytes(storage), non_blocking=True)
        return target.untyped_storage()

    def _copy_in(self, storage: torch.UntypedStorage) -> torch.UntypedStorage:
        """A device copy of ``storage``: allocated on the compute stream, copied on the in stream."""
        target = torch.empty(storage.nbytes(), dtype=torch.uint8, device=self.device)
        self.in_stream.wait_event(self._mark(self.compute))
        with self.api.use(self.in_stream):
            target.copy_(_bytes(storage), non_blocking=True)
        return target.untyped_storage()

    def _mark(self, stream: Any) -> Any:
        """A new event recorded on ``stream``."""
        event = self.api.new_event()
        event.record(stream)
        return event

    def _retire(self) -> None:
        """Drop the host buffers whose last copy has completed."""
        self.retiring = [(event, host) for event, host in self.retiring if not event.query()]


def _bytes(storage: torch.UntypedStorage) -> torch.Tensor:
    """``storage`` as a flat byte tensor."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


CopyEngine = SyncCopies | StreamCopies


def as_device(device: torch.device | str) -> torch.device:
    """``device`` as a ``torch.device`` (a ConfigurationError naming it if it is none)."""
    try:
        return torch.device(device)
    except (TypeError, RuntimeError):
        raise ConfigurationError(f"a copy engine needs a torch device such as 'cuda:0', got {device!r}") from None


def check_engine(copies: Any, device: torch.device) -> CopyEngine:
    """``copies`` if it is a copy engine for ``device`` (the fixed tensors'), else a ConfigurationError."""
    if not isinstance(copies, (SyncCopies, StreamCopies)):
        raise ConfigurationError(f"copies must be a SyncCopies or StreamCopies instance, got {copies!r}")
    engine = copies.device
    if engine.type != device.type or (None not in (engine.index, device.index) and engine.index != device.index):
        raise ConfigurationError(f"copies run on {engine}, but the fixed tensors are on {device}")
    return copies


def copy_engine_for(device: torch.device, transfer: TransferModel | None) -> CopyEngine:
    """Copy streams on CUDA under an ``overlap`` transfer model, else copies on the compute stream."""
    if device.type == "cuda" and transfer is not None and transfer.mode == "overlap":
        return StreamCopies(device)
    return SyncCopies(device)
