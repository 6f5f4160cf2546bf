"""Schedules (Compute/Free and Offload/Prefetch/FreeHost steps), the simulator that is the source of truth."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.impls import default_nodes, simulate_compute, step_impl
from remat_models.core.transfer import HostTier, TransferModel
from remat_models.errors import InputTypeError, InvalidScheduleError


@dataclass(frozen=True, slots=True, repr=False)
class Compute:
    """Run node ``node`` (an index) with implementation ``impl`` (0: the default) and keep its output resident."""

    node: int
    impl: int = 0

    def __repr__(self) -> str:
        return f"Compute(node={self.node!r})" if self.impl == 0 else f"Compute(node={self.node!r}, impl={self.impl!r})"


@dataclass(frozen=True, slots=True)
class Free:
    """Release the resident output of node ``node``."""

    node: int


@dataclass(frozen=True, slots=True)
class Offload:
    """Copy the device-resident output of ``node`` to the host; the device copy stays until ``Free``."""

    node: int


@dataclass(frozen=True, slots=True)
class Prefetch:
    """Copy the host copy of ``node`` back to the device; it counts as device memory from this step on."""

    node: int


@dataclass(frozen=True, slots=True)
class FreeHost:
    """Drop the host copy of ``node``."""

    node: int


Step = Compute | Free | Offload | Prefetch | FreeHost
TRANSFER_STEPS = (Offload, Prefetch, FreeHost)


@dataclass(frozen=True)
class Schedule:
    """An ordered list of steps over one graph's node indices."""

    steps: tuple[Step, ...]

    @classmethod
    def of(cls, steps: Iterable[Step]) -> Schedule:
        """Build from any iterable of steps."""
        return cls(tuple(steps))

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def compute_sequence(self) -> list[int]:
        """Return the nodes computed, in order (recomputations included)."""
        return [step.node for step in self.steps if isinstance(step, Compute)]

    def first_computation_order(self) -> np.ndarray:
        """Return the nodes in the order of their first computation (topological when the schedule is valid)."""
        return np.fromiter(dict.fromkeys(self.compute_sequence()), dtype=np.int64)


@dataclass(frozen=True)
class SimulationResult:
    """What running a schedule costs: peak memory, total cost, TDI, recomputations, timeline.

    ``timeline[k]`` is the device memory in use during step k if it is a Compute (fixed + resident +
    output + workspace) or a Prefetch (resident + the prefetched value), and after it otherwise.
    With a transfer model, ``total_cost`` is compute + transfer time in ``serial`` mode and the
    makespan in ``overlap`` mode; ``tdi`` stays relative to computing every node once.
    """

    peak: int
    peak_step: int
    total_cost: float
    tdi: float
    computations: int
    recomputations: int
    timeline: np.ndarray = field(repr=False)
    transfer_cost: float = 0.0
    offloads: int = 0
    prefetches: int = 0
    host_peak: int = 0
    makespan: float | None = None

    def fits(self, budget: int) -> bool:
        """Whether the peak is within ``budget`` bytes."""
        return self.peak <= budget


