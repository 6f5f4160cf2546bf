"""MiniZinc backend: the generic model of ``mzn.py`` plus ``.dzn`` data, solved through the ``minizinc`` package."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import shutil
import tempfile
import threading
import warnings
from collections.abc import Coroutine
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from remat_models.backends import mzn
from remat_models.backends.base import LoweringBackend, SolveLimits, Trajectory
from remat_models.backends.interrupt import Stopper
from remat_models.core.limits import INT32_MAX, fit_seed, fit_time_limit
from remat_models.errors import BackendUnavailableError, SolverError
from remat_models.model import Model, SolveResult, SolveStatus

log = logging.getLogger(__name__)

DEFAULT_SOLVER = "gecode"
BINARY_HINT = (
    "the MiniZinc binary: `apt-get install minizinc` (Debian/Ubuntu, ships Gecode) or the bundle from"
    " https://www.minizinc.org/software.html (ships Gecode, Chuffed, OR-Tools CP-SAT, HiGHS, COIN-BC)"
)
_PROBE = "var 0..1: probe; constraint probe = 1; solve satisfy;\n"
# MiniZinc 2.6 takes --time-limit in int32 milliseconds and adds its own time to it: from ~2**31 ms on it
# fails ("Invalid argument") or answers UNKNOWN at once, so longer limits are clamped to 10**9 ms (11.6 days).
MAX_TIME_LIMIT = 1e6
NARROW_SOLVERS = frozenset({"gecode", "chuffed"})  # 32-bit integers; the others hold mzn.EXACT_LIMIT
NO_LIMITS = SolveLimits()


class MiniZincBackend(LoweringBackend):
    """MiniZinc with a chosen solver (``minizinc:gecode`` by default); globals are passed natively."""

    name = "minizinc"
    native_constructs = mzn.NATIVE
    module = "minizinc"
    install_hint = f"pip install 'remat_models[minizinc]', and {BINARY_HINT}"
    options = ("gecode", "chuffed", "cp-sat", "or-tools", "highs", "cbc", "coinbc", "gurobi", "scip", "cplex", "xpress")
    isolate_timed = True  # 13 s past a 60 s limit (Checkmate, 199 nodes; Moccasin, 9,607 nodes): flattening, parsing

    def __init__(self, option: str | None = None) -> None:
        super().__init__(option)
        self.solver_tag = option or DEFAULT_SOLVER
        problem = solver_problem(self.solver_tag)
        if problem:
            raise BackendUnavailableError(f"minizinc:{self.solver_tag} is not usable here: {problem}")

    @classmethod
    def available(cls) -> bool:
        """The ``minizinc`` package, the binary and the default solver (Gecode) all work."""
        return super().available() and solver_problem(DEFAULT_SOLVER) is None

    def solve(self, model: Model, limits: SolveLimits = NO_LIMITS, hints: dict[str, Any] | None = None) -> SolveResult:
        """As every backend's; the time limit clamped to MiniZinc's range first (logged here, not in the child)."""
        if limits.time_limit is not None:
            limits = replace(limits, time_limit=fit_time_limit(limits.time_limit, MAX_TIME_LIMIT, "minizinc"))
        return super().solve(model, limits, hints)

    def _solve_lowered(self, model: Model, limits: SolveLimits, hint: np.ndarray | None) -> SolveResult:
        import minizinc

        solver = minizinc.Solver.lookup(self.solver_tag)
        with tempfile.TemporaryDirectory(prefix="remat_mzn_") as tmp:
            paths = Path(tmp) / "model.mzn", Path(tmp) / "model.dzn"
            limit = mzn.INT32_LIMIT if self.solver_tag in NARROW_SOLVERS else mzn.EXACT_LIMIT
            scale = mzn.write(model, *paths, hint, limit=limit, solver=f"minizinc:{self.solver_tag}")
            instance = minizinc.Instance(solver, minizinc.Model(list(paths)))
            kwargs = _solve_kwargs(solver, self.limits_left(limits))
            traj = Trajectory()
            try:
                status, x, stats = _run(_stream(instance, kwargs, model, traj, self.stopper))
            except minizinc.MiniZincError as err:
                raise SolverError(f"minizinc:{self.solver_tag} failed: {err}") from err
        result = SolveResult(
            status=_status(status, x is not None),
            trajectory=traj.points,
            time_to_first=traj.first,
            solver_version=f"MiniZinc {minizinc.default_driver.parsed_version} / {solver.name} {solver.version}",
            log=json.dumps(stats, default=str) if limits.log else None,
        )
        if result.has_solution and x is not None:
            result.x = x
            result.objective = model.objective_value(x)
            result.bound = result.objective if result.status == SolveStatus.OPTIMAL else _bound(model, stats, scale)
        return result


@functools.cache
def solver_problem(tag: str) -> str | None:
    """Why MiniZinc with solver ``tag`` cannot run here (None if it can); solves a one-variable model once."""
    try:
        import minizinc
    except ImportError:
        return "the Python package is missing: pip install 'remat_models[minizinc]'"
    if minizinc.default_driver is None or shutil.which("minizinc") is None:
        return f"the `minizinc` executable is not on PATH; install {BINARY_HINT}"
    try:
        solver = minizinc.Solver.lookup(tag)
    except LookupError:
        known = sorted(tag for tag in minizinc.default_driver.available_solvers() if "." not in tag)
        return f"MiniZinc knows no solver {tag!r} (installed: {', '.join(known)}); install {BINARY_HINT}"
    try:
        probe = minizinc.Model()
        probe.add_string(_PROBE)
        res = _run(minizinc.Instance(solver, probe).solve_async(time_limit=timedelta(seconds=20)))
    except Exception as err:  # a configured solver whose library is missing fails here
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"solver {tag!r} is configured but does not run ({first}); install it with {BINARY_HINT}"
    if res.solution is None or res.solution.probe != 1:
        return f"solver {tag!r} failed a trivial model (status {res.status})"
    return None


async def _stream(
    instance: Any, kwargs: dict[str, Any], model: Model, traj: Trajectory, stopper: Stopper
) -> tuple[Any, np.ndarray | None, dict[str, Any]]:
    """Collect intermediate solutions into ``traj``; return (final status, best x, statistics).

    ``stopper.stop()`` (Ctrl-C) cancels the stream, which ends the MiniZinc process; the best so far is kept.
    """
    import minizinc

    status, best, stats = minizinc.Status.UNKNOWN, None, {}
    loop, task, cancelled = asyncio.get_running_loop(), asyncio.current_task(), threading.Event()

    def cancel() -> None:  # once: a second cancel could cut short the stream's clean-up of the process
        if task is not None and not cancelled.is_set():
            cancelled.set()
            loop.call_soon_threadsafe(task.cancel)

    stopper.on_stop(cancel)
    try:
        async for r in instance.solutions(intermediate_solutions=True, **kwargs):
            status = r.status
            stats.update(r.statistics)
            if r.solution is not None:
                best = np.asarray(r.solution.x, dtype=np.float64)
                traj.record(model.objective_value(best), best.copy)
    except asyncio.CancelledError:
        if not stopper.stopped.is_set():
            raise
        status = minizinc.Status.SATISFIED if best is not None else minizinc.Status.UNKNOWN
    return status, best, stats


def _solve_kwargs(solver: Any, limits: SolveLimits) -> dict[str, Any]:
    """MiniZinc options from the limits (flags the solver lacks are left out, with a debug note)."""
    kwargs: dict[str, Any] = {}
    if limits.time_limit is not None:
        seconds = fit_time_limit(limits.time_limit, MAX_TIME_LIMIT, "minizinc")
        kwargs["time_limit"] = timedelta(seconds=seconds)
    if limits.workers > 1:
        if "-p" in solver.stdFlags:
            kwargs["processes"] = limits.workers
        else:
            log.debug("minizinc: %s takes no -p; workers=%d ignored", solver.id, limits.workers)
    if "-r" in solver.stdFlags:
        kwargs["random_seed"] = fit_seed(limits.seed, INT32_MAX, "minizinc")
    if limits.mip_gap is not None:
        log.debug("minizinc: mip_gap ignored (MiniZinc has no solver-independent gap option)")
    return kwargs


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to completion (also from inside a running event loop); MiniZinc's warnings go to the log."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        else:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                return pool.submit(asyncio.run, coro).result()
        finally:
            for w in caught:
                log.debug("minizinc: %s", w.message)


def _status(status: Any, has_solution: bool) -> SolveStatus:
    import minizinc

    s = minizinc.Status
    if status in (s.OPTIMAL_SOLUTION, s.ALL_SOLUTIONS):
        return SolveStatus.OPTIMAL
    if status == s.UNSATISFIABLE:
        return SolveStatus.INFEASIBLE
    if status in (s.SATISFIED, s.UNKNOWN):
        return SolveStatus.FEASIBLE if has_solution else SolveStatus.NO_SOLUTION
    return SolveStatus.SOLVER_ERROR


def _bound(model: Model, stats: dict[str, Any], scale: float) -> float:
    """Best bound: the solver's ``objectiveBound`` if it reports one, else the bound implied by column bounds."""
    if "objectiveBound" in stats:
        sign = 1 if model.sense == "min" else -1
        return sign * float(stats["objectiveBound"]) / scale + model.obj_offset
    coefs = model.objective_vector()
    lo, hi = coefs * model.col_lb, coefs * model.col_ub
    with np.errstate(invalid="ignore"):
        per_col = np.where(coefs == 0, 0.0, np.minimum(lo, hi) if model.sense == "min" else np.maximum(lo, hi))
    return float(per_col.sum() + model.obj_offset)
