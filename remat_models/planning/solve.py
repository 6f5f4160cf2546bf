"""What ``plan()`` runs for a formulation: warm start, solve or approximate, and never return worse than the start."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from remat_models.backends import SolveLimits
from remat_models.backends.interrupt import run_stoppable
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, simulate
from remat_models.errors import ConfigurationError, ModelTooLargeError
from remat_models.formulations import Extension, Formulation, SolveOutcome, get_formulation
from remat_models.formulations.solving import DEFAULT_LIMITS, approximate, solve_model
from remat_models.model import SolveStatus
from remat_models.planning.lns import MAX_WINDOW_NODES, improve_by_windows
from remat_models.planning.result import MethodRun
from remat_models.planning.warm_start import WarmStart, initial_schedule

log = logging.getLogger(__name__)

DEFAULT_WINDOW_SECONDS = 60.0  # windows re-solved for this long when no time limit is given
MIN_SOLVE_SECONDS = 1.0  # less than this (or half the limit) left after the warm start: no build, no solve


def run_formulation(
    graph: Graph,
    budget: int,
    formulation: str,
    *,
    backend: str | None = None,
    approx: str | None = None,
    init: str | Schedule | None = "auto",
    options: Mapping[str, Any] | None = None,
    extensions: Sequence[Extension] = (),
    limits: SolveLimits = DEFAULT_LIMITS,
    windows: bool | None = None,
) -> MethodRun:
    """Warm start (``init``), solve or approximate ``formulation``, and keep the warm start if the solver did worse.

    ``windows``: re-solve windows of the warm start with the formulation's model (:mod:`remat_models.planning.lns`)
    instead of the whole graph; None (the default) does so above the formulation's ``window_nodes`` and where the
    whole model is too large. The time limit covers the warm start and the build; a model too large for a whole
    solve fails before the warm start runs.
    SIGINT or SIGTERM during the warm start returns it (FastSA's best so far) without solving; during the
    build or the solve it stops the solver, which keeps its incumbent.
    """
    started = time.perf_counter()
    if approx is not None and windows:
        raise ConfigurationError(f"windows re-solve {formulation}'s own model, not the approximation {approx!r}")
    if approx is not None:
        outcome = approximate(
            graph, budget, formulation, approx, backend, options=options, limits=limits, extensions=extensions
        )
        return _run_of(f"{formulation}/{approx}", graph, budget, outcome, None, init, extensions)
    form = get_formulation(formulation)
    windowed = _windowed(form, graph, budget, options, extensions, windows)
    if not windowed:
        form.check_size(graph, budget, options)  # ModelTooLargeError before any work
    elif init is None or init == "none":
        log.info("%s: windows need a start: init 'auto'", formulation)
        init = "auto"

    def work(stop: threading.Event) -> tuple[WarmStart | None, SolveOutcome | None]:
        start = initial_schedule(graph, budget, init, seed=limits.seed, time_limit=limits.time_limit, stop=stop)
        left, limit = limits, limits.time_limit
        if limit is not None:  # the warm start's time counts against the limit
            remaining = limit - (time.perf_counter() - started)
            if remaining < min(MIN_SOLVE_SECONDS, limit / 2):
                return start, None
            left = replace(limits, time_limit=remaining)
        if stop.is_set():
            return start, None
        initial = None if start is None else start.schedule
        if windowed:
            return start, _solve_windows(graph, budget, formulation, backend, start, options, left, stop)
        return start, solve_model(
            graph, budget, formulation, backend, options=options, limits=left, init=initial, extensions=extensions
        )

    (start, outcome), interrupted = run_stoppable(work)
    if outcome is None:
        label = f"{formulation}/{backend or get_formulation(formulation).default_backend}"
        return _unsolved(label, graph, budget, start, init, extensions, interrupted)
    run = _run_of(f"{formulation}/{outcome.backend}", graph, budget, outcome, start, init, extensions)
    return run if run.interrupted_by is not None or interrupted is None else replace(run, interrupted_by=interrupted)


def _windowed(
    form: Formulation,
    graph: Graph,
    budget: int,
    options: Mapping[str, Any] | None,
    extensions: Sequence[Extension],
    windows: bool | None,
) -> bool:
    """Whether to solve by windows: asked, or by default above ``window_nodes`` or where the model is too large.

    Never with extensions or operator implementations (a window graph carries neither).
    """
    if windows is False or extensions or graph.impl_table is not None:
        if windows:
            raise ConfigurationError("windows take graphs without extensions or operator implementations")
        return False
    if windows:
        return True
    if form.window_nodes is not None and graph.n > form.window_nodes:
        return True
    try:
        form.check_size(graph, budget, options)
    except ModelTooLargeError as error:
        log.info("%s; solving windows of a start instead", error)
        return True
    return False


def _solve_windows(
    graph: Graph,
    budget: int,
    formulation: str,
    backend: str | None,
    start: WarmStart | None,
    options: Mapping[str, Any] | None,
    limits: SolveLimits,
    stop: threading.Event,
) -> SolveOutcome:
    """Windows of the warm start re-solved exactly (never "optimal": the rest of the schedule stays fixed)."""
    backend = backend or get_formulation(formulation).default_backend
    started = time.perf_counter()
    simulation = None if start is None else start.simulation or simulate(graph, start.schedule)
    if start is None or simulation is None or not simulation.fits(budget):
        log.warning("%s/%s: no fitting start to re-solve windows of", formulation, backend)
        return SolveOutcome(formulation, backend, SolveStatus.NO_SOLUTION, details={"windows": 0})
    search = improve_by_windows(
        graph,
        budget,
        formulation,
        backend,
        start.schedule,
        time_limit=max(0.0, (limits.time_limit or DEFAULT_WINDOW_SECONDS) - 0.5),
        seed=limits.seed,
        options=options,
        stop=stop,
        start_simulation=simulation,
        max_nodes=get_formulation(formulation).window_nodes or MAX_WINDOW_NODES,
    )
    stopped = search.interrupted
    return SolveOutcome(
        formulation,
        backend,
        SolveStatus.FEASIBLE if stopped is None else SolveStatus.INTERRUPTED,
        schedule=search.schedule,
        simulation=search.simulation,
        objective=search.simulation.total_cost,
        wall_time=time.perf_counter() - started,
        solve_time=time.perf_counter() - started,
        trajectory=search.trajectory,
        phases={} if stopped is None else {"window": stopped},
        details=search.summary(),
    )


def _unsolved(
    label: str,
    graph: Graph,
    budget: int,
    start: WarmStart | None,
    init: str | Schedule | None,
    extensions: Sequence[Extension],
    interrupted: signal.Signals | None,
) -> MethodRun:
    """A run not solved (interrupted in its warm start, or no time left): the warm start if it fits (no extensions)."""
    details: dict[str, Any] = {"init": init if isinstance(init, str) else None}
    if interrupted is not None:
        log.warning("%s: interrupted (%s) during its warm start: not solving", label, interrupted.name)
        details["interrupted_in"] = "warm_start"
    else:
        log.warning("%s: the warm start used up the time limit: not solving", label)
        details["solve_skipped"] = "no time left after the warm start"
    simulation = None if start is None or extensions else start.simulation or simulate(graph, start.schedule)
    if start is None or simulation is None or not simulation.fits(budget):
        return MethodRun(label, None, details, interrupted_by=interrupted)
    return MethodRun(label, start.schedule, details, simulation=simulation, interrupted_by=interrupted)


def _run_of(
    label: str,
    graph: Graph,
    budget: int,
    outcome: SolveOutcome,
    start: WarmStart | None,
    init: str | Schedule | None,
    extensions: Sequence[Extension],
) -> MethodRun:
    """The outcome's schedule, or the warm start when it fits and the solver returned nothing cheaper.

    With extensions the warm start is never returned: it need not meet their constraints.
    """
    details = {**outcome.summary(), "init": init if isinstance(init, str) else None}
    run = MethodRun(
        label,
        outcome.schedule,
        details,
        outcome,
        simulation=outcome.simulation,
        infeasible=outcome.status.is_no_schedule_proof,
        interrupted_by=_interrupted_by(outcome),
    )
    if start is None or extensions:
        return run
    initial, found = start.simulation or simulate(graph, start.schedule), outcome.simulation
    if initial.fits(budget) and (found is None or not found.fits(budget) or initial.total_cost < found.total_cost):
        log.info("%s did not improve on its warm start: returning the warm start", label)
        details["returned_warm_start"] = True
        return replace(run, schedule=start.schedule, simulation=initial, infeasible=False)
    return run


def _interrupted_by(outcome: SolveOutcome) -> signal.Signals | None:
    """The signal that interrupted the solve (SIGINT when its phases did not record one), None if it finished."""
    if outcome.status is not SolveStatus.INTERRUPTED:
        return None
    return signal.Signals(outcome.interrupt_signal or signal.SIGINT)
