"""Issue #34, limits: the hard-deadline grace lies inside the time limit (the solver stops 1 s + 5 % before its child
is killed at the limit), so a run at 5 s keeps the 1.1 x limit + 2 s it may take."""

from __future__ import annotations

import time

import pytest
from test_backends import _market_split

import remat_models.backends.base as backend_base
from remat_models.backends import SolveLimits, get_backend
from remat_models.backends.deadline import hard_deadline, killed_at_the_limit
from remat_models.model import SolveStatus

MARGIN = 4.0  # seconds on top of 1.1 x limit + 2 s: the machine is shared


def test_a_hard_deadline_solve_stops_by_itself_before_its_child_is_killed_at_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HiGHS in the child gets the limit less 1 s + 5 % and stops by itself: its own answer, no kill."""
    monkeypatch.setattr(backend_base, "ISOLATE_SIZE", 0)  # every timed solve runs in the hard-deadline child
    model = _market_split(m_rows=6, n=60)  # hours to prove
    started = time.perf_counter()
    result = get_backend("highs").solve(model, SolveLimits(time_limit=3.0))
    assert time.perf_counter() - started <= 1.1 * 3.0 + 2.0 + MARGIN
    assert "killed" not in (result.log or "")  # HiGHS's own answer at its (cut) limit
    assert result.status in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION)


@pytest.mark.parametrize("limit", [2.0, 5.0, 60.0])
def test_the_child_is_killed_at_the_limit_itself(limit: float) -> None:
    cut = killed_at_the_limit(SolveLimits(time_limit=limit))
    assert cut.time_limit is not None and cut.time_limit < limit - 0.9
    assert hard_deadline(cut.time_limit) == pytest.approx(limit)