def simulate(
    graph: Graph, schedule: Schedule | Sequence[Step], transfer: TransferModel | None = None
) -> SimulationResult:
    """Execute ``schedule`` symbolically on ``graph``; raise InvalidScheduleError on any violation.

    Offload/Prefetch/FreeHost steps need a ``transfer`` model (see ``remat_models.core.transfer``).
    """
    steps = _checked_steps(graph, schedule)
    mem = graph.mem.tolist()
    workspace = graph.workspace.tolist()
    cost = graph.cost.tolist()
    recomputable = graph.recomputable.tolist()
    pred_ptr, pred_idx = graph.pred_ptr.tolist(), graph.pred_idx.tolist()
    names = graph.names
    n = graph.n
    resident = [False] * n
    computed = [0] * n
    timeline = np.empty(len(steps), dtype=np.int64)
    in_use = graph.fixed_mem
    peak, peak_step, total_cost = -1, -1, 0.0
    tier = None if transfer is None else HostTier(mem, names, transfer)
    with_impls = graph.impl_table is not None
    aux = graph.aux_of.tolist()
    for k, step in enumerate(steps):
        v = step.node
        if not (isinstance(v, (int, np.integer)) and 0 <= v < n):
            raise InvalidScheduleError(f"{step!r} refers to no node of a {n}-node graph", step=k)
        if isinstance(step, Compute):
            if with_impls or step.impl:  # see remat_models/core/impls.py
                reads, during, in_use, step_cost = simulate_compute(graph, v, step.impl, k, resident, computed, in_use)
            else:
                if resident[v]:
                    raise InvalidScheduleError(f"computes {names[v]!r} while its output is already resident", step=k)
                if computed[v] and not recomputable[v]:
                    raise InvalidScheduleError(f"recomputes non-recomputable node {names[v]!r}", step=k)
                reads = pred_idx[pred_ptr[v] : pred_ptr[v + 1]]
                for u in reads:
                    if not resident[u]:
                        raise InvalidScheduleError(
                            f"computes {names[v]!r} but its input {names[u]!r} is not resident", step=k
                        )
                during, step_cost = in_use + mem[v] + workspace[v], cost[v]
                resident[v] = True
                in_use += mem[v]
                computed[v] += 1
            timeline[k] = during
            if during > peak:
                peak, peak_step = during, k
            total_cost += step_cost
            if tier is not None:
                tier.compute(reads, step_cost)
        elif isinstance(step, Free):
            if not resident[v]:
                raise InvalidScheduleError(f"frees {names[v]!r}, which is not resident", step=k)
            resident[v] = False
            in_use -= mem[v]
            timeline[k] = in_use
            if tier is not None:
                tier.free(v)
        elif isinstance(step, TRANSFER_STEPS):
            if tier is None:
                raise InvalidScheduleError(f"{type(step).__name__}({names[v]!r}) without a transfer model", step=k)
            if isinstance(step, Prefetch):
                tier.prefetch(k, v, resident[v])
                during = in_use + mem[v]
                if during > peak:
                    peak, peak_step = during, k
                resident[v] = True
                in_use = during
            elif isinstance(step, Offload):
                tier.offload(k, v, resident[v])
            else:
                tier.free_host(k, v)
            timeline[k] = in_use
        else:
            raise InvalidScheduleError(f"unknown step {step!r}", step=k)
    never = [names[v] for v in range(n) if not computed[v] and aux[v] < 0]
    if never:
        raise InvalidScheduleError(f"node {never[0]!r} is never computed ({len(never)} nodes in all)")
    missing = [names[v] for v in graph.outputs.tolist() if not resident[v]]
    if missing:
        raise InvalidScheduleError(f"graph output {missing[0]!r} is not resident at the end")
    computations = sum(computed)
    timeline.setflags(write=False)
    if tier is None:
        transfers: dict = {}
    else:
        total_cost = tier.makespan if tier.overlap else total_cost + tier.transfer_cost
        transfers = {
            "transfer_cost": tier.transfer_cost,
            "offloads": tier.offloads,
            "prefetches": tier.prefetches,
            "host_peak": tier.host_peak,
            "makespan": tier.makespan,
        }
    return SimulationResult(
        peak=peak,
        peak_step=peak_step,
        total_cost=total_cost,
        tdi=tdi(graph, total_cost),
        computations=computations,
        recomputations=computations - (n - graph.n_aux),
        timeline=timeline,
        **transfers,
    )


def tdi(graph: Graph, total_cost: float) -> float:
    """Total duration increase in % over computing every node once (0 for a zero-cost graph)."""
    base = graph.total_cost
    return 0.0 if base == 0 else 100.0 * (total_cost - base) / base


