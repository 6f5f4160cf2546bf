"""A model build's deadline: the solve chain sets it, a formulation's build checks it between its phases.

A build that passes it stops (``BuildTimeUp``) and the chain answers "no schedule" (``details["build_skipped"]``),
so ``plan`` returns its warm start within the time limit instead of handing a solver a model with no time left
(MONeT's build of a 199-node transformer took 3.6 s under load of what was left of a 5 s limit; its solver then got
0.1 s and HiGHS took 3 s to set the model up).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from remat_models.errors import RematError

SOLVE_SHARE = 0.05  # of the time limit, the least left for the solve after the build: a build past the rest stops

_DEADLINE: ContextVar[float | None] = ContextVar("remat_build_deadline", default=None)


class BuildTimeUp(RematError):
    """A model build passed its deadline (the solve chain answers no schedule; never seen outside it)."""


@contextmanager
def build_deadline(time_limit: float | None, started: float) -> Iterator[None]:
    """Inside, :func:`check_build_time` stops a build past ``started`` + (1 - ``SOLVE_SHARE``) ``time_limit``."""
    deadline = None if time_limit is None else started + (1.0 - SOLVE_SHARE) * time_limit
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_build_time(what: str) -> None:
    """Raise ``BuildTimeUp`` naming ``what`` when the enclosing build's deadline has passed (else nothing)."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.perf_counter() > deadline:
        raise BuildTimeUp(f"{what}: the build passed its share of the time limit; stopped before the solve")


def solve_time_left(time_limit: float, build_time: float) -> float | None:
    """Seconds left for the solve after a build of ``build_time``; None when less than ``SOLVE_SHARE`` is left."""
    left = time_limit - build_time
    return left if left >= SOLVE_SHARE * time_limit else None
