"""Issue #34, limits: every phase of a formulation's solve inside the time limit, the model build included.

A build that passes its share of the limit stops and the solve answers "no schedule", so ``plan`` returns its warm
start (never a claim); solvers that ignore their limit while setting a large model up run in the hard-deadline
child, killed at the limit itself, also below 1.1 s; LP rounding's later LPs and its candidates keep to the limit.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from remat_models import plan
from remat_models.backends import SolveLimits, get_backend
from remat_models.backends.base import LOWERED_NONZEROS_PER_SECOND
from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import simulate
from remat_models.formulations import get_formulation
from remat_models.formulations.base import SolveChain
from remat_models.formulations.build_deadline import BuildTimeUp, build_deadline, check_build_time
from remat_models.formulations.checkmate.rounding import lp_rounding
from remat_models.heuristics.registry import run_heuristic
from remat_models.heuristics.rounding import rounding_candidates
from remat_models.io.generators import linear_chain, transformer
from remat_models.model import SolveStatus
from remat_models.model.lowering import effective_native, estimate


@pytest.fixture(scope="module")
def tr8() -> Graph:
    """The 199-node transformer of the #34 benchmark (``transformer --size 8 --seed 1``)."""
    return transformer(8, seed=1)


def test_a_check_past_the_build_deadline_stops_the_build() -> None:
    check_build_time("outside any build")  # no deadline: nothing happens
    with build_deadline(10.0, time.perf_counter()):
        check_build_time("early")
    late = build_deadline(1.0, time.perf_counter() - 1.0)
    with pytest.raises(BuildTimeUp, match="monet: the build passed its share of the time limit"), late:
        check_build_time("monet")


@pytest.mark.parametrize("formulation", ["monet", "checkmate"])
def test_a_build_that_passes_the_limit_answers_no_schedule(tr8: Graph, formulation: str) -> None:
    """MONeT's build of 199 nodes took 3.6 s of a 5 s limit under load; its solver then got 0.1 s and took 3 s."""
    budget = parse_budget("50%", tr8)
    started = time.perf_counter()
    limits = SolveLimits(time_limit=0.002)  # at 0.02 s a quiet machine built Checkmate of 199 nodes in time (once)
    outcome = SolveChain(get_formulation(formulation), "highs").solve(tr8, budget, limits=limits)
    assert outcome.status is SolveStatus.NO_SOLUTION and outcome.schedule is None
    assert "build_skipped" in outcome.details, outcome.details
    assert time.perf_counter() - started < 2.0


def test_plan_returns_its_warm_start_when_the_build_uses_up_the_limit() -> None:
    """MONeT's build of 775 nodes takes over 1 s: at 0.4 s it stops, and the given start is the plan.

    (391 nodes took 0.8 s unloaded, and once built in time on a quiet machine: HiGHS then started and was killed.)
    """
    graph = transformer(32, seed=1)
    budget = parse_budget("50%", graph)
    start = run_heuristic("chen-sqrtn", graph, budget)[0]
    started = time.perf_counter()
    result = plan(graph, budget, "monet", init=start, time_limit=0.4, windows=False)  # the whole model
    assert time.perf_counter() - started < 1.5  # the build stopped at 0.4 s, no solve
    assert result.solver_status is SolveStatus.NO_SOLUTION  # no claim: nothing was solved
    assert "build_skipped" in result.details, result.details
    assert result.schedule is not None and simulate(graph, result.schedule).peak <= budget
    assert simulate(graph, result.schedule).total_cost == simulate(graph, start).total_cost


def test_highs_is_killed_at_a_limit_below_a_second_on_millions_of_nonzeros(tr8: Graph) -> None:
    """MONeT's 199-node model has 62k columns and rows but 2 M nonzeros: HiGHS took 3 s to set it up at a 0.1 s
    limit (below the isolation size); in the hard-deadline child it is killed at the limit itself (was >= 1.1 s)."""
    budget = parse_budget("50%", tr8)
    built = SolveChain(get_formulation("monet"), "highs").build(tr8, budget)
    assert built.model.num_nonzeros >= 1_000_000
    started = time.perf_counter()
    result = get_backend("highs").solve(built.model, SolveLimits(time_limit=0.5))
    assert time.perf_counter() - started < 1.05
    assert result.status in (SolveStatus.NO_SOLUTION, SolveStatus.FEASIBLE)


def test_lp_rounding_builds_and_solves_nothing_without_time_for_it(tr8: Graph) -> None:
    """Its build counted, but each LP got at least 0.1-1 s however little was left (7.6 s at 5 s on 199 nodes)."""
    budget = parse_budget("50%", tr8)
    started = time.perf_counter()
    outcome = lp_rounding(tr8, budget, limits=SolveLimits(time_limit=0.05))
    assert time.perf_counter() - started < 1.0  # the killed LP alone took 1.1 s before
    assert outcome.status is SolveStatus.NO_SOLUTION and outcome.schedule is None
    assert outcome.details["allowances"] in ([], [0.0]) and outcome.details["candidates"] == 0  # no later LP


def test_rounding_makes_one_candidate_past_its_deadline(tr8: Graph) -> None:
    """33 candidates of the 199-node graph took 2.6 s, after the LP had used the limit."""
    s_frac = np.tril(np.random.default_rng(0).random((tr8.n, tr8.n)), -1)
    kinds = {"thresholds": (0.3, 0.7), "random_thresholds": 1, "samples": 1}
    every = rounding_candidates(tr8, tr8.order, s_frac, **kinds)  # type: ignore[arg-type]
    first = rounding_candidates(tr8, tr8.order, s_frac, **kinds, deadline=time.perf_counter())  # type: ignore[arg-type]
    assert len(every) > 1 and len(first) == 1
    assert first[0].label == every[0].label
    assert first[0].simulation.peak == simulate(tr8, first[0].schedule).peak


def test_a_solve_whose_lowering_would_outlast_its_limit_is_not_lowered() -> None:
    """Moccasin's reservoirs lower to time-indexed rows for HiGHS: a window of the 9,607-node transformer wrote 61 M
    nonzeros for CVXPY in 6.1 s of a 3.4 s limit (20.4 s for the whole command); now that solve answers at once."""
    graph = linear_chain(8)
    built = SolveChain(get_formulation("moccasin"), "highs").build(graph, parse_budget("60%", graph))
    added = estimate(built.model, effective_native(get_backend("highs").native_constructs)).nonzeros
    added -= built.model.num_nonzeros
    assert added > 10_000
    limit = 0.5 * added / LOWERED_NONZEROS_PER_SECOND
    started = time.perf_counter()
    result = get_backend("highs").solve(built.model, SolveLimits(time_limit=limit))
    assert time.perf_counter() - started < 0.5
    assert result.status is SolveStatus.NO_SOLUTION and "lowering to" in (result.log or "")
    enough = max(1.0, 2 * added / LOWERED_NONZEROS_PER_SECOND)
    solved = get_backend("highs").solve(built.model, SolveLimits(time_limit=enough))
    assert "lowering to" not in (solved.log or "")  # with time for it the same model is lowered and handed over
