"""HiGHS backend (highspy): the lowered model goes in as CSR arrays through ``passModel``."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from remat_models.backends.base import LoweringBackend, SolveLimits, Trajectory
from remat_models.core.limits import INT32_MAX, fit_seed
from remat_models.errors import SolverError
from remat_models.model import Model, SolveResult, SolveStatus
from remat_models.model import constructs as C

log = logging.getLogger(__name__)


class HighsBackend(LoweringBackend):
    """HiGHS MIP (or, with option ``lp`` / ``relax=True``, the LP relaxation)."""

    name = "highs"
    native_constructs = frozenset({C.CONTINUOUS})
    module = "highspy"
    install_hint = "pip install 'highspy>=1.14,<1.15' (newer ones clash with ortools 9.15 in one process)"
    options = ("lp",)
    isolate_large = True  # overruns its time limit on 1M+ column models: see backends/deadline.py
    takes_solver_options = True  # HiGHS option names (setOptionValue)

    def __init__(self, option: str | None = None, relax: bool = False) -> None:
        super().__init__(option)
        self.relax = relax or option == "lp"

    @property
    def integral(self) -> bool:
        """False when solving the LP relaxation."""
        return not self.relax

    def _solve_lowered(self, model: Model, limits: SolveLimits, hint: np.ndarray | None) -> SolveResult:
        import highspy

        h = build(model, relax=self.relax)
        h.setOptionValue("random_seed", fit_seed(limits.seed, INT32_MAX, "highs"))
        if not self.relax and model.num_cols >= LARGE_MIP_COLUMNS:
            _skip_unbounded_phases(h)
        if limits.mip_gap is not None:
            h.setOptionValue("mip_rel_gap", float(limits.mip_gap))
        if limits.workers > 1:
            log.debug("highs: workers=%d ignored (the HiGHS MIP search is serial)", limits.workers)
        lines: list[str] = []
        if limits.log:
            h.setOptionValue("output_flag", True)
            h.setOptionValue("log_to_console", False)
            h.cbLogging.subscribe(lambda e: lines.append(e.message.rstrip("\n")))
        traj = Trajectory()
        h.cbMipImprovingSolution.subscribe(
            lambda e: traj.record(e.data_out.objective_function_value, lambda: e.data_out.mip_solution)
        )
        if hint is not None:
            idx = np.flatnonzero(~np.isnan(hint))
            h.setSolution(len(idx), idx.astype(np.int32), hint[idx])
        h.HandleUserInterrupt = True  # its interrupt callbacks honour cancelSolve (Ctrl-C, see interrupt.py)
        self.stopper.on_stop(h.cancelSolve)
        seconds = self.limits_left(limits).time_limit
        if seconds is not None:
            h.setOptionValue("time_limit", seconds)
        self.set_solver_options(limits, lambda name, value: _set_option(h, name, value))
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        has_sol = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
        result = SolveResult(
            status=_status(status, has_sol),
            trajectory=traj.points,
            time_to_first=traj.first,
            solver_version=f"highspy {h.version()}",
            log="\n".join(lines) if limits.log else None,
        )
        if result.status == SolveStatus.SOLVER_ERROR:
            result.message = f"model status: {h.modelStatusToString(status)}"
            result.log = (result.log or "") + f"\n{result.message}"
            log.error("highs: model status %s", h.modelStatusToString(status))
        if result.has_solution:
            result.x = np.asarray(h.getSolution().col_value, dtype=np.float64)
            result.objective = model.objective_value(result.x)
            is_mip = not self.relax and bool(model.col_integer.any())
            result.bound = float(info.mip_dual_bound) if is_mip else result.objective
        return result


def _set_option(h: Any, name: str, value: object) -> None:
    import highspy

    if h.setOptionValue(name, value) == highspy.HighsStatus.kError:
        raise ValueError("HiGHS has no such option, or the value has the wrong type or range")


def check_option(name: str, value: object) -> None:
    """Raise ValueError unless HiGHS takes ``name=value`` (for front ends that pass options on unchecked)."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    _set_option(h, name, value)


LARGE_MIP_COLUMNS = 200_000  # from this size on, the MIP phases that ignore the time limit are skipped
PROBING, ENUMERATION = 1 << 15, 1 << 16  # presolve_rule_off bits


def _skip_unbounded_phases(h: Any) -> None:
    """Turn off presolve probing and enumeration and the feasibility jump heuristic.

    On Checkmate models of ~800 nodes (1.5 M columns) HiGHS 1.14 spends minutes in them without checking
    its time limit (a 20 s limit ran 126 s; without them 32 s); see ERGO-Code/HiGHS#1501 and #2021.
    """
    log.debug("highs: large MIP; presolve probing/enumeration and feasibility jump off (they overrun time limits)")
    h.setOptionValue("presolve_rule_off", PROBING | ENUMERATION)
    h.setOptionValue("mip_heuristic_run_feasibility_jump", False)


def build(model: Model, relax: bool = False) -> Any:
    """A ``highspy.Highs`` holding ``model`` (which must hold only linear rows and bounds), silent."""
    import highspy

    extra = model.constructs() - {C.CONTINUOUS}
    if extra:
        raise SolverError(f"highs: lower the model first; it still holds {', '.join(sorted(extra))}")
    indptr, cols, vals, rlb, rub = model.linear_csr()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    integrality = np.zeros(model.num_cols, np.int32) if relax else model.col_integer.astype(np.int32)
    sense = highspy.ObjSense.kMinimize if model.sense == "min" else highspy.ObjSense.kMaximize
    status = h.passModel(
        model.num_cols,
        len(rlb),
        len(cols),
        int(highspy.MatrixFormat.kRowwise),
        int(sense),
        model.obj_offset,
        model.objective_vector(),
        model.col_lb,
        model.col_ub,
        rlb,
        rub,
        indptr[:-1].astype(np.int32),
        cols.astype(np.int32),
        vals,
        integrality,
    )
    if status == highspy.HighsStatus.kError:
        raise SolverError("highs rejected the model in passModel")
    return h


def _status(status: Any, has_solution: bool) -> SolveStatus:
    import highspy

    s = highspy.HighsModelStatus
    if status in (s.kOptimal, s.kModelEmpty):
        return SolveStatus.OPTIMAL
    if status == s.kInfeasible:
        return SolveStatus.INFEASIBLE
    if status in (
        s.kTimeLimit,
        s.kIterationLimit,
        s.kSolutionLimit,
        s.kInterrupt,
        s.kHighsInterrupt,
        s.kObjectiveBound,
        s.kObjectiveTarget,
        s.kUnknown,
    ):
        return SolveStatus.FEASIBLE if has_solution else SolveStatus.NO_SOLUTION
    return SolveStatus.SOLVER_ERROR
