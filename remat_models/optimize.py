"""Optimization paths: a formulation solved by a backend (decoded, re-simulated), and Checkmate's LP rounding."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from remat_models.backends import SolveLimits, SolveStatus, get_backend
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.formulations import BuiltModel, get_formulation
from remat_models.formulations.checkmate import CHECKMATE, CheckmateOptions
from remat_models.graph import Graph
from remat_models.heuristics.rounding import DEFAULT_THRESHOLDS, Candidate, best_candidate, rounding_candidates
from remat_models.model import constructs
from remat_models.schedule import Schedule

log = logging.getLogger(__name__)

DEFAULT_LIMITS = SolveLimits()


@dataclass(frozen=True)
class SolveOutcome:
    """One exact solve: solver status and numbers in the graph's cost units, and the decoded schedule."""

    formulation: str
    backend: str
    status: SolveStatus
    objective: float | None
    bound: float | None
    gap: float | None
    build_time: float
    solve_time: float
    time_to_first: float | None
    trajectory: list[tuple[float, float]]
    schedule: Schedule | None
    model_peak: float | None
    solver_version: str
    options: dict[str, Any] = field(default_factory=dict)
    warm_start: bool = False

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers (no schedule)."""
        return {
            "formulation": self.formulation,
            "backend": self.backend,
            "solver_status": self.status.value,
            "objective": self.objective,
            "bound": self.bound,
            "gap": self.gap,
            "build_time_s": self.build_time,
            "solve_time_s": self.solve_time,
            "time_to_first_s": self.time_to_first,
            "trajectory": [list(point) for point in self.trajectory],
            "model_peak": self.model_peak,
            "solver_version": self.solver_version,
            "options": self.options,
            "warm_start": self.warm_start,
        }


def build_for_backend(
    graph: Graph, budget: int, formulation: str, backend_spec: str, options: Mapping[str, Any] | None = None
) -> BuiltModel:
    """Build ``formulation``'s model, with integral memory when the backend takes no continuous variables."""
    form = get_formulation(formulation)
    opts = dict(options or {})
    integral_option = getattr(form, "integral_option", None)
    if integral_option is not None and integral_option not in opts:
        native = get_backend(backend_spec).native_constructs
        opts[integral_option] = constructs.CONTINUOUS not in native
    return form.build(graph, budget, opts)


def solve_model(
    graph: Graph,
    budget: int,
    formulation: str = "checkmate",
    backend: str = "highs",
    *,
    options: Mapping[str, Any] | None = None,
    limits: SolveLimits = DEFAULT_LIMITS,
    init: Schedule | None = None,
) -> SolveOutcome:
    """Build, warm-start from ``init`` if it fits the model's structure, solve, decode.

    Moccasin goes through its two-phase solve (paper section 2.4) unless ``options["two_phase"]`` is false.
    """
    if formulation == "moccasin" and (options or {}).get("two_phase", True):
        return _solve_moccasin(graph, budget, backend, options, limits, init)
    solver = get_backend(backend)
    form = get_formulation(formulation)
    started = time.perf_counter()
    built = build_for_backend(graph, budget, formulation, backend, options)
    hints = _hints(form, built, init)
    build_time = time.perf_counter() - started
    result = solver.solve(built.model, limits, hints)
    schedule = form.decode(built, result.values) if result.has_solution else None
    peak = getattr(built, "peak_bound", None)
    log.info("%s/%s on %s: %s, objective %s", formulation, backend, graph.name, result.status.value, result.objective)
    return SolveOutcome(
        formulation=formulation,
        backend=backend,
        status=result.status,
        objective=built.cost(result.objective),
        bound=built.cost(result.bound),
        gap=result.gap,
        build_time=build_time,
        solve_time=result.wall_time,
        time_to_first=result.time_to_first,
        trajectory=[(t, built.cost(v) or 0.0) for t, v in result.trajectory],
        schedule=schedule,
        model_peak=peak(result.values) if peak is not None and result.has_solution else None,
        solver_version=result.solver_version,
        options={k: _jsonable(v) for k, v in (options or {}).items()},
        warm_start=hints is not None,
    )


