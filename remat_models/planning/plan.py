"""``plan()``: the one entry point of every planning method. Resolve the method, run it, simulate its schedule once."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from remat_models.core.budget import check_budget
from remat_models.core.graph import Graph
from remat_models.core.limits import check_count, check_time_limit
from remat_models.core.schedule import Schedule, input_order_peak, simulate
from remat_models.core.transfer import TransferModel, transfer_of
from remat_models.errors import ConfigurationError
from remat_models.extensions.overlap_paging import OverlapPaging
from remat_models.extensions.paging import Paging
from remat_models.formulations import Extension
from remat_models.heuristics.registry import HEURISTICS
from remat_models.model.result import relative_gap
from remat_models.planning.bounds import lower_bounds
from remat_models.planning.default_view import plan_default_view, supports_impls
from remat_models.planning.methods import (
    DEFAULT_METHOD,
    PORTFOLIOS,
    MethodRef,
    method_names,
    methods,
    parse_method_name,
    resolve_method,
    run_method,
)
from remat_models.planning.result import MethodRun, PlanResult, PlanStatus, Status, over_budget_error

__all__ = [
    "DEFAULT_METHOD",
    "MethodRef",
    "PlanResult",
    "PlanStatus",
    "Status",
    "method_names",
    "methods",
    "over_budget_error",
    "parse_method_name",
    "plan",
]

log = logging.getLogger(__name__)

BOUND_NODES = 5_000  # plans of larger graphs carry no lower bounds (the bit matrices take ~0.2 s at 5k nodes)
BOUND_SECONDS = 0.1  # search time for each bound in a plan's details


def plan(
    graph: Graph,
    budget: int,
    method: str | MethodRef | None = None,
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
    transfer: TransferModel | None = None,
    windows: bool | None = None,
) -> PlanResult:
    """Plan ``graph`` under ``budget`` bytes with ``method`` (default ``auto``) and return the simulated result.

    ``method`` is a heuristic or portfolio name, ``FORMULATION[/BACKEND]`` or ``FORMULATION/APPROXIMATION``
    (e.g. ``"checkmate/highs"``, ``"checkmate/lp-rounding"``), or a :class:`MethodRef`; equivalently
    ``formulation=`` with ``backend=`` (default: the formulation's own) or ``approx=``. ``options`` go to the
    formulation (or approximation, or FastSA); ``extensions`` add constraints to the formulation's model;
    ``init`` (a heuristic name or a Schedule) warm-starts a solver: ``"auto"`` (the default) the cheapest
    fitting fast heuristic, ``"none"`` or None no warm start; a solver never returns worse than its warm start.
    ``solver_options`` go to the solver itself by its own names, after the ones this project sets; a name the
    solver rejects raises ConfigurationError. A schedule that does not fit the budget raises
    BudgetExceededError (carrying the result) unless ``allow_over_budget``, which returns it with status
    OVER_BUDGET. ``transfer`` lets the plan offload values to the host: a formulation gets the ``paging``
    plug-in with it, ``auto`` and the heuristics that take it (``three-way``) get it as an option, and the
    schedule is simulated under it. On a graph with operator implementations, a method that does not choose
    them plans the default view, then (``impls``) greedily switches steps to cheaper implementations.
    """
    check_budget(graph, budget)  # types, range and lower bound, before anything reads the graph
    time_limit = check_time_limit(time_limit)
    check_count(seed, "seed", minimum=0)
    ref = resolve_method(method, formulation, backend, approx)
    if transfer is not None:
        options, extensions = _with_transfer(ref, transfer, options, extensions)
    arguments: dict[str, Any] = dict(
        time_limit=time_limit,
        init=init,
        options=options,
        extensions=extensions,
        seed=seed,
        workers=workers,
        solver_options=solver_options,
        windows=windows,
    )
    if graph.impl_table is not None and not (impls and supports_impls(ref.formulation, graph, options)):
        if isinstance(init, Schedule):
            log.warning("warm start dropped: a schedule of the full graph does not fit its default view")
            arguments["init"] = None

        def plan_view(view: Graph) -> PlanResult:
            return plan(view, budget, ref, allow_over_budget=True, impls=False, transfer=transfer, **arguments)

        viewed = plan_default_view(graph, budget, plan_view, greedy=impls, allow_over_budget=allow_over_budget)
        return _with_bounds(graph, budget, viewed, transfer)  # the view's bounds do not hold for the full graph
    started = time.perf_counter()
    run = run_method(ref, graph, budget, **arguments)
    result = _result(graph, budget, run, time.perf_counter() - started, extensions, transfer)
    result = _with_bounds(graph, budget, result, transfer or transfer_of(extensions))
    if result.status is PlanStatus.OVER_BUDGET and not allow_over_budget:
        raise over_budget_error(result)
    return result


def _with_bounds(graph: Graph, budget: int, result: PlanResult, transfer: TransferModel | None) -> PlanResult:
    """``result`` with the cheap lower bounds of ``planning.bounds`` in its details (graphs up to BOUND_NODES).

    ``lower_bound`` (total cost), ``lower_bound_tdi``, ``lower_bound_method``, ``lower_bound_gap`` (relative
    to the plan's cost) and ``peak_lower_bound`` hold for every schedule of the graph; the solver's own
    ``bound``/``gap`` stay as they were (they hold for its model, which may restrict the schedules).
    """
    if graph.n > BOUND_NODES:
        return result
    started = time.perf_counter()
    peak, cost = lower_bounds(graph, budget, time_limit=BOUND_SECONDS, transfer=transfer)
    details: dict[str, Any] = {"peak_lower_bound": peak.value}
    if cost is not None:  # None: the cut proved that nothing fits the budget
        sim = result.simulation
        details |= {
            "lower_bound": cost.value,
            "lower_bound_tdi": cost.tdi,
            "lower_bound_method": cost.method,
            "lower_bound_gap": (
                relative_gap(sim.total_cost, cost.value)
                if sim is not None and result.status is PlanStatus.WITHIN_BUDGET
                else None
            ),
        }
    log.debug("lower bounds on %s in %.3f s: %s", graph.name, time.perf_counter() - started, details)
    return replace(result, details={**result.details, **details})


def _with_transfer(
    ref: MethodRef, transfer: TransferModel, options: Mapping[str, Any] | None, extensions: Sequence[Extension]
) -> tuple[Mapping[str, Any] | None, Sequence[Extension]]:
    """The options and extensions that give ``ref`` the transfer model (see :func:`plan`)."""
    if not isinstance(transfer, TransferModel):
        raise ConfigurationError(f"transfer must be a TransferModel, got {transfer!r}")
    if ref.is_solver:
        given = transfer_of(extensions)
        if given is None:
            paging = OverlapPaging if transfer.mode == "overlap" else Paging  # overlap: Checkmate only
            return options, [*extensions, paging(transfer)]
        if given != transfer:
            raise ConfigurationError("transfer= differs from the transfer model of the paging extension given")
        return options, extensions
    if ref.method in PORTFOLIOS or "transfer" in HEURISTICS[str(ref.method)].options:
        return {**(options or {}), "transfer": transfer}, extensions
    return options, extensions  # a recompute-only heuristic: its schedule is simulated under the model


def _result(
    graph: Graph,
    budget: int,
    run: MethodRun,
    wall_time: float,
    extensions: Sequence[Extension],
    transfer: TransferModel | None = None,
) -> PlanResult:
    """The run as a PlanResult: its schedule simulated once (reusing the solver's simulation), its status."""
    simulation = run.simulation
    if simulation is None and run.schedule is not None:
        simulation = simulate(graph, run.schedule, transfer or transfer_of(extensions))
    if simulation is not None:
        status = PlanStatus.WITHIN_BUDGET if simulation.fits(budget) else PlanStatus.OVER_BUDGET
        log.info(
            "%s on %s: peak %d (budget %d), TDI %.2f%%", run.label, graph.name, simulation.peak, budget, simulation.tdi
        )
    else:
        status = run.no_schedule_status()
    if run.outcome is not None and run.outcome.status is PlanStatus.SOLVER_ERROR:
        status = PlanStatus.SOLVER_ERROR  # whatever schedule stands (a warm start), the solver failed: say so
    return PlanResult(
        graph_name=graph.name,
        graph_hash=graph.content_hash,
        method=run.label,
        budget=budget,
        reference_peak=input_order_peak(graph),
        status=status,
        schedule=run.schedule,
        simulation=simulation,
        wall_time=wall_time,
        details=run.details,
        outcome=run.outcome,
        interrupted_by=run.interrupted_by,
    )
