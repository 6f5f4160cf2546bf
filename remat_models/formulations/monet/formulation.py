"""MONeT (Shah et al., ICLR 2021): joint checkpointing and operator-implementation selection as a 0-1 program.

The program of spec section A.4 on the abstract model, over the layout of ``monet_layout``
(forward positions p, stages t = 0 .. T-1, stage t >= 1 running stage node b_t once):

- ``R[t, p]`` compute/recompute (stage 0: every non-aux forward node, fixed 1), ``S[t, p]`` (t = 1..T)
  kept into stage t, ``DELTA[t, p, l]`` forward implementation (only for nodes with several; else
  R), ``DHAT[t, l]`` implementation of b_t, ``P[t, u]`` present after the stage for in-place
  targets (else R), ``SIGMA[t, i, l] = DHAT[t, l] * S[t+1, i]`` for values read by some but not all
  implementations of b_t (``add_products``: native on CP-SAT, McCormick rows on MILP backends).
- Rows: sel, aux, dep (7a), carry (7b), in-place (15)-(16), backward dependencies (8) by
  ``dep_rule`` ("exact", default: ``DHAT + IP <= P + S[t]`` with the read counted through K; or
  "paper": ``DHAT <= P + S[t+1]``), memory rows m2 (12)/(5)/(11), optional state rows m1 (13),
  backward rows m3 (10), objective (9).

Memory is in units of the gcd of every byte count (exact integers for CP backends); costs are
scaled like Checkmate's. Every decoded schedule is re-simulated by the caller; ``peak_bound`` is
the model's own peak, which is at least the simulated one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Schedule, Step
from remat_models.errors import ConfigurationError
from remat_models.formulations.base import BuiltModel, FormulationBase
from remat_models.formulations.build_deadline import check_build_time
from remat_models.formulations.checkmate.formulation import MAX_CONTINUOUS_CAPACITY
from remat_models.formulations.monet.layout import MonetLayout, monet_layout
from remat_models.formulations.scaling import DEFAULT_PRECISION, Units, gcd_of, scale_costs
from remat_models.model import Model
from remat_models.model.size import check_fits_in_memory

log = logging.getLogger(__name__)

DepRule = Literal["exact", "paper"]


@dataclass(frozen=True)
class MonetOptions:
    """Options of the MONeT program (spec A.4).

    ``tags``: None (every implementation) or the implementation tags allowed besides impl 0
    (MONeT's ablations; an empty set is "no implementation choice"). ``no_recompute``: operator
    selection only (MONeT's ``--ablation``). ``integral_memory`` None follows the backend.
    """

    dep_rule: DepRule = "exact"
    state_rows: bool = True
    tags: frozenset[str] | None = None
    no_recompute: bool = False
    integral_memory: bool | None = None
    cost_precision: float = DEFAULT_PRECISION
    prefix_vars: bool | None = None  # prefix-sum columns in the memory rows; None: when T * P**2 > 1e6

    def validated(self) -> MonetOptions:
        """Self, after checks (``tags`` as a frozenset)."""
        if self.dep_rule not in ("exact", "paper"):
            raise ConfigurationError(f"monet dep_rule must be 'exact' or 'paper', not {self.dep_rule!r}")
        if not 0.0 < self.cost_precision < 1.0:
            raise ConfigurationError(f"monet cost_precision must lie in (0, 1), got {self.cost_precision}")
        if self.tags is not None and not isinstance(self.tags, frozenset):
            tags = [t for t in self.tags.split(",") if t] if isinstance(self.tags, str) else self.tags
            return replace(self, tags=frozenset(str(t) for t in tags)).validated()
        return self


@dataclass
class MemoryRows:
    """Memory rows for ``peak_bound``: LHS terms, the constant part and the R column that activates each row."""

    rows: np.ndarray
    cols: np.ndarray
    coefs: np.ndarray
    const: np.ndarray  # per row, in model units
    active: np.ndarray  # per row: the R column (-1: always active)


@dataclass
class MonetModel(BuiltModel):
    """The built program plus what decoding, hints and ``peak_bound`` need."""

    options: MonetOptions
    layout: MonetLayout
    r_col: np.ndarray  # (T, P) column of R (-1: no cell)
    s_col: np.ndarray  # (T + 1, P) column of S (-1: no cell)
    delta_cols: list[list[list[int]]]  # [t][p] -> column per kept impl (R's column for single-impl nodes)
    dhat_cols: list[list[int]]  # [t] -> column per kept impl of b_t ([] at t = 0)
    memory: MemoryRows
    mem_scale: float
    p_col: np.ndarray  # (T, P) column of P (R's column where P is R; -1: none)
    p_cells: list[tuple[int, int]]  # (t, u) of each P column
    ip: dict[tuple[int, int], list[int]]  # (t, u) -> columns of the impls consuming u in place in stage t
    mem_units: np.ndarray  # output size at each position in memory units
    k_terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # per stage: (position, column, coef) of K
    prefix: tuple[np.ndarray, np.ndarray, np.ndarray] | None  # ASUF, APRE, KPRE columns (T, P + 1), or None

    @property
    def n_stages(self) -> int:
        """T."""
        return self.layout.n_stages

    def peak_bound(self, values: Mapping[str, np.ndarray]) -> float | None:
        """The model's peak in bytes: fixed memory plus the largest active memory row (m1, m2 with R = 1, m3)."""
        x = self.model.flatten(dict(values), fill=0.0)
        mr = self.memory
        lhs = np.bincount(mr.rows, weights=mr.coefs * x[mr.cols], minlength=mr.const.size) + mr.const
        on = (mr.active < 0) | (x[np.maximum(mr.active, 0)] > 0.5)
        return float(lhs[on].max()) * self.mem_scale + self.graph.fixed_mem if on.any() else None

    def choices(self, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, list[list[int]], list[int]]:
        """Dense R (T, P) as bools, the kept-impl index per (t, p) and per stage from a solution."""
        x = self.model.flatten(dict(values), fill=0.0)
        R = np.where(self.r_col >= 0, x[np.maximum(self.r_col, 0)] > 0.5, False)
        impl = [[int(np.argmax(x[cols])) if cols else 0 for cols in row] for row in self.delta_cols]
        stage = [int(np.argmax(x[cols])) if cols else 0 for cols in self.dhat_cols]
        return R, impl, stage

    def impl_choice(self, values: Mapping[str, np.ndarray]) -> dict[tuple[int, str], str]:
        """``{(stage, node name): implementation name}`` of every computation of a solution."""
        return {
            (t, self.graph.names[step.node]): _impl_name(self.graph, step)
            for t, stage in enumerate(_stages(self, values))
            for step in stage
        }


class Monet(FormulationBase):
    """MONeT's 0-1 program: build, decode (stage by stage, impl per step) and warm-start hints."""

    name: ClassVar[str] = "monet"
    window_nodes: ClassVar[int | None] = 360  # larger graphs: windows of a start (planning/lns.py)
    options_type: ClassVar[type] = MonetOptions
    default_backend: ClassVar[str] = "highs"
    integral_option: ClassVar[str | None] = "integral_memory"
    supports_impls: ClassVar[bool] = True  # the planner hands it graphs with implementations as they are

    def build(self, graph: Graph, budget: int, options: MonetOptions | Mapping[str, Any] | None = None) -> MonetModel:
        """Build the program of ``graph`` under ``budget`` bytes."""
        return _Builder(graph, budget, self.options(options)).build()

    def check_size(self, graph: Graph, budget: int, options: Any = None) -> None:
        """Raise ``ModelTooLargeError`` at once if the model could not be built and solved in this machine's memory."""
        _Builder(graph, budget, self.options(options)).check_size()

    def sequence(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> list[int | Step]:
        """Stage 0's forward pass, then per stage its recomputations in forward order and b_t, with impls."""
        return [step for stage in _stages(_monet(built), values) for step in stage]

    def _hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        from remat_models.formulations.monet.hints import hint_values

        return hint_values(_monet(built), schedule)


def _monet(built: BuiltModel) -> MonetModel:
    if not isinstance(built, MonetModel):
        raise ConfigurationError(f"expected a model built by MONeT, got {type(built).__name__}")
    return built


def _impl_name(graph: Graph, step: Compute) -> str:
    return "default" if graph.impls is None else graph.impls[step.node][step.impl].name


def _stages(built: MonetModel, values: Mapping[str, np.ndarray]) -> list[list[Compute]]:
    """The computes of each stage of a solution."""
    lay = built.layout
    R, impl, stage_impl = built.choices(values)
    stages: list[list[Compute]] = []
    for t in range(lay.n_stages):
        steps = [
            Compute(int(lay.forward[p]), lay.f_impls[p][impl[t][p]].index)
            for p in np.flatnonzero(R[t] & ~lay.is_aux).tolist()
        ]
        if t >= 1:
            steps.append(Compute(int(lay.stage_nodes[t - 1]), lay.b_impls[t - 1][stage_impl[t]].index))
        stages.append(steps)
    return stages


class _Terms:
    """Rows collected as (row, col, coef) arrays with bounds; column -1 means absent and is dropped."""

    def __init__(self) -> None:
        self.count = 0
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.lb: list[np.ndarray] = []
        self.ub: list[np.ndarray] = []

    def rows(self, k: int, lb: Any = -np.inf, ub: Any = np.inf) -> np.ndarray:
        """Reserve ``k`` rows with bounds; returns their ids."""
        ids = np.arange(self.count, self.count + k, dtype=np.int64)
        self.count += k
        self.lb.append(np.broadcast_to(np.asarray(lb, dtype=np.float64), (k,)).copy())
        self.ub.append(np.broadcast_to(np.asarray(ub, dtype=np.float64), (k,)).copy())
        return ids

    def add(self, rows: Any, cols: Any, coefs: Any) -> None:
        """Add ``coef * x[col]`` to each row (broadcast)."""
        rows, cols, coefs = (
            np.asarray(rows, dtype=np.int64),
            np.asarray(cols, dtype=np.int64),
            np.asarray(coefs, dtype=np.float64),
        )
        if not rows.shape == cols.shape == coefs.shape:
            rows, cols, coefs = np.broadcast_arrays(rows, cols, coefs)
        keep = cols.ravel() >= 0
        self.parts.append((rows.ravel()[keep], cols.ravel()[keep], coefs.ravel()[keep]))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, coefs) so far."""
        if not self.parts:
            return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
        return tuple(np.concatenate(a) for a in zip(*self.parts, strict=True))  # type: ignore[return-value]

    def add_to(self, model: Model, name: str) -> None:
        """Add every row to ``model`` as batch ``name``."""
        rows, cols, coefs = self.arrays()
        lb = np.concatenate(self.lb) if self.lb else np.empty(0)
        ub = np.concatenate(self.ub) if self.ub else np.empty(0)
        model.add_rows(rows, cols, coefs, lb=lb, ub=ub, name=name)


class _Sums:
    """The sums of the memory rows, written out (dense) or through prefix-sum columns (``prefix_vars``).

    ``stored``: sum of M_i S[t, i] for i >= start; ``kept``: sum of M_i S[t+1, i] for i < end;
    ``read``: sum of M_i K[t, i] for i < end (K's variable part; its constant part is in the row bounds).
    Prefix columns ASUF, APRE, KPRE are defined by recurrences (rows ``prefix``).
    """

    def __init__(self, b: _Builder) -> None:
        self.b = b
        T, P = b.T, b.P
        auto = T * P * P > 1_000_000
        self.prefix = auto if b.opts.prefix_vars is None else bool(b.opts.prefix_vars)
        self.asuf = np.full((T, P + 1), -1, dtype=np.int64)
        self.apre = np.full((T, P + 1), -1, dtype=np.int64)
        self.kpre = np.full((T, P + 1), -1, dtype=np.int64)
        if self.prefix:
            self._columns()

    def _columns(self) -> None:
        b, m, T, P, M = self.b, self.b.m, self.b.T, self.b.P, self.b.M
        total = float(M.sum())
        make = (
            (lambda name, k, lb: m.int_block(name, k, lb=lb, ub=total))
            if b.opts.integral_memory
            else (lambda name, k, lb: m.cont_block(name, k, lb=lb, ub=total))
        )
        k_stages = [t for t in range(1, T) if b.k_terms[t][0].size]
        self.asuf[1:, :P] = make("ASUF", (T - 1) * P, 0.0).cols.reshape(T - 1, P)
        self.apre[:, 1:] = make("APRE", T * P, 0.0).cols.reshape(T, P)
        if k_stages:
            self.kpre[k_stages, 1:] = make("KPRE", len(k_stages) * P, -total).cols.reshape(len(k_stages), P)
        rows = _Terms()
        for t in range(T):
            if t >= 1:  # ASUF[t, j] = M_j S[t, j] + ASUF[t, j + 1]
                r = rows.rows(P, 0.0, 0.0)
                rows.add(r, self.asuf[t, :P], 1.0)
                rows.add(r, self.asuf[t, 1:], -1.0)
                rows.add(r, b.s_col[t], -M)
            r = rows.rows(P, 0.0, 0.0)  # APRE[t, j + 1] = APRE[t, j] + M_j S[t + 1, j]
            rows.add(r, self.apre[t, 1:], 1.0)
            rows.add(r, self.apre[t, :P], -1.0)
            rows.add(r, b.s_col[t + 1], -M)
            ki, kc, kf = b.k_terms[t]
            if ki.size:  # KPRE[t, j + 1] = KPRE[t, j] + M_j (K's variable terms at j)
                r = rows.rows(P, 0.0, 0.0)
                rows.add(r, self.kpre[t, 1:], 1.0)
                rows.add(r, self.kpre[t, :P], -1.0)
                rows.add(r[ki], kc, -kf * M[ki])
        rows.add_to(m, "prefix")

    def stored(self, rows: _Terms, t: int, r: np.ndarray, start: np.ndarray) -> None:
        if self.prefix:
            rows.add(r, self.asuf[t, start], 1.0)
            return
        pos = np.arange(self.b.P)
        rr, ii = np.nonzero(pos[None, :] >= start[:, None])
        rows.add(r[rr], self.b.s_col[t, ii], self.b.M[ii])

    def kept(self, rows: _Terms, t: int, r: np.ndarray, end: np.ndarray) -> None:
        if self.prefix:
            rows.add(r, self.apre[t, end], 1.0)
            return
        pos = np.arange(self.b.P)
        rr, ii = np.nonzero(pos[None, :] < end[:, None])
        rows.add(r[rr], self.b.s_col[t + 1, ii], self.b.M[ii])

    def read(self, rows: _Terms, t: int, r: np.ndarray, end: np.ndarray) -> None:
        if self.prefix:
            rows.add(r, self.kpre[t, end], 1.0)
            return
        ki, kc, kf = self.b.k_terms[t]
        rr, ee = np.nonzero(ki[None, :] < end[:, None])
        rows.add(r[rr], kc[ee], kf[ee] * self.b.M[ki[ee]])


class _Builder:
    """One build of the MONeT program."""

    def __init__(self, graph: Graph, budget: int, opts: MonetOptions) -> None:
        self.graph, self.budget, self.opts = graph, budget, opts
        self.lay = monet_layout(graph, opts.tags)
        self.T, self.P = self.lay.n_stages, self.lay.n_positions
        self.m = Model(f"monet:{graph.name}")
        workspaces = [impl.workspace for group in (*self.lay.f_impls, *self.lay.b_impls) for impl in group]
        g = gcd_of(np.concatenate([graph.mem, workspaces, [graph.fixed_mem]]).astype(np.int64))
        whole = (int(budget) - graph.fixed_mem) // g if budget >= graph.fixed_mem else -1
        if opts.integral_memory:
            self.unit, self.cap = float(g), float(whole)
        else:
            self.unit = float(g) * 2.0 ** max(0, math.ceil(math.log2(max(whole, 1) / MAX_CONTINUOUS_CAPACITY)))
            self.cap = (whole + 0.5) * g / self.unit
        self.M = self.lay.mem / self.unit
        self.G = self.lay.stage_resident / self.unit

    # ------------------------------------------------------------------ blocks
    def check_size(self) -> None:
        """Refuse (``ModelTooLargeError``) a model whose R and S blocks (T x P each) would not fit in memory."""
        where = f"monet on {self.graph.name!r} ({self.T:,} stages x {self.P:,} positions)"
        check_fits_in_memory(where, 2 * self.T * self.P)

    def build(self) -> MonetModel:
        self.check_size()
        for phase in (self._blocks, self._selection, self._dependencies, self._inplace, self._backward):
            check_build_time("monet")  # a build that passes its share of the time limit stops
            phase()
        check_build_time("monet")
        memory = self._memory()
        self._objective()
        log.info(
            "monet model of %s: T=%d, %d positions, %d columns, %d rows, %d nonzeros",
            self.graph.name,
            self.T,
            self.P,
            self.m.num_cols,
            self.m.num_rows,
            self.m.num_nonzeros,
        )
        return MonetModel(
            model=self.m,
            graph=self.graph,
            budget=self.budget,
            units=self.units,
            formulation="monet",
            options=self.opts,
            layout=self.lay,
            r_col=self.r_col,
            s_col=self.s_col,
            delta_cols=self.delta_cols,
            dhat_cols=self.dhat_cols,
            memory=memory,
            mem_scale=self.unit,
            p_col=self.p_col,
            p_cells=self.p_cells,
            ip=self.ip,
            mem_units=self.M,
            k_terms=self.k_terms,
            prefix=self.prefix,
        )

    def _blocks(self) -> None:
        lay, T, P, m = self.lay, self.T, self.P, self.m
        aux = lay.is_aux
        recomputable = self.graph.recomputable[lay.forward]
        producer_ok = np.array(
            [any(p in impl.aux for impl in lay.f_impls[lay.producer[p]]) if aux[p] else True for p in range(P)]
        )
        r_mask = np.zeros((T, P), dtype=bool)
        r_mask[0] = ~aux | producer_ok
        if not self.opts.no_recompute:
            base = recomputable & ~aux
            r_mask[1:] = (base | (aux & producer_ok & recomputable[np.maximum(lay.producer, 0)]))[None, :]
        lb = np.zeros((T, P))
        lb[0] = ~aux
        R = m.int_block("R", int(r_mask.sum()), lb=lb[r_mask], ub=1)
        self.r_col = np.full((T, P), -1, dtype=np.int64)
        self.r_col[r_mask] = R.cols
        S = m.bool_block("S", (T, P))
        self.s_col = np.full((T + 1, P), -1, dtype=np.int64)
        self.s_col[1:] = S.cols
        # DELTA: forward nodes with several impls, where R has a cell
        cells = [(t, p) for t in range(T) for p in range(P) if r_mask[t, p] and len(lay.f_impls[p]) > 1]
        sizes = [len(lay.f_impls[p]) for _, p in cells]
        D = m.bool_block("DELTA", int(sum(sizes)))
        self.delta_cols = [[[] for _ in range(P)] for _ in range(T)]
        start = D.offset
        for (t, p), k in zip(cells, sizes, strict=True):
            self.delta_cols[t][p] = list(range(start, start + k))
            start += k
        for t in range(T):
            for p in range(P):
                if r_mask[t, p] and len(lay.f_impls[p]) == 1:
                    self.delta_cols[t][p] = [int(self.r_col[t, p])]
        H = m.bool_block("DHAT", int(sum(len(impls) for impls in lay.b_impls)))
        self.dhat_cols = [[]]
        start = H.offset
        for impls in lay.b_impls:
            self.dhat_cols.append(list(range(start, start + len(impls))))
            start += len(impls)
        # in-place: IP[t, u] columns, P cells where R[t, u] and IP exist
        self.ip: dict[tuple[int, int], list[int]] = {}
        for t in range(T):
            for v in range(P):
                for k, impl in enumerate(lay.f_impls[v]):
                    if impl.inplace >= 0 and self.delta_cols[t][v]:
                        self.ip.setdefault((t, impl.inplace), []).append(self.delta_cols[t][v][k])
        p_cells = [(t, u) for (t, u) in sorted(self.ip) if self.r_col[t, u] >= 0]
        Pb = m.bool_block("P", len(p_cells))
        self.p_col = self.r_col.copy()
        for (t, u), col in zip(p_cells, Pb.cols.tolist(), strict=True):
            self.p_col[t, u] = col
        self.p_cells = p_cells
        # SIGMA and K per stage
        self.k_terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [(np.empty(0, np.int64),) * 2 + (np.empty(0),)]
        self.k_const = np.zeros((T, P))
        sig_z, sig_b, sig_x = [], [], []
        sigma_cols: list[tuple[int, int, int]] = []
        for t in range(1, T):
            impls = lay.b_impls[t - 1]
            reads = [set(impl.reads.tolist()) for impl in impls]
            union = set().union(*reads)
            inter = set.intersection(*reads)
            for i in sorted(union - inter):
                for k, r in enumerate(reads):
                    if i in r:
                        sigma_cols.append((t, i, k))
        SG = m.bool_block("SIGMA", len(sigma_cols))
        sigma_at = {key: col for key, col in zip(sigma_cols, SG.cols.tolist(), strict=True)}
        for t in range(1, T):
            impls = lay.b_impls[t - 1]
            reads = [set(impl.reads.tolist()) for impl in impls]
            inter = set.intersection(*reads)
            ki, kc, kf = [], [], []
            for i in sorted(inter):
                self.k_const[t, i] = 1.0
                ki.append(i)
                kc.append(self.s_col[t + 1, i])
                kf.append(-1.0)
            for (tt, i, k), col in sigma_at.items():
                if tt != t:
                    continue
                ki += [i, i]
                kc += [self.dhat_cols[t][k], col]
                kf += [1.0, -1.0]
                sig_z.append(col)
                sig_b.append(self.dhat_cols[t][k])
                sig_x.append(self.s_col[t + 1, i])
            self.k_terms.append((np.asarray(ki, np.int64), np.asarray(kc, np.int64), np.asarray(kf)))
        if sig_z:
            m.add_products(sig_z, sig_b, sig_x)

    # -------------------------------------------------------------------- rows
    def _selection(self) -> None:
        lay, rows = self.lay, _Terms()
        for t in range(self.T):
            for p in range(self.P):
                cols = self.delta_cols[t][p]
                if len(cols) > 1:
                    r = rows.rows(1, 0.0, 0.0)
                    rows.add(r, cols, 1.0)
                    rows.add(r, self.r_col[t, p], -1.0)
            if t >= 1:
                r = rows.rows(1, 1.0, 1.0)
                rows.add(r, self.dhat_cols[t], 1.0)
            for a in np.flatnonzero(lay.is_aux).tolist():
                if self.r_col[t, a] < 0:
                    continue
                p = int(lay.producer[a])
                r = rows.rows(1, 0.0, 0.0)
                rows.add(r, self.r_col[t, a], 1.0)
                producing = [c for c, impl in zip(self.delta_cols[t][p], lay.f_impls[p], strict=False) if a in impl.aux]
                rows.add(r, producing, -1.0)
        for o in self.lay.forward_outputs.tolist():
            r = rows.rows(1, 1.0, np.inf)
            rows.add(r, self.s_col[self.T, o], 1.0)
        rows.add_to(self.m, "selection")

    def _dependencies(self) -> None:
        """(7a) per implementation, and (7b) the carry rows.

        (7a) is one row per read of each (stage, implementation) block, DELTA <= R + S of the read, its terms in
        the order of one ``add`` per block and column kind, made at once (41k ``add`` calls took 2.7 s on 199 nodes).
        """
        lay, rows = self.lay, _Terms()
        stages, columns, reads_of = [], [], []
        for t in range(self.T):
            for j in range(self.P):
                for col, impl in zip(self.delta_cols[t][j], lay.f_impls[j], strict=False):
                    reads = impl.reads
                    if t == 0:
                        reads = reads[lay.is_aux[reads]]  # other inputs are computed in stage 0 anyway
                    if reads.size:
                        stages.append(t)
                        columns.append(col)
                        reads_of.append(reads)
        if reads_of:
            sizes = np.array([reads.size for reads in reads_of])
            reads = np.concatenate(reads_of).astype(np.int64)
            t = np.repeat(np.array(stages, dtype=np.int64), sizes)
            r = rows.rows(reads.size, -np.inf, 0.0)
            delta = np.repeat(np.array(columns, dtype=np.int64), sizes)
            cols = np.stack([delta, self.r_col[t, reads], self.s_col[t, reads]])
            block = np.repeat(np.arange(sizes.size), sizes)
            order = np.argsort((3 * block[None, :] + np.arange(3)[:, None]).ravel(), kind="stable")
            coefs = np.broadcast_to(np.array([[1.0], [-1.0], [-1.0]]), cols.shape)
            rows.add(np.broadcast_to(r, cols.shape).ravel()[order], cols.ravel()[order], coefs.ravel()[order])
        rows.add_to(self.m, "dependencies")
        carry = _Terms()
        for t in range(self.T):
            r = carry.rows(self.P, -np.inf, 0.0)
            carry.add(r, self.s_col[t + 1], 1.0)
            carry.add(r, self.s_col[t], -1.0)
            carry.add(r, self.p_col[t], -1.0)
        carry.add_to(self.m, "carry")

    def _inplace(self) -> None:
        """(15)-(16): P <= R, P + IP <= 1, P >= R - IP, S[t+1, u] + IP <= 1."""
        rows = _Terms()
        for (t, u), ip in sorted(self.ip.items()):
            r = rows.rows(1, -np.inf, 1.0)
            rows.add(r, self.s_col[t + 1, u], 1.0)
            rows.add(r, ip, 1.0)
            if (t, u) not in self.p_cells:
                continue
            p, rc = self.p_col[t, u], self.r_col[t, u]
            r = rows.rows(3, [-np.inf, -np.inf, 0.0], [0.0, 1.0, np.inf])
            rows.add(r[0], [p, rc], [1.0, -1.0])
            rows.add(r[1], [p, *ip], 1.0)
            rows.add(r[2], [p, rc, *ip], [1.0, -1.0, *([1.0] * len(ip))])
        rows.add_to(self.m, "inplace")

    def _backward(self) -> None:
        """(8): what b_t reads is present, by ``dep_rule``."""
        rows = _Terms()
        exact = self.opts.dep_rule == "exact"
        for t in range(1, self.T):
            for col, impl in zip(self.dhat_cols[t], self.lay.b_impls[t - 1], strict=True):
                for i in impl.reads.tolist():
                    r = rows.rows(1, -np.inf, 0.0)
                    rows.add(r, [col, self.p_col[t, i]], [1.0, -1.0])
                    if exact:
                        rows.add(r, self.s_col[t, i], -1.0)
                        rows.add(r, self.ip.get((t, i), []), 1.0)
                    else:
                        rows.add(r, self.s_col[t + 1, i], -1.0)
        rows.add_to(self.m, "backward_dependencies")

    def _memory(self) -> MemoryRows:
        """m2 (forward/recompute rows), m1 (state rows, optional) and m3 (backward rows)."""
        lay, T, P, M = self.lay, self.T, self.P, self.M
        rows = _Terms()
        consts: list[np.ndarray] = []
        actives: list[np.ndarray] = []
        pos = np.arange(P)
        last = lay.last_forward_reader
        sums = _Sums(self)
        self.prefix = (sums.asuf, sums.apre, sums.kpre) if sums.prefix else None
        for t in range(T):
            k_const_bytes = np.cumsum(np.concatenate([[0.0], M * self.k_const[t]]))  # sum over i < j
            base = self.G[t]  # fixed memory is taken off the capacity
            # m2: one row per computed non-aux position j
            js = np.flatnonzero((self.r_col[t] >= 0) & ~lay.is_aux)
            if js.size:
                r = rows.rows(js.size, -np.inf, self.cap)
                local = (pos[None, :] < js[:, None]) & (last[None, :] >= js[:, None])
                sums.stored(rows, t, r, js + 1)  # S[t, i] for i > j
                if sums.prefix:  # S[t+1, i] for i < j outside the local set
                    sums.kept(rows, t, r, js)
                    rr, ii = np.nonzero(local)
                    rows.add(r[rr], self.s_col[t + 1, ii], -M[ii])
                else:
                    rr, ii = np.nonzero((pos[None, :] < js[:, None]) & ~local)
                    rows.add(r[rr], self.s_col[t + 1, ii], M[ii])
                sums.read(rows, t, r, js)
                rows.add(r, self.r_col[t, js], M[js] + (local * M[None, :]).sum(axis=1))
                own: tuple[list[int], list[int], list[float]] = ([], [], [])  # one add: the same terms in order
                for row, j in zip(r.tolist(), js.tolist(), strict=True):
                    for col, impl in zip(self.delta_cols[t][j], lay.f_impls[j], strict=True):
                        extra = impl.workspace + impl.aux_bytes - (lay.mem[j] if impl.inplace >= 0 else 0)
                        own[0].append(row)
                        own[1].append(col)
                        own[2].append(extra / self.unit)
                rows.add(*own)
                consts.append(base + k_const_bytes[js])
                actives.append(self.r_col[t, js])
            # m1: state rows at every position
            if self.opts.state_rows and t >= 1:
                r = rows.rows(P, -np.inf, self.cap)
                sums.stored(rows, t, r, pos)
                sums.kept(rows, t, r, pos)
                sums.read(rows, t, r, pos)
                consts.append(base + k_const_bytes[pos])
                actives.append(np.full(P, -1, dtype=np.int64))
            # m3: the backward step
            if t >= 1:
                r = rows.rows(1, -np.inf, self.cap)
                b = int(lay.stage_nodes[t - 1])
                for col, impl in zip(self.dhat_cols[t], lay.b_impls[t - 1], strict=True):
                    alloc = 0 if impl.inplace >= 0 else int(self.graph.mem[b])
                    rows.add(r, col, (alloc + impl.workspace) / self.unit)
                sums.kept(rows, t, r, np.array([P]))
                sums.read(rows, t, r, np.array([P]))
                consts.append(np.array([base + (M * self.k_const[t]).sum()]))
                actives.append(np.array([-1]))
        const = np.concatenate(consts)
        # constants move to the bounds: row <= cap - const
        rows_ub = np.concatenate(rows.ub) - const
        rows.ub = [rows_ub]
        rows.lb = [np.concatenate(rows.lb)]
        rows.add_to(self.m, "memory")
        rr, cc, ff = rows.arrays()
        return MemoryRows(rr, cc, ff, const, np.concatenate(actives))

    def _objective(self) -> None:
        lay = self.lay
        cols: list[int] = []
        costs: list[float] = []
        for t in range(self.T):
            for p in range(self.P):
                for col, impl in zip(self.delta_cols[t][p], lay.f_impls[p], strict=False):
                    cols.append(col)
                    costs.append(impl.cost if t == 0 else impl.recompute_cost)
            if t >= 1:
                for col, impl in zip(self.dhat_cols[t], lay.b_impls[t - 1], strict=True):
                    cols.append(col)
                    costs.append(impl.cost)
        scaled, unit, exact = scale_costs(np.asarray(costs, dtype=np.float64), self.opts.cost_precision)
        self.units = Units(cost_unit=unit, mem_unit=int(self.unit), cost_exact=exact)
        self.m.set_objective(np.asarray(cols, dtype=np.int64), scaled.astype(np.float64))


MONET = Monet()

__all__ = ["MONET", "Monet", "MonetModel", "MonetOptions"]
