"""Pyomo backend: the lowered (linear) model as a ``ConcreteModel``, solved by any Pyomo solver (``pyomo:cbc``).

A timed solve runs in a child killed at a hard deadline (``backends/deadline.py``): building the model and
handing it to the solver take seconds in Python, outside the solver's limit. Solver options (``-S``) are
checked against HiGHS's and Gurobi's own tables for the plug-ins on those solvers, and otherwise against
the solver's output after the solve (CBC: "No match for NAME", GLPK: "Invalid option '--NAME'").
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import math
import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from remat_models.backends.base import LoweringBackend, SolveLimits, Trajectory, mentions
from remat_models.core.limits import INT32_MAX, fit_time_limit
from remat_models.errors import BackendUnavailableError, ConfigurationError, SolverError
from remat_models.model import Model, SolveResult, SolveStatus
from remat_models.model import constructs as C

log = logging.getLogger(__name__)


DEFAULT_SOLVER = "appsi_highs"
_PYOMO_PLACEHOLDERS = "pyomo.common.dependencies."  # sys.modules names of Pyomo's deferred imports


def pyomo_environ() -> Any:
    """``pyomo.environ``, imported, with Pyomo's placeholders for the optional modules it lacks out of ``sys.modules``.

    Pyomo registers e.g. ``pyomo.common.dependencies.pyutilib`` there even when pyutilib is missing, and
    ``getattr`` on such a placeholder raises DeferredImportError, not AttributeError: that breaks
    ``pickle.whichmodule`` (it walks ``sys.modules``) for the rest of the process, torch inductor's cache
    key included.
    """
    import pyomo.environ as pe

    for name in [name for name in sys.modules if name.startswith(_PYOMO_PLACEHOLDERS)]:
        if importlib.util.find_spec(name.removeprefix(_PYOMO_PLACEHOLDERS).split(".")[0]) is None:
            del sys.modules[name]
    return pe


# How to install the solvers most often asked for; others fall back to Pyomo's documentation.
SOLVER_HINTS = {
    "appsi_highs": "pip install 'highspy>=1.14,<1.15'",
    "highs": "pip install 'highspy>=1.14,<1.15'",
    "cbc": "apt-get install coinor-cbc (or conda install -c conda-forge coincbc)",
    "appsi_cbc": "apt-get install coinor-cbc (or conda install -c conda-forge coincbc)",
    "glpk": "apt-get install glpk-utils (or conda install -c conda-forge glpk)",
    "gurobi_direct": "pip install 'remat_models[gurobi]'",
    "gurobi_persistent": "pip install 'remat_models[gurobi]'",
    "appsi_gurobi": "pip install 'remat_models[gurobi]'",
}
# Solver option carrying the relative MIP gap, per solver (appsi solvers take config.mip_gap).
GAP_OPTION = {
    "cbc": "ratio",
    "glpk": "mipgap",
    "cplex": "mip_tolerances_mipgap",
    "scip": "limits/gap",
    "gurobi": "MIPGap",
    "gurobi_direct": "MIPGap",
    "gurobi_persistent": "MIPGap",
}
HIGHS_PLUGINS = ("appsi_highs", "highs")  # plug-ins passing options to HiGHS unchecked: checked with highspy first
# How a solver reports an option it does not know, on the line naming it.
REJECTED = re.compile(r"no match|invalid|unknown|unrecogni[sz]ed|illegal|not (a )?valid", re.IGNORECASE)


class SolverNames(tuple[str, ...]):
    """Spellings accepted after ``pyomo:``: the listed ones, and any other name Pyomo's SolverFactory knows."""

    __slots__ = ()

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (isinstance(name, str) and _pyomo_knows(name))


