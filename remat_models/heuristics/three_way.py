"""Three-way planner: each value is kept, recomputed or offloaded (torchtitan's saved-set decision, at scale).

Recompute-only candidates come from the knapsack's saved-set sweep (each recomputable forward value
kept or recomputed, :func:`knapsack_sequences`) and, when given, warm starts (e.g. FastSA's orders).
Each is then shaved with offloads until it fits: at the simulated peak, the values resident there
but idle (read neither at that step nor until a later read) are paged over that idle gap, the
largest first, until their bytes cover the excess: offloaded right after their first production
(host copies persist), prefetched before the read that ends the gap. In ``overlap`` mode a prefetch
is issued as early as the computes before that read cover ``lead`` times its transfer (never before
the shaved step), so copies hide behind compute on the copy stream. Candidates are tried by their
compute cost, cheapest first; a candidate that already computes more than the best plan costs is not
shaved. Every plan is simulated under the transfer model; the cheapest that fits wins (else the lowest
peak). With nothing to shave, the result is the best recompute-only candidate.
"""

from __future__ import annotations

import bisect
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.limits import check_time_limit
from remat_models.core.schedule import Offload, Prefetch, Schedule, SimulationResult, Step, eager_frees, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError
from remat_models.heuristics.baselines import knapsack_sequences
from remat_models.heuristics.fastsa import fastsa
from remat_models.heuristics.recompute import sequence_schedule, sequence_score

logger = logging.getLogger(__name__)

DEFAULT_TIME_LIMIT = 60.0  # seconds, when the caller gives none

Gap = tuple[int, int]  # (position of the production or read opening it, position of the read closing it)


@dataclass(frozen=True)
class ThreeWayOptions:
    """The heuristic's options (``plan(..., "three-way", transfer=..., options={...})``)."""

    transfer: TransferModel | None = None  # required: what a transfer costs (plan's transfer= fills it in)
    min_bytes: int = 0  # values smaller than this are never paged
    fastsa_share: float = 0.5  # of the time limit for two FastSA runs (recompute-only, fetch units) as warm starts

    def __post_init__(self) -> None:
        if not isinstance(self.transfer, TransferModel):
            raise ConfigurationError(
                "three-way needs a transfer model: plan(..., transfer=TransferModel(...)) or --transfer"
            )
        if not (isinstance(self.min_bytes, int) and self.min_bytes >= 0):
            raise ConfigurationError(f"three-way min_bytes must be an int >= 0, got {self.min_bytes!r}")
        if not (isinstance(self.fastsa_share, (int, float)) and 0 <= self.fastsa_share < 1):
            raise ConfigurationError(f"three-way fastsa_share must be in [0, 1), got {self.fastsa_share!r}")


@dataclass(frozen=True)
class ThreeWayPlan:
    """The chosen plan: its schedule, its simulation under the transfer model, how many plans were simulated."""

    schedule: Schedule
    simulation: SimulationResult
    plans_tried: int


