"""Lower bounds valid for the simulator's semantics: on total cost at a budget, and on the least peak.

Every schedule of Compute/Free steps (and, with a ``transfer`` model in ``serial`` mode, Offload/Prefetch
steps) whose simulated peak fits the budget costs at least :func:`cost_lower_bound`; none has a peak below
:func:`peak_lower_bound`. Both come from the *cut argument* at a pivot node p (:func:`_PivotScan`): at the
first computation of p, every ancestor of p was computed before and every descendant of p will be computed
after, so an ancestor that a descendant reads (or a graph output) and that is not resident then must be
produced again later. The solvers' own bounds are not used: Checkmate's and Moccasin's models fix a
topological order or cap recomputations, so their proven bounds hold for the restricted model only.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass

import numpy as np

from remat_models.core.budget import check_budget
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.limits import check_time_limit
from remat_models.core.schedule import Compute, input_order_peak, input_order_schedule, simulate, tdi
from remat_models.core.transfer import TransferModel
from remat_models.errors import BudgetInfeasibleError

__all__ = ["Bound", "PeakBound", "cost_lower_bound", "lower_bounds", "peak_lower_bound"]

log = logging.getLogger(__name__)

MAX_CLOSURE_NODES = 40_000  # above this the ancestor/descendant bit matrices (n^2 / 4 bytes) are not built
_SAFETY = 1e-9  # relative margin taken off the knapsack's extra cost (floating-point sums)


@dataclass(frozen=True)
class Bound:
    """A lower bound on total cost: ``value`` (graph cost units), the ``tdi`` (%) it implies, and what proved it."""

    value: float
    tdi: float
    method: str


@dataclass(frozen=True)
class PeakBound:
    """A lower bound on the peak of every schedule: ``value`` bytes, its ``fraction`` of the input-order peak."""

    value: int
    fraction: float
    method: str


def cost_lower_bound(
    graph: Graph, budget: int, time_limit: float = 1.0, transfer: TransferModel | None = None
) -> Bound:
    """The largest proven lower bound on the total cost of any schedule whose peak fits ``budget``.

    ``trivial``: every node is computed at least once. ``loss-cut`` / ``cut``: at the first computation
    of a pivot p (the loss first, then the nodes where the input order holds most memory, until
    ``time_limit`` seconds), the values an ancestor of p hands to a descendant (or graph outputs) that are
    not resident must be recomputed (or, with a serial ``transfer`` model, fetched back) after it; at most
    the budget's room beside p's step stays resident, so the fractional knapsack over that room bounds
    what can be saved. Raises BudgetInfeasibleError when the cut proves that nothing fits ``budget``.
    """
    check_budget(graph, budget)  # types, range and the step lower bound
    time_limit = check_time_limit(time_limit) or 0.0
    if graph.impl_table is not None or (transfer is not None and transfer.mode != "serial"):
        return _trivial(graph)  # implementations change reads and costs; overlap hides transfer time
    return _cost_bound(_PivotScan(graph, transfer), budget, time_limit)


def lower_bounds(
    graph: Graph, budget: int, time_limit: float = 1.0, transfer: TransferModel | None = None
) -> tuple[PeakBound, Bound | None]:
    """Both bounds with one scan (``time_limit`` each): the cost bound is None when the budget is proven too small."""
    with contextlib.suppress(BudgetInfeasibleError):  # below graph.lower_bound, which the peak bound includes
        check_budget(graph, budget)
    time_limit = check_time_limit(time_limit) or 0.0
    scan = _PivotScan(graph, transfer) if graph.impl_table is None else None
    peak = _peak_bound(graph, scan, time_limit)
    if peak.value > budget:
        return peak, None
    if scan is None or (transfer is not None and transfer.mode != "serial"):
        return peak, _trivial(graph)
    try:
        return peak, _cost_bound(scan, budget, time_limit)
    except BudgetInfeasibleError as error:
        return PeakBound(error.lower_bound, error.lower_bound / input_order_peak(graph), "cut"), None


def _cost_bound(scan: _PivotScan, budget: int, time_limit: float) -> Bound:
    """The cut bound of :func:`cost_lower_bound` over ``scan``'s pivots for ``time_limit`` seconds."""
    graph = scan.graph
    deadline = time.perf_counter() + time_limit
    best, pivot = 0.0, -1
    for p in scan.pivots():
        extra = scan.extra_cost(p, budget)
        if extra > best:
            best, pivot = extra, p
        if time.perf_counter() > deadline:
            break
    if pivot < 0:
        return _trivial(graph)
    value = graph.total_cost + best * (1.0 - _SAFETY)
    method = "loss-cut" if graph.kind[pivot] is NodeKind.LOSS else "cut"
    log.debug("cost bound on %s: %s at %r, extra %.6g", graph.name, method, graph.names[pivot], best)
    return Bound(value=float(value), tdi=float(tdi(graph, value)), method=method)


