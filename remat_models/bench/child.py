"""The isolated run: ``python -m remat_models.bench.child RESULT.json`` reads a task (JSON) on stdin, plans, writes.

The parent (:mod:`remat_models.bench.isolate`) kills this process at time limit + grace and records a crash
(signal, exit code) when it dies without writing its result.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from remat_models.bench.clock import method_time_limit
from remat_models.bench.methods import MethodSpec
from remat_models.bench.record import outcome_of
from remat_models.bench.sweep import RunSpec
from remat_models.bench.watchdog import start_watchdog
from remat_models.core.plugins import load_callable
from remat_models.errors import ConfigurationError, GraphError
from remat_models.extensions.registry import make_extensions
from remat_models.io import read_graph, write_json_atomic, write_schedule
from remat_models.planning.methods import PORTFOLIOS
from remat_models.planning.plan import PlanResult, Status, plan

log = logging.getLogger(__name__)


def execute(run: RunSpec) -> dict[str, Any]:
    """Plan one run in this process and return its outcome fields (status, numbers, trajectory)."""
    if run.memory_limit is not None:
        resource.setrlimit(resource.RLIMIT_AS, (run.memory_limit, run.memory_limit))
    started = time.perf_counter()
    try:
        graph = read_graph(run.graph_path)
        if graph.content_hash != run.graph_hash:
            raise GraphError(f"{run.graph_path} changed since the sweep was expanded (hash differs)")
        time_limit = method_time_limit(run.time_limit) or run.time_limit  # the start-up counts: 1.1 x limit + 2 s
        result = call_method(run.method, graph, run.budget, seed=run.seed, time_limit=time_limit)
        if time_limit != run.time_limit:
            result.details["method_time_limit"] = time_limit
        if run.schedule_dir is not None and result.schedule is not None:
            target = Path(run.schedule_dir) / f"{run.run_id}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            write_schedule(target, result.schedule, graph, metadata={"run_id": run.run_id, **result.metadata()})
        return outcome_of(result, time.perf_counter() - started)
    except MemoryError:
        oom = {"status": Status.OOM.value, "error_type": "MemoryError", "error": "out of memory"}
        return {**oom, "process_s": _since(started)}
    except Exception as error:  # any failure of one run is recorded, never fatal to the sweep
        log.debug("run %s failed", run.run_id, exc_info=True)
        detail = "".join(traceback.format_exception_only(error)).strip()
        failed = {"status": Status.ERROR.value, "error_type": type(error).__name__, "error": detail}
        return {**failed, "process_s": _since(started)}


def call_method(method: MethodSpec, graph: Any, budget: int, *, seed: int, time_limit: float) -> PlanResult:
    """Run a method spec through the planner (or a plug-in that returns a PlanResult)."""
    if method.kind == "plugin":
        result = load_callable(str(method.plugin))(graph, budget, seed=seed, time_limit=time_limit, **method.options)
        if not isinstance(result, PlanResult):
            raise ConfigurationError(f"plug-in {method.plugin} returned {type(result).__name__}, not a PlanResult")
        return result
    ref = method.ref
    # a heuristic gets a method-level limit only (FastSA: 60 s); `auto` the run's (without it: its own default,
    # 47 s for a 30 s sweep on a 185-node CNN, #34)
    solver_limit = time_limit if ref.is_solver or ref.method in PORTFOLIOS else None
    return plan(
        graph,
        budget,
        ref,
        time_limit=solver_limit if method.time_limit is None else time_limit,
        init=method.init,
        options=method.options or None,
        extensions=make_extensions(method.extensions),
        seed=seed,
        workers=method.workers,
        allow_over_budget=True,  # recorded as status over_budget
    )


def _since(started: float) -> float:
    return time.perf_counter() - started


def main() -> None:
    """Read the task from stdin, run it, write the outcome atomically to argv[1]."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    run = RunSpec.from_task(json.load(sys.stdin))
    start_watchdog(Path(sys.argv[1]).parent, run.time_limit + run.grace)
    write_json_atomic(sys.argv[1], execute(run))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    logging.shutdown()
    os._exit(0)  # written: no interpreter teardown (numba, solvers: up to 1 s under load, inside the run's limit)


if __name__ == "__main__":
    main()
