"""Heuristic planning methods by name (baselines and FastSA): each returns a schedule and JSON-ready details.

The ``auto`` portfolio is a planning method, not a heuristic: see :mod:`remat_models.planning.methods`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.errors import ConfigurationError
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.fastsa.solver import FastSAOptions
from remat_models.heuristics.least_peak import run_least_peak
from remat_models.heuristics.rotor import rotor
from remat_models.heuristics.saveset import saveset
from remat_models.heuristics.three_way import ThreeWayOptions, run_three_way

log = logging.getLogger(__name__)

FASTSA_TIME_LIMIT = 60.0  # seconds, when the caller gives none (the paper's 20M + 2M attempts can take longer)

Runner = Callable[..., tuple[Schedule, dict[str, Any]]]  # (graph, budget, *, seed, time_limit, options[, stop])


@dataclass(frozen=True)
class Heuristic:
    """A heuristic, whether it takes a seed, a time limit and options (baselines take none), and their names.

    ``stoppable``: its runner takes ``stop`` (a ``threading.Event``; once set it returns its best so far).
    """

    run: Runner
    configurable: bool = False
    options: tuple[str, ...] = ()
    stoppable: bool = False
    target_option: str | None = None  # the option that takes a proven lower bound on cost (the run may stop there)


def _baseline(function: Callable[[Graph, int], Schedule]) -> Heuristic:
    return Heuristic(lambda graph, budget, **_: (function(graph, budget), {}))


def _timed(function: Callable[..., Schedule]) -> Heuristic:
    """A heuristic taking a time limit (no seed, no options): at the limit it returns its best plan so far."""

    def run(graph: Graph, budget: int, *, time_limit: float | None = None, **_: Any) -> tuple[Schedule, dict[str, Any]]:
        return function(graph, budget, time_limit=time_limit), {}

    return Heuristic(run, configurable=True)


def _fastsa(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    from remat_models.heuristics.fastsa import fastsa

    limit = FASTSA_TIME_LIMIT if time_limit is None else time_limit  # 0 is refused by fastsa, not replaced
    log.info("FastSA on %s: annealing for at most %g s%s", graph.name, limit, "" if stop is None else " (stoppable)")
    result = fastsa(graph, budget, seed=seed, time_limit=limit, stop=stop, **dict(options or {}))
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


HEURISTICS: dict[str, Heuristic] = {
    **{name: _baseline(function) for name, function in BASELINES.items()},
    "saveset": _timed(saveset),
    "rotor": _timed(rotor),
    "fastsa": Heuristic(
        _fastsa,
        configurable=True,
        options=("iterations", *(f.name for f in fields(FastSAOptions))),
        stoppable=True,
        target_option="target_cost",
    ),
    "three-way": Heuristic(run_three_way, configurable=True, options=tuple(f.name for f in fields(ThreeWayOptions))),
    "least-peak": Heuristic(run_least_peak, configurable=True, stoppable=True),  # a time limit, no options
}


def register_heuristic(name: str, heuristic: Heuristic) -> None:
    """Register a heuristic method under ``name``."""
    HEURISTICS[name] = heuristic


def run_heuristic(
    name: str,
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
    target: float | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    """Run the heuristic ``name``; options and a time limit only where it takes them.

    ``stop`` reaches a stoppable heuristic (FastSA), which then ends early with its best so far; others
    run to their end (the baselines take seconds at most). ``target``, a proven lower bound on the total
    cost, reaches a heuristic with a ``target_option`` (FastSA: it stops once a fitting schedule costs that
    little) unless the options set it; the others ignore it.
    """
    heuristic = HEURISTICS.get(name)
    if heuristic is None:
        raise ConfigurationError(f"unknown method {name!r}; choose one of {', '.join(HEURISTICS)}")
    if not heuristic.configurable and (options or time_limit is not None):
        takes = ", ".join(n for n, h in HEURISTICS.items() if h.configurable)
        raise ConfigurationError(f"method {name!r} takes no options (such as --iterations) or time limit; {takes} does")
    extra = {"stop": stop} if heuristic.stoppable and stop is not None else {}
    if target is not None and heuristic.target_option is not None:
        options = {heuristic.target_option: target, **(options or {})}
    return heuristic.run(graph, budget, seed=seed, time_limit=time_limit, options=options, **extra)
