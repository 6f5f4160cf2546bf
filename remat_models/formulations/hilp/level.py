"""H-ILP (HiREmate section 3.2.2, App. B) on the abstract model: staged cells, options, phantoms ("fb").

The model of one level (``HGraph``): compute nodes k in phase order (one stage each), each with
options q; data nodes d with one producer. Blocks, all flat over the cells that can be non-zero:

- ``R[t, q]``: option q of compute node k(q) runs in stage t (t >= k; t == k for a node computed
  once; a layer's non-ff forward option only at t = F_j or t >= B_j: rockmate's phantom pruning).
- ``P[t, d]``: d resident when stage t starts (t > its producer).
- ``FREE[t, d, k]``: d freed after compute node k in stage t (k is a reader of d, or d's producer
  when that is a layer or d has no reader).
- ``U[t, k]``: memory just after k runs in stage t, before the frees that follow it.

Rows: every node runs in its stage (V6), at most one option per cell (5), reads resident or
produced earlier in the stage (D3/D4, Checkmate (1b)), residency only if kept or produced (1c),
graph outputs kept at the end (V5), frees only where the hazard count is 0 (Checkmate's (7c), one
row per term), no hold or rerun that nothing uses (dominance rows), the "fb" phantom equalities,
the U recurrence with phantoms (IF/IB) and the memory rows ``U + m R <= budget``; for subproblems,
``U <= save`` in the loss stage. With one single-node option per node (the flat case) this has
Checkmate's staged MILP's optimum (the same cells, tighter rows).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, eager_frees, simulate
from remat_models.core.stages import resolve_order, staged_sequence, stages_from_schedule
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.formulations.base import BuiltModel, FormulationBase
from remat_models.formulations.checkmate.formulation import byte_gcd, memory_scale
from remat_models.formulations.hilp.alternatives import with_impls
from remat_models.formulations.hilp.graph import HGraph, build_hgraph
from remat_models.formulations.hilp.options import HilpOptions
from remat_models.formulations.rows import Rows, index_of
from remat_models.formulations.scaling import Units, scale_costs
from remat_models.formulations.staged_memory import (
    StageCells,
    add_recurrence,
    staged_assignment,
    subtract_frees,
)
from remat_models.model import Model

log = logging.getLogger(__name__)


@dataclass
class HilpModel(BuiltModel):
    """The built H-ILP plus the index maps decoding, hints and the peak bound need."""

    hgraph: HGraph
    options: HilpOptions
    r_mask: np.ndarray  # (T, Q)
    p_mask: np.ndarray  # (T, I)
    u_mask: np.ndarray  # (T, T)
    opt_node: np.ndarray  # compute node of each option q
    hazard: Rows
    memory_step: Rows
    memory_const: np.ndarray
    first_cell: np.ndarray
    memory_rows: Rows  # left-hand sides of every memory row beyond U <= budget
    mem_scale: float

    def chosen(self, values: Mapping[str, np.ndarray]) -> list[tuple[int, int]]:
        """(stage, option) of every R cell set, stage by stage, compute node ascending."""
        R = np.zeros(self.r_mask.shape, dtype=bool)
        R[self.r_mask] = np.asarray(values["R"]) > 0.5
        t, q = np.nonzero(R)
        return list(zip(t.tolist(), q.tolist(), strict=True))

    def sequence(self, values: Mapping[str, np.ndarray]) -> list[int]:
        """The flattened compute sequence (nodes of the level graph) of a solution."""
        return [v for v, _ in self.steps(values)]

    def steps(self, values: Mapping[str, np.ndarray]) -> list[tuple[int, int]]:
        """Each chosen option's (node, implementation) steps, stage by stage (:func:`once_steps`)."""
        parts = [p for node_parts in self.hgraph.parts for p in node_parts]
        steps = [step for _, q in self.chosen(values) for step in with_impls(parts[q].seq, parts[q].impls)]
        return once_steps(self.graph, steps)

    def peak_bound(self, values: Mapping[str, np.ndarray]) -> float:
        """The model's memory bound in bytes: max over cells of U + m R."""
        x = self.model.flatten(values, fill=0.0)
        during = np.concatenate([np.asarray(values["U"], dtype=np.float64), self.memory_rows.evaluate(x)])
        return float(during.max()) * self.mem_scale if during.size else 0.0