class _Paging:
    """A compute sequence, the positions where each value is produced and read, and the gaps paged so far."""

    def __init__(self, graph: Graph, sequence: np.ndarray, transfer: TransferModel, lead: float, min_bytes: int):
        self.graph, self.transfer, self.lead = graph, transfer, lead
        self.sequence = np.asarray(sequence, dtype=np.int64)
        self.start = np.concatenate([[0.0], np.cumsum(graph.cost[self.sequence])])
        pred_ptr, pred_idx = graph.pred_ptr.tolist(), graph.pred_idx.tolist()
        self.events: list[list[int]] = [[] for _ in range(graph.n)]  # positions of productions and reads
        self.reads: list[set[int]] = [set() for _ in range(graph.n)]
        for i, w in enumerate(self.sequence.tolist()):
            for u in pred_idx[pred_ptr[w] : pred_ptr[w + 1]]:
                if not self.events[u] or self.events[u][-1] != i:
                    self.events[u].append(i)
                self.reads[u].add(i)
            self.events[w].append(i)
        pageable = graph.mem >= max(min_bytes, 1)
        pageable[graph.outputs] = False
        self.pageable = pageable.tolist()
        self.floor: dict[tuple[int, Gap], int] = {}  # paged (value, gap) -> earliest prefetch position
        self.host_room = math.inf if transfer.host_capacity is None else transfer.host_capacity
        self.on_host: set[int] = set()  # offloaded values (one host copy each, kept)

    def issue(self, v: int, gap: Gap) -> int:
        """Where the prefetch closing ``gap`` goes: ``lead`` x its transfer ahead of the read, not before its floor."""
        read = gap[1]
        if self.transfer.mode != "overlap" or self.lead <= 0:
            return read
        wanted = self.start[read] - self.lead * self.transfer.in_time(int(self.graph.mem[v]))
        return max(int(np.searchsorted(self.start, wanted, side="right")) - 1, self.floor[(v, gap)])

    def idle_at(self, i: int) -> list[tuple[int, Gap]]:
        """Values resident but idle at compute position ``i`` (their next event a read), with their gap."""
        found = []
        for v, events in enumerate(self.events):
            if not self.pageable[v] or not events or (v not in self.on_host and self.graph.mem[v] > self.host_room):
                continue
            k = bisect.bisect_right(events, i)
            if k == 0 or k == len(events) or events[k - 1] == i or events[k] not in self.reads[v]:
                continue
            gap = (events[k - 1], events[k])
            if (v, gap) not in self.floor or self.issue(v, gap) <= i:
                found.append((v, gap))
        return found

    def page(self, v: int, gap: Gap, i: int) -> bool:
        """Page ``v`` over ``gap`` so that it is off the device at position ``i``; False if the host has no room."""
        if v not in self.on_host:
            if self.graph.mem[v] > self.host_room:
                return False
            self.on_host.add(v)
            self.host_room -= int(self.graph.mem[v])
        self.floor[(v, gap)] = i + 1
        return True

    def schedule(self) -> Schedule:
        """The eager-free schedule with every paged gap's offload and prefetch."""
        if not self.floor:
            return sequence_schedule(self.graph, self.sequence)
        offload_after: dict[int, list[int]] = {}
        prefetch_before: dict[int, list[int]] = {}
        for v in sorted(self.on_host):
            offload_after.setdefault(self.events[v][0], []).append(v)  # after its first production
        for v, gap in self.floor:
            prefetch_before.setdefault(self.issue(v, gap), []).append(v)
        events: list[int | Step] = []
        for i, w in enumerate(self.sequence.tolist()):
            events.extend(Prefetch(u) for u in prefetch_before.get(i, ()))
            events.append(w)
            events.extend(Offload(u) for u in offload_after.get(i, ()))
        return eager_frees(self.graph, events)


def _compute_position(schedule: Schedule, step: int) -> int:
    """Compute position of schedule step ``step`` (a transfer or free: of the next compute)."""
    return sum(1 for s in schedule.steps[:step] if type(s).__name__ == "Compute")


def shave(
    graph: Graph,
    sequence: np.ndarray,
    budget: int,
    transfer: TransferModel,
    *,
    lead: float = 1.0,
    min_bytes: int = 0,
    deadline: float = math.inf,
    cutoff: float = math.inf,
) -> tuple[Schedule, SimulationResult, int]:
    """Page idle values at the simulated peak of ``sequence`` until it fits ``budget`` (or nothing is left to page).

    Stops early once the total cost reaches ``cutoff`` (paging more only adds transfers). Returns the
    last schedule, its simulation under ``transfer`` and the number of schedules simulated.
    """
    paging = _Paging(graph, sequence, transfer, lead, min_bytes)
    schedule = paging.schedule()
    result = simulate(graph, schedule, transfer)
    tried = 1
    while result.peak > budget and result.total_cost < cutoff and time.perf_counter() < deadline:
        i = _compute_position(schedule, result.peak_step)
        candidates = sorted(paging.idle_at(i), key=lambda item: -int(graph.mem[item[0]]))
        excess = result.peak - budget
        if sum(int(graph.mem[v]) for v, _ in candidates) < excess:
            break  # paging every idle value at the peak would not fit it
        for v, gap in candidates:  # the largest first: fewest transfers
            if paging.page(v, gap, i):
                excess -= int(graph.mem[v])
            if excess <= 0:
                break
        if excess > 0:
            break  # the host has no room for enough of them
        schedule = paging.schedule()
        result = simulate(graph, schedule, transfer)
        tried += 1
    return schedule, result, tried


