"""Memory budgets: parse bytes, units or fractions of the input-order peak; reject impossible ones."""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.limits import MAX_BYTES
from remat_models.core.schedule import input_order_peak
from remat_models.core.units import UNITS, exact, match_number, parse_size, to_bytes
from remat_models.errors import BudgetError, BudgetInfeasibleError, InputTypeError

__all__ = ["check_budget", "parse_budget", "parse_size"]


def parse_budget(text: str | int | float, graph: Graph) -> int:
    """Resolve a budget to bytes.

    Accepted: bytes ("13484795520", 1000), units ("11.3GiB", "500MB"), percent of the
    input-order peak ("80%"), or a fraction of it ("0.8": any plain number in (0, 1]).
    Fractions round down, so the resolved budget never exceeds the stated share. Numbers are read
    exactly (no float rounding above 2**53); budgets of ``MAX_BYTES`` or more are refused.
    """
    match = match_number(text)
    if match is None:
        raise BudgetError(f"cannot read budget {text!r}: expected bytes, a unit like '11.3GiB', '80%' or '0.8'")
    with exact(text):
        return _resolve(Decimal(match["number"]), match, text, graph)


def _resolve(number: Decimal, match: re.Match[str], text: str | int | float, graph: Graph) -> int:
    unit = match["unit"].lower()
    if unit == "%":
        return to_bytes(number / 100 * input_order_peak(graph), text)
    if unit and unit not in UNITS:
        raise BudgetError(f"unknown unit {match['unit']!r} in budget {text!r}; use one of {sorted(UNITS)}")
    if not unit and 0 < number <= 1:
        return to_bytes(number * input_order_peak(graph), text)
    if not unit and number != number.to_integral_value():
        raise BudgetError(f"budget {text!r} is neither whole bytes nor a fraction in (0, 1]")
    return to_bytes(number * UNITS.get(unit, 1), text)


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