class PyomoBackend(LoweringBackend):
    """Pyomo ``ConcreteModel`` of the fully lowered model; the solver is the option (``appsi_highs`` by default)."""

    name = "pyomo"
    native_constructs = frozenset({C.CONTINUOUS})
    module = "pyomo"
    takes_solver_options = True  # the plug-in's ``options`` (passed to the solver as it names them)
    isolate_timed = True  # building the ConcreteModel and handing it over take seconds, outside the solver's limit
    install_hint = (
        "pip install 'remat_models[pyomo]' (appsi_highs runs on highspy;"
        " cbc/glpk: apt-get install coinor-cbc glpk-utils)"
    )
    options = SolverNames(("appsi_highs", "highs", "cbc", "glpk", "gurobi_direct", "gurobi_persistent", "scip"))

    def __init__(self, option: str | None = None) -> None:
        super().__init__(option)
        self.solver_name = option or DEFAULT_SOLVER
        if super().available() and not _solver_available(self.solver_name):
            hint = SOLVER_HINTS.get(self.solver_name, "see Pyomo's solver documentation")
            raise BackendUnavailableError(f"pyomo:{self.solver_name}: Pyomo finds no such solver here; install: {hint}")

    @classmethod
    def available(cls) -> bool:
        """Pyomo is importable and its default solver (appsi_highs) is installed (highspy)."""
        return super().available() and _solver_available(DEFAULT_SOLVER)

    def _solve_lowered(self, model: Model, limits: SolveLimits, hint: np.ndarray | None) -> SolveResult:
        from pyomo.common.errors import ApplicationError
        from pyomo.solvers.plugins.solvers.persistent_solver import PersistentSolver

        pe = pyomo_environ()
        self.set_solver_options(limits, _option_check(self.solver_name))  # before the build: seconds
        pm = build(model)
        opt = pe.SolverFactory(self.solver_name)
        kwargs = self._configure(opt, self.limits_left(limits))
        output = _Output()
        if hasattr(opt, "config") and "solver_output_logger" in opt.config:  # appsi plug-ins
            opt.config.solver_output_logger = output
        if hint is not None:
            if opt.warm_start_capable():
                for var, v in zip(pm.x.values(), hint.tolist(), strict=True):
                    if v == v:  # not NaN
                        var.set_value(v, skip_validation=True)
                kwargs["warmstart"] = True
            else:
                log.debug("pyomo: %s takes no warm start; hints ignored", self.solver_name)
        if isinstance(opt, PersistentSolver):  # gurobi_persistent and the like solve the instance they were given
            opt.set_instance(pm)
        traj = Trajectory()
        try:
            res = opt.solve(pm, **kwargs)
        except (ApplicationError, RuntimeError, ValueError, subprocess.SubprocessError) as err:
            self._check_output(limits, output.lines, opt)
            raise SolverError(f"pyomo:{self.solver_name} failed: {err}") from err
        self._check_output(limits, output.lines, opt)
        x = _load(pm, res)
        status = _status(res, x is not None)
        if status == SolveStatus.FEASIBLE:  # stopped at a limit: keep the values only if they are a solution
            x = self.proven(model, x)
            status = SolveStatus.FEASIBLE if x is not None else SolveStatus.NO_SOLUTION
        if x is not None:
            traj.record(model.objective_value(x))  # Pyomo has no generic incumbent callback: the final one only
        result = SolveResult(
            status=status,
            trajectory=traj.points,
            time_to_first=traj.first,
            solver_version=_version(opt, self.solver_name),
            log=str(res) if limits.log else None,
        )
        if result.has_solution and x is not None:
            result.x = x
            result.objective = model.objective_value(x)
            bound = res.problem.lower_bound if model.sense == "min" else res.problem.upper_bound
            if result.status == SolveStatus.OPTIMAL and limits.mip_gap is None:
                result.bound = result.objective  # legacy plugins report no bound at optimality
            elif bound is not None and math.isfinite(float(bound)):
                result.bound = float(bound)
        return result

    def _configure(self, opt: Any, limits: SolveLimits) -> dict[str, Any]:
        """Set time limit and gap on ``opt``; return the keyword arguments for ``opt.solve``."""
        name = self.solver_name
        kwargs: dict[str, Any] = {"load_solutions": False, "tee": False}
        if limits.time_limit is not None:
            t = float(limits.time_limit)
            if name == "glpk":  # not `timelimit` (shell plugins also kill the process with it); whole seconds, an int
                opt.options["tmlim"] = max(1, math.ceil(fit_time_limit(t, INT32_MAX, "pyomo:glpk")))
            elif name == "cbc":
                opt.options["sec"] = t
                opt.options["timeMode"] = "elapsed"  # CBC counts CPU seconds by default
            else:
                kwargs["timelimit"] = t  # appsi and direct plugins map it to the solver's own limit
        gap = limits.mip_gap
        if gap is not None:
            if hasattr(opt, "config") and "mip_gap" in opt.config:
                opt.config.mip_gap = gap
            elif name in GAP_OPTION:
                opt.options[GAP_OPTION[name]] = gap
            else:
                log.debug("pyomo: no known gap option for %s; mip_gap ignored", name)
        if limits.workers > 1 or limits.seed:
            log.debug("pyomo: workers/seed are not passed on (no solver-independent Pyomo option)")
        opt.options.update(limits.solver_options)  # checked before the build, or after the solve
        return kwargs

    def _check_output(self, limits: SolveLimits, lines: list[str], opt: Any) -> None:
        """Raise ConfigurationError if the solver's output reports a solver option it does not know."""
        if not limits.solver_options:
            return
        output = [*lines, *(getattr(opt, "_log", None) or "").splitlines()]  # shell plug-ins keep theirs in _log
        for name, value in limits.solver_options.items():
            said = next((line for line in output if mentions(line, name) and REJECTED.search(line)), None)
            if said is not None:
                raise ConfigurationError(f"pyomo: solver option {name}={value!r} rejected: {said.strip()}")


