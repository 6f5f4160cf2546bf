"""Sizes in bytes: whole bytes or units ("8GiB", "500MB"), read exactly; the number grammar budgets share."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import MAX_EMAX, MIN_EMIN, ROUND_FLOOR, Context, Decimal, DecimalException, localcontext

from remat_models.core.limits import MAX_BYTES
from remat_models.errors import BudgetError, InputTypeError

UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
# exact for any budget text that fits MAX_BYTES; overflow becomes Infinity (then "too large"), never an exception
_EXACT = Context(prec=200, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])
_PATTERN = re.compile(r"^\s*(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>%|[a-zA-Z]*)\s*$")


def parse_size(text: str | int | float) -> int:
    """Resolve an absolute size to bytes: whole bytes ("8589934592") or units ("8GiB", "500MB").

    Numbers are read exactly (no float rounding above 2**53); sizes of ``MAX_BYTES`` or more are refused.
    """
    match = match_number(text)
    unit = "" if match is None else match["unit"].lower()
    if match is None or unit == "%" or (unit and unit not in UNITS):
        raise BudgetError(f"cannot read size {text!r}: expected bytes or a unit like '8GiB' ({', '.join(UNITS)})")
    with exact(text):
        return to_bytes(Decimal(match["number"]) * UNITS.get(unit, 1), text, "size")



@contextmanager
def exact(text: str | int | float) -> Iterator[None]:
    """Exact decimal arithmetic; a number beyond its exponent range becomes a BudgetError naming ``text``."""
    with localcontext(_EXACT):
        try:
            yield
        except DecimalException as exc:
            raise BudgetError(f"cannot read {text!r}: the number is out of range") from exc


def match_number(text: str | int | float) -> re.Match[str] | None:
    """The number and unit of a budget or size text (None if it has neither form); InputTypeError for a non-number."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise InputTypeError(f"a budget or size is a string or a number, got {type(text).__name__} {text!r}")
    return _PATTERN.match(str(text))


def to_bytes(value: Decimal, text: str | int | float, what: str = "budget") -> int:
    """Round ``value`` down to whole bytes, refusing ``MAX_BYTES`` and more (checked before any big int is made)."""
    if value.is_nan():
        raise BudgetError(f"cannot read {what} {text!r}: the number is out of range")
    if value > MAX_BYTES:
        raise BudgetError(f"{what} {text!r} is too large: the most this library takes is {MAX_BYTES:,} B (2**62 - 1)")
    return int(value.to_integral_value(rounding=ROUND_FLOOR))