def _solve_moccasin(
    graph: Graph,
    budget: int,
    backend: str,
    options: Mapping[str, Any] | None,
    limits: SolveLimits,
    init: Schedule | None,
) -> SolveOutcome:
    from remat_models.formulations.moccasin import solve_moccasin

    opts = {key: value for key, value in (options or {}).items() if key != "two_phase"}
    result = solve_moccasin(
        graph,
        budget,
        backend=backend,
        time_limit=limits.time_limit,
        workers=limits.workers,
        seed=limits.seed,
        init=init,
        **opts,
    )
    phases = [phase for phase in (result.phase1, result.phase2) if phase is not None]
    objective, bound = result.total_cost, result.cost_bound
    gap = None if objective is None or bound is None or objective == 0 else (objective - bound) / objective
    return SolveOutcome(
        formulation="moccasin",
        backend=backend,
        status=result.status,
        objective=objective,
        bound=bound,
        gap=gap,
        build_time=result.wall_time - sum(phase.wall_time for phase in phases),
        solve_time=sum(phase.wall_time for phase in phases),
        time_to_first=result.time_to_first,
        trajectory=result.trajectory,
        schedule=result.schedule,
        model_peak=result.peak,
        solver_version=phases[-1].solver_version if phases else "",
        options={k: _jsonable(v) for k, v in (options or {}).items()},
        warm_start=init is not None,
    )


def _hints(form: Any, built: BuiltModel, init: Schedule | None) -> dict[str, Any] | None:
    if init is None:
        return None
    try:
        return form.hints(built, init)
    except (InvalidScheduleError, ConfigurationError) as error:
        log.warning("warm start dropped: the initial schedule does not fit the model (%s)", error)
        return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


@dataclass(frozen=True)
class RoundingOutcome:
    """Checkmate's LP relaxation with two-phase and randomized rounding; every candidate simulated."""

    lp_status: SolveStatus
    lp_bound: float | None  # LP optimum at the full budget: a lower bound on the staged MILP's cost
    lp_time: float
    allowance: float
    candidates: int
    best: Candidate | None  # cheapest within budget
    lowest_peak: Candidate | None

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers (no schedule)."""
        return {
            "approx": "lp-rounding",
            "lp_status": self.lp_status.value,
            "lp_bound": self.lp_bound,
            "lp_time_s": self.lp_time,
            "allowance": self.allowance,
            "candidates": self.candidates,
            "best": self.best.label if self.best else None,
            "lowest_peak": self.lowest_peak.simulation.peak if self.lowest_peak else None,
        }


def lp_rounding(
    graph: Graph,
    budget: int,
    *,
    backend: str = "highs:lp",
    allowance: float = 0.0,
    order: Sequence[int] | None = None,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    random_thresholds: int = 8,
    samples: int = 16,
    seed: int = 0,
    limits: SolveLimits = DEFAULT_LIMITS,
) -> RoundingOutcome:
    """Solve the staged LP relaxation (at ``(1 - allowance) * budget``), round S*, keep the best simulated schedule."""
    solver = get_backend(backend)
    if getattr(solver, "integral", True):
        raise ConfigurationError(f"LP rounding needs a relaxation backend such as 'highs:lp', not {backend!r}")
    options = CheckmateOptions(order=None if order is None else tuple(int(v) for v in order))
    started = time.perf_counter()
    full = CHECKMATE.build(graph, budget, options)
    bound_result = solver.solve(full.model, limits)
    rounded_result, built = bound_result, full
    if allowance > 0:
        built = CHECKMATE.build(graph, budget, replace(options, allowance=allowance))
        rounded_result = solver.solve(built.model, limits)
    lp_time = time.perf_counter() - started
    candidates: list[Candidate] = []
    if rounded_result.has_solution:
        _, s_frac = built.fractional(rounded_result.values)
        candidates = rounding_candidates(
            graph,
            built.order,
            s_frac,
            thresholds=thresholds,
            random_thresholds=random_thresholds,
            samples=samples,
            seed=seed,
        )
    best, lowest = best_candidate(candidates, budget)
    status = bound_result.status
    log.info("LP rounding on %s: LP %s, %d candidates, best %s", graph.name, status.value, len(candidates), best)
    return RoundingOutcome(
        lp_status=status,
        lp_bound=full.cost(bound_result.objective) if bound_result.has_solution else None,
        lp_time=lp_time,
        allowance=allowance,
        candidates=len(candidates),
        best=best,
        lowest_peak=lowest,
    )