def eager_frees(graph: Graph, compute_sequence: Sequence[int | Step] | np.ndarray) -> Schedule:
    """Free every value right after its last use before its next recomputation.

    The last computation of a graph output is kept to the end; a value nobody reads is freed
    right after it is computed. Items are node indices (computes) or steps: ``Compute``, and the
    transfers ``Offload`` (a device read), ``Prefetch`` (a producer, like a compute) and
    ``FreeHost``, which are kept in place; host copies persist. A ``(node, impl)`` pair is
    ``Compute(node, impl)``: its reads come from that implementation, an in-place step consumes
    its target (no Free; reading that instance later is an error) and aux values are produced
    with their producer.
    """
    sequence = [_as_step(v) for v in compute_sequence]
    pred_ptr, pred_idx = graph.pred_ptr.tolist(), graph.pred_idx.tolist()
    with_impls = graph.impl_table is not None
    latest = [-1] * graph.n  # position of the live computation (or prefetch) of each node
    consumed = [False] * graph.n  # the live instance was consumed by an in-place step
    free_after: dict[tuple[int, int], int] = {}  # (producing position, node) -> position of its last use
    for position, step in enumerate(sequence):
        v = step.node
        if not 0 <= v < graph.n:
            raise InvalidScheduleError(
                f"compute sequence names node index {v} of a {graph.n}-node graph", step=position
            )
        produced: tuple[int, ...] = (v,)
        if isinstance(step, Compute):
            if with_impls or step.impl:
                s = step_impl(graph, v, step.impl, position)
                reads, inplace, produced = s.reads, s.inplace, (v, *s.aux)
            else:
                reads, inplace = pred_idx[pred_ptr[v] : pred_ptr[v + 1]], -1
            for u in reads:
                if latest[u] < 0:
                    what = "after an in-place step consumed" if consumed[u] else "before"
                    raise InvalidScheduleError(
                        f"compute sequence computes {graph.names[v]!r} {what} its input {graph.names[u]!r}",
                        step=position,
                    )
                free_after[(latest[u], u)] = position
            if inplace >= 0:  # the target's buffer becomes v's: no Free for that instance
                del free_after[(latest[inplace], inplace)]
                latest[inplace], consumed[inplace] = -1, True
        elif isinstance(step, Offload):
            if latest[v] < 0:
                raise InvalidScheduleError(
                    f"compute sequence offloads {graph.names[v]!r} before computing it", step=position
                )
            free_after[(latest[v], v)] = position
        if isinstance(step, (Compute, Prefetch)):
            for w in produced:
                latest[w], consumed[w] = position, False
                free_after[(position, w)] = position
    kept = {(latest[v], v) for v in graph.outputs.tolist() if latest[v] >= 0}
    frees: list[list[int]] = [[] for _ in sequence]
    for instance, position in free_after.items():
        if instance not in kept:
            frees[position].append(instance[1])
    steps: list[Step] = []
    for position, step in enumerate(sequence):
        steps.append(step)
        steps.extend(Free(u) for u in sorted(frees[position]))
    return Schedule(tuple(steps))


def _as_step(item: int | Step | tuple[int, int]) -> Step:
    """A compute-sequence item as a step: a node index, a ``(node, impl)`` pair, or a step."""
    if isinstance(item, (Compute, *TRANSFER_STEPS)):
        return item
    if isinstance(item, tuple):
        return Compute(int(item[0]), int(item[1]))
    return Compute(int(item))


def input_order_schedule(graph: Graph) -> Schedule:
    """Every node once, in the graph's input order, with eager frees (checkpoint-all; impl 0, aux values skipped)."""
    if graph.impl_table is not None:
        return eager_frees(graph, graph.order[graph.aux_of[graph.order] < 0])
    return eager_frees(graph, graph.order)


@lru_cache(maxsize=32)  # keyed by the graph's content hash (Graph.__hash__/__eq__): computed once per graph
def input_order_simulation(graph: Graph) -> SimulationResult:
    """The simulation of :func:`input_order_schedule` (cached per graph: budgets and bounds read it)."""
    return simulate(graph, input_order_schedule(graph))


def input_order_peak(graph: Graph) -> int:
    """Peak memory of the input order with eager frees: the reference for fractional budgets."""
    return input_order_simulation(graph).peak


def _checked_steps(graph: object, schedule: object) -> tuple[Step, ...]:
    """The steps of ``schedule`` for :func:`simulate`; wrong argument types raise InputTypeError naming them."""
    if not isinstance(graph, Graph):
        raise InputTypeError(f"simulate() takes a Graph first, got {type(graph).__name__}")
    if isinstance(schedule, Schedule):
        return schedule.steps
    if isinstance(schedule, (str, bytes)) or not isinstance(schedule, Iterable):
        raise InputTypeError(f"simulate() takes a Schedule or a list of steps, got {type(schedule).__name__}")
    steps = tuple(schedule)
    for k, step in enumerate(steps):
        if not isinstance(step, Step):
            raise InputTypeError(f"step {k} is {step!r}, not a step (Compute(node), Free(node), ...)")
    return steps


def lift_schedule(graph: Graph, schedule: Schedule) -> Schedule:
    """A schedule of ``default_view(graph)`` as a schedule of ``graph`` (impl 0 everywhere)."""
    keep = default_nodes(graph)
    steps = [Compute(int(keep[s.node])) if isinstance(s, Compute) else Free(int(keep[s.node])) for s in schedule.steps]
    return Schedule(tuple(steps))