def peak_lower_bound(graph: Graph, transfer: TransferModel | None = None, time_limit: float = 1.0) -> PeakBound:
    """The largest proven lower bound on the peak of any schedule of ``graph``.

    ``step``: ``graph.lower_bound`` (the largest single step, or the graph outputs at the end). ``cut``:
    during the first computation of a pivot p its inputs are resident, and so is every non-recomputable
    ancestor of p that a descendant of p reads or that is a graph output (it cannot be produced again;
    without a ``transfer`` model it cannot leave and come back either).
    """
    time_limit = check_time_limit(time_limit) or 0.0
    return _peak_bound(graph, _PivotScan(graph, transfer) if graph.impl_table is None else None, time_limit)


def _peak_bound(graph: Graph, scan: _PivotScan | None, time_limit: float) -> PeakBound:
    """The bound of :func:`peak_lower_bound` with ``scan``'s pivots (none: the step bound only)."""
    reference = input_order_peak(graph)
    value, method = int(graph.lower_bound), "step"
    if scan is not None:
        deadline = time.perf_counter() + time_limit
        for p in scan.pivots():
            need = scan.step_need(p)
            if need > value:
                value, method = need, "cut"
            if time.perf_counter() > deadline:
                break
    return PeakBound(value=value, fraction=value / reference if reference else 0.0, method=method)


def _trivial(graph: Graph) -> Bound:
    """Every node computed once: with implementations, each at its cheapest implementation's cost."""
    if graph.impls is None:
        value = graph.total_cost
    else:
        value = float(sum(min(impl.cost for impl in impls) for impls in graph.impls if impls))
    return Bound(value=float(value), tdi=float(tdi(graph, value)), method="trivial")