class _Output(logging.Logger):
    """Collects the solver output of Pyomo's appsi plug-ins, which would log it to the user's handlers.

    Those plug-ins capture the process's stdout and stderr meanwhile, so a handler writing to the terminal
    (``remat -v``) would feed the capture back to itself.
    """

    def __init__(self) -> None:
        super().__init__("remat_models.backends.pyomo.output")
        self.propagate = False
        self.lines: list[str] = []

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        """Keep the line (Pyomo's ``LogStream`` sends one per call)."""
        self.lines.append(str(msg))


def _option_check(solver: str) -> Callable[[str, Any], None]:
    """How to check one option of ``solver`` before the solve (raises if refused); a no-op where none is known."""
    if solver in HIGHS_PLUGINS:
        from remat_models.backends.highs import check_option

        return check_option
    if "gurobi" in solver:
        from remat_models.backends.gurobi import check_parameter

        return check_parameter
    return lambda name, value: None


def build(model: Model) -> Any:
    """A Pyomo ``ConcreteModel`` with ``x[j]`` per column, one constraint per linear row and the objective."""
    from pyomo.core.expr.numeric_expr import LinearExpression

    pe = pyomo_environ()
    extra = model.constructs() - {C.CONTINUOUS}
    if extra:
        raise SolverError(f"pyomo: lower the model first; it still holds {', '.join(sorted(extra))}")
    t0 = time.perf_counter()
    lb = [None if not np.isfinite(v) else v for v in model.col_lb.tolist()]
    ub = [None if not np.isfinite(v) else v for v in model.col_ub.tolist()]
    binary = (model.col_integer & (model.col_lb >= 0) & (model.col_ub <= 1)).tolist()
    integer = model.col_integer.tolist()
    domains = [pe.Binary if b else pe.Integers if i else pe.Reals for b, i in zip(binary, integer, strict=True)]
    pm = pe.ConcreteModel(name=model.name)
    pm.x = pe.Var(range(model.num_cols), dense=True)
    xs = list(pm.x.values())
    for var, d, lo, hi in zip(xs, domains, lb, ub, strict=True):
        var.domain = d
        var.setlb(lo)
        var.setub(hi)
    indptr, cols, vals, rlb, rub = model.linear_csr()
    ptr, cols_l, vals_l = indptr.tolist(), cols.tolist(), vals.tolist()
    rlo = [None if not np.isfinite(v) else v for v in rlb.tolist()]
    rhi = [None if not np.isfinite(v) else v for v in rub.tolist()]
    pm.rows = pe.ConstraintList()
    for r in range(len(rlo)):
        s, e = ptr[r], ptr[r + 1]
        expr = LinearExpression(constant=0.0, linear_coefs=vals_l[s:e], linear_vars=[xs[j] for j in cols_l[s:e]])
        pm.rows.add((rlo[r], expr, rhi[r]))
    coefs = model.objective_vector()
    nz = np.flatnonzero(coefs)
    obj = LinearExpression(
        constant=model.obj_offset, linear_coefs=coefs[nz].tolist(), linear_vars=[xs[j] for j in nz.tolist()]
    )
    pm.obj = pe.Objective(expr=obj, sense=pe.minimize if model.sense == "min" else pe.maximize)
    log.debug("pyomo: built %d columns, %d rows in %.2f s", model.num_cols, len(rlo), time.perf_counter() - t0)
    return pm


