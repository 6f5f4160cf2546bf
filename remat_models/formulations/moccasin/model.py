"""The Moccasin model (Bartan et al., ICML 2023): retention intervals with CP globals, eqs. (1)-(10), sec. 2.3.

Per node v, C_v optional intervals ``retain[k]`` (``start`` = compute event, exclusive ``end`` =
one past the last event it is retained, ``presence`` = a_v^i). Constraints, with the paper's numbers:

- (7) the first interval of every node is active; later ones form a prefix (a^{i+1} <= a^i, symmetry);
- (2) start < end (size >= 1); (3) an active interval starts after the previous one ends (indicator);
- (4) a cumulative of all intervals with demand mem[v] (and a length-1 workspace interval at each
  start), capacity budget - fixed memory; the interval covers events start..end-1 inclusive;
- (5) per edge (u, v) and interval i of v, a reservoir with the level changes of (10): +1/-1 at the
  start/end of each interval of u, -1/+1 at s_v^i and s_v^i + 1, min level 0 (for C_u = 1 it is
  the equivalent pair of linear rows); plus the implied row s_v^i > s_u^1;
- (6) active starts all different over the event domain 1..sum C_v (order="free" only): a
  capacity-1 cumulative of unit "compute" intervals; with order="input" the stage structure of
  sec. 2.3 makes starts distinct instead; inactive intervals are parked at their last start;
- graph outputs: the last active interval ends after the final event (retained to the end);
- objective (1): sum of cost[v] * a_v^i; phase 1 (sec. 2.4) minimizes max(M_var, budget) instead: the
  cumulative's capacity is a variable ``peak`` in [budget's capacity, the start's peak], minimized (12)-(13).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from remat_models.core.graph import Graph
from remat_models.errors import ConfigurationError
from remat_models.formulations.base import BuiltModel
from remat_models.formulations.moccasin.layout import (
    DEFAULT_C,
    IntervalValues,
    Layout,
    Order,
    make_layout,
    retained_peak,
)
from remat_models.formulations.rows import Rows
from remat_models.formulations.scaling import DEFAULT_PRECISION, ScaledGraph, scale_graph
from remat_models.model import Model, Var
from remat_models.model.constructs import Reservoir
from remat_models.model.expr import AffineBatch
from remat_models.model.index import IndexMap


@dataclass(frozen=True)
class MoccasinOptions:
    """C_v (``C`` for all nodes, ``C_nodes`` by name), event structure, cost rounding precision, solve phases.

    ``two_phase``: when the start is over budget, first minimize the peak (sec. 2.4); ``greedy``: start from the
    staged greedy plan when the input order is over budget; ``solver_log``: keep the solver's log.
    """

    C: int = DEFAULT_C
    C_nodes: Mapping[str, int] | None = None
    order: Order = "input"
    cost_precision: float = DEFAULT_PRECISION
    two_phase: bool = True
    greedy: bool = True
    solver_log: bool = False


@dataclass
class MoccasinModel(BuiltModel):
    """A built Moccasin model: the abstract model plus its interval layout and integer data."""

    layout: Layout | None = None
    scaled: ScaledGraph | None = None
    phase: int = 2
    capacity: int = 0  # memory capacity of the cumulative, in memory units
    slack: int = 0  # phase 1: how far above the budget's capacity the variable capacity may go
    options: MoccasinOptions = field(default_factory=MoccasinOptions)

    def interval_values(self, values: Mapping[str, np.ndarray]) -> IntervalValues:
        """The retention intervals of a solution."""
        return IntervalValues(
            np.rint(values["retain.start"]).astype(np.int64),
            np.rint(values["retain.end"]).astype(np.int64),
            np.rint(values["retain.presence"]).astype(np.int64),
        )

    def peak_bound(self, values: Mapping[str, np.ndarray]) -> int:
        """The model's memory peak in bytes for a solution's values (bounds the simulated peak).

        An applied extension that adds intervals to the cumulative reports the peak with them (``peak_bound``).
        """
        bound = self.peak(self.interval_values(values))
        for extension in self.applied:
            extra = getattr(extension, "peak_bound", None)
            if extra is not None:
                bound = max(bound, extra(self, values) or 0)
        return bound

    def peak(self, intervals: IntervalValues) -> int:
        """Memory (bytes, fixed memory included) the cumulative counts at its fullest event for these intervals."""
        assert self.layout is not None and self.scaled is not None
        units = retained_peak(self.layout, intervals, self.scaled.mem, self.scaled.workspace)
        return self.graph.fixed_mem + units * self.units.mem_unit


def build_model(graph: Graph, budget: int, options: MoccasinOptions, phase1_peak: int | None = None) -> MoccasinModel:
    """Build the model; with ``phase1_peak`` (bytes) the phase-1 model whose capacity may reach that peak."""
    layout = make_layout(graph, options.order, options.C, options.C_nodes)
    scaled = scale_graph(graph, options.cost_precision)
    capacity = scaled.capacity(budget, graph.fixed_mem)
    slack = 0
    if phase1_peak is not None:
        slack = max(0, scaled.capacity(phase1_peak + scaled.units.mem_unit - 1, graph.fixed_mem) - capacity)
    m = Model(f"moccasin_{options.order}_{graph.name or 'graph'}")
    builder = _Builder(m, layout, scaled)
    builder.intervals()
    builder.sequencing()
    builder.precedence()
    builder.memory(capacity, slack)
    if phase1_peak is None:
        m.set_objective(builder.presence, scaled.cost[layout.owner])
    builder.publish()
    return MoccasinModel(
        formulation="moccasin",
        hooks=builder.hooks,
        model=m,
        graph=graph,
        budget=budget,
        units=scaled.units,
        layout=layout,
        scaled=scaled,
        phase=2 if phase1_peak is None else 1,
        capacity=capacity,
        slack=slack,
        options=options,
    )


class _Builder:
    """Adds Moccasin's blocks and constraints to a model, vectorized except one reservoir per (edge, interval)."""

    def __init__(self, m: Model, layout: Layout, scaled: ScaledGraph) -> None:
        self.m, self.layout, self.scaled = m, layout, scaled
        self.later = np.flatnonzero(layout.rank > 0)
        self.hooks: dict[str, object] = {"memory": "memory", "supply": {}}

    def publish(self) -> None:
        """Index maps of the retention intervals on (node, copy) axes; the interval block as a hook."""
        lay = self.layout
        shape = (lay.graph.n, int(lay.counts.max()))
        for part in ("start", "end", "presence"):
            block = self.m.block(f"retain.{part}")
            self.m.set_index(
                IndexMap.sparse(
                    block.name, ("node", "copy"), shape, (lay.owner, lay.rank), block.cols, (lay.graph.names, None)
                )
            )
        self.hooks["retain"] = self.iv

    def intervals(self) -> None:
        """Retention intervals (2), their event domains, and the stage variables of the input order."""
        m, lay = self.m, self.layout
        lo, hi = lay.start_bounds()
        T = lay.horizon
        self.iv = m.interval_block("retain", lay.size, start=(lo, hi), size=(1, T), end=(lo + 1, T + 1), optional=True)
        self.start, self.end = self.iv.start.cols, self.iv.end.cols
        self.presence = self.iv.presence.cols  # type: ignore[union-attr]
        if lay.order == "input":  # start = n * (stage - 1) + slot
            stage_lo, stage_hi = lay.stage_bounds()
            stage = m.int_block("stage", lay.size, stage_lo, stage_hi).cols
            n = lay.graph.n
            Rows(lay.size).term(self.start, 1.0).term(stage, -n).add_to(m, lay.slot - n, lay.slot - n)

    def sequencing(self) -> None:
        """(7), prefix of actives, (3) with strict order, outputs retained to the end, (6) in free order."""
        m, lay, a = self.m, self.layout, self.presence
        Rows(lay.graph.n).term(a[lay.first], 1.0).add_to(m, 1.0, 1.0)
        later = self.later
        Rows(len(later)).term(a[later], 1.0).term(a[later - 1], -1.0).add_to(m, ub=0.0)
        self._when(later, self.end[later - 1], self.start[later], ub=0.0)
        # output v: end[k] >= (T + 1) * (a[k] - a[k + 1]), i.e. the last active interval ends after T
        out = np.flatnonzero(np.isin(lay.owner, lay.graph.outputs))
        has_next = np.zeros(len(out), dtype=bool)
        has_next[:] = (out + 1 < lay.size) & (lay.rank[np.minimum(out + 1, lay.size - 1)] > 0)
        big = float(lay.horizon + 1)
        rows = Rows(len(out)).term(self.end[out], 1.0).term(a[out], -big)
        rows.term(a[out[has_next] + 1], big, rows=np.flatnonzero(has_next))
        rows.add_to(m, lb=0.0)
        # a value nobody reads and that is not an output lives one event
        unread = np.flatnonzero(np.diff(lay.graph.succ_ptr) == 0)
        dead = np.flatnonzero(np.isin(lay.owner, np.setdiff1d(unread, lay.graph.outputs)))
        Rows(len(dead)).term(self.end[dead], 1.0).term(self.start[dead], -1.0).add_to(m, 1.0, 1.0)
        # an inactive interval is parked at its last possible start (no symmetric placements)
        lo, hi = lay.start_bounds()
        later = self.later
        if later.size:
            m.add_indicators(
                self.presence[later],
                np.arange(later.size),
                self.start[later],
                np.ones(later.size),
                hi[later],
                hi[later],
                negated=np.ones(later.size, dtype=bool),
            )
        if lay.order == "free":  # (6) on active starts: unit compute intervals, at most one per event
            c = m.interval_block("compute", lay.size, start=(lo, hi), size=1, optional=True)
            Rows(lay.size).term(c.start.cols, 1.0).term(self.start, -1.0).add_to(m, 0.0, 0.0)
            Rows(lay.size).term(c.presence.cols, 1.0).term(self.presence, -1.0).add_to(m, 0.0, 0.0)  # type: ignore[union-attr]
            m.add_cumulative(c.ids, 1, 1)

    def precedence(self) -> None:
        """(5): for each edge (u, v) and interval k of v, u is resident at v's compute event."""
        lay, g = self.layout, self.layout.graph
        u_e, v_e = g.edges[:, 0], g.edges[:, 1]
        per = lay.counts[v_e]
        edge = np.repeat(np.arange(g.m), per)
        k = lay.ptr[v_e][edge] + (np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per))
        u = u_e[edge]
        u_first = lay.ptr[u]
        self._when(k, self.start[u_first], self.start[k], ub=-1.0)  # s_u^1 + 1 <= s_v^i (implied)
        single = lay.counts[u] == 1
        self._when(k[single], self.start[k[single]], self.end[u_first[single]], ub=-1.0)  # s_v^i < end_u^1
        self._reservoirs(edge[~single], k[~single], u[~single])

    def _reservoirs(self, edges: np.ndarray, ks: np.ndarray, us: np.ndarray) -> None:
        """Paper eq. (10) per (edge, interval k of its consumer): producer intervals +1/-1, consumer event -1 at s,
        +1 at s + 1; level in [0, 1]. Made from column arrays, not expressions: Moccasin with C = 50 on a 65-node
        chain has 2,503 of them, which took 7 of the build's 7.5 s through ``Model.add_reservoir``.
        """  # noqa: D205
        lay, m = self.layout, self.m
        s, e, a = self.start.astype(np.int64), self.end.astype(np.int64), self.presence.astype(np.int64)
        count = lay.counts[us].astype(np.int64)  # J producer intervals: events J starts, J ends, s_k, s_k + 1
        size = 2 * count + 2
        offset = np.concatenate([[0], np.cumsum(size)])
        owner = np.repeat(np.arange(len(us)), size)
        p = np.arange(int(offset[-1])) - offset[owner]  # the event's position in its reservoir
        j = lay.ptr[us][owner] + np.where(p < count[owner], p, p - count[owner])  # its producer interval
        producer = p < 2 * count[owner]
        j = np.where(producer, j, 0)
        k_owner = ks[owner]
        cols = np.where(p < count[owner], s[j], np.where(producer, e[j], s[k_owner]))
        k_act = np.where(lay.rank[k_owner] == 0, -1, a[k_owner])
        active = np.where(producer, np.where(lay.rank[j] == 0, -1, a[j]), k_act)  # a first interval: always present
        changes = np.where((p < count[owner]) | (p == size[owner] - 1), 1, -1).astype(np.int64)
        const = (p == size[owner] - 1).astype(np.float64)  # s_k + 1
        ramp, ones, no = np.arange(int(size.max(initial=0)) + 1), np.ones(len(p)), np.zeros(len(p), dtype=bool)
        supply: dict[tuple[int, int], str] = self.hooks["supply"]  # type: ignore[assignment]
        for i, (edge, k) in enumerate(zip(edges.tolist(), ks.tolist(), strict=True)):
            a0, a1, n = int(offset[i]), int(offset[i + 1]), int(size[i])
            times = AffineBatch(ramp[: n + 1], cols[a0:a1], ones[a0:a1], const[a0:a1])
            name = supply[(edge, int(lay.rank[k]))] = f"supply[{edge},{int(lay.rank[k])}]"
            if name in m.reservoir_names:
                raise ConfigurationError(f"a reservoir called {name!r} exists already")
            m.reservoir_names[name] = len(m.reservoirs)
            m.reservoirs.append(Reservoir(times, changes[a0:a1], active[a0:a1], no[a0:a1], 0, 1))

    def memory(self, capacity: int, slack: int) -> None:
        """(4) as one cumulative; in phase 1 its capacity is a variable up to ``slack`` units above, minimized (12)."""
        m, lay, sc = self.m, self.layout, self.scaled
        ids, demands = [self.iv.ids], [sc.mem[lay.owner]]
        ws = np.flatnonzero(sc.workspace[lay.owner] > 0)
        if ws.size:
            lo, hi = lay.start_bounds()
            w = m.interval_block("workspace", ws.size, start=(lo[ws], hi[ws]), size=1, optional=True)
            Rows(ws.size).term(w.start.cols, 1.0).term(self.start[ws], -1.0).add_to(m, 0.0, 0.0)
            Rows(ws.size).term(w.presence.cols, 1.0).term(self.presence[ws], -1.0).add_to(m, 0.0, 0.0)  # type: ignore[union-attr]
            ids.append(w.ids)
            demands.append(sc.workspace[lay.owner[ws]])
        cap: int | Var = capacity
        if slack > 0:
            peak = m.int_block("peak", 1, capacity, capacity + slack)  # max(M_var, M) in memory units
            m.set_objective(peak.cols, 1.0)
            cap = peak[0]
        m.add_cumulative(np.concatenate(ids), np.concatenate(demands), cap, name="memory")

    def _when(self, k: np.ndarray, plus: np.ndarray, minus: np.ndarray, ub: float) -> None:
        """``x[plus] - x[minus] <= ub`` when interval ``k`` is active (a plain row for first intervals)."""
        first = self.layout.rank[k] == 0
        Rows(int(first.sum())).term(plus[first], 1.0).term(minus[first], -1.0).add_to(self.m, ub=ub)
        rest = np.flatnonzero(~first)
        r = np.arange(rest.size)
        if rest.size:
            self.m.add_indicators(
                self.presence[k[rest]],
                np.concatenate([r, r]),
                np.concatenate([plus[rest], minus[rest]]),
                np.concatenate([np.ones(rest.size), -np.ones(rest.size)]),
                -np.inf,
                np.full(rest.size, ub),
            )


