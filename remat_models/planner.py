"""One entry point for every planning method: resolve the budget, run the method, simulate."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.budget import check_budget
from remat_models.errors import ConfigurationError
from remat_models.graph import Graph
from remat_models.heuristics.baselines import BASELINES
from remat_models.schedule import Schedule, SimulationResult, input_order_peak, simulate

log = logging.getLogger(__name__)

Method = Callable[[Graph, int], Schedule]


class PlanStatus(StrEnum):
    """Whether the schedule a method returned fits the budget (as simulated), or why there is none."""

    WITHIN_BUDGET = "within_budget"
    OVER_BUDGET = "over_budget"
    INFEASIBLE = "infeasible"  # the solver proved that the model has no solution
    NO_SCHEDULE = "no_schedule"  # no solution within the limits (or a solver error)


APPROXIMATIONS = ("lp-rounding",)


@dataclass(frozen=True)
class PlanResult:
    """A method's schedule with its simulation and the inputs that produced it."""

    graph_name: str
    graph_hash: str
    method: str
    budget: int
    reference_peak: int
    status: PlanStatus
    schedule: Schedule | None
    simulation: SimulationResult | None
    wall_time: float
    details: dict[str, Any] = field(default_factory=dict)  # solver numbers (status, objective, bound, ...)

    @property
    def peak_fraction(self) -> float:
        """Simulated peak as a fraction of the input-order peak (0 without a schedule)."""
        if self.simulation is None or not self.reference_peak:
            return 0.0
        return self.simulation.peak / self.reference_peak

    def metadata(self) -> dict[str, object]:
        """JSON-ready summary stored beside a schedule on disk."""
        sim = self.simulation
        return {
            "graph_name": self.graph_name,
            "graph_hash": self.graph_hash,
            "method": self.method,
            "budget": self.budget,
            "status": self.status.value,
            "peak": None if sim is None else sim.peak,
            "total_cost": None if sim is None else sim.total_cost,
            "tdi": None if sim is None else sim.tdi,
            "recomputations": None if sim is None else sim.recomputations,
            "wall_time_s": self.wall_time,
            **self.details,
        }


FASTSA_TIME_LIMIT = 60.0  # seconds, when the caller gives none (the paper's 20M + 2M attempts can take longer)


def methods() -> dict[str, Method]:
    """Every heuristic planning method by name (baselines and FastSA, with default knobs)."""
    return {**BASELINES, "fastsa": lambda graph, budget: _fastsa(graph, budget)[0]}


def plan(
    graph: Graph,
    budget: int,
    method: str | None = None,
    *,
    formulation: str | None = None,
    backend: str = "highs",
    approx: str | None = None,
    time_limit: float | None = None,
    init: str | Schedule | None = None,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
    workers: int = 1,
) -> PlanResult:
    """Plan ``graph`` under ``budget`` bytes with a heuristic ``method`` or a ``formulation`` on a ``backend``.

    ``approx="lp-rounding"`` (Checkmate only) solves the LP relaxation with HiGHS and rounds it;
    ``options`` go to the formulation (for lp-rounding: ``allowance``, ``order``, ``samples``, ...).
    ``init`` (a baseline name or a Schedule) warm-starts a solver. The result is always re-simulated.
    """
    if (method is None) == (formulation is None):
        raise ConfigurationError("give either a heuristic method or a formulation")
    check_budget(graph, budget)
    started = time.perf_counter()
    if method is not None:
        schedule, details = _heuristic(graph, budget, method, seed=seed, time_limit=time_limit, options=options)
        label, status = method, None
    elif approx is not None:
        schedule, label, status, details = _approximate(
            graph, budget, formulation, backend, approx, time_limit, options, seed
        )
    else:
        limits = SolveLimits(time_limit=time_limit, workers=workers, seed=seed)
        schedule, label, status, details = _exact(graph, budget, formulation, backend, limits, init, options)
    wall_time = time.perf_counter() - started
    simulation = None if schedule is None else simulate(graph, schedule)
    if simulation is not None:
        status = PlanStatus.WITHIN_BUDGET if simulation.fits(budget) else PlanStatus.OVER_BUDGET
        log.info(
            "%s on %s: peak %d (budget %d), TDI %.2f%%", label, graph.name, simulation.peak, budget, simulation.tdi
        )
    return PlanResult(
        graph_name=graph.name,
        graph_hash=graph.content_hash,
        method=label,
        budget=budget,
        reference_peak=input_order_peak(graph),
        status=status or PlanStatus.NO_SCHEDULE,
        schedule=schedule,
        simulation=simulation,
        wall_time=wall_time,
        details=details,
    )