def _rank(result: SimulationResult, budget: int) -> tuple[bool, float, float]:
    if result.peak <= budget:
        return (False, result.total_cost, result.peak)
    return (True, result.peak, result.total_cost)


def three_way(
    graph: Graph,
    budget: int,
    transfer: TransferModel,
    *,
    time_limit: float | None = None,
    min_bytes: int = 0,
    inits: Sequence[Schedule] = (),
) -> ThreeWayPlan:
    """The cheapest fitting plan (else the lowest peak) of the shaved candidates, simulated under ``transfer``.

    Each of ``inits`` (schedules of ``graph`` valid under ``transfer``) competes as it is, and its compute
    sequence is a candidate. Candidates are shaved in the order of an estimate (compute cost plus the bytes over the
    budget paged out and in once); ``time_limit`` (seconds) stops the search once a plan exists. Values
    under ``min_bytes`` (and graph outputs) are never paged.
    """
    deadline = math.inf if time_limit is None else time.perf_counter() + time_limit
    sequences = [np.asarray(init.compute_sequence(), dtype=np.int64) for init in inits]
    sequences += list(knapsack_sequences(graph))
    per_byte = transfer.out_time(1) + transfer.in_time(1) - transfer.out_latency - transfer.in_latency
    candidates = []
    for sequence in sequences:  # by compute cost + the bytes over the budget paged out and in once
        peak, cost = sequence_score(graph, sequence)
        candidates.append((cost + max(peak - budget, 0) * per_byte, cost, len(candidates), sequence))
    candidates.sort(key=lambda item: item[:3])
    leads = (1.0, 0.0) if transfer.mode == "overlap" else (0.0,)
    best: tuple[tuple[bool, float, float], Schedule, SimulationResult] | None = None
    tried = 0
    for init in inits:  # as it is (it may page values itself), and its compute sequence shaved below
        result = simulate(graph, init, transfer)
        tried += 1
        if best is None or _rank(result, budget) < best[0]:
            best = (_rank(result, budget), init, result)
    for _, cost, _, sequence in candidates:
        cutoff = math.inf if best is None or best[0][0] else best[0][1]  # the best fitting plan's cost
        if best is not None and time.perf_counter() > deadline:
            break
        if cost >= cutoff:
            continue  # computing alone already costs more than the best plan
        for lead in leads:
            schedule, result, count = shave(
                graph, sequence, budget, transfer, lead=lead, min_bytes=min_bytes, deadline=deadline, cutoff=cutoff
            )
            tried += count
            key = _rank(result, budget)
            if best is None or key < best[0]:
                best = (key, schedule, result)
    assert best is not None
    _, schedule, result = best
    logger.info(
        "three-way on %s: peak %d (budget %d), cost %.6g, %d offloads, %d schedules simulated",
        graph.name, result.peak, budget, result.total_cost, result.offloads, tried,
    )  # fmt: skip
    return ThreeWayPlan(schedule, result, tried)


def run_three_way(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    """Registry runner: FastSA for ``fastsa_share`` of the time limit, then :func:`three_way` from its schedules.

    FastSA runs twice, half that share each: recompute-only, and with fetch units (App. B.3, unless the
    host capacity binds, which they do not model). Neither is better on every graph and link.
    """
    opts = ThreeWayOptions(**dict(options or {}))
    assert opts.transfer is not None
    limit = DEFAULT_TIME_LIMIT if time_limit is None else check_time_limit(time_limit, "three-way time limit")
    started = time.perf_counter()
    inits = []
    if opts.fastsa_share > 0:
        fetching = opts.transfer if opts.transfer.host_capacity is None else None
        for transfer in dict.fromkeys([None, fetching]):  # once without a host capacity's fetch units
            share = opts.fastsa_share * limit / (2 if fetching is not None else 1)
            inits.append(fastsa(graph, budget, seed=seed, time_limit=share, transfer=transfer).schedule)
    left = max(limit - (time.perf_counter() - started), 0.0)
    found = three_way(graph, budget, opts.transfer, time_limit=left, min_bytes=opts.min_bytes, inits=inits)
    result = found.simulation
    details = {
        "offloads": result.offloads,
        "prefetches": result.prefetches,
        "transfer_cost": result.transfer_cost,
        "host_peak": result.host_peak,
        "schedules_simulated": found.plans_tried,
        "search_time_s": time.perf_counter() - started,
    }
    return found.schedule, details
