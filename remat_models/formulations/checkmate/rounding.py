"""Checkmate's LP relaxation with two-phase and randomized rounding (paper sec. 5), an approximation of checkmate.

Each LP runs on Checkmate's solve chain (``SolveChain.run``); candidates are simulated once, where rounded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph
from remat_models.errors import ConfigurationError
from remat_models.formulations.base import BuiltModel, Extension, SolveChain
from remat_models.formulations.build_deadline import BuildTimeUp, build_deadline, solve_time_left
from remat_models.formulations.checkmate.formulation import CHECKMATE
from remat_models.formulations.outcome import SolveOutcome
from remat_models.heuristics.rounding import DEFAULT_THRESHOLDS, Candidate, best_candidate, rounding_candidates
from remat_models.model import SolveResult, SolveStatus

log = logging.getLogger(__name__)

DEFAULT_LIMITS = SolveLimits()
ALLOWANCES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the allowance search, in order


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
    extensions: Sequence[Extension] = (),
    search: bool = True,
) -> SolveOutcome:
    """Solve the staged LP relaxation (at ``(1 - allowance) * budget``), round S*, keep the best simulated schedule.

    With ``search`` (the paper's allowance search), while no candidate fits the budget the LP is solved
    again at the larger allowances of ``ALLOWANCES`` (a smaller model budget) and rounded, until one fits
    or the time limit is spent; every candidate competes. ``backend`` "highs" means its LP ("highs:lp").
    The outcome's schedule is the cheapest candidate within the budget, else the lowest-peak one (then
    over budget); ``bound`` is the LP optimum at the full budget, a lower bound on the staged MILP's cost;
    ``details`` hold the LP status, the allowances tried, candidate count and labels.
    """
    if extensions:
        raise ConfigurationError("lp-rounding rounds Checkmate's own S matrix and takes no extensions")
    started = time.perf_counter()  # finding the backend counts against the limit too
    chain = SolveChain(CHECKMATE, "highs:lp" if backend == "highs" else backend)
    if getattr(chain.backend, "integral", True):
        raise ConfigurationError(f"LP rounding needs a relaxation backend such as 'highs:lp', not {chain.spec!r}")
    options = chain.options({"order": order, "integral_memory": False})
    if not 0 <= allowance < 1:
        raise ConfigurationError(f"LP rounding allowance must lie in [0, 1), got {allowance!r}")
    full = _built(graph, budget, options, limits, started)  # every build and LP counts against the limit
    first = _left(limits, started)  # (tr40: the first build took most of a 5 s limit)
    unsolved = SolveResult(SolveStatus.NO_SOLUTION, backend=chain.spec, log="no time left for the LP after its build")
    bound_result = unsolved if full is None or first is None else chain.run(full.model, first)
    phases = {"lp": bound_result}
    candidates: list[Candidate] = []
    tried: list[float] = []
    for eps in [allowance, *(a for a in ALLOWANCES if search and a > allowance)] if full is not None else []:
        if eps == 0:
            built, result = full, bound_result
        else:  # a later LP only with time left after its build (each got at least 1 s: 7.6 s at 5 s on 199 nodes)
            again = _built(graph, budget, replace(options, allowance=eps), limits, started)
            left = _left(limits, started)
            if again is None or left is None:
                break
            built, result = again, chain.run(again.model, left)
            phases[f"lp_allowance_{eps:g}"] = result
        tried.append(eps)
        if result.has_solution:
            _, s_frac = built.fractional(result.values)
            candidates += rounding_candidates(
                graph,
                built.order,
                s_frac,
                thresholds=thresholds,
                random_thresholds=random_thresholds,
                samples=samples,
                seed=seed,
                label=f"allowance {eps:g}, ",
                deadline=None if limits.time_limit is None else started + limits.time_limit,
            )
        if best_candidate(candidates, budget)[0] is not None or bound_result.status == SolveStatus.INFEASIBLE:
            break
    best, lowest = best_candidate(candidates, budget)
    chosen = best or lowest
    if chosen is not None:
        status = SolveStatus.FEASIBLE
    else:
        # an infeasible LP relaxation proves only that Checkmate's model (one order, stages) holds no schedule
        infeasible = bound_result.status == SolveStatus.INFEASIBLE
        status = SolveStatus.NO_SCHEDULE_IN_MODEL if infeasible else SolveStatus.NO_SOLUTION
    log.info(
        "LP rounding on %s: LP %s, %d candidates, best %s", graph.name, bound_result.status.value, len(candidates), best
    )
    return SolveOutcome(
        formulation=CHECKMATE.name,
        backend=chain.spec,
        status=status,
        schedule=None if chosen is None else chosen.schedule,
        simulation=None if chosen is None else chosen.simulation,
        objective=None if chosen is None else chosen.simulation.total_cost,
        bound=full.cost(bound_result.objective) if full is not None and bound_result.has_solution else None,
        solve_time=sum(p.wall_time for p in phases.values()),
        wall_time=time.perf_counter() - started,
        solver_version=bound_result.solver_version,
        options={"allowance": allowance, "samples": samples, "random_thresholds": random_thresholds, "search": search},
        phases=phases,
        details={
            "approx": "lp-rounding",
            "lp_status": bound_result.status.value,
            "lp_bound": full.cost(bound_result.objective) if full is not None and bound_result.has_solution else None,
            "allowances": tried,
            "candidates": len(candidates),
            "best": None if best is None else best.label,
            "lowest_peak": None if lowest is None else lowest.simulation.peak,
        },
    )


def _built(graph: Graph, budget: int, options: Any, limits: SolveLimits, started: float) -> BuiltModel | None:
    """Checkmate's relaxation, or None where its build passed its share of the time limit (``build_deadline``)."""
    if limits.time_limit is not None and solve_time_left(limits.time_limit, time.perf_counter() - started) is None:
        return None
    try:
        with build_deadline(limits.time_limit, started):
            return CHECKMATE.build(graph, budget, options)
    except BuildTimeUp as error:
        log.info("LP rounding: %s", error)
        return None


def _left(limits: SolveLimits, started: float) -> SolveLimits | None:
    """``limits`` with what is left of the time limit since ``started``; None when too little is left for an LP."""
    if limits.time_limit is None:
        return limits
    left = solve_time_left(limits.time_limit, time.perf_counter() - started)
    return None if left is None else replace(limits, time_limit=left)
