"""Checkmate (Jain et al., MLSys 2020), section 4: the rematerialization MILP (9) on the abstract model.

Everything is indexed by *position* p in a topological ``order`` (default: the graph's input
order). Blocks are flat, holding only the cells that can be non-zero:

- ``R[t, k]`` (compute k in stage t) and ``U[t, k]`` (memory just after computing k in stage t,
  before the frees that follow it): staged, ``k <= t`` (8c), and only ``k == t`` for a
  non-recomputable node; unpartitioned, every (t, k).
- ``S[t, i]`` (i resident when stage t starts): staged ``i < t`` (8b); unpartitioned ``t >= 1`` (1d).
- ``FREE[t, i, k]`` for each edge (i, k) and each stage where ``R[t, k]`` exists, plus ``i == k`` for
  sinks that are not graph outputs (4.8 drops the others), except where it is forced to 0 (a graph
  output in the last stage).

Rows: (1b), (1c), (8a) or "every node computed", graph outputs resident at the end, FREE through
the hazard count (7b)-(7c), the U recurrence (2)-(3) with fixed memory and ``U <= budget``; a node's
workspace is counted while it runs (``U[t, k] + workspace_k R[t, k] <= budget``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, eager_frees, simulate
from remat_models.core.stages import (
    compute_sequence,
    resolve_order,
    schedule_from_model_frees,
    staged_sequence,
    stages_from_schedule,
)
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.formulations.base import BuiltModel, FormulationBase, PagingPart
from remat_models.formulations.build_deadline import check_build_time
from remat_models.formulations.checkmate.paging import CheckmatePagingPart
from remat_models.formulations.checkmate.peak import CheckmatePeak
from remat_models.formulations.peak import PeakPart
from remat_models.formulations.rows import Rows, index_of
from remat_models.formulations.scaling import DEFAULT_PRECISION, Units, gcd_of, scale_costs
from remat_models.formulations.staged_memory import (
    StageCells,
    add_free_rows,
    add_recurrence,
    staged_assignment,
    subtract_frees,
)
from remat_models.model import Model
from remat_models.model.index import IndexMap
from remat_models.model.size import check_fits_in_memory

log = logging.getLogger(__name__)

FreeMode = Literal["eager", "model"]


@dataclass(frozen=True)
class CheckmateOptions:
    """Options of the Checkmate model; ``allowance`` is the paper's epsilon (model budget ``(1 - eps) B``).

    ``integral_memory`` None (default) follows the backend: integer memory where it takes no continuous columns.
    """

    order: tuple[int, ...] | None = None
    staged: bool = True
    stages: int | None = None
    integral_memory: bool | None = None
    allowance: float = 0.0
    cost_precision: float = DEFAULT_PRECISION

    def validated(self) -> CheckmateOptions:
        """Self, after range checks (``order`` as a tuple of ints)."""
        if self.order is not None and not isinstance(self.order, tuple):
            return replace(self, order=tuple(int(v) for v in self.order)).validated()
        if not 0.0 <= self.allowance < 1.0:
            raise ConfigurationError(f"checkmate allowance must lie in [0, 1), got {self.allowance}")
        if self.stages is not None and (self.staged or self.stages < 1):
            raise ConfigurationError("checkmate 'stages' is for the unpartitioned variant (staged=False), and >= 1")
        if not 0.0 < self.cost_precision < 1.0:
            raise ConfigurationError(f"checkmate cost_precision must lie in (0, 1), got {self.cost_precision}")
        return self


@dataclass
class CheckmateModel(BuiltModel):
    """The built MILP plus the index maps decoding and hints need (positions in ``order``)."""

    options: CheckmateOptions
    order: np.ndarray
    r_mask: np.ndarray
    s_mask: np.ndarray
    free: np.ndarray  # (F, 3): t, i, k
    hazard: Rows  # per FREE row: -R[t,k] + S[t+1,i] + sum of later users' R[t,j] (the hazard count minus 1)
    memory_step: Rows  # per R cell: U[t,k] - U[t,prev k] (fixed memory + checkpoints on a stage's first cell)
    memory_const: np.ndarray
    first_cell: np.ndarray  # per R cell: the id of its stage's first R cell
    mem_scale: float  # bytes per model memory unit
    capacity: float  # U's upper bound in model memory units

    @property
    def n_stages(self) -> int:
        """Number of stages T."""
        return int(self.r_mask.shape[0])

    def fractional(self, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Dense (R, S) of shape (T, n) from values by block name, as floats (relaxations stay fractional)."""
        self.require(values, "R", "S")
        R = np.zeros(self.r_mask.shape)
        S = np.zeros(self.s_mask.shape)
        R[self.r_mask] = values["R"]
        S[self.s_mask] = values["S"]
        return R, S

    def matrices(self, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Dense boolean (R, S) of shape (T, n) from values by block name."""
        R, S = self.fractional(values)
        return R > 0.5, S > 0.5

    def assignment(self, R: np.ndarray, S: np.ndarray) -> dict[str, np.ndarray]:
        """Values of every block implied by dense (R, S): FREE from (5), U from (2)-(3)."""
        if (R & ~self.r_mask).any() or (S & ~self.s_mask).any():
            raise ConfigurationError("R/S set a cell this model has no variable for (wrong stage structure)")
        return staged_assignment(self, {"R": R[self.r_mask], "S": S[self.s_mask]})

    def peak_bound(self, values: Mapping[str, np.ndarray]) -> float:
        """The model's memory peak in bytes: max over cells of U (+ workspace of the node computed there)."""
        self.require(values, "U", "R")
        workspace = self.graph.workspace[self.order][np.nonzero(self.r_mask)[1]] / self.mem_scale
        during = np.asarray(values["U"], dtype=np.float64) + workspace * (np.asarray(values["R"]) > 0.5)
        return float(during.max()) * self.mem_scale if during.size else 0.0


class Checkmate(FormulationBase):
    """Checkmate's MILP: build, decode (Algorithm 1), warm-start hints from any staged Schedule."""

    name: ClassVar[str] = "checkmate"
    window_nodes: ClassVar[int | None] = 360  # larger graphs: windows of a start (planning/lns.py)
    paging_part: ClassVar[type[PagingPart] | None] = CheckmatePagingPart
    peak_model: ClassVar[type[PeakPart] | None] = CheckmatePeak
    overlap_paging: ClassVar[bool] = True  # its stage structure carries the clocks
    options_type: ClassVar[type] = CheckmateOptions
    default_backend: ClassVar[str] = "highs"
    integral_option: ClassVar[str | None] = "integral_memory"

    def build(
        self, graph: Graph, budget: int, options: CheckmateOptions | Mapping[str, Any] | None = None
    ) -> CheckmateModel:
        """Build the model of ``graph`` under ``budget`` bytes."""
        return _Builder(graph, budget, self.options(options)).build()

    def check_size(self, graph: Graph, budget: int, options: Any = None) -> None:
        """Raise ``ModelTooLargeError`` at once if the model could not be built and solved in this machine's memory."""
        _Builder(graph, budget, self.options(options)).check_size()

    def sequence(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> list[int | Any]:
        """Algorithm 1's compute order: the row-major scan of R."""
        R, _ = _checkmate(built).matrices(values)
        return list(compute_sequence(_checkmate(built).order, R))

    def decode(self, built: BuiltModel, values: Mapping[str, np.ndarray], frees: FreeMode = "eager") -> Schedule:
        """Algorithm 1: row-major scan of R; frees as early as possible ("eager") or by the FREE values ("model")."""
        if frees == "eager":
            return super().decode(built, values)
        if frees == "model":
            cm = _checkmate(built)
            R, S = cm.matrices(values)
            cm.require(values, "FREE")
            chosen = cm.free[np.asarray(values["FREE"]) > 0.5]
            return schedule_from_model_frees(cm.graph, cm.order, R, S, chosen)
        raise ConfigurationError(f"unknown free mode {frees!r}; use 'eager' or 'model'")

    def _hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Every block's values for a Schedule whose first computations follow the model's order.

        A schedule outside the stage structure (FastSA recomputes in any order) is recast into it
        (``staged_sequence``) if the recast one still fits the budget.
        """
        cm = _checkmate(built)
        try:
            R, S = stages_from_schedule(cm.graph, cm.order, schedule, cm.n_stages)
        except InvalidScheduleError:
            staged = eager_frees(cm.graph, staged_sequence(cm.graph, cm.order, schedule))
            peak = simulate(cm.graph, staged).peak
            if peak > cm.budget:
                raise InvalidScheduleError(f"recast into stages, its peak {peak:,} B exceeds the budget") from None
            R, S = stages_from_schedule(cm.graph, cm.order, staged, cm.n_stages)
        return cm.assignment(R, S)

    def warm_options(self, options: Any, init: Schedule | None) -> CheckmateOptions:
        """The stages follow the warm start's first computations unless an order is given (FastSA may reorder)."""
        opts = self.options(options)
        if init is None or opts.order is not None:
            return opts
        return self.options(replace(opts, order=tuple(int(v) for v in init.first_computation_order())))


def _checkmate(built: BuiltModel) -> CheckmateModel:
    if not isinstance(built, CheckmateModel):
        raise ConfigurationError(f"expected a model built by Checkmate, got {type(built).__name__}")
    return built


class _Builder:
    """One build of the Checkmate model (kept as a class so that each step is a short method)."""

    def __init__(self, graph: Graph, budget: int, opts: CheckmateOptions) -> None:
        self.graph, self.budget, self.opts = graph, budget, opts
        self.order = resolve_order(graph, opts.order)
        n = graph.n
        self.n = n
        self.T = n if opts.staged else (opts.stages or n)
        position = np.empty(n, dtype=np.int64)
        position[self.order] = np.arange(n)
        capacity = int(np.floor(budget * (1.0 - opts.allowance)))
        self.integral = bool(opts.integral_memory)
        self.mem_scale, self.capacity = memory_scale(graph, capacity, integral=self.integral)
        costs, cost_unit, exact = scale_costs(graph.cost, opts.cost_precision)
        self.costs = costs[self.order].astype(np.float64)
        self.units = Units(cost_unit=cost_unit, mem_unit=int(byte_gcd(graph)), cost_exact=exact)
        self.mem = graph.mem[self.order] / self.mem_scale
        self.workspace = graph.workspace[self.order] / self.mem_scale
        self.is_output = np.zeros(n, dtype=bool)
        self.is_output[position[graph.outputs]] = True
        self.position = position
        self.ei, self.ek = position[graph.edges[:, 0]], position[graph.edges[:, 1]]
        t, p = np.arange(self.T)[:, None], np.arange(n)[None, :]
        recomputable = graph.recomputable[self.order][None, :]
        if opts.staged:
            self.r_mask = (p <= t) & (recomputable | (p == t))
            self.s_mask = np.broadcast_to(p < t, (self.T, n)).copy()
        else:
            self.r_mask = np.ones((self.T, n), dtype=bool)
            self.s_mask = np.broadcast_to(t >= 1, (self.T, n)).copy()
        self.m = Model(f"checkmate:{graph.name}")
        self.hooks: dict[str, Any] = {}
        self.row_cells: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # row batch -> (stage, position) of each row

    def check_size(self) -> None:
        """Refuse (``ModelTooLargeError``) a model whose columns would not fit in memory, before building it."""
        frees = self.r_mask.sum(axis=0)[self.ek].sum()  # FREE cells: one per (stage, edge) where its reader runs
        columns = int(self.r_mask.sum() + self.s_mask.sum() + frees)
        check_fits_in_memory(f"checkmate on {self.graph.name!r} ({self.n:,} nodes, {self.T:,} stages)", columns)

    def build(self) -> CheckmateModel:
        self.check_size()
        m = self.m
        R = m.bool_block("R", int(self.r_mask.sum()))
        S = m.bool_block("S", int(self.s_mask.sum()))
        self.rid, self.sid = index_of(self.r_mask, R.offset), index_of(self.s_mask, S.offset)
        self._dependencies()
        self._coverage()
        check_build_time("checkmate")
        free, hazard = self._frees()
        check_build_time("checkmate")
        memory_step, memory_const, first = self._memory(free)
        cells = np.nonzero(self.r_mask)[1]
        m.set_objective(R.cols, self.costs[cells])
        self._publish(free)
        log.info(
            "checkmate model of %s: %d columns, %d rows, %d nonzeros (memory unit %g B, cost unit %g)",
            self.graph.name,
            m.num_cols,
            m.num_rows,
            m.num_nonzeros,
            self.mem_scale,
            self.units.cost_unit,
        )
        return CheckmateModel(
            formulation="checkmate",
            hooks=self.hooks,
            model=m,
            graph=self.graph,
            budget=self.budget,
            units=self.units,
            options=self.opts,
            order=self.order,
            r_mask=self.r_mask,
            s_mask=self.s_mask,
            free=free,
            hazard=hazard,
            memory_step=memory_step,
            memory_const=memory_const,
            first_cell=first,
            mem_scale=self.mem_scale,
            capacity=self.capacity,
        )

    def _publish(self, free: np.ndarray) -> None:
        """Index maps of R, S, U, FREE on (stage, node[, consumer]) axes by graph node id; row maps as hooks."""
        names = self.graph.names
        axes = ("stage", "node")
        by_node = self.position  # position of each graph node id
        r_ids = np.where(self.r_mask, self.rid, -1)[:, by_node]
        s_ids = np.where(self.s_mask, self.sid, -1)[:, by_node]
        u_ids = np.full(self.r_mask.shape, -1, dtype=np.int64)
        u_ids[self.r_mask] = self.m.block("U").cols
        self.m.set_index(IndexMap.dense("R", axes, r_ids, labels=(None, names)))
        self.m.set_index(IndexMap.dense("S", axes, s_ids, labels=(None, names)))
        self.m.set_index(IndexMap.dense("U", axes, u_ids[:, by_node], labels=(None, names)))
        ft, fi, fk = free.T
        self.m.set_index(
            IndexMap.sparse(
                "FREE",
                ("stage", "node", "consumer"),
                (self.T, self.n, self.n),
                (ft, self.order[fi], self.order[fk]),
                self.m.block("FREE").cols,
                labels=(None, names, names),
            )
        )
        for hook, (tt, pp) in self.row_cells.items():
            rows = np.arange(tt.size)
            self.hooks[hook] = IndexMap.sparse(hook, axes, (self.T, self.n), (tt, self.order[pp]), rows, (None, names))

    def _dependencies(self) -> None:
        """(1b) inputs resident or computed in the stage; (1c) a checkpoint was there or computed before."""
        tt, ee = np.nonzero(self.r_mask[:, self.ek])
        i, k = self.ei[ee], self.ek[ee]
        rows = Rows(tt.size).term(self.rid[tt, k], 1.0).term(self.rid[tt, i], -1.0).term(self.sid[tt, i], -1.0)
        rows.add_to(self.m, ub=0.0, name="dependencies")
        tt, ii = np.nonzero(self.s_mask)
        keep = tt >= 1
        tt, ii = tt[keep], ii[keep]
        rows = (
            Rows(tt.size).term(self.sid[tt, ii], 1.0).term(self.rid[tt - 1, ii], -1.0).term(self.sid[tt - 1, ii], -1.0)
        )
        rows.add_to(self.m, ub=0.0, name="carry")
        self.row_cells["carry"] = (tt, ii)

    def _coverage(self) -> None:
        """(8a) R[t, t] = 1 (staged) or every node computed (once if not recomputable); outputs kept at the end."""
        n, last = self.n, self.T - 1
        if self.opts.staged:
            Rows(n).term(self.rid[np.arange(n), np.arange(n)], 1.0).add_to(self.m, lb=1.0, ub=1.0, name="coverage")
        else:
            tt, pp = np.nonzero(self.r_mask)
            once = ~self.graph.recomputable[self.order]
            Rows(n).term(self.rid[tt, pp], 1.0, rows=pp).add_to(
                self.m, lb=1.0, ub=np.where(once, 1.0, np.inf), name="coverage"
            )
        outputs = np.flatnonzero(self.is_output)
        rows = Rows(outputs.size).term(self.rid[last, outputs], 1.0).term(self.sid[last, outputs], 1.0)
        rows.add_to(self.m, lb=1.0, name="outputs")

    def _frees(self) -> tuple[np.ndarray, Rows]:
        """FREE cells and (7b)-(7c); returns the (t, i, k) table and the hazard rows (count minus 1)."""
        n, T = self.n, self.T
        sinks = np.flatnonzero((np.bincount(self.ei, minlength=n) == 0) & ~self.is_output)
        pair_i = np.concatenate([self.ei, sinks])
        pair_k = np.concatenate([self.ek, sinks])
        # users of each position sorted by position: the users of i after k are a contiguous range
        by_user = np.lexsort((self.ek, self.ei))
        users = self.ek[by_user]
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.ei, minlength=n), out=ptr[1:])
        rank = np.empty(self.ei.size, dtype=np.int64)
        rank[by_user] = np.arange(self.ei.size) - ptr[self.ei[by_user]]
        later_start = np.concatenate([ptr[self.ei] + rank + 1, ptr[sinks + 1]])
        later_end = ptr[pair_i + 1]
        tt, pp = np.nonzero(self.r_mask[:, pair_k])
        keep = ~((tt == T - 1) & self.is_output[pair_i[pp]])
        tt, pp = tt[keep], pp[keep]
        i, k = pair_i[pp], pair_k[pp]
        F = tt.size
        s_next = np.where(tt + 1 < T, self.sid[np.minimum(tt + 1, T - 1), i], -1)
        count = later_end[pp] - later_start[pp]
        owner = np.repeat(np.arange(F), count)
        offset = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
        later = self.rid[tt[owner], users[later_start[pp][owner] + offset]]
        hazard = Rows(F).term(self.rid[tt, k], -1.0).term(s_next, 1.0).term(later, 1.0, rows=owner)
        kappa = 1.0 + (s_next >= 0) + np.bincount(owner[later >= 0], minlength=F)
        check_build_time("checkmate")  # half of this phase: 1.2 s on a window of 9,607 nodes under load
        add_free_rows(self.m, hazard, kappa, names=("free_lower", "free_upper"))
        return np.stack([tt, i, k], axis=1), hazard

    def _memory(self, free: np.ndarray) -> tuple[Rows, np.ndarray, np.ndarray]:
        """U recurrence (2)-(3): U[cell] = U[previous cell of the stage] - frees after it + M_k R[cell]."""
        cells = int(self.r_mask.sum())
        cap = self.capacity
        if self.integral:
            U = self.m.int_block("U", cells, lb=0, ub=cap)
        else:
            U = self.m.cont_block("U", cells, lb=0.0, ub=cap)
        stage, pos = np.nonzero(self.r_mask)
        staged = StageCells.of(self.r_mask)
        step = Rows(cells).term(self.rid[stage, pos], self.mem[pos])
        st, si = np.nonzero(self.s_mask)
        step.term(self.sid[st, si], self.mem[si], rows=staged.stage_first[st])
        ft, fi, fk = free.T
        free_cell = self.rid[ft, fk] - self.m.block("R").offset
        subtract_frees(step, staged, self.m.block("FREE").cols, ft, free_cell, self.mem[fi])
        const = add_recurrence(self.m, U, step, staged, self.graph.fixed_mem / self.mem_scale, name="memory")
        self.row_cells["memory"] = (stage, pos)
        heavy = np.flatnonzero(self.workspace[pos] > 0)
        rows = (
            Rows(heavy.size)
            .term(U.cols[heavy], 1.0)
            .term(self.rid[stage[heavy], pos[heavy]], self.workspace[pos[heavy]])
        )
        rows.add_to(self.m, ub=cap, name="workspace")
        self.row_cells["workspace"] = (stage[heavy], pos[heavy])
        return step, const, staged.first


