"""A second memory tier: the transfer model and the host/stream accounting the simulator uses.

``TransferModel`` prices device -> host copies (offloads) and host -> device copies (prefetches)
as ``latency + bytes / bandwidth`` in the graph's cost units. ``HostTier`` is the bookkeeping
``remat_models.core.schedule.simulate`` delegates the transfer steps to: host residency, host capacity,
transfer cost and, in ``overlap`` mode, one copy stream per direction next to the compute stream.
This module works on node indices only; the step classes live in ``remat_models.core.schedule``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from remat_models.errors import ConfigurationError, InvalidScheduleError

TRANSFER_MODES = ("serial", "overlap")


@dataclass(frozen=True, kw_only=True)
class TransferModel:
    """Cost of copying values between device and host.

    Bandwidths are bytes per cost unit, latencies are cost units. ``mode="serial"`` adds every
    transfer to the total cost (POET); ``mode="overlap"`` runs one copy stream per direction
    beside the compute stream and reports the makespan. ``host_capacity`` bounds host bytes.
    """

    out_latency: float = 0.0
    out_bw: float
    in_latency: float = 0.0
    in_bw: float
    host_capacity: int | None = None
    mode: str = "serial"

    def __post_init__(self) -> None:
        for name in ("out_bw", "in_bw"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ConfigurationError(f"TransferModel.{name} must be a positive finite number, got {value!r}")
        for name in ("out_latency", "in_latency"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
                raise ConfigurationError(f"TransferModel.{name} must be a finite number >= 0, got {value!r}")
        if self.host_capacity is not None and not (isinstance(self.host_capacity, int) and self.host_capacity >= 0):
            raise ConfigurationError(f"TransferModel.host_capacity must be bytes >= 0, got {self.host_capacity!r}")
        if self.mode not in TRANSFER_MODES:
            raise ConfigurationError(f"TransferModel.mode must be one of {TRANSFER_MODES}, got {self.mode!r}")

    def out_time(self, nbytes: int | float) -> float:
        """Duration of offloading ``nbytes`` bytes."""
        return self.out_latency + nbytes / self.out_bw

    def in_time(self, nbytes: int | float) -> float:
        """Duration of prefetching ``nbytes`` bytes."""
        return self.in_latency + nbytes / self.in_bw

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> TransferModel:
        """Build from CLI-style options (``--with paging:...``, ``remat simulate --transfer ...``).

        Keys: ``bw``/``out_bw``/``in_bw``, ``latency``/``out_latency``/``in_latency``, ``host``
        (a size such as ``64GiB``) or ``host_capacity``, ``mode``. ``bw`` and ``latency`` set both
        directions; the directional keys override them.
        """
        from remat_models.core.units import parse_size

        known = {"bw", "out_bw", "in_bw", "latency", "out_latency", "in_latency", "host", "host_capacity", "mode"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigurationError(f"unknown transfer option {unknown[0]!r} (expected one of {sorted(known)})")

        def number(key: str, default: Any) -> float:
            value = options.get(key, default)
            try:
                return float(value)
            except (TypeError, ValueError):
                raise ConfigurationError(f"transfer option {key}={value!r} is not a number") from None

        bw = options.get("bw")
        if options.get("out_bw", bw) is None or options.get("in_bw", bw) is None:
            raise ConfigurationError("transfer options need a bandwidth: bw=, or out_bw= and in_bw= (bytes/cost unit)")
        latency = options.get("latency", 0.0)
        host = options.get("host", options.get("host_capacity"))
        return cls(
            out_latency=number("out_latency", latency),
            out_bw=number("out_bw", bw),
            in_latency=number("in_latency", latency),
            in_bw=number("in_bw", bw),
            host_capacity=None if host is None else parse_size(host),
            mode=str(options.get("mode", "serial")),
        )


def parse_transfer(text: str) -> TransferModel:
    """A TransferModel from ``"bw=2e9,latency=1e-5,host=64GiB,mode=overlap"`` (keys of ``from_options``)."""
    options: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"transfer option {item!r} is not KEY=VALUE (in {text!r})")
        options[key.strip()] = value.strip()
    return TransferModel.from_options(options)


class HostTier:
    """Host residency, host capacity, transfer cost and stream clocks while simulating one schedule.

    The simulator calls ``offload``/``prefetch``/``free_host`` for transfer steps (after checking
    device residency itself) and ``compute``/``free`` for every compute and free step, so that in
    ``overlap`` mode computes wait for the prefetches they read and frees wait for offloads.
    """

    def __init__(self, mem: list[int], names: list[str], transfer: TransferModel) -> None:
        self.mem = mem
        self.names = names
        self.transfer = transfer
        self.overlap = transfer.mode == "overlap"
        n = len(mem)
        self.on_host = [False] * n
        self.host_in_use = 0
        self.host_peak = 0
        self.transfer_cost = 0.0
        self.compute_cost = 0.0
        self.offloads = 0
        self.prefetches = 0
        self.clock = 0.0  # the compute stream
        self.out_end = 0.0
        self.in_end = 0.0
        self.ready = [0.0] * n  # when the device copy from a prefetch is complete
        self.saved = [0.0] * n  # when the host copy from an offload is complete

    def offload(self, k: int, v: int, resident: bool) -> None:
        """Copy device -> host; ``resident`` is v's device residency."""
        name = self.names[v]
        if not resident:
            raise InvalidScheduleError(f"offloads {name!r}, which is not resident on the device", step=k)
        if self.on_host[v]:
            raise InvalidScheduleError(f"offloads {name!r}, which already has a host copy", step=k)
        self.host_in_use += self.mem[v]
        capacity = self.transfer.host_capacity
        if capacity is not None and self.host_in_use > capacity:
            raise InvalidScheduleError(
                f"offloading {name!r} needs {self.host_in_use} host bytes, over the host capacity {capacity}", step=k
            )
        self.host_peak = max(self.host_peak, self.host_in_use)
        self.on_host[v] = True
        duration = self.transfer.out_time(self.mem[v])
        self.transfer_cost += duration
        self.offloads += 1
        if self.overlap:
            start = max(self.clock, self.out_end, self.ready[v])
            self.out_end = self.saved[v] = start + duration
        else:
            self.clock += duration

    def prefetch(self, k: int, v: int, resident: bool) -> None:
        """Copy host -> device; ``resident`` is v's device residency before the step."""
        name = self.names[v]
        if not self.on_host[v]:
            raise InvalidScheduleError(f"prefetches {name!r}, which has no host copy", step=k)
        if resident:
            raise InvalidScheduleError(f"prefetches {name!r}, which is already resident on the device", step=k)
        duration = self.transfer.in_time(self.mem[v])
        self.transfer_cost += duration
        self.prefetches += 1
        if self.overlap:
            start = max(self.clock, self.in_end, self.saved[v])
            self.in_end = self.ready[v] = start + duration
        else:
            self.clock += duration

    def free_host(self, k: int, v: int) -> None:
        """Drop the host copy of ``v``."""
        if not self.on_host[v]:
            raise InvalidScheduleError(f"frees the host copy of {self.names[v]!r}, which has none", step=k)
        self.on_host[v] = False
        self.host_in_use -= self.mem[v]
        if self.overlap:
            self.clock = max(self.clock, self.saved[v])

    def compute(self, reads: Iterable[int], duration: float) -> None:
        """Advance the compute stream by one compute that reads ``reads`` (waiting for their prefetches)."""
        self.compute_cost += duration
        if self.overlap:
            ready = self.ready
            self.clock = max([self.clock, *(ready[u] for u in reads)]) + duration
        else:
            self.clock += duration

    def free(self, v: int) -> None:
        """A device free of ``v`` waits (overlap mode) until its copies in flight are complete."""
        if self.overlap:
            self.clock = max(self.clock, self.saved[v], self.ready[v])

    @property
    def makespan(self) -> float:
        """End of the last stream: compute + transfers in serial mode."""
        return max(self.clock, self.out_end, self.in_end)


def transfer_of(extensions: Iterable[object]) -> TransferModel | None:
    """The transfer model that applied extensions price Offload/Prefetch with (None when none moves values).

    An extension that inserts transfer steps carries its model as ``transfer``; schedules decoded with
    it are simulated under that model.
    """
    models = {model for extension in extensions if (model := getattr(extension, "transfer", None)) is not None}
    if len(models) > 1:
        raise ConfigurationError(f"the extensions use {len(models)} different transfer models; give one")
    return next(iter(models), None)
