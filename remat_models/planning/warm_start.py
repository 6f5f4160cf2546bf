"""Warm starts of exact solves: a given schedule, a named heuristic's, or ``auto_init``'s (the default)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Schedule, SimulationResult, lift_schedule, simulate
from remat_models.errors import RematError
from remat_models.formulations.saveset.intervals import SAVESET_INTERVALS
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.least_peak import STARTS as LEAST_PEAK_STARTS
from remat_models.heuristics.least_peak import TIME_LIMIT as LEAST_PEAK_TIME_LIMIT
from remat_models.heuristics.least_peak import cheapened, least_peak_search
from remat_models.heuristics.registry import run_heuristic

log = logging.getLogger(__name__)

DEFAULT_TIME_LIMIT = 60.0  # seconds: what ``auto`` (and its warm start's FastSA share) assume when given none
INIT_FASTSA_NODES = 500  # the default warm start adds a short FastSA run from this many nodes on
INIT_FASTSA_SHARE = 0.2
INIT_SHARE = 0.3  # of the time limit the default warm start may take: no candidate after the first starts later
INIT_CHEAPEN_SHARE = 0.02  # of the time limit (of DEFAULT_TIME_LIMIT without one), per fitting baseline: cheapened
INIT_FASTSA_MIN_SECONDS = 1.0  # less of the warm start's share left than this: no FastSA run
INIT_LEAST_PEAK_SHARE = 0.6  # of the time limit, the least-peak fallback may run until (nothing fits without it)
INIT_LEAST_PEAK_MIN_SECONDS = 1.0  # the least-peak fallback gets at least this (or half the time limit, if less)
INIT_REPAIR_SHARE = 0.1  # of the time limit: the least-peak search from cheaper baselines over the budget
INIT_POLISH_NODES = 500  # from this many nodes a fitting save-set start is polished by the save-set model
INIT_POLISH_SHARE = 0.25  # of the time limit (at most INIT_POLISH_MAX_SECONDS), before FastSA's run
INIT_POLISH_MAX_SECONDS = 30.0
POLISH_WORKERS = 2  # CP-SAT's portfolio (its neighbourhood search runs from the second worker on)


class WarmStart(NamedTuple):
    """A warm-start schedule with its simulation (so that nothing simulates it twice; None: a given schedule)."""

    schedule: Schedule
    simulation: SimulationResult | None


def initial_schedule(
    graph: Graph,
    budget: int,
    init: str | Schedule | None,
    seed: int = 0,
    time_limit: float | None = None,
    stop: threading.Event | None = None,
) -> WarmStart | None:
    """A warm start: given, or produced by the heuristic method named ``init`` (then simulated, once).

    ``"auto"``: :func:`auto_init` (None if no fast heuristic fits); ``"none"`` or None: None.
    On a graph with operator implementations the heuristic plans the default view (lifted back).
    ``stop`` (an interrupt) ends a FastSA run early with its best so far.
    """
    if init is None or init == "none":
        return None
    if init == "auto":
        if graph.impl_table is not None:
            return None
        return auto_init(graph, budget, seed=seed, time_limit=time_limit, stop=stop)
    if not isinstance(init, str):
        return WarmStart(init, None)  # simulated only where it may be returned (it may hold transfer steps)
    if graph.impl_table is not None:
        schedule = lift_schedule(graph, run_heuristic(init, graph.default_view(), budget, seed=seed, stop=stop)[0])
    else:
        schedule = run_heuristic(init, graph, budget, seed=seed, stop=stop)[0]
    return WarmStart(schedule, simulate(graph, schedule))


def auto_init(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    stop: threading.Event | None = None,
    on_baseline: Callable[[WarmStart], None] | None = None,
) -> WarmStart | None:
    """The default warm start of an exact solve (``--init auto``): the cheapest fitting fast heuristic, or None.

    ``WARM_BASELINES`` (Chen's greedy and sqrt(n), the saved-set knapsack, the save-set search and rotor's
    programme over blocks up to ``SAVESET_NODES``: milliseconds to two seconds; each fitting one less the
    recomputations the budget does not need, :func:`~remat_models.heuristics.least_peak.cheapened`), where the
    save-set search fits from ``INIT_POLISH_NODES`` nodes its polish by the save-set model (``INIT_POLISH_SHARE``
    of the limit), and on graphs of ``INIT_FASTSA_NODES`` nodes or more a FastSA run of ``INIT_FASTSA_SHARE`` of
    the time limit (at most 30 s). With a time limit the whole warm start keeps to ``INIT_SHARE`` of it: the
    candidates run cheapest first, the deadline checked before each (the first always runs; the cheapenings
    get at most what is left), and FastSA gets at most what is left of the share (none if less than
    ``INIT_FASTSA_MIN_SECONDS``).
    When no fast baseline fits, the least-peak search (:mod:`~remat_models.heuristics.least_peak`) runs first,
    until ``INIT_LEAST_PEAK_SHARE`` of the time limit (a longer share: without a start the solvers rarely fit
    there; at least ``INIT_LEAST_PEAK_MIN_SECONDS``, or half the limit if less; ``LEAST_PEAK_TIME_LIMIT``
    without a limit): it stops once within the budget, so every budget above the peak it reaches gets a start.
    Where only rotor fits and a baseline of the search's own starts is over the budget but cheaper, the search
    also runs from them (``INIT_REPAIR_SHARE`` of the limit): it lowers their peak into the budget at a cost often
    far below rotor's (a held-out 6-layer Qwen2 at 30 %: 23.2 % TDI against rotor's 35.0 %).
    None when nothing fits: the solver then starts as it would without a warm start (Moccasin from the input
    order, or its staged greedy on small graphs). ``on_baseline`` gets the cheapest fitting baseline as soon as
    the baselines are scored, before the polish and FastSA (``auto``'s exact worker reports it at once).
    """
    started = time.perf_counter()
    deadline = None if time_limit is None else started + INIT_SHARE * time_limit
    baselines = fast_baselines(graph, budget, deadline)
    cheapen = INIT_CHEAPEN_SHARE * (time_limit or DEFAULT_TIME_LIMIT)
    for name, schedule in baselines.items():  # within the warm start's share, as every candidate
        left = cheapen if deadline is None else min(cheapen, deadline - time.perf_counter())
        baselines[name] = cheapened(graph, schedule, budget, left)
    scored = {name: WarmStart(schedule, simulate(graph, schedule)) for name, schedule in baselines.items()}
    best = cheapest(budget, scored.values())
    if best is not None and on_baseline is not None:
        on_baseline(best)
    candidates: list[Schedule] = []
    if best is None and not (stop is not None and stop.is_set()):
        until = None if time_limit is None else started + INIT_LEAST_PEAK_SHARE * time_limit
        candidates.extend(_least_peak(graph, budget, baselines, time_limit, until, stop))
    elif _repairable(scored, best, budget) and not (stop is not None and stop.is_set()):
        limit = time_limit or DEFAULT_TIME_LIMIT
        seconds = max(INIT_REPAIR_SHARE * limit, min(INIT_LEAST_PEAK_MIN_SECONDS, 0.5 * limit))
        log.info("warm start: only rotor fits; least-peak from the cheaper baselines for at most %.1f s", seconds)
        own = {name: schedule for name, schedule in baselines.items() if name in LEAST_PEAK_STARTS}
        candidates.append(least_peak_search(graph, budget, time_limit=seconds, stop=stop, starts=own).schedule)
    save_set = scored.get("saveset")
    fits = save_set is not None and save_set.simulation is not None and save_set.simulation.peak <= budget
    if fits and graph.n >= INIT_POLISH_NODES and not (stop is not None and stop.is_set()):
        seconds = min(INIT_POLISH_MAX_SECONDS, INIT_POLISH_SHARE * (time_limit or DEFAULT_TIME_LIMIT))
        polished = _polished_save_set(graph, budget, save_set.schedule, seconds, seed)
        if polished is not None:
            candidates.append(polished)
    if graph.n >= INIT_FASTSA_NODES and not (stop is not None and stop.is_set()):
        seconds = min(30.0, max(1.0, INIT_FASTSA_SHARE * (time_limit or DEFAULT_TIME_LIMIT)))
        if deadline is not None:
            seconds = min(seconds, deadline - time.perf_counter())
        if seconds >= INIT_FASTSA_MIN_SECONDS:
            log.info("warm start: FastSA for at most %.1f s", seconds)
            candidates.append(run_heuristic("fastsa", graph, budget, seed=seed, time_limit=seconds, stop=stop)[0])
        else:
            log.info("warm start: no FastSA run (%.1f s of its share left)", max(seconds, 0.0))
    found = cheapest_fitting(graph, budget, candidates)
    if best is None or (found is not None and found.simulation.total_cost < best.simulation.total_cost):
        return found
    return best


def _polished_save_set(graph: Graph, budget: int, start: Schedule, seconds: float, seed: int) -> Schedule | None:
    """The save-set model (``saveset-intervals``, its default backend) from the save-set search's fitting schedule.

    None where the graph has no backward pass or the model finds nothing (logged).
    """
    if not graph.of_kind(NodeKind.BACKWARD).any():
        return None
    form = SAVESET_INTERVALS
    log.info("warm start: the save-set model from the save-set search's schedule for at most %.1f s", seconds)
    try:
        built = form.build(graph, budget)
        limits = SolveLimits(time_limit=seconds, seed=seed, workers=POLISH_WORKERS)
        outcome = form.solve(built, form.default_backend, limits, init=start)
    except RematError as error:
        log.info("warm start: the save-set model gave nothing (%s)", error)
        return None
    return outcome.schedule


def _repairable(scored: dict[str, WarmStart], best: WarmStart | None, budget: int) -> bool:
    """Whether no start of the least-peak search fits while one over the budget is cheaper than ``best``."""
    own = [start.simulation for name, start in scored.items() if name in LEAST_PEAK_STARTS]
    if best is None or best.simulation is None or any(result.peak <= budget for result in own if result):
        return False
    return any(result.total_cost < best.simulation.total_cost for result in own if result)


def _least_peak(
    graph: Graph,
    budget: int,
    baselines: dict[str, Schedule],
    time_limit: float | None,
    until: float | None,
    stop: threading.Event | None,
) -> list[Schedule]:
    """The least-peak search's schedules at ``budget``, running until ``until`` (the baselines reused).

    The search stops at its first fitting schedule, so the start matters: it runs from the baselines of its own
    ``STARTS`` first (half the time, or until it fits), then with rotor's plan among them for what is left, and
    both results compete (LLaMA at 25 %: 51.2 % TDI from the first, 172.6 % from rotor's; ResNet at 25 %: 277 % from
    the first, 59 % from rotor's).
    """
    started = time.perf_counter()
    if until is None or time_limit is None:
        seconds = LEAST_PEAK_TIME_LIMIT
    else:
        seconds = max(until - started, min(INIT_LEAST_PEAK_MIN_SECONDS, 0.5 * time_limit))
    log.info("warm start: no fast baseline fits; least-peak search for at most %.1f s", seconds)
    own = {name: schedule for name, schedule in baselines.items() if name in LEAST_PEAK_STARTS}
    rotor = "rotor" in baselines
    found = [least_peak_search(graph, budget, time_limit=seconds / 2 if rotor else seconds, stop=stop, starts=own)]
    left = seconds - (time.perf_counter() - started)
    if rotor and left >= INIT_LEAST_PEAK_MIN_SECONDS and not (stop is not None and stop.is_set()):
        log.info("warm start: least-peak search with rotor's plan among its starts for at most %.1f s", left)
        found.append(least_peak_search(graph, budget, time_limit=left, stop=stop, starts=baselines))
    return [result.schedule for result in found]


FAST_BASELINES = ("chen-greedy", "chen-sqrtn", "knapsack", "saveset")  # max batch's starts, this order on ties
WARM_BASELINES = (*FAST_BASELINES, "rotor")  # the default warm start's (rotor: a second or two, too slow per batch)
BASELINES_CHEAPEST_FIRST = ("chen-sqrtn", "knapsack", "chen-greedy", "saveset", "rotor")  # ~0.1, 0.4, 0.8 s at 9.6k
SAVESET_NODES = 2000  # saveset and rotor join up to this many nodes (0.05-0.5 s and 1-2 s on the zoo)
SAVESET_BASED = ("saveset", "rotor")  # rotor's block options come from the save-set search
MIN_BASELINE_SECONDS = 0.5  # the least time limit the save-set search or rotor gets within a warm start's share


def fast_baselines(graph: Graph, budget: int, deadline: float | None = None) -> dict[str, Schedule]:
    """The schedules of ``WARM_BASELINES`` by name (in that order): the candidates of every warm start.

    They run cheapest first; with a ``deadline`` (``time.perf_counter()`` seconds) one after the first
    runs only before it, and the save-set search and rotor get what is left of it as their time limit.
    """
    found: dict[str, Schedule] = {}
    for name in BASELINES_CHEAPEST_FIRST:
        if found and deadline is not None and time.perf_counter() >= deadline:
            log.info("warm start: its share of the time limit is used up; %s skipped", name)
            continue
        if name in SAVESET_BASED:
            if graph.n <= SAVESET_NODES:  # PyTorch's plan space, searched: often the cheapest start on transformers
                left = None if deadline is None else max(MIN_BASELINE_SECONDS, deadline - time.perf_counter())
                found[name] = run_heuristic(name, graph, budget, time_limit=left)[0]
            continue
        found[name] = BASELINES[name](graph, budget)
    return {name: found[name] for name in WARM_BASELINES if name in found}


def cheapest_fitting(graph: Graph, budget: int, candidates: list[Schedule]) -> WarmStart | None:
    """The cheapest of ``candidates`` within ``budget`` (each simulated once), or None."""
    return cheapest(budget, (WarmStart(schedule, simulate(graph, schedule)) for schedule in candidates))


def cheapest(budget: int, starts: Iterable[WarmStart]) -> WarmStart | None:
    """The cheapest of simulated ``starts`` within ``budget`` (the first on ties), or None."""
    best, best_cost = None, float("inf")
    for start in starts:
        result = start.simulation
        if result is not None and result.peak <= budget and result.total_cost < best_cost:
            best, best_cost = start, result.total_cost
    return best
