"""Memory budgets: parse bytes, units or fractions of the input-order peak; reject impossible ones."""

from __future__ import annotations

import re

from remat_models.errors import BudgetError, BudgetInfeasibleError
from remat_models.graph import Graph
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
_PATTERN = re.compile(r"^\s*(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>%|[a-zA-Z]*)\s*$")


def parse_size(text: str | int | float) -> int:
    """Resolve an absolute size to bytes: whole bytes ("8589934592") or units ("8GiB", "500MB")."""
    match = _PATTERN.match(str(text))
    unit = "" if match is None else match["unit"].lower()
    if match is None or unit == "%" or (unit and unit not in _UNITS):
        raise BudgetError(f"cannot read size {text!r}: expected bytes or a unit like '8GiB' ({', '.join(_UNITS)})")
    return int(float(match["number"]) * _UNITS.get(unit, 1))


def parse_budget(text: str | int | float, graph: Graph) -> int:
    """Resolve a budget to bytes.

    Accepted: bytes ("13484795520", 1000), units ("11.3GiB", "500MB"), percent of the
    input-order peak ("80%"), or a fraction of it ("0.8": any plain number in (0, 1]).
    Fractions round down, so the resolved budget never exceeds the stated share.
    """
    match = _PATTERN.match(str(text))
    if match is None:
        raise BudgetError(f"cannot read budget {text!r}: expected bytes, a unit like '11.3GiB', '80%' or '0.8'")
    number, unit = float(match["number"]), match["unit"].lower()
    if unit == "%":
        return int(number / 100 * input_order_peak(graph))
    if unit and unit not in _UNITS:
        raise BudgetError(f"unknown unit {match['unit']!r} in budget {text!r}; use one of {sorted(_UNITS)}")
    if not unit and 0 < number <= 1:
        return int(number * input_order_peak(graph))
    if not unit and number != int(number):
        raise BudgetError(f"budget {text!r} is neither whole bytes nor a fraction in (0, 1]")
    return int(number * _UNITS.get(unit, 1))


def check_budget(graph: Graph, budget: int) -> None:
    """Raise BudgetInfeasibleError if no schedule can fit ``budget`` (below the graph's lower bound)."""
    if budget < graph.lower_bound:
        raise BudgetInfeasibleError(
            f"budget {budget:,} B is below the lower bound {graph.lower_bound:,} B of graph {graph.name!r} "
            "(fixed memory + inputs + output + workspace of its largest step)",
            budget=budget,
            lower_bound=graph.lower_bound,
        )
