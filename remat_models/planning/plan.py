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
from remat_models.errors import BudgetInfeasibleError, ConfigurationError
from remat_models.extensions.overlap_paging import OverlapPaging
from remat_models.extensions.paging import Paging
from remat_models.formulations import Extension
from remat_models.heuristics.registry import HEURISTICS
from remat_models.planning.bounds import CostBoundSearch, PeakBound, bound_search
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
from remat_models.planning.warm_start import DEFAULT_TIME_LIMIT as DEFAULT_AUTO_LIMIT

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
BOUND_SECONDS = 1.0  # search time for each bound before the method runs (the cut passes take ~0.3 s at 5k nodes)
BOUND_SHARE = 0.05  # of a time limit, at most, for each bound; what the bounds take is the method's limit less
METHOD_SHARE = 0.5  # of the time limit the method keeps however long the bounds took
BOUND_PATIENCE = 10  # closure LPs in a row without a better cost bound that end that search
AUTO_BOUND_SHARE = 0.05  # of auto's time limit kept for the cost bound's search, spent if the gap is still large
AUTO_BOUND_SECONDS = 5.0  # at most this many seconds of it
AUTO_BOUND_GAP = 0.01  # the gap (relative to the plan's cost) above which auto spends that time


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

    Lower bounds (graphs up to ``BOUND_NODES`` nodes; :mod:`remat_models.planning.bounds`) are computed
    first: a budget below the peak lower bound raises BudgetInfeasibleError naming it before any method
    runs; the result carries them (``lower_bound``, ``peak_lower_bound``, ``lower_bound_gap``). ``auto``
    keeps ``AUTO_BOUND_SHARE`` of its time limit (at most ``AUTO_BOUND_SECONDS``) and spends it on the cost
    bound when its plan's gap to the bound is still above ``AUTO_BOUND_GAP``.
    """
    check_budget(graph, budget)  # types, range and lower bound, before anything reads the graph
    time_limit = check_time_limit(time_limit)
    check_count(seed, "seed", minimum=0)
    ref = resolve_method(method, formulation, backend, approx)
    if transfer is not None:
        options, extensions = _with_transfer(ref, transfer, options, extensions)
    started = time.perf_counter()
    peak, search = _bounds_first(graph, budget, transfer or _bound_transfer(extensions), time_limit)
    if time_limit is not None:  # the bounds count against the limit
        time_limit = max(time_limit - (time.perf_counter() - started), METHOD_SHARE * time_limit)
    reserve = _bound_reserve(ref, time_limit, search)
    if reserve:
        time_limit = time_limit - reserve if time_limit is not None else DEFAULT_AUTO_LIMIT - reserve
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
        return _with_bounds(viewed, peak, search, reserve)  # the view's bounds do not hold for the full graph
    started = time.perf_counter()
    run = run_method(ref, graph, budget, target=None if search is None else search.bound.value, **arguments)
    result = _result(graph, budget, run, time.perf_counter() - started, extensions, transfer)
    result = _with_bounds(result, peak, search, reserve)
    if result.status is PlanStatus.OVER_BUDGET and not allow_over_budget:
        raise over_budget_error(result)
    return result


def _bounds_first(
    graph: Graph, budget: int, transfer: TransferModel | None, time_limit: float | None
) -> tuple[PeakBound | None, CostBoundSearch | None]:
    """The peak bound and the cost bound's search (``BOUND_SECONDS`` each, at most ``BOUND_SHARE`` of ``time_limit``).

    A budget below the peak bound raises.

    BudgetInfeasibleError names the bound and what proved it. Graphs above ``BOUND_NODES``: (None, None).
    """
    if graph.n > BOUND_NODES:
        return None, None
    started = time.perf_counter()
    seconds = BOUND_SECONDS if time_limit is None else min(BOUND_SECONDS, BOUND_SHARE * time_limit)
    peak, search = bound_search(graph, budget, seconds, transfer, BOUND_PATIENCE)
    log.debug("lower bounds on %s in %.3f s: %s, %s", graph.name, time.perf_counter() - started, peak, search)
    if search is None:
        raise BudgetInfeasibleError(
            f"budget {budget:,} B is below the peak lower bound {peak.value:,} B of graph {graph.name!r} "
            f"({peak.proof}): no schedule fits it",
            budget=budget,
            lower_bound=peak.value,
        )
    return peak, search


def _bound_reserve(ref: MethodRef, time_limit: float | None, search: CostBoundSearch | None) -> float:
    """Seconds of ``auto``'s time limit kept for the cost bound (0: another method, or the search is over)."""
    if ref.method not in PORTFOLIOS or search is None or search.done:
        return 0.0
    return min(AUTO_BOUND_SHARE * (DEFAULT_AUTO_LIMIT if time_limit is None else time_limit), AUTO_BOUND_SECONDS)


_UNPROVEN = (PlanStatus.NO_SCHEDULE, PlanStatus.NO_SCHEDULE_IN_MODEL)


def _with_bounds(
    result: PlanResult, peak: PeakBound | None, search: CostBoundSearch | None, reserve: float
) -> PlanResult:
    """``result`` with the lower bounds, which hold for every schedule of the graph.

    The solver's own ``bound`` and ``gap`` stay in its details (they hold for its model, which may restrict
    the schedules). With a ``reserve`` (auto), the cost bound's search goes on for that long when the plan's
    gap is still above ``AUTO_BOUND_GAP`` (or there is no plan within the budget).
    """
    if peak is None:
        return result
    if search is None:  # the cut proved that no schedule of the graph fits the budget: a proof for the whole problem
        status = PlanStatus.INFEASIBLE if result.schedule is None and result.status in _UNPROVEN else result.status
        return replace(result, status=status, peak_lower_bound=peak)
    if reserve > 0 and not search.done:
        gap = replace(result, lower_bound=search.bound).lower_bound_gap
        if gap is None or gap > AUTO_BOUND_GAP:
            started = time.perf_counter()
            search.run(reserve)
            log.info("auto: %.2f s more on the cost bound: %s", time.perf_counter() - started, search.bound.proof)
    return replace(result, lower_bound=search.bound, peak_lower_bound=peak)


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
    log.warning(  # a recompute-only heuristic: said, not silently ignored (#34)
        "%s never offloads: the transfer model only prices its schedule (use fastsa, three-way, auto or a "
        "formulation to plan offloading)",
        ref.label,
    )
    return options, extensions


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


def _bound_transfer(extensions: Sequence[Extension]) -> TransferModel | None:
    """The extensions' transfer model for the bounds; None where they disagree (their own checks name why, later)."""
    try:
        return transfer_of(extensions)
    except ConfigurationError:
        return None
