"""A run's outcome fields from a PlanResult, and the versions and machine recorded beside them."""

from __future__ import annotations

import functools
import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any

from remat_models.planning.plan import PlanResult, Status

# Statuses a record can have: the planner's, and the ones the isolation adds.
RUN_STATUSES = tuple(
    s.value
    for s in (
        *(Status.WITHIN_BUDGET, Status.OVER_BUDGET, Status.INFEASIBLE, Status.NO_SCHEDULE_IN_MODEL),
        *(Status.NO_SCHEDULE, Status.SOLVER_ERROR),
        *(Status.ERROR, Status.OOM, Status.TIMEOUT, Status.CRASHED),
        Status.INTERRUPTED,  # the sweep stopped it (rerun on resume)
    )
)
_PACKAGES = ("remat_models", "numpy", "ortools", "highspy", "gurobipy", "minizinc", "numba", "torch")
# Every record has these keys (None where a run produced no value), plus error fields when it failed.
OUTCOME_FIELDS = (
    "status",
    "solver_status",
    "objective",
    "total_cost",
    "tdi",
    "peak",
    "peak_fraction",
    "recomputations",
    "bound",
    "gap",
    "lower_bound",
    "lower_bound_tdi",
    "lower_bound_method",
    "lower_bound_gap",
    "peak_lower_bound",
    "time_to_first_s",
    "time_to_best_s",
    "wall_s",
    "process_s",
    "error_type",
    "error",
)
_MOVED = ("trajectory", "objective", "bound", "gap", "time_to_first_s", "time_to_best_s")


def outcome_of(result: PlanResult, process_s: float) -> dict[str, Any]:
    """Flatten a PlanResult into record fields; the solver's own ``details`` are kept under ``details``."""
    sim = result.simulation
    details = dict(result.details)
    trajectory = [[float(t), float(v)] for t, v in details.get("trajectory") or []]
    objective = details.get("objective")
    if objective is None and sim is not None:
        objective = sim.total_cost
    bound = details.get("bound", details.get("lp_bound"))
    time_to_best = details.get("time_to_best_s") or _time_to_best(trajectory)
    if time_to_best is None and sim is not None:
        time_to_best = result.wall_time
    time_to_first = details.get("time_to_first_s")
    if time_to_first is None and sim is not None:
        time_to_first = trajectory[0][0] if trajectory else result.wall_time
    return {
        "status": result.status.value,
        "method_label": result.method,
        "solver_status": details.get("solver_status", details.get("lp_status")),
        "objective": objective,
        "total_cost": None if sim is None else sim.total_cost,
        "tdi": None if sim is None else sim.tdi,
        "peak": None if sim is None else sim.peak,
        "peak_fraction": None if sim is None else result.peak_fraction,
        "recomputations": None if sim is None else sim.recomputations,
        "bound": bound,
        "gap": details.get("gap"),
        "lower_bound": None if result.lower_bound is None else result.lower_bound.value,  # every schedule's
        "lower_bound_tdi": None if result.lower_bound is None else result.lower_bound.tdi,
        "lower_bound_method": None if result.lower_bound is None else result.lower_bound.proof,
        "lower_bound_gap": result.lower_bound_gap,
        "peak_lower_bound": None if result.peak_lower_bound is None else result.peak_lower_bound.value,
        "time_to_first_s": time_to_first,
        "time_to_best_s": time_to_best,
        "wall_s": result.wall_time,
        "process_s": process_s,
        "trajectory": trajectory,
        "details": {key: value for key, value in details.items() if key not in _MOVED},
    }


def _time_to_best(trajectory: list[list[float]]) -> float | None:
    if not trajectory:
        return None
    best = min(value for _, value in trajectory)
    return next(t for t, value in trajectory if value <= best + 1e-9 * max(1.0, abs(best)))


@functools.cache
def versions() -> dict[str, str]:
    """Python and the installed versions of the packages that shape results."""
    found = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


@functools.cache
def machine() -> dict[str, Any]:
    """Host name, OS, CPU model and count, memory of the machine that ran the process."""
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": _memory_gib(),
        "executable": sys.executable,
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None
