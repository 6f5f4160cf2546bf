"""Lower bounds valid for the simulator's semantics: on total cost at a budget, and on the least peak.

Every schedule of Compute/Free steps (and, with a ``transfer`` model in ``serial`` mode, Offload/Prefetch
steps) whose simulated peak fits the budget costs at least :func:`cost_lower_bound`; none has a peak below
:func:`peak_lower_bound`. Both come from the *cut argument* at a pivot node p (:func:`_PivotScan`): at the
first computation of p, every ancestor of p was computed before and every descendant of p will be computed
after, so an ancestor that a descendant reads (or a graph output) and that is not resident then must be
produced again later. The ``closure`` bound adds the recomputations' own inputs: a value produced again
after p reads inputs that are resident at p's step or produced again too, by a recomputation or (with a
serial transfer model) a prefetch (the LP relaxation of that choice, bounded from its dual solution, and at the
pivots where it proves the most that choice in whole values, a MIP). The peak bound adds the *lineage* argument
(without transfers): of values resident together, the last computed ran while the others stayed.
The solvers' own bounds are not used: Checkmate's and Moccasin's models fix a topological order or cap
recomputations, so their proven bounds hold for the restricted model only.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from remat_models.core.budget import check_budget
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.limits import check_time_limit
from remat_models.core.schedule import (
    Compute,
    input_order_peak,
    input_order_schedule,
    input_order_simulation,
    tdi,
)
from remat_models.core.transfer import TransferModel
from remat_models.errors import BudgetInfeasibleError

__all__ = [
    "Bound",
    "CostBoundSearch",
    "PeakBound",
    "bound_search",
    "cost_lower_bound",
    "lower_bounds",
    "peak_lower_bound",
]

log = logging.getLogger(__name__)

MAX_CLOSURE_NODES = 40_000  # above this the ancestor/descendant bit matrices (n^2 / 4 bytes) are not built
_SAFETY = 1e-9  # relative margin taken off the knapsack's extra cost (floating-point sums)
FIRST_LP_SECONDS = 0.5  # the least time limit of a search's first closure LP (the strongest, usually)
LINEAGE_DEPTH = 8  # the deepest level of the lineage peak bound's recursion
MIP_PIVOTS = 1  # the integral closure (a MIP) runs at this many pivots, those where the closure LP proved the most
MIP_MARGIN = 1e-6  # relative margin taken off a MIP's dual bound (the solver's tolerances)
MIP_SECONDS = 0.25  # each integral closure's time limit at most (on the zoo as good as 5 s, but for ViT at 50 %)


@dataclass(frozen=True)
class Bound:
    """A lower bound on total cost: ``value`` (graph cost units), the ``tdi`` (%) it implies, and what proved it."""

    value: float
    tdi: float
    method: str
    at: str | None = None  # the pivot node whose cut proved it

    @property
    def proof(self) -> str:
        """What proved it: the method, and the pivot node where there is one."""
        return self.method if self.at is None else f"{self.method} at {self.at!r}"


@dataclass(frozen=True)
class PeakBound:
    """A lower bound on the peak of every schedule: ``value`` bytes, its ``fraction`` of the input-order peak."""

    value: int
    fraction: float
    method: str
    at: str | None = None  # the pivot node whose cut proved it

    @property
    def proof(self) -> str:
        """What proved it: the method, and the pivot node where there is one."""
        return self.method if self.at is None else f"{self.method} at {self.at!r}"


def cost_lower_bound(
    graph: Graph, budget: int, time_limit: float = 1.0, transfer: TransferModel | None = None
) -> Bound:
    """The largest proven lower bound on the total cost of any schedule whose peak fits ``budget``.

    ``trivial``: every node is computed at least once. ``loss-cut`` / ``cut``: at the first computation
    of a pivot p (the loss first, then the nodes where the input order holds most memory, until
    ``time_limit`` seconds), the values an ancestor of p hands to a descendant (or graph outputs) that are
    not resident must be recomputed (or, with a serial ``transfer`` model, fetched back) after it; at most
    the budget's room beside p's step stays resident, so the fractional knapsack over that room bounds
    what can be saved. ``closure``: each recomputation after p also needs its inputs, resident at p's step
    or produced again after it too (recomputed, or with a serial ``transfer`` model fetched back); the LP
    relaxation of that choice at the pivots whose needed values most exceed the budget (the rest of
    ``time_limit``). ``closure-mip``: the same choice in whole values (a MIP) at the ``MIP_PIVOTS`` pivots
    whose LP proved the most, once the LPs ran (or stopped for lack of progress), ``MIP_SECONDS`` each at
    most. Raises BudgetInfeasibleError when the cut proves that nothing fits ``budget``.
    """
    check_budget(graph, budget)  # types, range and the step lower bound
    time_limit = check_time_limit(time_limit) or 0.0
    scan = None if _trivial_only(graph, transfer) else _PivotScan(graph, transfer)
    return CostBoundSearch(graph, budget, scan).run(time_limit)


def lower_bounds(
    graph: Graph, budget: int, time_limit: float = 1.0, transfer: TransferModel | None = None
) -> tuple[PeakBound, Bound | None]:
    """Both bounds with one scan (``time_limit`` each): the cost bound is None when the budget is proven too small."""
    peak, search = bound_search(graph, budget, time_limit, transfer)
    return peak, None if search is None else search.bound


def bound_search(
    graph: Graph,
    budget: int,
    time_limit: float = 1.0,
    transfer: TransferModel | None = None,
    patience: int | None = None,
) -> tuple[PeakBound, CostBoundSearch | None]:
    """The peak bound and the cost bound's search after ``time_limit`` seconds each (one scan for both).

    The search is None when the budget is proven too small (below the peak bound returned); otherwise its
    ``run`` goes on where it stopped (``done`` once every pivot was tried). ``patience``: as for ``run``.
    """
    with contextlib.suppress(BudgetInfeasibleError):  # below graph.lower_bound, which the peak bound includes
        check_budget(graph, budget)
    time_limit = check_time_limit(time_limit) or 0.0
    scan = _PivotScan(graph, transfer) if graph.impl_table is None else None
    peak = _peak_bound(graph, scan, time_limit)
    if peak.value > budget:
        return peak, None
    search = CostBoundSearch(graph, budget, None if _trivial_only(graph, transfer) else scan)
    try:
        search.run(time_limit, patience)
    except BudgetInfeasibleError as error:
        fraction = error.lower_bound / input_order_peak(graph)
        return PeakBound(error.lower_bound, fraction, "cut", at=search.refuted_at), None
    return peak, search


def _trivial_only(graph: Graph, transfer: TransferModel | None) -> bool:
    """Implementations change reads and costs; overlapped transfers hide their time: only the trivial bound holds."""
    return graph.impl_table is not None or (transfer is not None and transfer.mode != "serial")


class CostBoundSearch:
    """The cost bound's search at ``budget``, resumable: the cut at every pivot, then the closure LPs.

    ``run(seconds)`` goes on where the last call stopped and returns ``bound``, the best bound so far (the
    trivial one before any pivot proves more); ``done`` once every pivot was tried. The closure LPs go to
    the pivots whose needed values exceed the budget the most first.
    """

    def __init__(self, graph: Graph, budget: int, scan: _PivotScan | None) -> None:
        self.graph, self.budget, self.scan = graph, budget, scan
        self.bound = _trivial(graph)
        self._best = 0.0
        self._cut_next = 0  # the next pivot of the cut's pass
        self._lp_queue: list[int] | None = None  # the closure LPs' pivots, once the cut's pass is over
        self._lp_next = 0
        self._lp_values: list[tuple[float, int]] = []  # (-extra the closure LP proved, pivot)
        self._mip_done: set[int] = set()  # the pivots whose integral closure ran
        self._overflow: list[tuple[int, float, int]] = []  # (-bytes needed beyond the budget, -cut's extra, pivot)
        self.refuted_at: str | None = None  # the pivot whose cut proved that nothing fits the budget

    @property
    def done(self) -> bool:
        """Whether every pivot was tried (the bound cannot improve)."""
        if self.scan is None:
            return True
        return self._lp_queue is not None and self._lp_next >= len(self._lp_queue) and not self._mip_pivots()

    def run(self, seconds: float, patience: int | None = None) -> Bound:
        """Search ``seconds`` more; the best bound so far.

        Each call tries at least one pivot, and the first closure LP runs once the cut's pass is over even
        past ``seconds``. ``patience``: the LPs stop after that many in a row without a better bound (a later
        call goes on from there), and the integral closure runs at the best LP pivots so far in the time left.
        """
        scan = self.scan
        if scan is None or self.done:
            return self.bound
        graph, budget = self.graph, self.budget
        deadline = time.perf_counter() + seconds
        pivots = scan.pivots()
        while self._cut_next < len(pivots):
            p = pivots[self._cut_next]
            self._cut_next += 1
            try:
                sets = scan.sets(p)
                extra, over = scan.extra_cost(p, budget, sets), scan.overflow(p, budget, sets)
            except BudgetInfeasibleError:
                self.refuted_at = graph.names[p]
                raise
            self._improve(extra, p, "loss-cut" if graph.kind[p] is NodeKind.LOSS else "cut")
            if over > 0:
                self._overflow.append((-over, -extra, p))
            if time.perf_counter() > deadline:
                return self.bound
        if self._lp_queue is None:
            self._lp_queue = [p for _, _, p in sorted(self._overflow)]  # the most needed bytes first: strongest
        idle = 0
        while self._lp_next < len(self._lp_queue):
            left = deadline - time.perf_counter()
            if left <= 0 and self._lp_next > 0:
                return self.bound
            if patience is not None and idle >= patience:
                break
            p = self._lp_queue[self._lp_next]
            self._lp_next += 1
            extra = scan.closure_extra(p, budget, max(left, FIRST_LP_SECONDS))
            self._lp_values.append((-extra, p))
            idle = 0 if self._improve(extra, p, "closure") else idle + 1
        for p in self._mip_pivots():  # the integral closure where the LPs so far proved the most, strongest first
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            self._mip_done.add(p)
            extra = scan.closure_extra(p, budget, min(left, MIP_SECONDS), integral=True)
            self._improve(extra, p, "closure-mip")
        return self.bound

    def _mip_pivots(self) -> list[int]:
        """The ``MIP_PIVOTS`` pivots whose closure LP proved the most so far, less those whose MIP ran."""
        best = [p for extra, p in sorted(self._lp_values)[:MIP_PIVOTS] if extra < 0]
        return [p for p in best if p not in self._mip_done]

    def _improve(self, extra: float, p: int, method: str) -> bool:
        """Keep ``extra`` (proved at pivot ``p`` by ``method``) when it beats the best so far; whether it did.

        A bound past the float range is not kept (costs near 1e308: every schedule's sum overflows too).
        """
        graph = self.graph
        value = float(graph.total_cost) + float(extra) * (1.0 - _SAFETY)  # Python floats: inf, no warning
        if extra <= self._best or not math.isfinite(value):
            return False
        self._best = extra
        self.bound = Bound(value=float(value), tdi=float(tdi(graph, value)), method=method, at=graph.names[p])
        log.debug("cost bound on %s: %s at %r, extra %.6g", graph.name, method, graph.names[p], extra)
        return True


def peak_lower_bound(graph: Graph, transfer: TransferModel | None = None, time_limit: float = 1.0) -> PeakBound:
    """The largest proven lower bound on the peak of any schedule of ``graph``.

    ``step``: ``graph.lower_bound`` (the largest single step, or the graph outputs at the end). ``cut``:
    during the first computation of a pivot p its inputs are resident, and so is every non-recomputable
    ancestor of p that a descendant of p reads or that is a graph output (it cannot be produced again;
    without a ``transfer`` model it cannot leave and come back either). ``lineage`` (no ``transfer``): of the
    values resident together (a step's inputs, the graph outputs at the end), the last computed ran while the
    others stayed, and so on back (:class:`_Lineage`). ``closure`` (no ``transfer``, some values
    not recomputable): a needed value not resident then is computed again from inputs resident then or
    computed again too, down to values that cannot be; the least bytes resident, by the LP of
    :meth:`_PivotScan.closure_peak`, at the pivots that need the most bytes first (the rest of ``time_limit``).
    """
    time_limit = check_time_limit(time_limit) or 0.0
    return _peak_bound(graph, _PivotScan(graph, transfer) if graph.impl_table is None else None, time_limit)


def _peak_bound(graph: Graph, scan: _PivotScan | None, time_limit: float) -> PeakBound:
    """The bound of :func:`peak_lower_bound` with ``scan``'s pivots (none: the step bound only)."""
    reference = input_order_peak(graph)
    value, method, at = int(graph.lower_bound), "step", None
    if scan is not None:
        deadline = time.perf_counter() + time_limit
        needs: list[tuple[int, int, int]] = []  # (-bytes needed after p with its step, -step's bytes, pivot)
        for p in scan.pivots():
            sets = scan.sets(p)
            need = scan.step_need(p, sets)
            if need > value:
                value, method, at = need, "cut", graph.names[p]
            needs.append((-(need + int(scan.mem[sets[0]].sum())), -need, p))
            if time.perf_counter() > deadline:
                break
        if scan.transfer is None:  # without transfers a value held across a step stays from its last computation
            lineage = _Lineage(graph, deadline)
            found, node = lineage.search(value)
            if found > value:
                value, method, at = found, "lineage", None if node is None else graph.names[node]
        if scan.transfer is None and not graph.recomputable.all():  # values that cannot come back: the closure
            for k, (_, need, p) in enumerate(sorted(needs)):
                left = deadline - time.perf_counter()
                if left <= 0 and k > 0:
                    break
                closure = -need + scan.closure_peak(p, max(left, FIRST_LP_SECONDS))
                if closure > value:
                    value, method, at = closure, "closure", graph.names[p]
    return PeakBound(value=value, fraction=value / reference if reference else 0.0, method=method, at=at)


class _TimeUp(Exception):
    """The lineage search passed its deadline."""


class _Lineage:
    """The lineage peak bound (no transfers): of values resident together, the last computed ran while the rest stayed.

    If a set S of values is resident at once, let x be the one of S computed last before then: every other value
    of S stayed resident from its own last computation, so during x's step fixed + S - {x} + x's inputs + x +
    x's workspace are in use, and just before it S - {x} + x's inputs were resident at once. Hence
    ``B_0(S)`` = fixed + mem(S) and ``B_d(S) = min over x in S of max(that step, B_{d-1}(S - {x} + inputs of x))``
    are lower bounds on the peak of every schedule that holds S at once; the inputs of every node are (at its
    step), and so are the graph outputs (at the end). Searched by iterative deepening until ``deadline``, up to
    ``LINEAGE_DEPTH`` or the first level past the first that proves nothing more.
    """

    def __init__(self, graph: Graph, deadline: float) -> None:
        self.graph = graph
        self.mem = graph.mem.tolist()
        self.workspace = graph.workspace.tolist()
        self.fixed = int(graph.fixed_mem)
        self.inputs = [frozenset(graph.preds(v).tolist()) for v in range(graph.n)]
        self.deadline = deadline
        self.memo: dict[tuple[frozenset[int], int], tuple[int, int]] = {}  # (S, depth) -> (bound, threshold used)

    def search(self, floor: int) -> tuple[int, int | None]:
        """(bound, node whose inputs proved it; None: the graph outputs) above ``floor``, else (``floor``, None)."""
        best, at = floor, None
        sets = [(v, self.inputs[v]) for v in range(self.graph.n) if self.inputs[v]]
        sets.append((-1, frozenset(self.graph.outputs.tolist())))
        try:
            for depth in range(1, LINEAGE_DEPTH + 1):
                level = best
                for v, needed in sets:
                    found = self.bound(needed, depth, best)
                    if found > best:
                        best, at = found, v
                if depth > 1 and best == level:
                    break  # a level that proved nothing more: the deeper ones rarely do (and cost most)
        except _TimeUp:
            pass
        return best, None if at is None or at < 0 else at

    def held(self, values: frozenset[int]) -> int:
        """Fixed memory and ``values``' bytes."""
        return self.fixed + sum(self.mem[w] for w in values)

    def bound(self, needed: frozenset[int], depth: int, threshold: int) -> int:
        """A lower bound on ``B_depth(needed)``, exact where it is above ``threshold`` (the search stops below it)."""
        if depth == 0 or not needed:
            return self.held(needed)
        key = (needed, depth)
        cached = self.memo.get(key)
        if cached is not None and (cached[0] <= cached[1] or cached[1] >= threshold):
            return cached[0]
        if time.perf_counter() > self.deadline:
            raise _TimeUp
        options = []
        for x in needed:
            before = (needed - {x}) | self.inputs[x]
            options.append((self.held(before) + self.mem[x] + self.workspace[x], x, before))
        options.sort(key=lambda option: option[0])
        lowest: int | None = None
        for step, _, before in options:
            value = step if step > threshold else max(step, self.bound(before, depth - 1, threshold))
            lowest = value if lowest is None else min(lowest, value)
            if lowest <= threshold:
                break  # this set proves nothing above the threshold
        assert lowest is not None
        self.memo[key] = (lowest, threshold)
        return lowest


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
        self.fetch: np.ndarray | None = None  # the price of an offload and a prefetch (serial transfers)
        if transfer is not None:
            self.fetch = np.array([transfer.out_time(b) + transfer.in_time(b) for b in graph.mem.tolist()])
            redo = np.minimum(redo, self.fetch)
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
        timeline = input_order_simulation(graph).timeline
        pressure = np.zeros(graph.n, dtype=np.int64)
        for k, step in enumerate(schedule.steps):
            if isinstance(step, Compute):
                pressure[step.node] = timeline[k]
        loss = graph.of_kind(NodeKind.LOSS)
        return np.lexsort((-pressure, ~loss)).tolist()

    def sets(self, p: int) -> tuple[np.ndarray, np.ndarray]:
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

    def step_need(self, p: int, sets: tuple[np.ndarray, np.ndarray] | None = None) -> int:
        """Bytes in use during the first computation of ``p`` at the least."""
        _, resident = self.sets(p) if sets is None else sets
        graph = self.graph
        return int(graph.fixed_mem + graph.mem[p] + graph.workspace[p] + self.mem[resident].sum())

    def overflow(self, p: int, budget: int, sets: tuple[np.ndarray, np.ndarray] | None = None) -> int:
        """Bytes by which the values needed after p's first computation, with its step, exceed ``budget``."""
        candidates, resident = self.sets(p) if sets is None else sets
        graph = self.graph
        need = graph.fixed_mem + graph.mem[p] + graph.workspace[p] + self.mem[resident | candidates].sum()
        return int(need) - budget

    def closure_extra(self, p: int, budget: int, time_limit: float, integral: bool = False) -> float:
        """Cost beyond computing every node once that the closure LP at ``p`` proves (its dual bound; 0: nothing).

        Any schedule within ``budget``: K, the ancestors of p resident during p's first computation (p's
        inputs and the values that cannot come back among them), fits the room beside that step; X, the
        ancestors of p computed again after it, each at least once more; with a serial transfer model F,
        those prefetched after it (each one prefetch after p and one offload, at their transfer times). A
        needed value (read by a descendant of p or a graph output) not in K is in X or F; a value in X
        reads inputs that are in K, X or F (its inputs are ancestors of p; one not resident at p's step is
        produced again before that read). The LP over k, x, f in [0, 1] (x = 0 where a node is not
        recomputable; no f without a transfer model): minimise sum cost x + fetch f subject to k_v + x_v +
        f_v >= 1 (v needed), k_u + x_u + f_u >= x_v (u an input of v), sum mem k <= room. Any nonnegative
        row multipliers give a bound below the LP's optimum (Lagrangian duality), so the solver's duals
        are evaluated here and its tolerances do not matter. ``integral``: k, x and f binary, as they are in
        a schedule (a MIP: HiGHS's dual bound, less ``MIP_MARGIN``, rounded up where every cost is an integer).
        """
        graph = self.graph
        candidates, resident = self.sets(p)
        room = budget - int(graph.fixed_mem + graph.mem[p] + graph.workspace[p] + self.mem[resident].sum())
        if room < 0:
            return 0.0
        lp = self._closure_rows(p, candidates, resident, fetched=self.fetch is not None)
        if lp is None:
            return 0.0
        nodes, upper, rows, cols, vals, lower = lp
        m = len(nodes)
        mem = self.mem[nodes]
        if room == 0:
            upper[:m][mem > 0] = 0.0
        else:
            rows = np.concatenate([rows, np.full(m, len(lower))])
            cols = np.concatenate([cols, np.arange(m)])
            vals = np.concatenate([vals, -mem / room])
            lower = np.concatenate([lower, [-1.0]])
        prices = [graph.cost[nodes]] if self.fetch is None else [graph.cost[nodes], self.fetch[nodes]]
        scale = float(max(price.max() for price in prices)) or 1.0
        objective = np.concatenate([np.zeros(m), *(price / scale for price in prices)])
        program = _Program(objective, upper, rows, cols, vals, lower)
        if not integral:
            return _dual_bound(program, time_limit) * scale
        value = _mip_bound(program, time_limit) * scale
        whole = all(np.array_equal(price, np.round(price)) for price in prices)
        return float(max(0.0, np.ceil(value) if whole else value))

    def closure_peak(self, p: int, time_limit: float) -> int:
        """Bytes beyond :meth:`step_need` that the closure proves resident during p's first computation.

        The LP of :meth:`closure_extra` without the budget's row, minimising the bytes of K: where values
        cannot be computed again (x = 0), a needed value needs itself or what it is recomputed from resident.
        Whole bytes: the LP's dual bound rounded up (K holds whole values).
        """
        candidates, resident = self.sets(p)
        lp = self._closure_rows(p, candidates, resident)
        if lp is None:
            return 0
        nodes, upper, rows, cols, vals, lower = lp
        m = len(nodes)
        if (upper[m:] > 0).all() or not len(lower):  # everything can be computed again: K may be empty
            return 0
        mem = self.mem[nodes].astype(float)
        scale = float(mem.max()) or 1.0
        objective = np.concatenate([mem / scale, np.zeros(m)])
        value = _dual_bound(_Program(objective, upper, rows, cols, vals, lower), time_limit) * scale
        return max(0, int(np.ceil(value - 1e-6 * (1.0 + value))))

    def _closure_rows(
        self, p: int, candidates: np.ndarray, resident: np.ndarray, fetched: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The closure LP's columns and rows at ``p`` (None when p has no ancestor that is not resident anyway).

        Columns k (resident at p's step), then x (computed again after it), then with ``fetched`` f (fetched
        back after it), over those ancestors; returns (nodes, upper bounds, rows, cols, vals, row lower bounds)
        of the rows ``A z >= lower``: k_v + x_v (+ f_v) >= 1 for needed v, k_u + x_u (+ f_u) - x_v >= 0 for
        each input u of v.
        """
        graph = self.graph
        n = graph.n
        nodes = np.flatnonzero(_bits(self.anc[p], n) & ~resident)
        m = len(nodes)
        if m == 0:
            return None
        local = np.full(n, -1, dtype=np.int64)
        local[nodes] = np.arange(m)
        ways = 3 if fetched else 2  # column blocks: k, x (, f)
        upper = np.ones(ways * m)
        upper[m : 2 * m][~graph.recomputable[nodes]] = 0.0
        cover = np.flatnonzero(candidates[nodes])
        u, v = local[self.src], local[self.dst]
        inner = (u >= 0) & (v >= 0)
        u, v = u[inner], v[inner]
        keep = upper[m + v] > 0  # a node that cannot be computed again puts no condition on its inputs
        u, v = u[keep], v[keep]
        c, e = len(cover), len(u)
        blocks = m * np.arange(ways)
        rows = np.concatenate([np.repeat(np.arange(c), ways), np.repeat(np.arange(c, c + e), ways + 1)])
        covering = (cover[:, None] + blocks).ravel()
        cols = np.concatenate([covering, np.column_stack([u[:, None] + blocks, m + v]).ravel()])
        vals = np.concatenate([np.ones(ways * c), np.tile([*([1.0] * ways), -1.0], e)])
        lower = np.concatenate([np.ones(c), np.zeros(e)])
        return nodes, upper, rows, cols, vals, lower

    def extra_cost(self, p: int, budget: int, sets: tuple[np.ndarray, np.ndarray] | None = None) -> float:
        """Cost beyond computing every node once that the cut at ``p`` proves (0 when it proves nothing)."""
        candidates, resident = self.sets(p) if sets is None else sets
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
            saved += value[whole] * (left / weight[whole])  # the share first: no overflow at costs near 1e308
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


class _Program(NamedTuple):
    """min objective.z over 0 <= z <= upper, A z >= lower, with A in COO form (rows, cols, vals)."""

    objective: np.ndarray
    upper: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    lower: np.ndarray


def _dual_bound(program: _Program, time_limit: float) -> float:
    """A lower bound on min objective.z over 0 <= z <= upper, A z >= lower (A in COO form), >= 0.

    HiGHS solves the LP; its row duals y (clipped to y >= 0, either sign convention) give the bound
    y.lower + sum_j min(0, (objective - A^T y)_j) upper_j, valid for any y >= 0 (Lagrangian duality), so a
    solve that stopped early or within tolerances still gives a valid bound (less a margin for the sums).
    """
    objective, upper, rows, cols, vals, lower = program
    count, width = len(lower), len(objective)
    if count == 0:
        return 0.0
    solver = _solved(program, time_limit, integral=False)
    duals = np.asarray(solver.getSolution().row_dual, dtype=float)
    if duals.shape != (count,) or not np.isfinite(duals).all():
        return 0.0
    best = 0.0
    for sign in (1.0, -1.0):  # whichever sign convention the solver reports: both give valid bounds
        y = np.maximum(sign * duals, 0.0)
        reduced = objective - np.bincount(cols, weights=vals * y[rows], minlength=width)
        terms = np.concatenate([y * lower, np.minimum(reduced, 0.0) * upper])
        value = float(terms.sum()) - 1e-9 * float(np.abs(terms).sum() + 1.0)  # rounding of the sums
        best = max(best, value)
    return best


def _mip_bound(program: _Program, time_limit: float) -> float:
    """A lower bound on min objective.z over binary z <= upper, A z >= lower: HiGHS's MIP dual bound less a margin.

    A MIP stopped by its time limit still has a valid dual bound (at least its root LP's).
    """
    if len(program.lower) == 0:
        return 0.0
    solver = _solved(program, time_limit, integral=True)
    value = float(solver.getInfo().mip_dual_bound)
    if not np.isfinite(value):
        return 0.0
    return max(0.0, value - MIP_MARGIN * (abs(value) + 1.0))


def _solved(program: _Program, time_limit: float, *, integral: bool) -> Any:
    """HiGHS after solving min objective.z over 0 <= z <= upper (integral: z integer), A z >= lower (COO A)."""
    import highspy

    objective, upper, rows, cols, vals, lower = program
    count, width = len(lower), len(objective)
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    start = np.searchsorted(rows, np.arange(count)).astype(np.int32)
    solver = highspy.Highs()
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("time_limit", max(time_limit, 0.01))
    solver.passModel(
        width,
        count,
        len(cols),
        int(highspy.MatrixFormat.kRowwise),
        int(highspy.ObjSense.kMinimize),
        0.0,
        objective,
        np.zeros(width),
        upper,
        lower,
        np.full(count, np.inf),
        start,
        cols.astype(np.int32),
        vals,
        np.full(width, 1 if integral else 0, dtype=np.int32),
    )
    if integral:
        solver.setOptionValue("mip_rel_gap", 0.0)
    solver.run()
    return solver