class _PivotScan:
    """Ancestor and descendant sets of every node (bit matrices) and the cut quantities at each pivot."""

    def __init__(self, graph: Graph, transfer: TransferModel | None) -> None:
        self.graph = graph
        self.transfer = transfer
        n = graph.n
        self.ok = n <= MAX_CLOSURE_NODES
        self.mem = graph.mem.astype(np.int64)
        self.is_output = np.zeros(n, dtype=bool)
        self.is_output[graph.outputs] = True
        redo = np.where(graph.recomputable, graph.cost, np.inf)  # the price of producing a value again
        if transfer is not None:
            fetch = np.array([transfer.out_time(b) + transfer.in_time(b) for b in graph.mem.tolist()])
            redo = np.minimum(redo, fetch)
        self.redo = redo
        self.forced = ~graph.recomputable if transfer is None else np.zeros(n, dtype=bool)
        if self.ok:
            self.anc = _closure(graph, graph.order, graph.pred_ptr, graph.pred_idx)
            self.desc = _closure(graph, graph.order[::-1], graph.succ_ptr, graph.succ_idx)
        self.src, self.dst = graph.edges[:, 0], graph.edges[:, 1]
        self._pivots: list[int] | None = None

    def pivots(self) -> list[int]:
        """Every node, the loss nodes first, then by the input order's memory at their step (most first)."""
        if not self.ok:
            return []
        if self._pivots is None:
            self._pivots = self._ranked()
        return self._pivots

    def _ranked(self) -> list[int]:
        """The pivots in the order of :meth:`pivots`."""
        graph = self.graph
        schedule = input_order_schedule(graph)
        timeline = simulate(graph, schedule).timeline
        pressure = np.zeros(graph.n, dtype=np.int64)
        for k, step in enumerate(schedule.steps):
            if isinstance(step, Compute):
                pressure[step.node] = timeline[k]
        loss = graph.of_kind(NodeKind.LOSS)
        return np.lexsort((-pressure, ~loss)).tolist()

    def _sets(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """(values needed after p's first computation among its ancestors, values resident during it)."""
        n = self.graph.n
        anc = _bits(self.anc[p], n)
        desc = _bits(self.desc[p], n)
        read_later = np.zeros(n, dtype=bool)
        read_later[self.src[desc[self.dst]]] = True
        needed = anc & (read_later | self.is_output)
        resident = needed & self.forced
        resident[self.graph.preds(p)] = True
        return needed & ~resident, resident

    def step_need(self, p: int) -> int:
        """Bytes in use during the first computation of ``p`` at the least."""
        _, resident = self._sets(p)
        graph = self.graph
        return int(graph.fixed_mem + graph.mem[p] + graph.workspace[p] + self.mem[resident].sum())

    def extra_cost(self, p: int, budget: int) -> float:
        """Cost beyond computing every node once that the cut at ``p`` proves (0 when it proves nothing)."""
        candidates, resident = self._sets(p)
        graph = self.graph
        room = budget - int(graph.fixed_mem + graph.mem[p] + graph.workspace[p] + self.mem[resident].sum())
        if room < 0:
            raise _below(budget, room, graph.names[p])
        items = np.flatnonzero(candidates)
        weight, value = self.mem[items], self.redo[items]
        if not np.isfinite(value).all():  # a value that can come back no other way must stay: it takes room
            room -= int(weight[~np.isfinite(value)].sum())
            if room < 0:
                raise _below(budget, room, graph.names[p])
            keep = np.isfinite(value)
            weight, value = weight[keep], value[keep]
        positive = weight > 0
        weight, value = weight[positive], value[positive]  # a zero-byte value is kept for free
        if weight.sum() <= room:
            return 0.0
        order = np.argsort(-value / weight, kind="stable")
        weight, value = weight[order], value[order]
        filled = np.cumsum(weight)
        whole = int(np.searchsorted(filled, room, side="right"))  # items that fit entirely
        saved = float(value[:whole].sum())
        if whole < len(weight):
            left = room - (int(filled[whole - 1]) if whole else 0)
            saved += value[whole] * left / weight[whole]
        return max(0.0, float(value.sum()) - saved)


def _closure(graph: Graph, order: np.ndarray, ptr: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Bit rows (uint64 words): row v holds every node reachable backwards from v along ``ptr``/``idx``."""
    n = graph.n
    words = (n + 63) // 64
    rows = np.zeros((n, words), dtype=np.uint64)
    one = np.uint64(1)
    ptr_list = ptr.tolist()
    for v in order.tolist():
        near = idx[ptr_list[v] : ptr_list[v + 1]]
        if near.size == 0:
            continue
        row = np.bitwise_or.reduce(rows[near], axis=0)
        np.bitwise_or.at(row, near >> 6, np.left_shift(one, (near & 63).astype(np.uint64)))
        rows[v] = row
    return rows


def _bits(row: np.ndarray, n: int) -> np.ndarray:
    """A bit row as a bool mask of length ``n``."""
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:n].astype(bool)


def _below(budget: int, room: int, name: str) -> BudgetInfeasibleError:
    """The error of a budget ``-room`` bytes short of the memory in use during the first computation of ``name``."""
    return BudgetInfeasibleError(
        f"budget {budget:,} B is below {budget - room:,} B, the least memory in use during the first computation of "
        f"{name!r}",
        budget=budget,
        lower_bound=budget - room,
    )
