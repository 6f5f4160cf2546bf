"""Integer scaling for CP backends: divide costs and sizes by their gcd, round fractional costs to a precision."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from math import gcd

import numpy as np

from remat_models.core.graph import Graph

MAX_EXACT = 2**40  # beyond this many units per value, exact integers are rounded like fractional ones
DEFAULT_PRECISION = 1e-6


@dataclass(frozen=True)
class Units:
    """What one model unit is in the graph's units: ``cost_unit`` (duration), ``mem_unit`` (bytes)."""

    cost_unit: float = 1.0
    mem_unit: int = 1
    cost_exact: bool = True  # False: costs were rounded to ``precision * max(cost)``


@dataclass(frozen=True)
class ScaledGraph:
    """A graph's costs, output sizes and workspaces as integers in ``units``."""

    cost: np.ndarray
    mem: np.ndarray
    workspace: np.ndarray
    units: Units

    def capacity(self, budget: int, fixed_mem: int) -> int:
        """The budget left after fixed memory, in memory units (rounded down: exact for integer demands)."""
        return (int(budget) - int(fixed_mem)) // self.units.mem_unit


def gcd_of(values: np.ndarray) -> int:
    """Greatest common divisor of the positive entries of an integer array (1 if there are none)."""
    ints = [int(v) for v in np.unique(np.asarray(values, dtype=np.int64)) if v > 0]
    return reduce(gcd, ints, 0) or 1


def scale_costs(costs: np.ndarray, precision: float = DEFAULT_PRECISION) -> tuple[np.ndarray, float, bool]:
    """Integer costs, the unit and whether exact: gcd division for whole numbers, else rounding.

    Rounding uses the unit ``precision * max(costs)`` (each cost is then off by at most half of it)
    and divides by the gcd of the rounded values. Zero costs stay zero.
    """
    c = np.asarray(costs, dtype=np.float64)
    top = float(c.max()) if c.size else 0.0
    if top == 0.0:
        return np.zeros(c.shape, dtype=np.int64), 1.0, True
    if top < 2**63 and np.all(c == np.round(c)):  # whole numbers past int64 are rounded (no overflowing cast)
        g = gcd_of(c.astype(np.int64))
        if top / g <= MAX_EXACT:
            return (c // g).astype(np.int64), float(g), True
    if not 0 < precision < 1:
        raise ValueError(f"cost precision must lie in (0, 1), got {precision!r}")
    unit = precision * top
    ints = np.rint(c / unit).astype(np.int64)
    g = gcd_of(ints)
    return ints // g, unit * g, False


def scale_graph(graph: Graph, precision: float = DEFAULT_PRECISION) -> ScaledGraph:
    """Costs and sizes of ``graph`` divided by their gcds (sizes share one unit: they add up in one budget)."""
    cost, cost_unit, exact = scale_costs(graph.cost, precision)
    mem_unit = gcd_of(np.concatenate([graph.mem, graph.workspace]))
    return ScaledGraph(
        cost=cost,
        mem=graph.mem // mem_unit,
        workspace=graph.workspace // mem_unit,
        units=Units(cost_unit=cost_unit, mem_unit=mem_unit, cost_exact=exact),
    )
