"""``auto``: one method for users, a portfolio within the time limit; and the default warm start of exact solves.

The portfolio runs, one after the other within the time limit: FastSA (a share of the time), Checkmate's
MILP on HiGHS warm-started from FastSA where the graph is small, then Moccasin on CP-SAT warm-started from
the best schedule so far with the time left. It returns the cheapest schedule within the budget (else the
lowest peak) and the best lower bound on cost any of them proved.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from remat_models.errors import BudgetExceededError, RematError
from remat_models.graph import Graph
from remat_models.heuristics.baselines import BASELINES
from remat_models.schedule import Schedule, SimulationResult, simulate

log = logging.getLogger(__name__)

AUTO_TIME_LIMIT = 60.0  # seconds, when the caller gives none
FASTSA_SHARE = 0.3  # of the time limit
CHECKMATE_NODES = 150  # Checkmate's MILP (O(n^2) variables) joins the portfolio up to this many nodes
CHECKMATE_SHARE = 0.3
INIT_FASTSA_NODES = 2000  # the default warm start adds a short FastSA run from this many nodes on
INIT_FASTSA_SHARE = 0.2


def _better(a: SimulationResult, b: SimulationResult | None, budget: int) -> bool:
    """Whether ``a`` ranks before ``b``: within the budget by cost, else by peak."""
    if b is None:
        return True
    fits_a, fits_b = a.peak <= budget, b.peak <= budget
    if fits_a != fits_b:
        return fits_a
    if fits_a:
        return (a.total_cost, a.peak) < (b.total_cost, b.peak)
    return (a.peak, a.total_cost) < (b.peak, b.total_cost)


def auto(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    """The portfolio's best schedule and details: each member's cost, peak, time and bound, and the best bound."""
    from remat_models.heuristics.registry import run_heuristic
    from remat_models.planner import plan

    total = AUTO_TIME_LIMIT if time_limit is None else time_limit
    started = time.perf_counter()
    best: tuple[str, Schedule, SimulationResult] | None = None
    members: list[dict[str, Any]] = []
    bound: float | None = None

    def offer(name: str, schedule: Schedule | None, member_bound: float | None, seconds: float) -> None:
        nonlocal best, bound
        result = None if schedule is None else simulate(graph, schedule)
        members.append(
            {
                "method": name,
                "seconds": seconds,
                "peak": None if result is None else result.peak,
                "total_cost": None if result is None else result.total_cost,
                "bound": member_bound,
            }
        )
        if member_bound is not None:
            bound = member_bound if bound is None else max(bound, member_bound)
        if result is not None and _better(result, None if best is None else best[2], budget):
            best = (name, schedule, result)

    def left() -> float:
        return total - (time.perf_counter() - started)

    t0 = time.perf_counter()
    offer("chen-greedy", BASELINES["chen-greedy"](graph, budget), None, time.perf_counter() - t0)
    t0 = time.perf_counter()
    schedule, _ = run_heuristic("fastsa", graph, budget, seed=seed, time_limit=max(1.0, FASTSA_SHARE * total))
    offer("fastsa", schedule, None, time.perf_counter() - t0)
    exact = [("checkmate", "highs", CHECKMATE_SHARE)] if graph.n <= CHECKMATE_NODES else []
    exact.append(("moccasin", "cpsat", 1.0))
    for formulation, backend, share in exact:
        if left() < 1.0:
            break
        assert best is not None
        t0 = time.perf_counter()
        try:
            result = plan(
                graph,
                budget,
                formulation=formulation,
                backend=backend,
                time_limit=max(1.0, share * left()),
                init=best[1],
                seed=seed,
                allow_over_budget=True,
            )
        except (BudgetExceededError, RematError) as error:  # a member's failure is not the portfolio's
            log.info("auto: %s/%s failed: %s", formulation, backend, error)
            continue
        offer(f"{formulation}/{backend}", result.schedule, result.details.get("bound"), time.perf_counter() - t0)
    assert best is not None
    name, schedule, result = best
    gap = None if bound is None or result.peak > budget or not result.total_cost else 1 - bound / result.total_cost
    log.info("auto on %s: %s chosen, cost %s, bound %s", graph.name, name, result.total_cost, bound)
    return schedule, {"chosen": name, "bound": bound, "gap": gap, "portfolio": members}


def auto_init(graph: Graph, budget: int, *, seed: int = 0, time_limit: float | None = None) -> Schedule | None:
    """The default warm start of an exact solve (``--init auto``): the cheapest fitting fast heuristic, or None.

    Chen's greedy and sqrt(n) (milliseconds), and on graphs of ``INIT_FASTSA_NODES`` nodes or more a FastSA
    run of ``INIT_FASTSA_SHARE`` of the time limit (at most 30 s). None when none fits: the solver then
    starts as it would without a warm start (Moccasin from its staged greedy).
    """
    from remat_models.heuristics.registry import run_heuristic

    candidates = [BASELINES["chen-greedy"](graph, budget), BASELINES["chen-sqrtn"](graph, budget)]
    if graph.n >= INIT_FASTSA_NODES:
        seconds = min(30.0, max(1.0, INIT_FASTSA_SHARE * (time_limit or AUTO_TIME_LIMIT)))
        candidates.append(run_heuristic("fastsa", graph, budget, seed=seed, time_limit=seconds)[0])
    best: tuple[Schedule, SimulationResult] | None = None
    for schedule in candidates:
        result = simulate(graph, schedule)
        if result.peak <= budget and (best is None or result.total_cost < best[1].total_cost):
            best = (schedule, result)
    return None if best is None else best[0]
