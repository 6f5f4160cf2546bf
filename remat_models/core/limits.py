"""Numeric limits checked once, where values enter the library (files, budgets, options).

Byte counts (sizes, budgets, totals) stay below ``2**62`` so that every sum the simulator and the
solvers form (peaks, capacities, CP-SAT's int64 domains) is exact; times are finite and positive.
"""

from __future__ import annotations

import math
from typing import Any

from remat_models.errors import ConfigurationError, InputTypeError

__all__ = ["MAX_BYTES", "check_count", "check_time_limit"]

MAX_BYTES = 2**62 - 1  # the largest size, budget or graph total the library takes


def check_time_limit(value: Any, what: str = "time limit") -> float | None:
    """Return ``value`` as seconds (None = no limit); NaN, infinities, zero and negatives are refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputTypeError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{what} must be a finite number of seconds > 0, got {value!r} (omit it for none)")
    return float(value)


def check_count(value: Any, what: str, minimum: int = 1) -> int:
    """Return ``value`` if it is a whole number >= ``minimum`` (e.g. solver workers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputTypeError(f"{what} must be a whole number, got {value!r}")
    if value < minimum:
        raise ConfigurationError(f"{what} must be >= {minimum}, got {value}")
    return value
