"""Memory budgets: parse bytes, units or fractions of the input-order peak; reject impossible ones."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import MAX_EMAX, MIN_EMIN, ROUND_FLOOR, Context, Decimal, DecimalException, localcontext

import numpy as np

from remat_models.errors import BudgetError, BudgetInfeasibleError, InputTypeError
from remat_models.graph import Graph
from remat_models.limits import MAX_BYTES
from remat_models.schedule import input_order_peak

_UNITS = {
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
    match = _match(text)
    unit = "" if match is None else match["unit"].lower()
    if match is None or unit == "%" or (unit and unit not in _UNITS):
        raise BudgetError(f"cannot read size {text!r}: expected bytes or a unit like '8GiB' ({', '.join(_UNITS)})")
    with _exact(text):
        return _bytes(Decimal(match["number"]) * _UNITS.get(unit, 1), text, "size")


def parse_budget(text: str | int | float, graph: Graph) -> int:
    """Resolve a budget to bytes.

    Accepted: bytes ("13484795520", 1000), units ("11.3GiB", "500MB"), percent of the
    input-order peak ("80%"), or a fraction of it ("0.8": any plain number in (0, 1]).
    Fractions round down, so the resolved budget never exceeds the stated share. Numbers are read
    exactly (no float rounding above 2**53); budgets of ``MAX_BYTES`` or more are refused.
    """
    match = _match(text)
    if match is None:
        raise BudgetError(f"cannot read budget {text!r}: expected bytes, a unit like '11.3GiB', '80%' or '0.8'")
    with _exact(text):
        return _resolve(Decimal(match["number"]), match, text, graph)


def _resolve(number: Decimal, match: re.Match[str], text: str | int | float, graph: Graph) -> int:
    unit = match["unit"].lower()
    if unit == "%":
        return _bytes(number / 100 * input_order_peak(graph), text)
    if unit and unit not in _UNITS:
        raise BudgetError(f"unknown unit {match['unit']!r} in budget {text!r}; use one of {sorted(_UNITS)}")
    if not unit and 0 < number <= 1:
        return _bytes(number * input_order_peak(graph), text)
    if not unit and number != number.to_integral_value():
        raise BudgetError(f"budget {text!r} is neither whole bytes nor a fraction in (0, 1]")
    return _bytes(number * _UNITS.get(unit, 1), text)


@contextmanager
def _exact(text: str | int | float) -> Iterator[None]:
    """Exact decimal arithmetic; a number beyond its exponent range becomes a BudgetError naming ``text``."""
    with localcontext(_EXACT):
        try:
            yield
        except DecimalException as exc:
            raise BudgetError(f"cannot read {text!r}: the number is out of range") from exc


def _match(text: str | int | float) -> re.Match[str] | None:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise InputTypeError(f"a budget or size is a string or a number, got {type(text).__name__} {text!r}")
    return _PATTERN.match(str(text))


def _bytes(value: Decimal, text: str | int | float, what: str = "budget") -> int:
    """Round ``value`` down to whole bytes, refusing ``MAX_BYTES`` and more (checked before any big int is made)."""
    if value.is_nan():
        raise BudgetError(f"cannot read {what} {text!r}: the number is out of range")
    if value > MAX_BYTES:
        raise BudgetError(f"{what} {text!r} is too large: the most this library takes is {MAX_BYTES:,} B (2**62 - 1)")
    return int(value.to_integral_value(rounding=ROUND_FLOOR))


def check_budget(graph: Graph, budget: int) -> None:
    """Raise BudgetInfeasibleError if no schedule can fit ``budget`` (below the graph's lower bound).

    Wrong types (``"80 %"`` for bytes; parse it with :func:`parse_budget`) raise InputTypeError, and
    budgets of ``MAX_BYTES`` or more BudgetError, naming the value.
    """
    if not isinstance(graph, Graph):
        raise InputTypeError(f"expected a Graph, got {type(graph).__name__} {_short(graph)}")
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
        hint = " (parse text such as '80%' with remat_models.budget.parse_budget)" if isinstance(budget, str) else ""
        raise InputTypeError(f"a budget is a whole number of bytes, got {type(budget).__name__} {budget!r}{hint}")
    if not 0 <= budget <= MAX_BYTES:
        raise BudgetError(f"budget {budget:,} B is out of range: it must lie in [0, {MAX_BYTES:,}] (2**62 - 1)")
    if budget < graph.lower_bound:
        raise BudgetInfeasibleError(
            f"budget {budget:,} B is below the lower bound {graph.lower_bound:,} B of graph {graph.name!r} "
            "(fixed memory + inputs + output + workspace of its largest step, or + every graph output "
            "resident at the end)",
            budget=budget,
            lower_bound=graph.lower_bound,
        )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
