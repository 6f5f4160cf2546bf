"""Large timed solves run in a forked child killed at a hard deadline (backends/deadline.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from remat_models.backends import SolveLimits, get_backend
from remat_models.backends.deadline import hard_deadline, publish_incumbent, run_with_deadline
from remat_models.backends.interrupt import Stopper
from remat_models.errors import ConfigurationError
from remat_models.model import Model, SolveResult, SolveStatus


def _answer() -> SolveResult:
    result = SolveResult(SolveStatus.FEASIBLE)
    result.x = np.arange(300_000, dtype=np.float64)  # a large solution travels back through the pipe
    return result


def test_an_answer_within_the_deadline_comes_back_whole() -> None:
    result = run_with_deadline("test", _answer, 30.0, Stopper())
    assert result.status == SolveStatus.FEASIBLE
    assert result.x is not None and result.x.shape == (300_000,) and result.x[-1] == 299_999


def test_a_solver_past_the_deadline_is_killed_and_answers_no_solution() -> None:
    started = time.perf_counter()
    result = run_with_deadline("test", lambda: time.sleep(120) or _answer(), 1.0, Stopper())
    assert result.status == SolveStatus.NO_SOLUTION and "hard deadline" in (result.log or "")
    assert time.perf_counter() - started < 60  # not the 120 s of the stuck solver


def test_a_solver_error_is_raised_in_the_caller() -> None:
    def fail() -> SolveResult:
        raise ConfigurationError("bad option x")

    with pytest.raises(ConfigurationError, match="bad option x"):
        run_with_deadline("test", fail, 30.0, Stopper())


def test_the_hard_deadline_allows_the_grace() -> None:
    assert hard_deadline(60.0) == pytest.approx(64.0)


def test_a_large_timed_solve_goes_through_the_child_and_comes_back_exact() -> None:
    """200,000 columns: above ISOLATE_SIZE, so the solve runs in the forked child; values come back by block.

    On HiGHS (under a second); CP-SAT takes the same path but ~50 s to write and presolve this model.
    """
    from remat_models.backends.deadline import ISOLATE_SIZE

    n = ISOLATE_SIZE
    costs = np.random.default_rng(0).integers(1, 1000, n)
    model = Model("pick_three")
    x = model.bool_block("x", n)
    model.add_rows(np.zeros(n, dtype=np.int64), x.cols, np.ones(n), [3], [np.inf])
    model.set_objective(x.cols, costs)
    result = get_backend("highs").solve(model, SolveLimits(time_limit=60))
    assert result.status == SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(np.sort(costs)[:3].sum())
    assert int(result.values["x"].sum()) == 3


def test_a_killed_solver_answers_with_its_last_incumbent() -> None:
    def improve_then_hang() -> SolveResult:
        publish_incumbent(np.array([1.0, 0.0, 1.0]))
        publish_incumbent(np.array([0.0, 1.0, 1.0]))
        time.sleep(120)
        return _answer()

    result = run_with_deadline("test", improve_then_hang, 2.0, Stopper())
    assert result.status == SolveStatus.FEASIBLE and "incumbent kept" in (result.log or "")
    assert result.x is not None and result.x.tolist() == [0.0, 1.0, 1.0]


def _cover(n: int = 400, m: int = 120) -> Model:
    """A set-cover MIP: HiGHS finds an incumbent in milliseconds and does not prove it optimal in 10 s."""
    rng = np.random.default_rng(0)
    model = Model("cover")
    x = model.bool_block("x", n)
    rows = np.repeat(np.arange(m), 12)
    cols = np.concatenate([rng.choice(n, 12, replace=False) for _ in range(m)])
    model.add_rows(rows, x.cols[cols], np.ones(rows.size), np.full(m, 2), np.full(m, np.inf))
    model.set_objective(x.cols, rng.integers(50, 100, n))
    return model


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
def test_a_real_solver_killed_at_the_hard_deadline_keeps_its_incumbent(backend, monkeypatch) -> None:
    """Every timed solve isolated, killed 2 s in although its own limit is 60 s: the callback's incumbent survives."""
    from remat_models.backends import base

    monkeypatch.setattr(base, "ISOLATE_SIZE", 0)
    monkeypatch.setattr(base, "hard_deadline", lambda time_limit: 2.0)
    model = _cover()
    started = time.perf_counter()
    result = get_backend(backend).solve(model, SolveLimits(time_limit=60))
    assert time.perf_counter() - started < 30
    assert result.status == SolveStatus.FEASIBLE and "killed at the hard deadline" in (result.log or "")
    chosen = result.values["x"]
    assert result.objective == pytest.approx(model.objective_value(chosen))
    indptr, cols, vals, lower, _ = model.linear_csr()
    assert (np.add.reduceat(chosen[cols] * vals, indptr[:-1]) >= lower).all()  # the incumbent is a cover