def _load(pm: Any, res: Any) -> np.ndarray | None:
    """Load the solver's solution into ``pm`` and return the column values (None if there is none)."""
    from pyomo.common.log import LoggingIntercept

    if len(res.solution) == 0:
        return None
    with LoggingIntercept(level=logging.WARNING) as out:  # Pyomo warns on loading a time-limited solution
        try:
            pm.solutions.load_from(res)
        except (ValueError, RuntimeError) as err:
            log.debug("pyomo: no solution to load: %s", err)
            return None
        finally:
            if out.getvalue():
                log.debug("pyomo: %s", out.getvalue().strip())
    x = np.array([v.value for v in pm.x.values()], dtype=np.float64)
    return None if np.isnan(x).any() else x


def _status(res: Any, has_solution: bool) -> SolveStatus:
    from pyomo.opt import TerminationCondition as TC

    tc = res.solver.termination_condition
    if tc in (TC.optimal, TC.globallyOptimal, TC.locallyOptimal):
        return SolveStatus.OPTIMAL
    if tc in (TC.infeasible, TC.infeasibleOrUnbounded):
        return SolveStatus.INFEASIBLE
    if tc in (
        TC.maxTimeLimit,
        TC.maxIterations,
        TC.maxEvaluations,
        TC.userInterrupt,
        TC.feasible,
        TC.intermediateNonInteger,
        TC.minStepLength,
        TC.unknown,
    ):
        return SolveStatus.FEASIBLE if has_solution else SolveStatus.NO_SOLUTION
    return SolveStatus.SOLVER_ERROR


def _version(opt: Any, name: str) -> str:
    import pyomo.version

    try:
        v = opt.version()
        solver = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # some plugins cannot report a version without a model
        solver = "?"
    return f"pyomo {pyomo.version.version} / {name} {solver}"


@functools.cache
def _pyomo_knows(name: str) -> bool:
    """Whether Pyomo's SolverFactory has a plugin called ``name`` (True when Pyomo is missing: decided later)."""
    try:
        pe = pyomo_environ()
    except ImportError:
        return True
    return name in pe.SolverFactory


@functools.cache
def _solver_available(name: str) -> bool:
    """Whether Pyomo can run solver ``name`` here.

    HiGHS's plug-ins: whether highspy is installed, without importing Pyomo (0.4-1.5 s, which a timed solve
    then spends in its child, within the time limit, not before it).
    """
    if name in HIGHS_PLUGINS:
        return importlib.util.find_spec("highspy") is not None
    pe = pyomo_environ()

    try:
        return bool(pe.SolverFactory(name).available(exception_flag=False))
    except Exception as err:  # some plugins raise instead of answering False
        log.debug("pyomo: %s unavailable: %s", name, err)
        return False
