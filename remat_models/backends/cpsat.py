"""OR-Tools CP-SAT backend: native for every construct except continuous variables (CP-SAT is integer-only)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from remat_models.backends.base import LoweringBackend, SolveLimits, Trajectory
from remat_models.backends.deadline import ISOLATE_SIZE, isolation_available
from remat_models.core.limits import INT32_MAX, fit_seed
from remat_models.errors import UnsupportedConstructError
from remat_models.model import Model, SolveResult, SolveStatus
from remat_models.model import constructs as C
from remat_models.model.expr import AffineBatch
from remat_models.model.lowering import LoweredModel

log = logging.getLogger(__name__)

BOUND = 2**50  # infinite integer bounds are clipped to +-BOUND (CP-SAT needs finite domains)
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
NO_LIMITS = SolveLimits()


class CpSatBackend(LoweringBackend):
    """CP-SAT through its model proto; linear rows are written into the proto from CSR arrays."""

    name = "cpsat"
    native_constructs = C.ALL_CONSTRUCTS - {C.CONTINUOUS}
    module = "ortools.sat.python.cp_model"
    install_hint = "pip install 'ortools==9.15.6755'"
    isolate_large = True  # overruns its time limit on 1M+ column models: see backends/deadline.py
    takes_solver_options = True  # SatParameters field names
    precedences = 0  # of the last compiled model's reservoirs (:func:`reservoir_precedences`)

    def compile(self, model: Model, limits: SolveLimits = NO_LIMITS) -> LoweredModel:
        """The base's compile; also counts the precedences CP-SAT's presolve expands the reservoirs into."""
        lowered = super().compile(model, limits)
        self.precedences = reservoir_precedences(lowered.model)
        return lowered

    def _hard_deadline(self, limits: SolveLimits) -> bool:
        """The base's rule, and also from ``ISOLATE_SIZE`` reservoir precedences on.

        CP-SAT's presolve expands a reservoir of k events into up to k(k-1)/2 precedence literals without looking
        at the time limit: Moccasin with C = 1000 on a 65-node chain (2,608 reservoirs, 11.5 M pairs; 10.7k
        columns, 15.8k rows, far below the base's size) spent 37 s of a 5 s limit in its presolve.
        """
        large = limits.time_limit is not None and isolation_available() and self.precedences >= ISOLATE_SIZE
        return large or super()._hard_deadline(limits)

    def _solve_lowered(self, model: Model, limits: SolveLimits, hint: np.ndarray | None) -> SolveResult:
        from ortools.sat.python import cp_model

        cp = _Builder(model).cp
        if hint is not None:
            idx = np.flatnonzero(~np.isnan(hint))
            cp.proto.solution_hint.vars.extend(idx.tolist())
            cp.proto.solution_hint.values.extend(np.rint(hint[idx]).astype(np.int64).tolist())
        solver = cp_model.CpSolver()
        params = solver.parameters
        seconds = self.limits_left(limits).time_limit  # building the CP-SAT model counts against the limit
        if seconds is not None:
            params.max_time_in_seconds = seconds
        params.num_workers = max(1, limits.workers)
        params.random_seed = fit_seed(limits.seed, INT32_MAX, "cpsat")  # an int32 field
        if limits.mip_gap is not None:
            params.relative_gap_limit = limits.mip_gap
        lines: list[str] = []
        if limits.log:
            params.log_search_progress = True
            params.log_to_stdout = False
            solver.log_callback = lines.append
        traj = Trajectory()
        recorder = _recorder(traj, model.obj_cols.size > 0)
        self.set_solver_options(limits, lambda name, value: _set_parameter(params, name, value))
        params.catch_sigint_signal = False  # Ctrl-C goes through interrupt.py, which says it was interrupted
        self.stopper.on_stop(solver.stop_search)
        status = solver.solve(cp, recorder)
        result = SolveResult(
            status=_STATUS.get(status.name, SolveStatus.SOLVER_ERROR),
            trajectory=traj.points,
            time_to_first=traj.first,
            solver_version=_version(),
            log="\n".join(lines) if limits.log else None,
        )
        if result.status == SolveStatus.SOLVER_ERROR:
            from ortools.sat.python import cp_model_helper as cmh

            why = solver.response_proto.solution_info or cmh.CpSatHelper.validate_model(cp.proto) or "no reason given"
            result.message = f"{status.name}: {why}"
            result.log = result.message if result.log is None else f"{result.log}\n{result.message}"
            log.error("cpsat: %s", result.message)
        if result.has_solution:
            result.x = np.asarray(solver.response_proto.solution, dtype=np.float64)
            result.objective = model.objective_value(result.x)
            result.bound = solver.best_objective_bound + 0.0 if model.obj_cols.size else result.objective
        return result


_STATUS = {
    "OPTIMAL": SolveStatus.OPTIMAL,
    "FEASIBLE": SolveStatus.FEASIBLE,
    "INFEASIBLE": SolveStatus.INFEASIBLE,
    "UNKNOWN": SolveStatus.NO_SOLUTION,
}


def _set_parameter(params: Any, name: str, value: object) -> None:
    if name.startswith("_") or not hasattr(params, name) or callable(getattr(params, name)):
        raise ValueError("CP-SAT's SatParameters has no such field")
    setattr(params, name, value)


def _version() -> str:
    import ortools

    return f"ortools {ortools.__version__}"


def _recorder(traj: Trajectory, has_objective: bool) -> Any:
    """A solution callback recording the incumbent trajectory (built lazily: ortools may be absent)."""
    from ortools.sat.python import cp_model

    class Recorder(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            traj.record(self.objective_value if has_objective else 0.0, lambda: self.response_proto.solution)

    return Recorder()


class _Builder:
    """Writes a lowered model into a ``cp_model.CpModel``."""

    def __init__(self, m: Model) -> None:
        from ortools.sat.python import cp_model

        self.m = m
        self.cp = cp_model.CpModel()
        self.true_index: int | None = None
        proto = self.cp.proto
        lb = np.clip(m.col_lb, -BOUND, BOUND).astype(np.int64).tolist()
        ub = np.clip(m.col_ub, -BOUND, BOUND).astype(np.int64).tolist()
        for lo, hi in zip(lb, ub, strict=True):
            proto.variables.add().domain.extend((lo, hi))
        indptr, cols, vals, rlb, rub = m.linear_csr()
        self._rows(indptr, cols, vals, rlb, rub, None)
        for ind in m.indicators:
            a = ind.rows.to_affine()
            lits = np.where(ind.lit_neg, -ind.lit_cols - 1, ind.lit_cols)
            self._rows(a.indptr, a.cols, a.coefs, ind.rows.lb, ind.rows.ub, lits.tolist())
        self._globals()
        self._objective()

    def _rows(
        self,
        indptr: np.ndarray,
        cols: np.ndarray,
        vals: np.ndarray,
        lb: np.ndarray,
        ub: np.ndarray,
        enforce: list[int] | None,
    ) -> None:
        """Linear constraints from CSR arrays, optionally with one enforcement literal per row."""
        coefs = _integral(vals, "linear row")
        lo, hi = _int_bound(lb, np.ceil, INT_MIN), _int_bound(ub, np.floor, INT_MAX)
        cols_l, coefs_l, ptr = cols.tolist(), coefs.tolist(), indptr.tolist()
        constraints = self.cp.proto.constraints
        for r in range(len(lo)):
            c = constraints.add()
            if enforce is not None:
                c.enforcement_literal.append(enforce[r])
            lin = c.linear
            s, e = ptr[r], ptr[r + 1]
            lin.vars.extend(cols_l[s:e])
            lin.coeffs.extend(coefs_l[s:e])
            lin.domain.extend((lo[r], hi[r]))

    def _var(self, col: int) -> Any:
        return self.cp.get_int_var_from_proto_index(int(col))

    def _lit(self, col: int, neg: bool) -> Any:
        if col < 0:
            return True
        v = self.cp.get_bool_var_from_proto_index(int(col))
        return ~v if neg else v

    def _exprs(self, batch: AffineBatch, what: str) -> list[Any]:
        from ortools.sat.python import cp_model

        coefs = _integral(batch.coefs, what)
        const = _integral(batch.const, what)
        ptr = batch.indptr.tolist()
        return [
            cp_model.LinearExpr.weighted_sum(
                [self._var(j) for j in batch.cols[ptr[i] : ptr[i + 1]]], coefs[ptr[i] : ptr[i + 1]].tolist()
            )
            + int(const[i])
            for i in range(batch.size)
        ]

    def _globals(self) -> None:
        m, cp = self.m, self.cp
        iv = m.intervals
        intervals = []
        for i in range(len(iv.start)):
            size = self._var(iv.size_col[i]) if iv.size_col[i] >= 0 else int(iv.fixed_size[i])
            start, end = self._var(iv.start[i]), self._var(iv.end[i])
            if iv.presence[i] >= 0:
                intervals.append(
                    cp.new_optional_interval_var(start, size, end, self._lit(iv.presence[i], False), f"iv{i}")
                )
            else:
                intervals.append(cp.new_interval_var(start, size, end, f"iv{i}"))
        for cu in m.cumulatives:
            capacity = cu.capacity + (self._var(cu.capacity_col) if cu.capacity_col >= 0 else 0)
            cp.add_cumulative([intervals[i] for i in cu.interval_ids], cu.demands.tolist(), capacity)
        for r in m.reservoirs:
            self._reservoir(r)
        for ad in m.all_different:
            cp.add_all_different(self._exprs(ad.exprs, "all_different expression"))
        for p in m.products:
            for z, b, x in zip(p.z.tolist(), p.b.tolist(), p.x.tolist(), strict=True):
                cp.add_multiplication_equality(self._var(z), [self._var(b), self._var(x)])

    def _reservoir(self, r: C.Reservoir) -> None:
        """A reservoir written into the proto directly (Moccasin's C = 1000 on a 65-node chain: 235k events).

        Through ``add_reservoir_constraint_with_active`` each event cost a Python ``LinearExpr`` and a variable
        look-up: 3-4 s for that model before the solver's clock started.
        """
        coefs = _integral(r.times.coefs, "reservoir time").tolist()
        const = _integral(r.times.const, "reservoir time").tolist()
        cols, ptr = r.times.cols.tolist(), r.times.indptr.tolist()
        reservoir = self.cp.proto.constraints.add().reservoir
        reservoir.min_level, reservoir.max_level = int(r.min_level), int(r.max_level)
        times, changes = reservoir.time_exprs, reservoir.level_changes
        for s, e, c, change in zip(ptr, ptr[1:], const, r.changes.tolist(), strict=False):
            time_expr = times.add()
            time_expr.vars.extend(cols[s:e])
            time_expr.coeffs.extend(coefs[s:e])
            time_expr.offset = c
            changes.add().offset = change
        active = np.where(r.active_neg, -r.active_cols - 1, r.active_cols)  # a negated literal is -index - 1
        active[r.active_cols < 0] = self._true()  # always active
        reservoir.active_literals.extend(active.tolist())

    def _true(self) -> int:
        """Index of a variable fixed to 1 (the always-true literal), added once."""
        if self.true_index is None:
            self.true_index = self.cp.new_constant(1).index
        return self.true_index

    def _objective(self) -> None:
        """Objective written into the proto directly (integer objective if integral, else floating point)."""
        m = self.m
        if m.obj_cols.size == 0:
            return
        coefs = m.objective_vector()
        cols = np.flatnonzero(coefs)
        w = coefs[cols]
        if np.all(w == np.rint(w)) and m.obj_offset == round(m.obj_offset):
            obj = self.cp.proto.objective  # CP-SAT minimizes; maximization is a scaling factor of -1
            sign = 1 if m.sense == "min" else -1
            obj.vars.extend(cols.tolist())
            obj.coeffs.extend((sign * np.rint(w)).astype(np.int64).tolist())
            obj.offset = sign * m.obj_offset
            obj.scaling_factor = sign
        else:
            fobj = self.cp.proto.floating_point_objective
            fobj.vars.extend(cols.tolist())
            fobj.coeffs.extend(w.tolist())
            fobj.offset = m.obj_offset
            fobj.maximize = m.sense == "max"


def reservoir_precedences(model: Model) -> int:
    """Pairs of events over ``model``'s reservoirs: what CP-SAT's presolve may expand them into."""
    return sum(k * (k - 1) // 2 for k in (len(r.changes) for r in model.reservoirs))


def _int_bound(b: np.ndarray, rounding: Any, infinite: int) -> list[int]:
    """Row bounds as ints, infinite ones replaced by the int64 extreme CP-SAT reads as unbounded."""
    out = np.full(len(b), infinite, dtype=np.int64)
    fin = np.isfinite(b)
    out[fin] = rounding(b[fin] + np.sign(infinite) * 1e-9).astype(np.int64)
    return out.tolist()


def _integral(a: np.ndarray, what: str) -> np.ndarray:
    """Integer copy of ``a``; CP-SAT takes integer coefficients only."""
    r = np.rint(a)
    if not (np.abs(a - r) <= 1e-9).all():  # allclose(rtol=0), without its per-call overhead (called per reservoir)
        raise UnsupportedConstructError(
            f"cpsat: fractional coefficient in {what} (construct 'fractional_coefficient'); scale the model to integers"
        )
    return r.astype(np.int64)
