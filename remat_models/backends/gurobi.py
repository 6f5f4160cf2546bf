"""Gurobi backend (gurobipy matrix API): CSR rows via ``addMConstr``, indicators via ``addGenConstrIndicator``.

A timed solve of a large model runs in a child killed at a hard deadline (``backends/deadline.py``): handing
Moccasin's lowered model of a 60-node window (4 M columns) to gurobipy took 70 s, outside Gurobi's time limit.
Under a size-limited license (pip's gurobipy) a model above its size is refused before it is lowered or built.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from remat_models.backends.base import LoweringBackend, SolveLimits, Trajectory
from remat_models.core.limits import fit_seed
from remat_models.errors import BackendUnavailableError, ModelTooLargeError, SolverError
from remat_models.model import Model, SizeEstimate, SolveResult, SolveStatus
from remat_models.model import constructs as C
from remat_models.model.size import model_size

log = logging.getLogger(__name__)

SIZE_LIMITED = 10010  # GurobiError: "Model too large for size-limited license"
NO_LICENSE = (10009, 10032)  # no/expired license
MAX_SEED = 2_000_000_000  # the range of Gurobi's Seed parameter
LICENSE_SIZE = 2000  # a size-limited license takes at most this many variables and this many constraints


class GurobiBackend(LoweringBackend):
    """Gurobi MIP; takes continuous variables and indicator rows natively, everything else lowered."""

    name = "gurobi"
    native_constructs = frozenset({C.CONTINUOUS, C.INDICATOR})
    module = "gurobipy"
    takes_solver_options = True  # Gurobi parameter names (setParam)
    install_hint = "pip install 'remat_models[gurobi]' (gurobipy and scipy; pip's gurobipy license is size-limited)"
    isolate_large = True  # gurobipy takes a minute to build a 4 M-column model, outside Gurobi's time limit

    @classmethod
    def available(cls) -> bool:
        """Whether gurobipy and scipy (for the CSR matrices) are importable."""
        return super().available() and importlib.util.find_spec("scipy") is not None

    def check_size(self, size: SizeEstimate) -> None:
        """Refuse at once a model above a size-limited license's size (Gurobi would refuse it after the build)."""
        if max(size.variables, size.constraints) > LICENSE_SIZE and size_limited_license():
            raise _too_large(size)

    def _solve_lowered(self, model: Model, limits: SolveLimits, hint: np.ndarray | None) -> SolveResult:
        import gurobipy as gp
        from gurobipy import GRB

        lines: list[str] = []
        traj = Trajectory()
        try:
            with gp.Env(params={"OutputFlag": 0}) as env, gp.Model(model.name, env=env) as gm:
                x = build(gm, model)
                _set_params(gm, self.limits_left(limits))
                self.set_solver_options(limits, gm.setParam)
                if hint is not None:
                    x.Start = np.where(np.isnan(hint), GRB.UNDEFINED, hint)
                self.stopper.on_stop(gm.terminate)  # Ctrl-C (interrupt.py)
                gm.optimize(_callback(traj, x, lines if limits.log else None))
                if gm.Status == GRB.INF_OR_UNBD:  # ask again without dual reductions to tell the two apart
                    gm.Params.DualReductions = 0
                    gm.optimize()
                return _result(gm, x, model, traj, lines if limits.log else None)
        except gp.GurobiError as err:
            raise _translate(err, model) from err


def build(gm: Any, model: Model) -> Any:
    """Add ``model``'s columns, linear rows, indicator rows and objective to the gurobipy model ``gm``; return x."""
    import scipy.sparse as sp
    from gurobipy import GRB

    extra = model.constructs() - GurobiBackend.native_constructs
    if extra:
        raise SolverError(f"gurobi: lower the model first; it still holds {', '.join(sorted(extra))}")
    lb, ub, integer = model.col_lb, model.col_ub, model.col_integer
    vtype = np.where(integer & (lb >= 0) & (ub <= 1), GRB.BINARY, np.where(integer, GRB.INTEGER, GRB.CONTINUOUS))
    x = gm.addMVar(model.num_cols, lb=lb, ub=ub, vtype=vtype, name="x")
    n = model.num_cols
    indptr, cols, vals, rlb, rub = model.linear_csr()
    a = sp.csr_matrix((vals, cols, indptr), shape=(len(rlb), n))
    for rows, sense, rhs in _by_sense(rlb, rub):
        gm.addMConstr(a[rows], x, sense, rhs)
    for ind in model.indicators:
        af = ind.rows.to_affine()
        a = sp.csr_matrix((af.coefs, af.cols, af.indptr), shape=(ind.rows.num_rows, n))
        a.sum_duplicates()
        for rows, sense, rhs in _by_sense(ind.rows.lb, ind.rows.ub):
            gm.addGenConstrIndicator(x[ind.lit_cols[rows]], ~ind.lit_neg[rows], a[rows] @ x, sense, rhs)
    gm.setObjective(
        model.objective_vector() @ x + model.obj_offset, GRB.MINIMIZE if model.sense == "min" else GRB.MAXIMIZE
    )
    return x