def once_steps(graph: Graph, steps: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``steps`` without the reruns of non-recomputable nodes.

    A layer whose only such forward nodes are tails (``layers.fixed_tails``, read by no recomputation) runs again
    without them; their first run's values are kept (the model keeps them to the end).
    """
    seen: set[int] = set()
    kept = []
    for v, impl in steps:
        if not graph.recomputable[v]:
            if v in seen:
                continue
            seen.add(v)
        kept.append((v, impl))
    return kept


class _LevelByLevel(Model):
    """The stand-in model of a hierarchical request: it has no rows to export or solve directly."""

    def linear_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Refuse: the hierarchical solve builds one model per cluster and level inside ``Hilp.solve``."""
        raise ConfigurationError(
            "hierarchical hilp builds its models level by level while solving; for one model to export or "
            "inspect use the flat H-ILP (partition=false, -O partition=false)"
        )


@dataclass
class HilpDeferred(BuiltModel):
    """A hierarchical ``hilp`` request: the models are built level by level inside ``Hilp.solve``."""

    options: HilpOptions | None = None


class HilpLevel(FormulationBase):
    """H-ILP's model of one level: the flat model of a graph, or a deferred hierarchical request.

    :class:`remat_models.formulations.hilp.formulation.Hilp` adds the hierarchical solve on top.
    """

    name: ClassVar[str] = "hilp"
    options_type: ClassVar[type] = HilpOptions
    default_backend: ClassVar[str] = "highs"
    integral_option: ClassVar[str | None] = "integral_memory"

    def build(self, graph: Graph, budget: int, options: HilpOptions | Mapping[str, Any] | None = None) -> BuiltModel:
        """The flat H-ILP of ``graph`` (one single-node option per node), or a deferred hierarchical request."""
        opts = self.options(options)
        if opts.hierarchical(graph.n):
            placeholder = _LevelByLevel(f"hilp:{graph.name}")
            return HilpDeferred(placeholder, graph, int(budget), Units(), formulation=self.name, options=opts)
        loss = next((v for v in graph.order.tolist() if graph.kind[v] == "loss"), None)
        hgraph = build_hgraph(graph, loss=loss, once=opts.loss_once, order=resolve_order(graph, opts.order))
        built = self.build_level(hgraph, budget, opts)
        built.formulation = self.name
        return built

    def build_level(
        self, hgraph: HGraph, budget: int, options: HilpOptions | Mapping[str, Any] | None = None
    ) -> HilpModel:
        """The H-ILP of one level under ``budget`` bytes."""
        return _Builder(hgraph, budget, self.options(options)).build()

    def warm_options(self, options: Any, init: Schedule | None) -> HilpOptions:
        """The flat model's stages follow the warm start's first computations unless an order is given (as Checkmate's).

        The hierarchical solve ignores ``order``.
        """
        opts = self.options(options)
        if init is None or opts.order is not None:
            return opts
        return self.options(replace(opts, order=tuple(int(v) for v in init.first_computation_order())))

    def sequence(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> list[int | Any]:
        """Every chosen option's nodes, stage by stage."""
        return list(_hilp(built).sequence(values))

    def _hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Values of every block for a schedule of a flat model (single-node options).

        A schedule outside the stage structure (FastSA recomputes in any order) is recast into it as Checkmate
        does (``staged_sequence``, then eager frees) if the recast one still fits the budget.
        """
        hm = _hilp(built)
        h = hm.hgraph
        if any(len(p) != 1 or len(p[0].seq) != 1 for p in h.parts):
            raise ConfigurationError("hilp hints exist for flat models only")
        order = np.array([p[0].seq[0] for p in h.parts], dtype=np.int64)
        try:
            R, S = stages_from_schedule(hm.graph, order, schedule)
        except InvalidScheduleError:
            staged = eager_frees(hm.graph, staged_sequence(hm.graph, order, schedule))
            peak = simulate(hm.graph, staged).peak
            if peak > hm.budget:
                raise InvalidScheduleError(f"recast into stages, its peak {peak:,} B exceeds the budget") from None
            R, S = stages_from_schedule(hm.graph, order, staged)
        if (R & ~hm.r_mask).any():
            raise ConfigurationError("the schedule uses a cell this hilp model has no variable for")
        R, S = _without_waste(hm.graph, order, R, S)
        return staged_assignment(hm, {"R": R[hm.r_mask], "P": _p_values(hm, S, order)})


def _hilp(built: BuiltModel) -> HilpModel:
    if not isinstance(built, HilpModel):
        raise ConfigurationError("this hilp request is hierarchical: it has no single model to decode")
    return built


def _without_waste(graph: Graph, order: np.ndarray, R: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Staged (R, S) (positions in ``order``) without the reruns and holds the dominance rows forbid.

    A rerun that no later computation of its stage reads and that is not kept into the next stage, and a value held
    at a stage's start that the stage does not read and does not keep, are dropped, stages last to first (a drop can
    make an earlier one idle). The schedule costs no more and peaks no higher; its hints satisfy the model's rows.
    """
    R, S = R.copy(), S.copy()
    T, n = R.shape
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    ei, ek = position[graph.edges[:, 0]], position[graph.edges[:, 1]]
    by_reader = np.argsort(ei, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(ei, minlength=n))])
    readers = ek[by_reader]
    kept_at_end = np.zeros(n, dtype=bool)
    kept_at_end[position[graph.outputs]] = True
    for t in range(T - 1, -1, -1):
        kept = S[t + 1] if t + 1 < T else kept_at_end
        for k in np.flatnonzero(R[t, :t])[::-1].tolist():
            if not kept[k] and not R[t, readers[ptr[k] : ptr[k + 1]]].any():
                R[t, k] = False
        read = np.zeros(n, dtype=bool)
        read[ei[R[t, ek]]] = True
        S[t] &= read | kept
    return R, S


