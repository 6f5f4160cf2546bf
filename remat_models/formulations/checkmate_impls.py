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

Graphs with aux values (sign masks) are not supported here (``ConfigurationError``): use ``monet``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from remat_models.errors import ConfigurationError
from remat_models.formulations.base import BuiltModel
from remat_models.formulations.checkmate import Checkmate, CheckmateModel, CheckmateOptions
from remat_models.formulations.scaling import Units, scale_costs
from remat_models.graph import Graph
from remat_models.schedule import Compute, Free, Schedule, Step

log = logging.getLogger(__name__)


@dataclass
class CheckmateImplsModel(CheckmateModel):
    """The Checkmate model with implementation columns: ``delta[c]`` lists the columns of R cell c's impls."""

    delta: list[list[int]] | None = None  # per R cell (row-major): the column of each impl (R's own for one impl)
    workspace_rows: tuple[np.ndarray, list[list[float]]] | None = None  # (cells, per-impl workspace in units)

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

    def build(
        self, graph: Graph, budget: int, options: CheckmateOptions | Mapping[str, Any] | None = None
    ) -> CheckmateImplsModel:
        """Build Checkmate's model of ``graph`` and add the implementation choice to it."""
        if graph.n_aux:
            aux = graph.names[int(np.flatnonzero(graph.aux_of >= 0)[0])]
            raise ConfigurationError(f"checkmate-impls does not model aux values such as {aux!r}; use monet")
        base = super().build(graph, budget, options)
        built = CheckmateImplsModel(**{f: getattr(base, f) for f in base.__dataclass_fields__})
        built.formulation = self.name
        _Impls(built).apply()
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


def _model(built: BuiltModel) -> CheckmateImplsModel:
    if not isinstance(built, CheckmateImplsModel):
        raise ConfigurationError(f"expected a model built by checkmate-impls, got {type(built).__name__}")
    return built


class _Impls:
    """Adds DELTA and rewrites the rows of a built Checkmate model (see the module docstring)."""

    def __init__(self, built: CheckmateImplsModel) -> None:
        self.b = built
        self.m = built.model
        self.table = built.graph.impl_table
        g = built.graph
        n = g.n
        self.position = np.empty(n, dtype=np.int64)
        self.position[built.order] = np.arange(n)
        self.stage, self.pos = np.nonzero(built.r_mask)
        self.cell = np.full(built.r_mask.shape, -1, dtype=np.int64)
        self.cell[built.r_mask] = np.arange(self.stage.size)
        self.r_cols = self.m.block("R").cols

    def n_impls(self, p: int) -> int:
        return 1 if self.table is None else len(self.table.impls[int(self.b.order[p])])

    def reads(self, p: int, li: int) -> set[int]:
        v = int(self.b.order[p])
        reads = self.b.graph.preds(v).tolist() if self.table is None else self.table.reads[v][li]
        return {int(self.position[u]) for u in reads}

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
        g, b = self.b.graph, self.b
        ei, ek = self.position[g.edges[:, 0]], self.position[g.edges[:, 1]]
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
        g = b.graph
        ei, ek = self.position[g.edges[:, 0]], self.position[g.edges[:, 1]]
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


def _hint_values(built: CheckmateImplsModel, schedule: Schedule) -> dict[str, np.ndarray]:
    """Values of every block for a staged schedule over the model's order (impls and in place included)."""
    graph, order = built.graph, built.order
    n, T = graph.n, built.n_stages
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    R = np.zeros(built.r_mask.shape, dtype=bool)
    S = np.zeros(built.s_mask.shape, dtype=bool)
    impl = np.zeros(built.r_mask.shape, dtype=np.int64)
    resident = np.zeros(n, dtype=bool)
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
            S[t] = resident[order]
        R[t, p], impl[t, p] = True, step.impl
        if graph.impl_table is not None and graph.impl_table.inplace[step.node][step.impl] >= 0:
            resident[graph.impl_table.inplace[step.node][step.impl]] = False
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
    # FREE from the (rewritten) hazard rows: FREE + hazard >= 0 with FREE = 0 gives the hazard count minus 1
    hazard = _row_values(m.rows("free_lower"), x)
    x[m.block("FREE").cols] = hazard == -1
    # U from the memory rows: U[c] - U[c-1] - step[c] = const, so with U = 0 the row value is -step[c]
    step = -_row_values(m.rows("memory"), x) + built.memory_const
    total = np.cumsum(step)
    first = built.first_cell
    x[m.block("U").cols] = total - (total[first] - step[first])
    return m.split(x)


def _row_values(batch: Any, x: np.ndarray) -> np.ndarray:
    return np.bincount(batch.rows, weights=batch.coefs * x[batch.cols], minlength=batch.num_rows)


CHECKMATE_IMPLS = CheckmateImpls()

__all__ = ["CHECKMATE_IMPLS", "CheckmateImpls", "CheckmateImplsModel"]