def _by_sense(lb: np.ndarray, ub: np.ndarray) -> Iterator[tuple[np.ndarray, str, np.ndarray]]:
    """Rows grouped as (row ids, sense, rhs): equalities, then finite upper sides, then finite lower sides."""
    eq = lb == ub
    for rows, sense, rhs in (
        (np.flatnonzero(eq), "=", lb),
        (np.flatnonzero(~eq & np.isfinite(ub)), "<", ub),
        (np.flatnonzero(~eq & np.isfinite(lb)), ">", lb),
    ):
        if len(rows):
            yield rows, sense, rhs[rows]


def _set_params(gm: Any, limits: SolveLimits) -> None:
    p = gm.Params
    if limits.time_limit is not None:
        p.TimeLimit = float(limits.time_limit)
    if limits.mip_gap is not None:
        p.MIPGap = float(limits.mip_gap)
    p.Threads = max(1, limits.workers)
    p.Seed = fit_seed(limits.seed, MAX_SEED, "gurobi")
    if limits.log:
        p.LogToConsole, p.OutputFlag = 0, 1  # in this order: messages reach the callback only


def check_parameter(name: str, value: object) -> None:
    """Raise unless Gurobi takes the parameter ``name=value`` (for front ends that pass parameters on unchecked)."""
    import gurobipy as gp

    with gp.Env(empty=True) as env:  # not started: no license is checked out
        env.setParam("OutputFlag", 0)
        env.setParam(name, value)


@functools.cache
def size_limited_license() -> bool:
    """Whether the Gurobi license in use is size-limited (it refuses a model of ``LICENSE_SIZE + 1`` columns).

    One probe per process (~0.25 s, mostly the license check a solve makes anyway).
    """
    import gurobipy as gp

    try:
        with gp.Env(params={"OutputFlag": 0}) as env, gp.Model("license probe", env=env) as gm:
            gm.addMVar(LICENSE_SIZE + 1)
            gm.optimize()
    except gp.GurobiError as err:
        log.debug("gurobi: license probe: %s (error %s)", err, err.errno)
        return bool(err.errno == SIZE_LIMITED)
    return False


def _callback(traj: Trajectory, x: Any, lines: list[str] | None) -> Any:
    """A callback recording improving incumbents (sent to the parent from a hard-deadline child), and log lines."""
    from gurobipy import GRB

    def cb(gm: Any, where: int) -> None:
        if where == GRB.Callback.MIPSOL:
            obj = gm.cbGet(GRB.Callback.MIPSOL_OBJ)
            if not traj.points or obj != traj.points[-1][1]:
                traj.record(obj, lambda: gm.cbGetSolution(x))
        elif where == GRB.Callback.MESSAGE and lines is not None:
            lines.append(gm.cbGet(GRB.Callback.MSG_STRING).rstrip("\n"))

    return cb


def _result(gm: Any, x: Any, model: Model, traj: Trajectory, lines: list[str] | None) -> SolveResult:
    import gurobipy as gp

    has_sol = gm.SolCount > 0
    result = SolveResult(
        status=_status(gm.Status, has_sol),
        trajectory=traj.points,
        time_to_first=traj.first,
        solver_version="gurobi {}.{}.{}".format(*gp.gurobi.version()),
        log="\n".join(lines) if lines is not None else None,
    )
    if result.has_solution:
        result.x = np.asarray(x.X, dtype=np.float64)
        result.objective = model.objective_value(result.x)
        result.bound = float(gm.ObjBound) if gm.IsMIP else result.objective
        if not traj.points:  # an LP, or an optimum found before any callback
            traj.record(result.objective)
            result.trajectory, result.time_to_first = traj.points, traj.first
    if gm.Status == gp.GRB.INTERRUPTED:  # Ctrl-C caught by Gurobi itself, or terminate(): keep the incumbent
        result.status = SolveStatus.INTERRUPTED
    return result


def _status(status: int, has_solution: bool) -> SolveStatus:
    from gurobipy import GRB

    if status == GRB.OPTIMAL:
        return SolveStatus.OPTIMAL
    if status == GRB.INFEASIBLE:
        return SolveStatus.INFEASIBLE
    limited = (
        GRB.TIME_LIMIT,
        GRB.NODE_LIMIT,
        GRB.SOLUTION_LIMIT,
        GRB.ITERATION_LIMIT,
        GRB.INTERRUPTED,
        GRB.WORK_LIMIT,
        GRB.MEM_LIMIT,
        GRB.USER_OBJ_LIMIT,
        GRB.SUBOPTIMAL,
    )
    if status in limited:
        return SolveStatus.FEASIBLE if has_solution else SolveStatus.NO_SOLUTION
    return SolveStatus.SOLVER_ERROR


def _translate(err: Any, model: Model) -> Exception:
    """The library's error for a ``GurobiError``."""
    if err.errno == SIZE_LIMITED:
        return _too_large(model_size(model))
    if err.errno in NO_LICENSE:
        return BackendUnavailableError(f"gurobi: no usable license ({err}); {GurobiBackend.install_hint}")
    return SolverError(f"gurobi failed: {err} (error {err.errno})")


def _too_large(size: SizeEstimate) -> ModelTooLargeError:
    """The error for a model of ``size`` (after lowering) above a size-limited license's size."""
    return ModelTooLargeError(
        f"gurobi: the model ({size.variables} variables, {size.constraints} constraints after lowering) is"
        f" above the size limit of the license in use (pip's gurobipy ships a size-limited license: {LICENSE_SIZE}"
        f" variables and {LICENSE_SIZE} constraints); install a full Gurobi license, or use highs/cpsat",
        estimate=size.as_dict(),
    )
