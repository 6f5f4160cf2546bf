"""Warm starts of exact solves: a given schedule, a named heuristic's, or ``auto_init``'s (the default)."""

from __future__ import annotations

import logging
import threading
from typing import NamedTuple

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, SimulationResult, lift_schedule, simulate
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.registry import run_heuristic

log = logging.getLogger(__name__)

DEFAULT_TIME_LIMIT = 60.0  # seconds: what ``auto`` (and its warm start's FastSA share) assume when given none
INIT_FASTSA_NODES = 500  # the default warm start adds a short FastSA run from this many nodes on
INIT_FASTSA_SHARE = 0.2


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
    graph: Graph, budget: int, *, seed: int = 0, time_limit: float | None = None, stop: threading.Event | None = None
) -> WarmStart | None:
    """The default warm start of an exact solve (``--init auto``): the cheapest fitting fast heuristic, or None.

    ``FAST_BASELINES`` (Chen's greedy and sqrt(n), the saved-set knapsack: milliseconds), and on graphs of
    ``INIT_FASTSA_NODES`` nodes or more a FastSA run of ``INIT_FASTSA_SHARE`` of the time limit (at most 30 s).
    None when none fits: the solver then starts as it would without a warm start (Moccasin from its staged greedy).
    """
    candidates = fast_baselines(graph, budget)
    if graph.n >= INIT_FASTSA_NODES and not (stop is not None and stop.is_set()):
        seconds = min(30.0, max(1.0, INIT_FASTSA_SHARE * (time_limit or DEFAULT_TIME_LIMIT)))
        log.info("warm start: FastSA for at most %.1f s", seconds)
        candidates.append(run_heuristic("fastsa", graph, budget, seed=seed, time_limit=seconds, stop=stop)[0])
    return cheapest_fitting(graph, budget, candidates)


FAST_BASELINES = ("chen-greedy", "chen-sqrtn", "knapsack")  # milliseconds to a second at 10k nodes


def fast_baselines(graph: Graph, budget: int) -> list[Schedule]:
    """The schedules of ``FAST_BASELINES``: the candidates of every warm start."""
    return [BASELINES[name](graph, budget) for name in FAST_BASELINES]


def cheapest_fitting(graph: Graph, budget: int, candidates: list[Schedule]) -> WarmStart | None:
    """The cheapest of ``candidates`` within ``budget`` (each simulated once), or None."""
    best: WarmStart | None = None
    for schedule in candidates:
        result = simulate(graph, schedule)
        if result.peak <= budget and (best is None or result.total_cost < best.simulation.total_cost):
            best = WarmStart(schedule, result)
    return best
