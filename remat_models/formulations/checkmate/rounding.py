"""Checkmate's LP relaxation with two-phase and randomized rounding (paper sec. 5), an approximation of checkmate.

Each LP runs on Checkmate's solve chain (``SolveChain.run``); candidates are simulated once, where rounded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph
from remat_models.errors import ConfigurationError
from remat_models.formulations.base import Extension, SolveChain
from remat_models.formulations.checkmate.formulation import CHECKMATE
from remat_models.formulations.outcome import SolveOutcome
from remat_models.heuristics.rounding import DEFAULT_THRESHOLDS, Candidate, best_candidate, rounding_candidates
from remat_models.model import SolveStatus

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
    chain = SolveChain(CHECKMATE, "highs:lp" if backend == "highs" else backend)
    if getattr(chain.backend, "integral", True):
        raise ConfigurationError(f"LP rounding needs a relaxation backend such as 'highs:lp', not {chain.spec!r}")
    options = chain.options({"order": order, "integral_memory": False})
    started = time.perf_counter()
    full = CHECKMATE.build(graph, budget, options)
    first = limits  # the build counts against the limit (tr40: it took most of a 5 s limit)
    if limits.time_limit is not None:
        first = replace(limits, time_limit=max(0.1, limits.time_limit - (time.perf_counter() - started)))
    bound_result = chain.run(full.model, first)
    phases = {"lp": bound_result}
    if not 0 <= allowance < 1:
        raise ConfigurationError(f"LP rounding allowance must lie in [0, 1), got {allowance!r}")
    candidates: list[Candidate] = []
    tried: list[float] = []
    for eps in [allowance, *(a for a in ALLOWANCES if search and a > allowance)]:
        left = None if limits.time_limit is None else limits.time_limit - (time.perf_counter() - started)
        if tried and left is not None and left <= 0:
            break
        if eps == 0:
            built, result = full, bound_result
        else:
            built = CHECKMATE.build(graph, budget, replace(options, allowance=eps))
            result = chain.run(built.model, limits if left is None else replace(limits, time_limit=max(left, 1.0)))
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
        bound=full.cost(bound_result.objective) if bound_result.has_solution else None,
        solve_time=sum(p.wall_time for p in phases.values()),
        wall_time=time.perf_counter() - started,
        solver_version=bound_result.solver_version,
        options={"allowance": allowance, "samples": samples, "random_thresholds": random_thresholds, "search": search},
        phases=phases,
        details={
            "approx": "lp-rounding",
            "lp_status": bound_result.status.value,
            "lp_bound": full.cost(bound_result.objective) if bound_result.has_solution else None,
            "allowances": tried,
            "candidates": len(candidates),
            "best": None if best is None else best.label,
            "lowest_peak": None if lowest is None else lowest.simulation.peak,
        },
    )