def _p_values(built: HilpModel, S: np.ndarray, order: np.ndarray) -> np.ndarray:
    position = np.empty(order.size, dtype=np.int64)
    position[order] = np.arange(order.size)
    dense = S[:, position[built.hgraph.data_node]]
    return dense[built.p_mask]


class _Builder:
    """One build of the H-ILP (a class so each group of rows is a short method)."""

    def __init__(self, h: HGraph, budget: int, opts: HilpOptions) -> None:
        self.h, self.budget, self.opts = h, budget, opts
        graph = h.graph
        self.T = T = h.T
        self.n_opt = np.array([len(p) for p in h.parts], dtype=np.int64)
        self.opt_ptr = np.concatenate([[0], np.cumsum(self.n_opt)])
        self.opt_node = np.repeat(np.arange(T), self.n_opt)
        parts = [p for node_parts in h.parts for p in node_parts]
        self.Q = len(parts)
        self.integral = bool(opts.integral_memory)
        self.mem_scale, self.capacity = memory_scale(graph, int(budget), integral=self.integral)
        costs, cost_unit, exact = scale_costs(np.array([p.cost for p in parts]), opts.cost_precision)
        self.costs = costs.astype(np.float64)
        self.units = Units(cost_unit=cost_unit, mem_unit=int(byte_gcd(graph)), cost_exact=exact)
        self.overhead = np.array([p.overhead for p in parts], dtype=np.float64) / self.mem_scale
        self.phantom = np.array([p.phantom for p in parts], dtype=np.float64) / self.mem_scale
        self.size = h.size / self.mem_scale
        t = np.arange(T)[:, None]
        k = self.opt_node[None, :]
        fixed_stage = ~(h.recomputable | h.once)
        self.r_mask = (t >= k) & (~fixed_stage[k] | (t == k))
        self.ff = np.zeros(self.Q, dtype=bool)
        for f, b in h.layers:
            self.ff[self.opt_ptr[f + 1] - 1] = True
            if b < 0:
                continue
            fq = np.arange(self.opt_ptr[f], self.opt_ptr[f + 1] - 1)
            self.r_mask[:, fq] &= (t == f) | (t >= b)
            if fixed_stage[f]:
                self.r_mask[:, fq] &= t == f
        self.p_mask = np.arange(T)[:, None] > h.producer[None, :]
        self.u_mask = np.zeros((T, T), dtype=bool)
        tt, qq = np.nonzero(self.r_mask)
        self.u_mask[tt, self.opt_node[qq]] = True
        self.m = Model(f"hilp:{graph.name}")

    # ------------------------------------------------------------------ helpers
    def cr(self, rows: Rows, tt: np.ndarray, kk: np.ndarray, coef: float | np.ndarray, row_ids: np.ndarray) -> Rows:
        """Add ``coef * CR[t, k]`` (the sum of k's options at stage t) to the given rows."""
        tt, kk, row_ids = (np.asarray(a, dtype=np.int64).ravel() for a in (tt, kk, row_ids))
        coefs = np.broadcast_to(np.asarray(coef, dtype=np.float64), tt.shape)
        counts = self.n_opt[kk]
        owner = np.repeat(np.arange(tt.size), counts)
        offset = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts)
        q = self.opt_ptr[kk][owner] + offset
        return rows.term(self.rid[tt[owner], q], coefs[owner], rows=row_ids[owner])

    def build(self) -> HilpModel:
        m = self.m
        R = m.bool_block("R", int(self.r_mask.sum()))
        P = m.bool_block("P", int(self.p_mask.sum()))
        self.rid, self.pid = index_of(self.r_mask, R.offset), index_of(self.p_mask, P.offset)
        self._coverage()
        self._reads()
        self._phantom_equalities()
        self.readers = self._readers()
        self.layer_nodes = {k for pair in self.h.layers for k in pair if k >= 0}
        self._no_waste()
        hazard, free = self._frees()
        step, const, first, overhead = self._memory(free)
        m.set_objective(R.cols, self.costs[np.nonzero(self.r_mask)[1]])
        log.info(
            "hilp model of %s: %d columns, %d rows, %d nonzeros",
            self.h.graph.name,
            m.num_cols,
            m.num_rows,
            m.num_nonzeros,
        )
        return HilpModel(
            model=m,
            graph=self.h.graph,
            budget=self.budget,
            units=self.units,
            hgraph=self.h,
            options=self.opts,
            r_mask=self.r_mask,
            p_mask=self.p_mask,
            u_mask=self.u_mask,
            opt_node=self.opt_node,
            hazard=hazard,
            memory_step=step,
            memory_const=const,
            first_cell=first,
            memory_rows=overhead,
            mem_scale=self.mem_scale,
        )

    def _coverage(self) -> None:
        """V6 CR[t, t] = 1; (5) CR[t, k] <= 1 for nodes with options; V5 graph outputs resident at the end."""
        T, h = self.T, self.h
        diag = np.arange(T)
        self.cr(Rows(T), diag, diag, 1.0, diag).add_to(self.m, lb=1.0, ub=1.0)
        tt, kk = np.nonzero(self.u_mask & (self.n_opt > 1)[None, :] & (np.arange(T)[:, None] != np.arange(T)))
        self.cr(Rows(tt.size), tt, kk, 1.0, np.arange(tt.size)).add_to(self.m, ub=1.0)
        final = np.flatnonzero(h.final)
        rows = Rows(final.size).term(self.pid[T - 1, final], 1.0)
        self.cr(rows, np.full(final.size, T - 1), h.producer[final], 1.0, np.arange(final.size))
        rows.add_to(self.m, lb=1.0)

    def _reads(self) -> None:
        """D3/D4: a read value is resident at the stage start or produced earlier in the stage; (1c) residency."""
        h, T = self.h, self.T
        kk = np.repeat(np.arange(T), [r.size for r in h.static_reads])
        dd = np.concatenate(h.static_reads) if T else np.empty(0, np.int64)
        tt, ee = np.nonzero(self.u_mask[:, kk])
        k, d = kk[ee], dd[ee]
        rows = Rows(tt.size)
        self.cr(rows, tt, k, 1.0, np.arange(tt.size))
        self.cr(rows, tt, h.producer[d], -1.0, np.arange(tt.size)).term(self.pid[tt, d], -1.0)
        rows.add_to(self.m, ub=0.0)
        qq = np.repeat(np.arange(self.Q), [r.size for node in h.part_reads for r in node])
        dd = np.concatenate([r for node in h.part_reads for r in node] or [np.empty(0, np.int64)])
        tt, ee = np.nonzero(self.r_mask[:, qq])
        q, d = qq[ee], dd[ee]
        rows = Rows(tt.size).term(self.rid[tt, q], 1.0).term(self.pid[tt, d], -1.0)
        self.cr(rows, tt, h.producer[d], -1.0, np.arange(tt.size)).add_to(self.m, ub=0.0)
        fixed = np.flatnonzero(~h.graph.recomputable[h.data_node] & h.recomputable[h.producer])
        tt, dd = np.nonzero(self.p_mask[:, fixed])
        Rows(tt.size).term(self.pid[tt, fixed[dd]], 1.0).add_to(self.m, lb=1.0)  # a rerun skips them: kept to the end
        tt, dd = np.nonzero(self.p_mask)
        keep = tt >= 1
        tt, dd = tt[keep], dd[keep]
        rows = Rows(tt.size).term(self.pid[tt, dd], 1.0).term(self.pid[tt - 1, dd], -1.0)
        self.cr(rows, tt - 1, h.producer[dd], -1.0, np.arange(tt.size)).add_to(self.m, ub=0.0)

    def _phantom_equalities(self) -> None:
        """Phantoms "fb": R[B, B, o] = R[F, F, o] + R[B, F, o]; R[t, B, o] = R[t, F, o] for t > B."""
        for f, b in self.h.layers:
            if b < 0:
                continue
            n_o = int(self.n_opt[b])
            fq = self.opt_ptr[f] + np.arange(n_o)
            bq = self.opt_ptr[b] + np.arange(n_o)
            rows = Rows(n_o).term(self.rid[b, bq], 1.0).term(self.rid[f, fq], -1.0).term(self.rid[b, fq], -1.0)
            rows.add_to(self.m, lb=0.0, ub=0.0)
            later = np.arange(b + 1, self.T)
            tt = np.repeat(later, n_o)
            oo = np.tile(np.arange(n_o), later.size)
            rows = Rows(tt.size).term(self.rid[tt, bq[oo]], 1.0).term(self.rid[tt, fq[oo]], -1.0)
            rows.add_to(self.m, lb=0.0, ub=0.0)

    def _readers(self) -> list[list[int]]:
        """The compute nodes reading each data node (statically or through an option), ascending."""
        users: list[set[int]] = [set() for _ in range(self.h.data_node.size)]
        for k in range(self.T):
            for d in self.h.static_reads[k].tolist():
                users[d].add(k)
            for r in self.h.part_reads[k]:
                for d in r.tolist():
                    users[d].add(k)
        return [sorted(u) for u in users]

    def _no_waste(self) -> None:
        """Dominance rows: no value held through a stage that does not read it unless kept on, no idle rerun.

        ``P[t, d] <= sum of d's readers' CR[t, j] + P[t + 1, d]``, and for a plain node k run again (t > k) with value
        d, ``R[t, k] <= CR[t, j] of d's readers after k in stage t + P[t + 1, d]``. Dropping such a hold or rerun
        costs nothing and frees memory, so every budget keeps an optimal schedule; the rows cut the many equal-cost
        variants (zero-cost reruns placed anywhere) that slow the MIP search. Graph outputs count as read at the end,
        and values kept to the end by construction (non-recomputable values of recomputable nodes) are exempt.
        """
        h, T = self.h, self.T
        stage = np.arange(T)[:, None]
        fixed = ~h.graph.recomputable[h.data_node] & h.recomputable[h.producer]
        held = self.p_mask & ~fixed[None, :]
        plain = np.array([k not in self.layer_nodes and self.n_opt[k] == 1 for k in h.producer.tolist()], dtype=bool)
        q_of = self.opt_ptr[h.producer]
        rerun = self.r_mask[:, q_of] & (stage > h.producer[None, :]) & (plain & ~fixed)[None, :]
        held[T - 1] &= ~h.final
        rerun[T - 1] &= ~h.final
        pt, pd = np.nonzero(held)
        rt, rd = np.nonzero(rerun)
        kind = np.concatenate([np.zeros(pt.size, np.int64), np.ones(rt.size, np.int64)])
        tt, dd = np.concatenate([pt, rt]), np.concatenate([pd, rd])
        col = np.concatenate([self.pid[pt, pd], self.rid[rt, q_of[rd]]])
        order = np.lexsort((tt, kind, dd))  # per data node: its holds, then its reruns, by stage
        tt, dd, kind, col = tt[order], dd[order], kind[order], col[order]
        count = tt.size
        if count == 0:
            return
        n_read = np.array([len(r) for r in self.readers], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(n_read)])
        readers = np.concatenate([np.asarray(r, dtype=np.int64) for r in self.readers] or [np.empty(0, np.int64)])
        row = np.repeat(np.arange(count), n_read[dd])
        offset = np.arange(row.size) - np.repeat(np.cumsum(n_read[dd]) - n_read[dd], n_read[dd])
        j = readers[ptr[dd[row]] + offset]
        keep = self.u_mask[tt[row], j] & ((kind[row] == 0) | (j > h.producer[dd[row]]))
        nxt = np.where(tt + 1 < T, self.pid[np.minimum(tt + 1, T - 1), dd], -1)
        rows = Rows(count).term(col, 1.0).term(nxt, -1.0)
        self.cr(rows, tt[row[keep]], j[keep], -1.0, row[keep])
        rows.add_to(self.m, ub=0.0)

    def _frees(self) -> tuple[Rows, np.ndarray]:
        """FREE cells for (d, k) with k the producer (layers only) or a reader of d, and their rows; the hazard rows."""
        h, T = self.h, self.T
        users = self.readers
        layer_nodes = self.layer_nodes
        cells_t, cells_d, cells_k, later_rows, later_t, later_k = [], [], [], [], [], []
        count = 0
        for d in range(h.data_node.size):
            readers = users[d]
            producer = int(h.producer[d])
            # a plain node runs only for a reader later in its stage (or as the stage's last node): freeing
            # its value right after it saves nothing, so only layers (whose reruns produce values no one
            # reads in that stage) get the producer as a freeing point
            for k in [producer, *readers] if producer in layer_nodes or not readers else readers:
                ts = np.flatnonzero(self.u_mask[:, k])
                if h.final[d]:
                    ts = ts[ts < T - 1]
                if ts.size == 0:
                    continue
                cells_t.append(ts)
                cells_d.append(np.full(ts.size, d))
                cells_k.append(np.full(ts.size, k))
                for k2 in readers:
                    if k2 <= k:
                        continue
                    hit = np.flatnonzero(self.u_mask[ts, k2])
                    later_rows.append(count + hit)
                    later_t.append(ts[hit])
                    later_k.append(np.full(hit.size, k2))
                count += ts.size
        cat = lambda parts: np.concatenate(parts) if parts else np.empty(0, np.int64)  # noqa: E731
        tt, dd, kk = cat(cells_t), cat(cells_d), cat(cells_k)
        lr, lt, lk = cat(later_rows), cat(later_t), cat(later_k)
        F = tt.size
        nxt = np.minimum(tt + 1, T - 1)
        p_next = np.where(tt + 1 < T, self.pid[nxt, dd], -1)
        hazard = Rows(F).term(p_next, 1.0)
        self.cr(hazard, tt, kk, -1.0, np.arange(F))
        self.cr(hazard, lt, lk, 1.0, lr)
        self._free_rows(tt, kk, p_next, (lr, lt, lk))
        return hazard, np.stack([tt, dd, kk], axis=1)

    def _free_rows(self, tt: np.ndarray, kk: np.ndarray, p_next: np.ndarray, later: tuple[np.ndarray, ...]) -> None:
        """FREE only where the hazard count is 0: Checkmate's (7c) split into one row per term, no (7b).

        Checkmate's (7c) ``kappa FREE + hazard <= kappa - 1`` lets the LP relaxation free a fraction of a value
        it keeps (FREE up to (kappa - 1) / kappa with the value kept and read later); the split rows
        ``FREE <= CR[t, k]``, ``FREE + P[t + 1, d] <= 1`` and ``FREE + CR[t, j] <= 1`` for each later reader j say the
        same on integers and force FREE = 0 whenever the value is kept or read on, so the relaxation pays for the
        memory it holds. (7b) (FREE = 1 when the count is 0) is left out: a free only lowers memory rows, so a
        solution that skips one stays valid (its schedule, freed eagerly, peaks no higher) and one that takes it
        costs the same; the hazard rows (``hazard``) still give the hints' FREE values.
        """
        F = tt.size
        free = self.m.bool_block("FREE", F).cols
        ran = Rows(F).term(free, 1.0)
        self.cr(ran, tt, kk, -1.0, np.arange(F)).add_to(self.m, ub=0.0)
        kept = np.flatnonzero(p_next >= 0)
        Rows(kept.size).term(free[kept], 1.0).term(p_next[kept], 1.0).add_to(self.m, ub=1.0)
        lr, lt, lk = later
        read_on = Rows(lr.size).term(free[lr], 1.0)
        self.cr(read_on, lt, lk, 1.0, np.arange(lr.size)).add_to(self.m, ub=1.0)

    def _memory(self, free: np.ndarray) -> tuple[Rows, np.ndarray, np.ndarray, Rows]:
        """U recurrence with produced bytes, frees, phantoms (IF/IB, SP in "fb" form); memory and save rows."""
        h, T = self.h, self.T
        cells = int(self.u_mask.sum())
        cap = self.capacity
        U = (self.m.int_block if self.integral else self.m.cont_block)("U", cells, 0, cap)
        uid = index_of(self.u_mask)
        stage, node = np.nonzero(self.u_mask)
        staged = StageCells.of(self.u_mask)
        cell, stage_first = np.arange(cells), staged.stage_first
        produced = np.bincount(h.producer, weights=self.size, minlength=T)
        step = Rows(cells)
        self.cr(step, stage, node, produced[node], cell)
        tt, qq = np.nonzero(self.r_mask)
        step.term(self.rid[tt, qq], self.phantom[qq], rows=uid[tt, self.opt_node[qq]])
        pt, pd = np.nonzero(self.p_mask)
        step.term(self.pid[pt, pd], self.size[pd], rows=stage_first[pt])
        for f, b in h.layers:  # SP[t] = R[F, F, o] for F < t <= B
            if b < 0:
                continue
            fq = np.arange(self.opt_ptr[f], self.opt_ptr[f + 1] - 1)
            ts = np.arange(f + 1, b + 1)
            tq, oq = np.repeat(ts, fq.size), np.tile(fq, ts.size)
            step.term(self.rid[f, oq], self.phantom[oq], rows=stage_first[tq])
        ft, fd, fk = free.T
        subtract_frees(step, staged, self.m.block("FREE").cols, ft, uid[ft, fk], self.size[fd])
        const = add_recurrence(self.m, U, step, staged, h.graph.fixed_mem / self.mem_scale)
        on = self.opts.correction != "off"
        corrected = np.array([bool(p.profile) and on for node in h.parts for p in node])
        node_corrected = np.zeros(T, dtype=bool)
        node_corrected[self.opt_node[corrected]] = True
        plain = ~node_corrected[self.opt_node[qq]]
        cell_of = uid[tt, self.opt_node[qq]]
        heavy = np.flatnonzero(np.bincount(cell_of[plain], weights=self.overhead[qq[plain]] > 0, minlength=cells))
        pick = np.full(cells, -1)
        pick[heavy] = np.arange(heavy.size)
        keep = plain & (pick[cell_of] >= 0)
        rows = Rows(heavy.size).term(U.cols[heavy], 1.0)
        rows.term(self.rid[tt[keep], qq[keep]], self.overhead[qq[keep]], rows=pick[cell_of[keep]])
        overhead = self._corrections(rows, uid, U, free, np.flatnonzero(corrected))
        overhead.add_to(self.m, ub=cap)
        if self.opts.save is not None and h.loss >= 0:
            in_loss = np.flatnonzero(stage == h.loss)
            g = byte_gcd(h.graph)
            save = (int(self.opts.save) // g + (0.0 if self.integral else 0.5)) * g / self.mem_scale
            Rows(in_loss.size).term(U.cols[in_loss], 1.0).add_to(self.m, ub=save)
        return step, const, staged.first, overhead

    def _corrections(self, rows: Rows, uid: np.ndarray, U: Any, free: np.ndarray, options: np.ndarray) -> Rows:
        """Append the rows (10c) of every corrected option to ``rows`` (a new batch with the extra rows)."""
        h = self.h
        parts = [p for node in h.parts for p in node]
        data_id = {int(v): d for d, v in enumerate(h.data_node.tolist())}
        ft, fd, fk = free.T
        free_cols = self.m.block("FREE").cols
        free_at: dict[tuple[int, int], np.ndarray] = {}
        order = np.lexsort((ft, fk, fd))
        keys = fd[order] * self.T + fk[order]
        bounds = np.flatnonzero(np.diff(keys)) + 1
        for chunk in np.split(order, bounds) if order.size else []:
            col = np.full(self.T, -1, dtype=np.int64)
            col[ft[chunk]] = free_cols[chunk]
            free_at[(int(fd[chunk[0]]), int(fk[chunk[0]]))] = col
        r0, c0, v0 = rows.arrays()
        all_r, all_c, all_v = [r0], [c0], [v0]
        count = rows.count
        none = np.full(self.T, -1, dtype=np.int64)
        for q in options.tolist():
            k = int(self.opt_node[q])
            ts = np.flatnonzero(self.r_mask[:, q])
            if ts.size == 0:
                continue
            for m_i, freed, pending in parts[q].profile:
                ids = count + np.arange(ts.size)
                pend = sum(float(self.size[data_id[v]]) for v in pending)
                all_r += [ids, ids]
                all_c += [U.cols[uid[ts, k]], self.rid[ts, q]]
                all_v += [np.ones(ts.size), np.full(ts.size, m_i / self.mem_scale - pend)]
                for v in freed:
                    d = data_id[v]
                    cols = free_at.get((d, k), none)[ts]
                    ok = cols >= 0
                    all_r.append(ids[ok])
                    all_c.append(cols[ok])
                    all_v.append(np.full(int(ok.sum()), -float(self.size[d])))
                count += ts.size
        result = Rows(count)
        return result.term(np.concatenate(all_c), np.concatenate(all_v), rows=np.concatenate(all_r))


HILP_LEVEL = HilpLevel()

__all__ = ["HILP_LEVEL", "HilpDeferred", "HilpLevel", "HilpModel", "HilpOptions"]
