"""CVXPY backend (``cvxpy[:SOLVER]``): the lowered model as a CVXPY problem, solved by any installed MILP solver.

Checkmate and MONeT were written in CVXPY; this backend lets their users keep the solver they know
(HIGHS, SCIP, GLPK_MI, CBC, GUROBI, SCIPY, ...). The model goes in as one vector variable (integer
where the model says so), sparse row blocks ``A x >= lb``, ``A x <= ub``, ``A x == b`` and bounds.
CVXPY reports no incumbents while solving, so the trajectory holds the final solution only, and a
solve cannot be stopped early (Ctrl-C waits for the time limit). A timed solve runs in a child killed at
a hard deadline (``backends/deadline.py``): CVXPY's own canonicalization ignores the limit. Values a
solver hands back at its limit count only if they satisfy the model (HiGHS returns its last iterate).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import warnings
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from remat_models.backends.base import LoweringBackend, SolveLimits, Trajectory, mentions
from remat_models.backends.gurobi import MAX_SEED as GUROBI_MAX_SEED
from remat_models.core.limits import INT32_MAX, fit_seed, fit_time_limit
from remat_models.errors import BackendUnavailableError, ConfigurationError, SolverError
from remat_models.model import Model, SolveResult, SolveStatus
from remat_models.model import constructs as C

log = logging.getLogger(__name__)


# CVXPY's MILP-capable solvers, in the order the default is picked from the installed ones.
MILP_SOLVERS = ("HIGHS", "SCIP", "GUROBI", "CBC", "GLPK_MI", "SCIPY", "CPLEX", "MOSEK", "XPRESS", "COPT")
INSTALL_HINT = (
    "pip install 'remat_models[cvxpy]' (cvxpy with HiGHS through highspy; other MILP solvers: "
    "pip install pyscipopt for SCIP, cylp for CBC, cvxopt for GLPK_MI, gurobipy for GUROBI)"
)
# Solvers whose CVXPY interface reads only these keywords of ``Problem.solve`` and drops any other silently.
READS_ONLY = {"SCIPY": ("scipy_options",)}


def installed_milp_solvers() -> list[str]:
    """The MILP solvers CVXPY can use here, in :data:`MILP_SOLVERS` order."""
    from cvxpy.reductions.solvers.defines import INSTALLED_MI_SOLVERS

    return [name for name in MILP_SOLVERS if name in INSTALLED_MI_SOLVERS]


def _highs_found() -> bool:
    """Whether highspy, CVXPY's first MILP solver, is installed (without importing CVXPY).

    CVXPY's import takes 1-2 s; a timed solve then spends it in its child, within the time limit, not before it.
    """
    return importlib.util.find_spec("highspy") is not None


class CvxpyBackend(LoweringBackend):
    """A CVXPY problem solved by the solver named in the option (default: the first installed MILP solver)."""

    name = "cvxpy"
    native_constructs = frozenset({C.CONTINUOUS})
    module = "cvxpy"
    takes_solver_options = True  # keyword arguments of ``Problem.solve`` for the chosen solver
    isolate_timed = True  # canonicalizing a Checkmate model takes seconds, outside the solver's limit
    install_hint = INSTALL_HINT
    options = tuple(solver.lower() for solver in MILP_SOLVERS)

    def __init__(self, option: str | None = None) -> None:
        super().__init__(option)
        if (option or "highs").upper() == MILP_SOLVERS[0] and _highs_found():
            self.solver = MILP_SOLVERS[0]
            return
        installed = installed_milp_solvers()
        self.solver = installed[0] if option is None and installed else (option or "").upper()
        if self.solver not in installed:
            raise BackendUnavailableError(
                f"cvxpy:{option}: CVXPY has no {self.solver or 'MILP'} solver here "
                f"(installed MILP solvers: {', '.join(installed) or 'none'}); {INSTALL_HINT}"
            )

    @classmethod
    def available(cls) -> bool:
        """CVXPY and at least one of its MILP solvers are installed."""
        return super().available() and (_highs_found() or bool(installed_milp_solvers()))

    def _solve_lowered(self, model: Model, limits: SolveLimits, hint: np.ndarray | None) -> SolveResult:
        import cvxpy as cp

        problem, x = build(model)
        warm = hint is not None and not np.isnan(hint).any()
        if warm:
            x.value = hint
        elif hint is not None:
            log.debug("cvxpy: a partial hint cannot be passed to CVXPY; ignored")
        traj = Trajectory()
        options = _solver_kwargs(self.solver, self.limits_left(limits))
        self.set_solver_options(limits, partial(_take_option, self.solver, options))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                problem.solve(solver=self.solver, warm_start=warm, **options)
            except Exception as err:
                name = _named_option(err, limits.solver_options)
                if name is not None:  # HiGHS, Gurobi and SCIP name the keyword they reject
                    value = limits.solver_options[name]
                    raise ConfigurationError(f"cvxpy: solver option {name}={value!r} rejected: {err}") from err
                if isinstance(err, cp.error.SolverError):
                    raise SolverError(f"cvxpy:{self.solver.lower()} failed: {err}") from err
                raise
        for warning in caught:
            log.debug("cvxpy: %s", warning.message)
        values = None if x.value is None else np.asarray(x.value, dtype=np.float64).reshape(-1)
        status = _status(problem.status, values is not None)
        if status == SolveStatus.FEASIBLE:
            values = self.proven(model, values)
            status = SolveStatus.FEASIBLE if values is not None else SolveStatus.NO_SOLUTION
        result = SolveResult(status=status, solver_version=_version())
        if values is not None and result.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
            result.x = values
            result.objective = model.objective_value(values)
            traj.record(result.objective)  # CVXPY has no incumbent callback: the final solution only
            result.bound = result.objective if result.status == SolveStatus.OPTIMAL else _bound(problem)
        result.trajectory, result.time_to_first = traj.points, traj.first
        return result


def build(model: Model) -> tuple[Any, Any]:
    """The CVXPY problem of ``model`` (linear rows and bounds only) and its vector variable."""
    import cvxpy as cp
    import scipy.sparse as sparse

    extra = model.constructs() - {C.CONTINUOUS}
    if extra:
        raise SolverError(f"cvxpy: lower the model first; it still holds {', '.join(sorted(extra))}")
    n = model.num_cols
    integer = np.flatnonzero(model.col_integer)
    x = cp.Variable(n, integer=[tuple(integer.tolist())]) if integer.size else cp.Variable(n)
    indptr, cols, vals, rlb, rub = model.linear_csr()
    matrix = sparse.csr_matrix((vals, cols, indptr), shape=(len(rlb), n))
    equal = np.isfinite(rlb) & (rlb == rub)
    constraints = []
    for rows, relation in ((equal, "=="), (np.isfinite(rlb) & ~equal, ">="), (np.isfinite(rub) & ~equal, "<=")):
        if rows.any():
            lhs, rhs = matrix[rows] @ x, (rlb if relation != "<=" else rub)[rows]
            constraints.append(lhs == rhs if relation == "==" else lhs >= rhs if relation == ">=" else lhs <= rhs)
    for bounds, lower in ((model.col_lb, True), (model.col_ub, False)):
        finite = np.flatnonzero(np.isfinite(bounds))
        if finite.size:
            constraints.append(x[finite] >= bounds[finite] if lower else x[finite] <= bounds[finite])
    objective = model.objective_vector() @ x + model.obj_offset
    goal = cp.Minimize(objective) if model.sense == "min" else cp.Maximize(objective)
    return cp.Problem(goal, constraints), x


def _solver_kwargs(solver: str, limits: SolveLimits) -> dict[str, Any]:
    """Time limit, gap, seed and threads in the spelling of ``solver`` (what it lacks is logged and left out)."""
    t, gap = limits.time_limit, limits.mip_gap
    name = f"cvxpy:{solver.lower()}"
    if solver == "HIGHS":
        options = {"time_limit": t, "mip_rel_gap": gap, "random_seed": fit_seed(limits.seed, INT32_MAX, name)}
        return {k: v for k, v in options.items() if v is not None}
    if solver == "GUROBI":
        seed = fit_seed(limits.seed, GUROBI_MAX_SEED, name)
        options = {"TimeLimit": t, "MIPGap": gap, "Seed": seed, "Threads": limits.workers, "OutputFlag": 0}
        return {k: v for k, v in options.items() if v is not None}
    if solver == "SCIPY":
        scipy = {"time_limit": t, "mip_rel_gap": gap}
        return {"scipy_options": {k: v for k, v in scipy.items() if v is not None}}
    if solver == "SCIP":
        seed = fit_seed(limits.seed, INT32_MAX, name)
        scip = {"limits/time": t, "limits/gap": gap, "randomization/randomseedshift": seed}
        return {"scip_params": {k: v for k, v in scip.items() if v is not None}}
    if solver == "CBC":
        seconds = None if t is None else max(1, math.ceil(fit_time_limit(t, INT32_MAX, name)))  # whole seconds
        cbc = {"maximumSeconds": seconds, "allowableFractionGap": gap}
        return {k: v for k, v in cbc.items() if v is not None}
    log.debug("cvxpy: no time limit, gap or seed passed to %s (not mapped here)", solver)
    return {}


def _take_option(solver: str, options: dict[str, Any], name: str, value: object) -> None:
    """Add the solver option ``name`` to ``options``; refuse it where CVXPY's interface would drop it unread."""
    if solver in READS_ONLY and name not in READS_ONLY[solver]:
        raise ValueError(f"CVXPY's {solver} interface reads only {', '.join(READS_ONLY[solver])}")
    options[name] = value


def _named_option(error: Exception, options: Mapping[str, Any]) -> str | None:
    """The solver option ``error`` names (the solver rejected it), if any."""
    return next((name for name in options if mentions(str(error), name)), None)


def _status(status: str, has_values: bool) -> SolveStatus:
    import cvxpy as cp

    if status == cp.OPTIMAL:
        return SolveStatus.OPTIMAL
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        return SolveStatus.INFEASIBLE
    if status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE, cp.SOLVER_ERROR):
        return SolveStatus.SOLVER_ERROR
    return SolveStatus.FEASIBLE if has_values else SolveStatus.NO_SOLUTION  # a limit, or an inaccurate optimum


def _bound(problem: Any) -> float | None:
    """The solver's dual bound after a limit, where CVXPY passes it on (HiGHS, SciPy, Gurobi)."""
    stats = problem.solver_stats.extra_stats
    for read in (
        lambda: stats["mip_dual_bound"],
        lambda: stats.mip_dual_bound,
        lambda: stats.ObjBound,
    ):
        try:
            value = float(read())
        except (KeyError, AttributeError, TypeError, ValueError):
            continue
        return value if math.isfinite(value) else None
    return None


def _version() -> str:
    import cvxpy as cp

    return f"cvxpy {cp.__version__}"
