"""One entry point for every planning method: resolve the budget, run the method, simulate."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.budget import check_budget
from remat_models.errors import BudgetExceededError, ConfigurationError
from remat_models.formulations import Extension, SolveOutcome, formulation_names, get_formulation
from remat_models.graph import Graph
from remat_models.heuristics.registry import HEURISTICS, run_heuristic
from remat_models.limits import check_count, check_time_limit
from remat_models.optimize import approximate, solve_model
from remat_models.schedule import Schedule, SimulationResult, input_order_peak, simulate
from remat_models.transfer import transfer_of

log = logging.getLogger(__name__)

Method = Callable[[Graph, int], Schedule]


class PlanStatus(StrEnum):
    """Whether the schedule a method returned fits the budget (as simulated), or why there is none."""

    WITHIN_BUDGET = "within_budget"
    OVER_BUDGET = "over_budget"
    INFEASIBLE = "infeasible"  # the solver proved that the model has no solution
    NO_SCHEDULE = "no_schedule"  # no solution within the limits (or a solver error)


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


def methods() -> dict[str, Method]:
    """Every heuristic planning method by name (baselines and FastSA, with default knobs)."""
    return {name: _default_run(name) for name in HEURISTICS}


def _default_run(name: str) -> Method:
    return lambda graph, budget: run_heuristic(name, graph, budget)[0]


@dataclass(frozen=True)
class MethodRef:
    """What a method name means: a heuristic, or a formulation on a backend, or an approximation of it."""

    method: str | None = None
    formulation: str | None = None
    backend: str | None = None
    approx: str | None = None


def parse_method_name(text: str) -> MethodRef:
    """``NAME`` (heuristic) or ``FORMULATION[/BACKEND]`` or ``FORMULATION/APPROXIMATION`` (e.g. checkmate/lp-rounding).

    One parser for the CLI and bench sweeps; the parts are checked against the registries.
    """
    from remat_models.formulations import approximation_names

    text = text.strip()
    if not text:
        raise ConfigurationError("empty method name")
    head, slash, tail = text.partition("/")
    if not slash:
        if head in formulation_names():
            return MethodRef(formulation=head)
        if head not in HEURISTICS:
            known = ", ".join([*HEURISTICS, *(f"{f}/BACKEND" for f in formulation_names())])
            raise ConfigurationError(f"unknown method {head!r}; choose one of {known}")
        return MethodRef(method=head)
    get_formulation(head)
    if not tail:
        raise ConfigurationError(f"method {text!r}: give a backend or approximation after '/'")
    if tail in approximation_names(head):
        return MethodRef(formulation=head, approx=tail)
    from remat_models.backends import backend_class

    backend_class(tail.partition(":")[0])
    return MethodRef(formulation=head, backend=tail)


def plan(
    graph: Graph,
    budget: int,
    method: str | None = None,
    *,
    formulation: str | None = None,
    backend: str | None = None,
    approx: str | None = None,
    time_limit: float | None = None,
    init: str | Schedule | None = "auto",
    options: Mapping[str, Any] | None = None,
    extensions: Sequence[Extension] = (),
    seed: int = 0,
    workers: int = 1,
    allow_over_budget: bool = False,
    impls: bool = True,
    solver_options: Mapping[str, Any] | None = None,
) -> PlanResult:
    """Plan ``graph`` under ``budget`` bytes with a heuristic ``method`` or a ``formulation`` on a ``backend``.

    ``backend`` defaults to the formulation's own; ``approx`` names an approximation of the formulation
    (e.g. ``"lp-rounding"`` of checkmate); ``options`` go to the formulation (or approximation, or FastSA);
    ``extensions`` add constraints to the formulation's model; ``init`` (a heuristic name or a Schedule)
    warm-starts a solver: ``"auto"`` (the default) the cheapest fitting fast heuristic if one fits
    (:func:`remat_models.auto.auto_init`), ``"none"`` or None no warm start. ``method="auto"`` runs the
    portfolio of :mod:`remat_models.auto`. The result is always re-simulated. A schedule that does not fit the budget
    raises BudgetExceededError (carrying the result) unless ``allow_over_budget``, which returns it
    with status OVER_BUDGET. On a graph with operator implementations, a method that does not choose
    them plans the default view, then (``impls``) greedily switches steps to cheaper implementations;
    with ``impls=False`` every method plans the default view. ``solver_options`` go to the solver itself,
    by its own names (HiGHS options, CP-SAT ``SatParameters`` fields, Gurobi parameters, a Pyomo plug-in's
    options, CVXPY ``solve`` keywords), after the ones this project sets; a name the solver rejects raises
    ConfigurationError.
    """
    check_budget(graph, budget)  # types, range and lower bound, before anything reads the graph
    time_limit = check_time_limit(time_limit)
    check_count(seed, "seed", minimum=0)
    if graph.impl_table is not None:  # operator implementations: see remat_models/impl_planning.py
        arguments = {key: value for key, value in locals().items() if key not in ("graph", "budget", "impls")}
        from remat_models.impl_planning import plan_default_view, supports_impls

        if not (impls and supports_impls(formulation)):
            return plan_default_view(graph, budget, greedy=impls, **arguments)
    if (method is None) == (formulation is None):
        raise ConfigurationError("give either a heuristic method or a formulation")
    if method is not None and (extensions or approx or solver_options or init not in (None, "auto", "none")):
        raise ConfigurationError(
            "extensions, approx, init and solver options apply to formulations, not to heuristic methods"
        )
    started = time.perf_counter()
    outcome = None
    if method is not None:
        schedule, details = run_heuristic(method, graph, budget, seed=seed, time_limit=time_limit, options=options)
        label, status = method, None
    else:
        assert formulation is not None
        limits = SolveLimits(time_limit=time_limit, workers=workers, seed=seed, solver_options=solver_options or {})
        if approx is not None:
            outcome = approximate(
                graph, budget, formulation, approx, backend, options=options, limits=limits, extensions=extensions
            )
            label, start = f"{formulation}/{approx}", None
        else:
            check_size = getattr(get_formulation(formulation), "check_size", None)
            if check_size is not None:  # a model too large fails before the warm start's time is spent
                check_size(graph, budget, options)
            start = initial_schedule(graph, budget, init, seed=seed, time_limit=time_limit)
            if time_limit is not None:  # the warm start's time counts against the limit
                left = max(1.0, time_limit - (time.perf_counter() - started))
                limits = replace(limits, time_limit=left)
            outcome = solve_model(
                graph, budget, formulation, backend, options=options, limits=limits, init=start, extensions=extensions
            )
            label = f"{formulation}/{outcome.backend}"
        schedule, status, details = _from_outcome(graph, budget, outcome, start, init, extensions)
    wall_time = time.perf_counter() - started
    simulation = None
    if schedule is not None:
        reuse = outcome is not None and schedule is outcome.schedule and outcome.simulation is not None
        transfer = transfer_of(extensions)
        simulation = outcome.simulation if reuse else simulate(graph, schedule, transfer)  # type: ignore[union-attr]
    if simulation is not None:
        status = PlanStatus.WITHIN_BUDGET if simulation.fits(budget) else PlanStatus.OVER_BUDGET
        log.info(
            "%s on %s: peak %d (budget %d), TDI %.2f%%", label, graph.name, simulation.peak, budget, simulation.tdi
        )
    result = PlanResult(
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
    if result.status is PlanStatus.OVER_BUDGET and not allow_over_budget:
        raise over_budget_error(result)
    return result


def over_budget_error(result: PlanResult) -> BudgetExceededError:
    """The error for a schedule whose simulated peak exceeds its budget (the result rides along)."""
    assert result.simulation is not None
    peak = result.simulation.peak
    return BudgetExceededError(
        f"{result.method} on {result.graph_name!r}: peak {peak:,} B exceeds the budget {result.budget:,} B "
        f"by {peak - result.budget:,} B (pass allow_over_budget=True to get the schedule anyway)",
        peak=peak,
        budget=result.budget,
        result=result,
    )


def initial_schedule(
    graph: Graph, budget: int, init: str | Schedule | None, seed: int = 0, time_limit: float | None = None
) -> Schedule | None:
    """A warm-start schedule: given, or produced by the heuristic method named ``init``.

    ``"auto"``: :func:`remat_models.auto.auto_init` (None if no fast heuristic fits); ``"none"``: None.
    On a graph with operator implementations the heuristic plans the default view (lifted back).
    """
    if init == "none":
        return None
    if init == "auto":
        from remat_models.auto import auto_init

        if graph.impl_table is not None:
            return None
        return auto_init(graph, budget, seed=seed, time_limit=time_limit)
    if isinstance(init, str) and graph.impl_table is not None:
        from remat_models.impls import lift_schedule

        return lift_schedule(graph, run_heuristic(init, graph.default_view(), budget, seed=seed)[0])
    return run_heuristic(init, graph, budget, seed=seed)[0] if isinstance(init, str) else init


def _from_outcome(
    graph: Graph,
    budget: int,
    outcome: SolveOutcome,
    start: Schedule | None,
    init: str | Schedule | None,
    extensions: Sequence[Extension],
) -> tuple[Schedule | None, PlanStatus | None, dict[str, Any]]:
    """The outcome's schedule, or the warm start when it fits and the solver returned nothing cheaper.

    With extensions the warm start is never returned: it need not meet their constraints.
    """
    status = PlanStatus.INFEASIBLE if outcome.status == SolveStatus.INFEASIBLE else None
    details = {**outcome.summary(), "init": init if isinstance(init, str) else None}
    schedule = outcome.schedule
    if start is not None and not extensions and _better_start(graph, budget, start, outcome):
        log.info(
            "%s/%s did not improve on its warm start: returning the warm start", outcome.formulation, outcome.backend
        )
        schedule, status, details["returned_warm_start"] = start, None, True
    return schedule, status, details


def _better_start(graph: Graph, budget: int, start: Schedule, outcome: SolveOutcome) -> bool:
    """Whether the warm start fits the budget and is cheaper than what the solver returned (or it returned none)."""
    initial = simulate(graph, start)
    if not initial.fits(budget):
        return False
    found = outcome.simulation
    return found is None or not found.fits(budget) or initial.total_cost < found.total_cost