def _heuristic(
    graph: Graph,
    budget: int,
    method: str,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    """Run a heuristic; only FastSA takes a seed, a time limit and options (e.g. ``iterations``)."""
    if method == "fastsa":
        return _fastsa(graph, budget, seed=seed, time_limit=time_limit, options=options)
    available = methods()
    if method not in available:
        raise ConfigurationError(f"unknown method {method!r}; choose one of {', '.join(available)}")
    if options or time_limit is not None:
        raise ConfigurationError(f"method {method!r} takes no options or time limit (fastsa does)")
    return available[method](graph, budget), {}


def _fastsa(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    from remat_models.heuristics.fastsa import fastsa

    result = fastsa(graph, budget, seed=seed, time_limit=time_limit or FASTSA_TIME_LIMIT, **dict(options or {}))
    fitting = [[point.time, point.best_cost] for point in result.trajectory if point.best_peak <= budget]
    details = {
        "seed": seed,
        "met_budget": result.met_budget,
        "iterations": list(result.iterations),
        "search_time_s": result.wall_time,
        "compile_time_s": result.compile_time,
        "time_to_first_s": fitting[0][0] if fitting else None,
        "trajectory": fitting,  # (seconds, best cost) of best states within the budget
    }
    return result.schedule, details


def initial_schedule(graph: Graph, budget: int, init: str | Schedule | None, seed: int = 0) -> Schedule | None:
    """A warm-start schedule: given, or produced by the heuristic method named ``init``."""
    return _heuristic(graph, budget, init, seed=seed)[0] if isinstance(init, str) else init


def _exact(
    graph: Graph,
    budget: int,
    formulation: str,
    backend: str,
    limits: SolveLimits,
    init: str | Schedule | None,
    options: Mapping[str, Any] | None,
) -> tuple[Schedule | None, str, PlanStatus | None, dict[str, Any]]:
    from remat_models.optimize import solve_model

    start = initial_schedule(graph, budget, init, seed=limits.seed)
    if start is not None and formulation == "checkmate" and (options or {}).get("order") is None:
        # Checkmate's stages follow the warm start's first computations (FastSA may reorder nodes)
        options = {**(options or {}), "order": start.first_computation_order()}
    outcome = solve_model(graph, budget, formulation, backend, options=options, limits=limits, init=start)
    status = PlanStatus.INFEASIBLE if outcome.status == SolveStatus.INFEASIBLE else None
    details = {**outcome.summary(), "init": init if isinstance(init, str) else None}
    schedule = outcome.schedule
    if start is not None and _better_start(graph, budget, start, schedule):
        log.info("%s/%s did not improve on its warm start: returning the warm start", formulation, backend)
        schedule, status, details["returned_warm_start"] = start, None, True
    return schedule, f"{formulation}/{backend}", status, details


def _better_start(graph: Graph, budget: int, start: Schedule, found: Schedule | None) -> bool:
    """Whether the warm start fits the budget and is cheaper than what the solver returned (or it returned none)."""
    initial = simulate(graph, start)
    if not initial.fits(budget):
        return False
    if found is None:
        return True
    result = simulate(graph, found)
    return not result.fits(budget) or initial.total_cost < result.total_cost


def _approximate(
    graph: Graph,
    budget: int,
    formulation: str,
    backend: str,
    approx: str,
    time_limit: float | None,
    options: Mapping[str, Any] | None,
    seed: int,
) -> tuple[Schedule | None, str, PlanStatus | None, dict[str, Any]]:
    from remat_models.optimize import lp_rounding

    if approx not in APPROXIMATIONS or formulation != "checkmate":
        raise ConfigurationError(f"unknown approximation {approx!r} for {formulation!r}; checkmate has lp-rounding")
    spec = "highs:lp" if backend in ("highs", "highs:lp") else backend
    outcome = lp_rounding(
        graph,
        budget,
        backend=spec,
        limits=SolveLimits(time_limit=time_limit, seed=seed),
        seed=seed,
        **dict(options or {}),
    )
    chosen = outcome.best or outcome.lowest_peak
    status = None
    if chosen is None:
        status = PlanStatus.INFEASIBLE if outcome.lp_status == SolveStatus.INFEASIBLE else PlanStatus.NO_SCHEDULE
    details = {"formulation": formulation, "backend": spec, **outcome.summary()}
    return None if chosen is None else chosen.schedule, "checkmate/lp-rounding", status, details
