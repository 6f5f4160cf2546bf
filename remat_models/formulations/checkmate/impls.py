"""Checkmate with operator implementations (spec A.6): a linear generalization of the Checkmate MILP.

Built on the Checkmate model of the graph (whose edges are the union of every implementation's
reads), then changed through the model's named row batches:

- ``DELTA[t, k, l]`` picks the implementation of each computation of a node with several
  (``sum_l DELTA = R``); elsewhere DELTA is R.
- ``rho[t, i, k] = sum of DELTA[t, k, l] over the impls l of k that read i`` ("k actually reads i")
  replaces R[t, k] in the dependency rows (1b) and in the hazard counts (7b)-(7c) of the frees.
- In place (k over u): ``IP[t, k] <= FREE[t, u, k]`` (u is freed after k anyway); the U recurrence
  allocates ``M_k (R - IP)`` at k and the step after k frees ``M_u (FREE - IP)``.
- Workspace rows ``U + sum_l c_l DELTA <= budget``; objective ``sum_l tau_l DELTA`` (recompute cost
  in the stages after a node's first computation, staged model).

Aux values (a ReLU's sign mask) take no position and no stage: the Checkmate model is built over
the graph without them (``core_graph``; its order is the graph's order without aux nodes, as in
``exhaustive_optimum(..., "staged")``), and each aux value a of producer p gets

- ``AUX_S[t, a]`` (a resident when stage t starts, t after p's first stage), produced in stage t
  when ``A[t, a] = sum of DELTA[t, p, l] over the impls l of p with a`` is 1;
- dependencies ``rho[t, a, k] <= A[t, a] + AUX_S[t, a]`` for every reader k, carry
  ``AUX_S[t + 1, a] <= AUX_S[t, a] + A[t, a]``;
- ``AUX_FREE[t, a, k]`` through the hazard count ``(1 - rho[t, a, k]) + AUX_S[t + 1, a] + sum_{j > k}
  rho[t, a, j]``;
- U terms: ``+ M_a AUX_S`` at a stage's first cell, ``+ M_a A`` at p and ``- M_a AUX_FREE`` after k;
- ``AUX_FREE[t, a, p]`` (a freed right after p: no reader in the stage) and ``PRODUCER_FREE[t, p]`` (p
  freed right after it runs, when it is recomputed for its aux values only), the same way.

In an integer-memory model an aux byte count that is not a multiple of the memory unit (the gcd of
the other byte counts) is rounded up, which is safe but may miss the optimum; the workspaces of
implementations other than 0 are rounded the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.impls import default_nodes, default_renumbering, kept_graph
from remat_models.core.schedule import Compute, Free, Schedule, Step
from remat_models.errors import ConfigurationError
from remat_models.formulations.base import BuiltModel
from remat_models.formulations.checkmate.formulation import Checkmate, CheckmateModel, CheckmateOptions
from remat_models.formulations.scaling import Units, scale_costs
from remat_models.formulations.staged_memory import recurrence_values
from remat_models.model.index import IndexMap

log = logging.getLogger(__name__)


@dataclass
class CheckmateImplsModel(CheckmateModel):
    """The Checkmate model with implementation columns: ``delta[c]`` lists the columns of R cell c's impls."""

    delta: list[list[int]] | None = None  # per R cell (row-major): the column of each impl (R's own for one impl)
    workspace_rows: tuple[np.ndarray, list[list[float]]] | None = None  # (cells, per-impl workspace in units)
    aux_s: np.ndarray | None = None  # (K, 2): stage, aux node of each AUX_S cell

    def impls_of(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """The chosen implementation of every R cell."""
        x = self.model.flatten(dict(values), fill=0.0)
        assert self.delta is not None
        return np.array([int(np.argmax(x[cols])) if len(cols) > 1 else 0 for cols in self.delta], dtype=np.int64)

    def peak_bound(self, values: Mapping[str, np.ndarray]) -> float:
        """Max over cells of U plus the workspace of the implementation computed there, in bytes."""
        x = self.model.flatten(dict(values), fill=0.0)
        assert self.delta is not None
        workspace = np.zeros(len(self.delta))
        cells, per_impl = self.workspace_rows or (np.empty(0, np.int64), [])
        for c, ws in zip(cells.tolist(), per_impl, strict=True):
            workspace[c] = float(np.dot(ws, x[self.delta[c]]))
        during = x[self.model.block("U").cols] + workspace
        return float(during.max()) * self.mem_scale if during.size else 0.0


class CheckmateImpls(Checkmate):
    """Checkmate's MILP with implementation choice (in place, reads, workspace, cost)."""

    name: ClassVar[str] = "checkmate-impls"
    supports_impls: ClassVar[bool] = True
    overlap_paging: ClassVar[bool] = False  # the overlapped clocks do not model implementation choice

    def build(
        self, graph: Graph, budget: int, options: CheckmateOptions | Mapping[str, Any] | None = None
    ) -> CheckmateImplsModel:
        """Build Checkmate's model of ``graph`` (without its aux nodes) and add the implementation choice to it."""
        opts = self.options(options)
        keep = default_nodes(graph)
        if not graph.n_aux:
            base = super().build(graph, budget, opts)
        else:
            core = core_graph(graph)
            if opts.order is not None:
                new_index = np.full(graph.n, -1, dtype=np.int64)
                new_index[keep] = np.arange(keep.size)
                order = new_index[np.asarray(opts.order, dtype=np.int64)]
                opts = replace(opts, order=tuple(int(v) for v in order[order >= 0]))
            base = super().build(core, budget, opts)
        built = CheckmateImplsModel(**{f: getattr(base, f) for f in base.__dataclass_fields__})
        built.formulation = self.name
        edges = graph.edges
        if graph.n_aux:
            built.graph, built.order, edges = graph, keep[base.order], keep[base.graph.edges]
            m = built.model
            for index in list(m.indexes.values()):
                m.set_index(_relabel(index, keep, graph))
            for name, hook in list(built.hooks.items()):
                if isinstance(hook, IndexMap):
                    built.hooks[name] = _relabel(hook, keep, graph)
        _Impls(built, edges).apply()
        return built

    def sequence(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> list[int | Step]:
        """Algorithm 1's row-major scan of R, each computation with its implementation."""
        cm = _model(built)
        R, _ = cm.matrices(values)
        impls = cm.impls_of(values)
        stage, pos = np.nonzero(cm.r_mask)
        chosen = R[stage, pos]
        return [Compute(int(cm.order[p]), int(li)) for p, li in zip(pos[chosen], impls[chosen], strict=True)]

    def _hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        return _hint_values(_model(built), schedule)


def core_graph(graph: Graph) -> Graph:
    """``graph`` without its aux nodes: edges are every implementation's reads of non-aux nodes.

    Node i is ``default_nodes(graph)[i]``; the order is the graph's order without the aux nodes.
    """
    keep, new_index = default_renumbering(graph)
    edges = new_index[graph.edges]
    return kept_graph(graph, keep, new_index, edges[(edges >= 0).all(axis=1)])


def _relabel(index: IndexMap, keep: np.ndarray, graph: Graph) -> IndexMap:
    """An index map of the core graph's model on the graph's own node ids (axes "node" and "consumer")."""
    nodes = ("node", "consumer")
    labels = index.labels or (None,) * len(index.axes)
    return replace(
        index,
        coords=tuple(keep[c] if a in nodes else c for a, c in zip(index.axes, index.coords, strict=True)),
        shape=tuple(graph.n if a in nodes else s for a, s in zip(index.axes, index.shape, strict=True)),
        labels=tuple(graph.names if a in nodes else x for a, x in zip(index.axes, labels, strict=True)),
    )


def _model(built: BuiltModel) -> CheckmateImplsModel:
    if not isinstance(built, CheckmateImplsModel):
        raise ConfigurationError(f"expected a model built by checkmate-impls, got {type(built).__name__}")
    return built


class _Impls:
    """Adds DELTA and rewrites the rows of a built Checkmate model (see the module docstring)."""

    def __init__(self, built: CheckmateImplsModel, edges: np.ndarray) -> None:
        self.b = built
        self.m = built.model
        self.table = built.graph.impl_table
        self.edges = edges  # the model's edges (between non-aux nodes), in the order its rows were built
        self.position = np.full(built.graph.n, -1, dtype=np.int64)
        self.position[built.order] = np.arange(built.order.size)
        self.stage, self.pos = np.nonzero(built.r_mask)
        self.cell = np.full(built.r_mask.shape, -1, dtype=np.int64)
        self.cell[built.r_mask] = np.arange(self.stage.size)
        self.r_cols = self.m.block("R").cols

    def n_impls(self, p: int) -> int:
        return 1 if self.table is None else len(self.table.impls[int(self.b.order[p])])

    def reads(self, p: int, li: int) -> set[int]:
        v = int(self.b.order[p])
        reads = self.b.graph.preds(v).tolist() if self.table is None else self.table.reads[v][li]
        return {int(self.position[u]) for u in reads if self.position[u] >= 0}

    def apply(self) -> None:
        cells = self.stage.size
        multi = [c for c in range(cells) if self.n_impls(int(self.pos[c])) > 1]
        block = self.m.bool_block("DELTA", int(sum(self.n_impls(int(self.pos[c])) for c in multi)))
        delta: list[list[int]] = [[int(self.r_cols[c])] for c in range(cells)]
        start = block.offset
        for c in multi:
            k = self.n_impls(int(self.pos[c]))
            delta[c] = list(range(start, start + k))
            start += k
        self.b.delta = delta
        sel_rows = np.repeat(np.arange(len(multi)), [len(delta[c]) + 1 for c in multi])
        sel_cols = np.concatenate([[*delta[c], int(self.r_cols[c])] for c in multi]) if multi else np.empty(0)
        sel_coefs = np.concatenate([[*([1.0] * len(delta[c])), -1.0] for c in multi]) if multi else np.empty(0)
        self.m.add_rows(sel_rows, sel_cols, sel_coefs, lb=0.0, ub=0.0, name="impl_selection")  # sum_l DELTA = R
        self.rho = self._rho(multi)
        self._dependencies()
        self._hazards()
        self._inplace()
        self._workspace()
        self._objective()
        if self.table is not None and self.table.n_aux:
            _Aux(self).apply()

    def _rho(self, multi: list[int]) -> dict[tuple[int, int], tuple[list[int], list[float]]]:
        """(cell, input position) -> (cols, coefs) of ``rho - R`` for nodes with several impls."""
        rho: dict[tuple[int, int], tuple[list[int], list[float]]] = {}
        for c in multi:
            p = int(self.pos[c])
            for i in set().union(*(self.reads(p, li) for li in range(self.n_impls(p)))):
                cols = [col for li, col in enumerate(self.b.delta[c]) if i in self.reads(p, li)]
                rho[(c, i)] = ([int(self.r_cols[c]), *cols], [-1.0, *([1.0] * len(cols))])
        return rho

    def _dependencies(self) -> None:
        """(1b): R[t, k] <= R[t, i] + S[t, i] becomes rho[t, i, k] <= R[t, i] + S[t, i]."""
        b = self.b
        ei, ek = self.position[self.edges[:, 0]], self.position[self.edges[:, 1]]
        tt, ee = np.nonzero(b.r_mask[:, ek])
        rows, cols, coefs = [], [], []
        for r, (t, e) in enumerate(zip(tt.tolist(), ee.tolist(), strict=True)):
            change = self.rho.get((int(self.cell[t, ek[e]]), int(ei[e])))
            if change is not None:
                rows += [r] * len(change[0])
                cols += change[0]
                coefs += change[1]
        self.m.add_terms("dependencies", rows, cols, coefs)

    def _hazards(self) -> None:
        """(7b)-(7c): the hazard count uses rho for the consumer k and for every later reader j of i."""
        b = self.b
        ei, ek = self.position[self.edges[:, 0]], self.position[self.edges[:, 1]]
        users: dict[int, list[int]] = {}
        for i, k in zip(ei.tolist(), ek.tolist(), strict=True):
            users.setdefault(i, []).append(k)
        rows, cols, coefs = [], [], []
        for f, (t, i, k) in enumerate(b.free.tolist()):
            if i == k:
                continue
            terms = [(k, -1.0)] + [(j, 1.0) for j in users.get(i, []) if j > k]
            for j, sign in terms:
                c = int(self.cell[t, j])
                change = self.rho.get((c, i)) if c >= 0 else None
                if change is not None:
                    rows += [f] * len(change[0])
                    cols += change[0]
                    coefs += [sign * x for x in change[1]]
        for batch in ("free_lower", "free_upper"):
            self.m.add_terms(batch, rows, cols, coefs)

    def _inplace(self) -> None:
        """IP <= FREE[t, u, k]; U allocates M_k (R - IP) at k and frees M_u (FREE - IP) after it."""
        b, table = self.b, self.table
        if table is None:
            return
        free_row = {(t, i, k): f for f, (t, i, k) in enumerate(b.free.tolist())}
        free_cols = self.m.block("FREE").cols
        mem = b.graph.mem[b.order] / b.mem_scale
        ip_rows, ip_cols, ip_coefs = [], [], []
        mem_rows, mem_cols, mem_coefs = [], [], []
        n_ip = 0
        for c in range(self.stage.size):
            t, k = int(self.stage[c]), int(self.pos[c])
            v = int(b.order[k])
            by_target: dict[int, list[int]] = {}
            for li, col in enumerate(b.delta[c]):
                if self.n_impls(k) > 1 and table.inplace[v][li] >= 0:
                    by_target.setdefault(int(self.position[table.inplace[v][li]]), []).append(col)
            for u, cols in by_target.items():
                f = free_row.get((t, u, k))
                if f is None:  # no FREE cell: u is kept (a graph output in the last stage): no in place
                    ip_rows += [n_ip] * len(cols)
                    ip_cols += cols
                    ip_coefs += [1.0] * len(cols)
                else:
                    ip_rows += [n_ip] * (len(cols) + 1)
                    ip_cols += [*cols, int(free_cols[f])]
                    ip_coefs += [*([1.0] * len(cols)), -1.0]
                n_ip += 1
                mem_rows += [c] * len(cols)
                mem_cols += cols
                mem_coefs += [float(mem[k])] * len(cols)  # step -= M_k IP (rows hold -step)
                if c + 1 < self.stage.size and self.stage[c + 1] == t:
                    mem_rows += [c + 1] * len(cols)
                    mem_cols += cols
                    mem_coefs += [-float(mem[u])] * len(cols)  # step += M_u IP
        self.m.add_rows(ip_rows, ip_cols, ip_coefs, lb=-np.inf, ub=0.0, name="inplace")
        self.m.add_terms("memory", mem_rows, mem_cols, mem_coefs)

    def _workspace(self) -> None:
        """U + sum_l c_l DELTA <= capacity on every cell where some implementation has a workspace."""
        b, table = self.b, self.table
        unit = b.mem_scale
        integral = float(b.capacity).is_integer()

        def units(nbytes: int) -> float:
            return float(np.ceil(nbytes / unit)) if integral else nbytes / unit

        hook = b.hooks.get("workspace")
        existing = {}
        if hook is not None:
            for r, (t, v) in enumerate(zip(hook.coords[0].tolist(), hook.coords[1].tolist(), strict=True)):
                existing[int(self.cell[t, self.position[v]])] = r
        cells, per_impl = [], []
        rows, cols, coefs = [], [], []
        new_rows, new_cols, new_coefs, n_new = [], [], [], 0
        u_cols = self.m.block("U").cols
        for c in range(self.stage.size):
            v = int(b.order[self.pos[c]])
            ws = [int(i.workspace) for i in table.impls[v]] if table is not None else [int(b.graph.workspace[v])]
            if max(ws) == 0:
                continue
            cells.append(c)
            per_impl.append([units(w) for w in ws])
            if len(b.delta[c]) == 1:
                continue  # Checkmate's own workspace row covers it
            if c in existing:
                r = existing[c]
                rows += [r] * (len(ws) + 1)
                cols += [int(self.r_cols[c]), *b.delta[c]]
                coefs += [-units(int(b.graph.workspace[v])), *(units(w) for w in ws)]
            else:
                new_rows += [n_new] * (len(ws) + 1)
                new_cols += [int(u_cols[c]), *b.delta[c]]
                new_coefs += [1.0, *(units(w) for w in ws)]
                n_new += 1
        if rows:
            self.m.add_terms("workspace", rows, cols, coefs)
        self.m.add_rows(new_rows, new_cols, new_coefs, lb=-np.inf, ub=b.capacity, name="impl_workspace")
        b.workspace_rows = (np.asarray(cells, dtype=np.int64), per_impl)

    def _objective(self) -> None:
        """Every computation costs its implementation's (recompute) cost; units rescaled over all impl costs."""
        b, table = self.b, self.table
        cols, costs = [], []
        for c in range(self.stage.size):
            t, p = int(self.stage[c]), int(self.pos[c])
            v = int(b.order[p])
            again = b.options.staged and t > p
            impls = table.impls[v] if table is not None else None
            for li, col in enumerate(b.delta[c]):
                cols.append(col)
                costs.append(float(b.graph.cost[v]) if impls is None else impls[li].step_cost(again))
        scaled, unit, exact = scale_costs(np.asarray(costs), b.options.cost_precision)
        self.m.set_objective(np.asarray(cols, dtype=np.int64), scaled.astype(np.float64))
        b.units = Units(cost_unit=unit, mem_unit=b.units.mem_unit, cost_exact=exact)


class _Aux:
    """Adds the aux values of a graph with implementations: AUX_S, AUX_FREE and their rows (module docstring)."""

    def __init__(self, impls: _Impls) -> None:
        self.i = impls
        self.b, self.m = impls.b, impls.m
        assert impls.table is not None
        self.table = impls.table
        self.T = self.b.n_stages
        self.stage_first = np.searchsorted(impls.stage, np.arange(self.T))
        self.aux = np.flatnonzero(self.table.aux_of >= 0).tolist()

    def units(self, a: int) -> float:
        nbytes, unit = int(self.b.graph.mem[a]), self.b.mem_scale
        if not self.b.options.integral_memory:
            return nbytes / unit
        if nbytes % unit:
            log.debug("aux value %r of %d bytes rounded up to whole memory units", self.b.graph.names[a], nbytes)
        return float(np.ceil(nbytes / unit))

    def produce(self, a: int, t: int) -> list[int]:
        """Columns of A[t, a]: the impls of a's producer that produce a, computed in stage t."""
        p = int(self.table.aux_of[a])
        c = int(self.i.cell[t, self.i.position[p]])
        if c < 0:
            return []
        return [col for li, col in enumerate(self.b.delta[c]) if a in self.table.impls[p][li].aux]

    def readers(self, a: int) -> list[int]:
        """Positions of the nodes some implementation of which reads a, increasing."""
        p = int(self.table.aux_of[a])
        found = []
        for v in self.b.graph.succs(a).tolist():
            if self.i.position[v] <= self.i.position[p]:
                names = self.b.graph.names
                raise ConfigurationError(
                    f"checkmate-impls: {names[v]!r} reads aux value {names[a]!r} but comes before its producer "
                    f"{names[p]!r} in the order"
                )
            found.append(int(self.i.position[v]))
        return sorted(found)

    def rho(self, a: int, t: int, k: int) -> list[int]:
        """Columns of rho[t, a, k] (the impls of node k reading a, computed in stage t)."""
        c = int(self.i.cell[t, k])
        if c < 0:
            return []
        v = int(self.b.order[k])
        return [col for li, col in enumerate(self.b.delta[c]) if a in self.table.reads[v][li]]

    def apply(self) -> None:
        b, m, T = self.b, self.m, self.T
        position = self.i.position
        s_cells = [(t, a) for a in self.aux for t in range(int(position[self.table.aux_of[a]]) + 1, T)]
        s_block = m.bool_block("AUX_S", len(s_cells))
        s_col = {cell: s_block.offset + j for j, cell in enumerate(s_cells)}
        b.aux_s = np.asarray(s_cells, dtype=np.int64).reshape(-1, 2)
        dep: list[list[tuple[int, float]]] = []
        carry: list[list[tuple[int, float]]] = []
        frees: list[tuple[int, int, int, list[tuple[int, float]], int]] = []  # t, a, k, hazard terms, kappa
        for a in self.aux:
            pp = int(position[self.table.aux_of[a]])
            readers = self.readers(a)
            for t in range(pp + 1, T):  # AUX_S[t] <= AUX_S[t - 1] + A[t - 1]
                terms = [(s_col[(t, a)], 1.0)] + [(col, -1.0) for col in self.produce(a, t - 1)]
                carry.append(terms + ([(s_col[(t - 1, a)], -1.0)] if t - 1 > pp else []))
            for t in range(pp, T):
                s_next = [(s_col[(t + 1, a)], 1.0)] if t + 1 < T else []
                for r, k in enumerate(readers):  # rho <= A + AUX_S; the free of a after reader k
                    own = self.rho(a, t, k)
                    if not own:
                        continue
                    terms = [(col, 1.0) for col in own] + [(col, -1.0) for col in self.produce(a, t)]
                    dep.append(terms + ([(s_col[(t, a)], -1.0)] if t > pp else []))
                    later = [self.rho(a, t, j) for j in readers[r + 1 :]]
                    hazard = [(col, -1.0) for col in own] + s_next + [(col, 1.0) for cols in later for col in cols]
                    frees.append((t, a, k, hazard, 1 + len(s_next) + sum(1 for cols in later if cols)))
                produced = self.produce(a, t)
                if produced:  # a freed right after its producer: no reader in the stage
                    readers_t = [self.rho(a, t, j) for j in readers]
                    hazard = [(col, -1.0) for col in produced] + s_next
                    hazard += [(col, 1.0) for cols in readers_t for col in cols]
                    frees.append((t, a, pp, hazard, 1 + len(s_next) + sum(1 for cols in readers_t if cols)))
        m.add_rows(*_arrays(dep), ub=0.0, name="aux_dependencies")
        m.add_rows(*_arrays(carry), ub=0.0, name="aux_carry")
        self._frees(frees, s_col)
        self._producer_frees()

    def _producer_frees(self) -> None:
        """PRODUCER_FREE[t, p]: an aux producer p freed right after it runs (computed for its aux values only).

        Checkmate frees a value only after one of its readers; a producer recomputed for its sign
        mask alone has none in the stage. Hazard: ``(1 - R[t, p]) + S[t + 1, p] + sum_j rho[t, p, j]``.
        """
        b, i = self.b, self.i
        position, T = i.position, self.T
        succs: dict[int, list[int]] = {}
        for u, k in zip(position[i.edges[:, 0]].tolist(), position[i.edges[:, 1]].tolist(), strict=True):
            succs.setdefault(u, []).append(k)
        s_rows = np.full(b.s_mask.shape, -1, dtype=np.int64)
        s_rows[b.s_mask] = self.m.block("S").cols
        cells, hazards, kappa = [], [], []
        for p in sorted({int(position[self.table.aux_of[a]]) for a in self.aux}):
            for t in range(p, T):
                c = int(i.cell[t, p])
                if c < 0:
                    continue
                s_next = [(int(s_rows[t + 1, p]), 1.0)] if t + 1 < T else []
                readers = [self._reads(t, p, j) for j in succs.get(p, [])]
                hazard = [(int(i.r_cols[c]), -1.0), *s_next, *((col, 1.0) for cols in readers for col in cols)]
                cells.append((t, p))
                hazards.append(hazard)
                kappa.append(1.0 + len(s_next) + sum(1 for cols in readers if cols))
        block = self.m.bool_block("PRODUCER_FREE", len(cells))
        k = np.asarray(kappa)
        self.m.add_rows(
            *_arrays([[(block.offset + f, 1.0), *h] for f, h in enumerate(hazards)]), lb=0.0, name="producer_free_lower"
        )
        self.m.add_rows(
            *_arrays([[(block.offset + f, k[f]), *h] for f, h in enumerate(hazards)]),
            ub=k - 1.0,
            name="producer_free_upper",
        )
        mem = b.graph.mem[b.order] / b.mem_scale
        rows, cols, coefs = [], [], []
        for f, (t, p) in enumerate(cells):
            after = int(i.cell[t, p]) + 1
            if after < i.stage.size and i.stage[after] == t:
                rows.append(after)
                cols.append(block.offset + f)
                coefs.append(float(mem[p]))  # step -= M_p PRODUCER_FREE (rows hold -step)
        self.m.add_terms("memory", rows, cols, coefs)

    def _reads(self, t: int, u: int, j: int) -> list[int]:
        """Columns of rho[t, u, j] for a non-aux value u (R[t, j] when every impl of j reads u)."""
        c = int(self.i.cell[t, j])
        if c < 0:
            return []
        change = self.i.rho.get((c, u))
        return [int(self.i.r_cols[c])] if change is None else change[0][1:]

    def _frees(self, frees: list[tuple[int, int, int, list[tuple[int, float]], int]], s_col: dict) -> None:
        """AUX_FREE through (7b)-(7c) and the U terms of aux values (rows of "memory" hold minus the step)."""
        b, m = self.b, self.m
        block = m.bool_block("AUX_FREE", len(frees))
        kappa = np.array([float(f[4]) for f in frees])
        lower = [[(block.offset + f, 1.0), *hazard] for f, (_, _, _, hazard, _) in enumerate(frees)]
        upper = [[(block.offset + f, kappa[f]), *hazard] for f, (_, _, _, hazard, _) in enumerate(frees)]
        mem_rows, mem_cols, mem_coefs = [], [], []
        stage = self.i.stage
        for f, (t, a, k, _, _) in enumerate(frees):
            after = int(self.i.cell[t, k]) + 1
            if after < stage.size and stage[after] == t:
                mem_rows.append(after)
                mem_cols.append(block.offset + f)
                mem_coefs.append(self.units(a))
        m.add_rows(*_arrays(lower), lb=0.0, name="aux_free_lower")
        m.add_rows(*_arrays(upper), ub=kappa - 1.0, name="aux_free_upper")
        for (t, a), col in s_col.items():
            mem_rows.append(int(self.stage_first[t]))
            mem_cols.append(col)
            mem_coefs.append(-self.units(a))
        for a in self.aux:
            p = int(self.table.aux_of[a])
            for t in range(self.T):
                for col in self.produce(a, t):
                    mem_rows.append(int(self.i.cell[t, self.i.position[p]]))
                    mem_cols.append(col)
                    mem_coefs.append(-self.units(a))
        m.add_terms("memory", mem_rows, mem_cols, mem_coefs)
        names = b.graph.names
        if s_col:
            st = b.aux_s.T
            m.set_index(
                IndexMap.sparse(
                    "AUX_S",
                    ("stage", "node"),
                    (self.T, b.graph.n),
                    (st[0], st[1]),
                    np.asarray(list(s_col.values()), dtype=np.int64),
                    labels=(None, names),
                )
            )
        if frees:
            ft, fa, fk = (np.asarray(x, dtype=np.int64) for x in zip(*(f[:3] for f in frees), strict=True))
            m.set_index(
                IndexMap.sparse(
                    "AUX_FREE",
                    ("stage", "node", "consumer"),
                    (self.T, b.graph.n, b.graph.n),
                    (ft, fa, b.order[fk]),
                    block.cols,
                    labels=(None, names, names),
                )
            )


def _arrays(rows: list[list[tuple[int, float]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COO arrays of rows given as lists of (column, coefficient)."""
    ids = np.repeat(np.arange(len(rows)), [len(r) for r in rows]).astype(np.int64)
    terms = [term for r in rows for term in r]
    cols = np.array([c for c, _ in terms], dtype=np.int64)
    return ids, cols, np.array([x for _, x in terms], dtype=np.float64)


def _hint_values(built: CheckmateImplsModel, schedule: Schedule) -> dict[str, np.ndarray]:
    """Values of every block for a staged schedule over the model's order (impls and in place included)."""
    graph, order = built.graph, built.order
    n, T = order.size, built.n_stages
    position = np.full(graph.n, -1, dtype=np.int64)
    position[order] = np.arange(n)
    R = np.zeros(built.r_mask.shape, dtype=bool)
    S = np.zeros(built.s_mask.shape, dtype=bool)
    impl = np.zeros(built.r_mask.shape, dtype=np.int64)
    resident = np.zeros(graph.n, dtype=bool)
    starts = np.zeros((T, graph.n), dtype=bool)  # resident when each stage starts
    t, last, seen = 0, -1, np.zeros(n, dtype=bool)
    for step in schedule.steps:
        if isinstance(step, Free):
            resident[step.node] = False
            continue
        if not isinstance(step, Compute):
            raise ConfigurationError(f"checkmate-impls warm start: unsupported step {step!r}")
        p = int(position[step.node])
        if t >= T or p <= last or p > t:
            raise ConfigurationError(f"checkmate-impls warm start: {graph.names[step.node]!r} out of the stage order")
        if last < 0 and t > 0:
            S[t], starts[t] = resident[order], resident
        R[t, p], impl[t, p] = True, step.impl
        table = graph.impl_table
        if table is not None:
            if table.inplace[step.node][step.impl] >= 0:
                resident[table.inplace[step.node][step.impl]] = False
            resident[list(table.impls[step.node][step.impl].aux)] = True
        resident[step.node] = True
        if p == t and not seen[p]:
            seen[p], t, last = True, t + 1, -1
        else:
            last = p
    if t < n or (R & ~built.r_mask).any():
        raise ConfigurationError("checkmate-impls warm start: not a staged schedule of the model's order")
    m = built.model
    x = np.zeros(m.num_cols)
    x[m.block("R").cols] = R[built.r_mask]
    x[m.block("S").cols] = (S & built.s_mask)[built.s_mask]
    assert built.delta is not None
    cells = impl[built.r_mask]
    chosen = R[built.r_mask]
    for c, cols in enumerate(built.delta):
        if len(cols) > 1 and chosen[c]:
            x[cols[cells[c]]] = 1.0
    if built.aux_s is not None and built.aux_s.size:
        x[m.block("AUX_S").cols] = starts[built.aux_s[:, 0], built.aux_s[:, 1]]
        x[m.block("AUX_FREE").cols] = _row_values(m.rows("aux_free_lower"), x) == -1
        x[m.block("PRODUCER_FREE").cols] = _row_values(m.rows("producer_free_lower"), x) == -1
    # FREE from the (rewritten) hazard rows: FREE + hazard >= 0 with FREE = 0 gives the hazard count minus 1
    hazard = _row_values(m.rows("free_lower"), x)
    x[m.block("FREE").cols] = hazard == -1
    # U from the memory rows: U[c] - U[c-1] - step[c] = const, so with U = 0 the row value is -step[c]
    step = -_row_values(m.rows("memory"), x) + built.memory_const
    x[m.block("U").cols] = recurrence_values(step, built.first_cell)
    return m.split(x)


def _row_values(batch: Any, x: np.ndarray) -> np.ndarray:
    return np.bincount(batch.rows, weights=batch.coefs * x[batch.cols], minlength=batch.num_rows)


CHECKMATE_IMPLS = CheckmateImpls()

__all__ = ["CHECKMATE_IMPLS", "CheckmateImpls", "CheckmateImplsModel"]
