"""Numeric limits checked once, where values enter the library (files, budgets, options), and fitted to solvers.

Byte counts (sizes, budgets, totals) stay below ``2**62`` so that every sum the simulator and the
solvers form (peaks, capacities, CP-SAT's int64 domains) is exact; times are finite and positive;
counts and seeds are below ``2**63`` (an int64). A solver whose own range is narrower (an int32 seed,
a time limit in int32 milliseconds) gets the value fitted by its backend: :func:`fit_time_limit`,
:func:`fit_seed`; a blocking wait is cut into slices of :data:`MAX_WAIT` (``poll`` takes int milliseconds).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from remat_models.errors import ConfigurationError, InputTypeError

__all__ = [
    "INT32_MAX",
    "MAX_BYTES",
    "MAX_COUNT",
    "MAX_WAIT",
    "check_count",
    "check_time_limit",
    "fit_seed",
    "fit_time_limit",
    "wait_slice",
]

log = logging.getLogger(__name__)

MAX_BYTES = 2**62 - 1  # the largest size, budget or graph total the library takes
MAX_COUNT = 2**63 - 1  # the largest count or seed the library takes (seeds from 2**63 on are refused)
INT32_MAX = 2**31 - 1  # the largest seed (or whole seconds) of most solvers: CP-SAT, HiGHS, SCIP, GLPK
MAX_WAIT = 86_400.0  # seconds of one blocking wait at most (poll() overflows past ~24.8 days); longer ones loop


def check_time_limit(value: Any, what: str = "time limit") -> float | None:
    """Return ``value`` as seconds (None = no limit); NaN, infinities, zero and negatives are refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputTypeError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{what} must be a finite number of seconds > 0, got {value!r} (omit it for none)")
    return float(value)


def check_count(value: Any, what: str, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """Return ``value`` if it is a whole number in ``[minimum, maximum]`` (e.g. solver workers, a seed)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputTypeError(f"{what} must be a whole number, got {value!r}")
    if value < minimum:
        raise ConfigurationError(f"{what} must be >= {minimum}, got {value}")
    if value > maximum:
        raise ConfigurationError(f"{what} must be <= {maximum}, got {value}")
    return value


def fit_time_limit(seconds: float, maximum: float, solver: str) -> float:
    """``seconds``, or ``maximum`` (logged) where the solver cannot take more (its limit would overflow)."""
    if seconds <= maximum:
        return seconds
    log.warning("%s: time limit %g s clamped to %g s, the most it takes", solver, seconds, maximum)
    return maximum


def fit_seed(seed: int, maximum: int, solver: str) -> int:
    """``seed`` reduced into the solver's range ``[0, maximum]``: modulo ``maximum + 1``, so deterministic."""
    fitted = seed % (maximum + 1)
    if fitted != seed:
        log.debug("%s: seed %d reduced to %d (its seeds go up to %d)", solver, seed, fitted, maximum)
    return fitted


def wait_slice(seconds: float) -> float:
    """One blocking wait's timeout towards ``seconds`` from now: in ``[0, MAX_WAIT]``; loop for the rest."""
    return min(max(0.0, seconds), MAX_WAIT)