def hint_values(built: MoccasinModel, intervals: IntervalValues) -> dict[str, np.ndarray]:
    """Values of every block of ``built`` for given interval values (a complete warm start)."""
    lay = built.layout
    assert lay is not None
    hints: dict[str, np.ndarray] = {
        "retain.start": intervals.start,
        "retain.end": intervals.end,
        "retain.size": intervals.end - intervals.start,
        "retain.presence": intervals.presence,
    }
    if lay.order == "input":
        hints["stage"] = (intervals.start - lay.slot) // lay.graph.n + 1
    if "workspace.start" in built.model.blocks:
        ws = np.flatnonzero(built.scaled.workspace[lay.owner] > 0)  # type: ignore[union-attr]
        hints["workspace.start"] = intervals.start[ws]
        hints["workspace.end"] = intervals.start[ws] + 1
        hints["workspace.presence"] = intervals.presence[ws]
    if "compute.start" in built.model.blocks:
        hints["compute.start"] = intervals.start
        hints["compute.end"] = intervals.start + 1
        hints["compute.presence"] = intervals.presence
    if "peak" in built.model.blocks:  # phase 1: the intervals' own peak, within the variable's bounds
        units = retained_peak(lay, intervals, built.scaled.mem, built.scaled.workspace)  # type: ignore[union-attr]
        hints["peak"] = np.array([min(max(units, built.capacity), built.capacity + built.slack)])
    return hints