def byte_gcd(graph: Graph) -> int:
    """The gcd of every byte count of the graph: outputs, workspaces and fixed memory (1 if all are 0)."""
    return gcd_of(np.concatenate([graph.mem, graph.workspace, [graph.fixed_mem]]))


def memory_scale(graph: Graph, capacity_bytes: int, *, integral: bool) -> tuple[float, float]:
    """Bytes per model memory unit and the capacity in those units.

    Every byte count is a multiple of their gcd g, so "sum <= budget" is exactly "sum / g <=
    floor(budget / g)": integer models use g. Continuous models divide further by a power of two
    (exact in floating point) so that the capacity is at most 2**20, and get half a unit g of slack,
    which no exact memory sum can use but which absorbs the solver's feasibility tolerances.
    """
    g = byte_gcd(graph)
    whole = capacity_bytes // g
    if integral:
        return float(g), float(whole)
    unit = float(g) * 2.0 ** max(0, math.ceil(math.log2(max(whole, 1) / MAX_CONTINUOUS_CAPACITY)))
    return unit, (whole + 0.5) * g / unit


MAX_CONTINUOUS_CAPACITY = 2**20
CHECKMATE = Checkmate()

__all__ = ["CHECKMATE", "Checkmate", "CheckmateModel", "CheckmateOptions", "FreeMode"]
