"""One entry point for every planning method: resolve the budget, run the method, simulate."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from remat_models.budget import check_budget
from remat_models.errors import ConfigurationError
from remat_models.graph import Graph
from remat_models.heuristics.baselines import BASELINES
from remat_models.schedule import Schedule, SimulationResult, input_order_peak, simulate

log = logging.getLogger(__name__)

Method = Callable[[Graph, int], Schedule]


class PlanStatus(StrEnum):
    """Whether the schedule a method returned fits the budget (as simulated)."""

    WITHIN_BUDGET = "within_budget"
    OVER_BUDGET = "over_budget"


@dataclass(frozen=True)
class PlanResult:
    """A method's schedule with its simulation and the inputs that produced it."""

    graph_name: str
    graph_hash: str
    method: str
    budget: int
    reference_peak: int
    status: PlanStatus
    schedule: Schedule
    simulation: SimulationResult
    wall_time: float

    @property
    def peak_fraction(self) -> float:
        """Simulated peak as a fraction of the input-order peak."""
        return self.simulation.peak / self.reference_peak if self.reference_peak else 0.0

    def metadata(self) -> dict[str, object]:
        """JSON-ready summary stored beside a schedule on disk."""
        return {
            "graph_name": self.graph_name,
            "graph_hash": self.graph_hash,
            "method": self.method,
            "budget": self.budget,
            "status": self.status.value,
            "peak": self.simulation.peak,
            "total_cost": self.simulation.total_cost,
            "tdi": self.simulation.tdi,
            "recomputations": self.simulation.recomputations,
            "wall_time_s": self.wall_time,
        }


def methods() -> dict[str, Method]:
    """Every planning method by name."""
    return dict(BASELINES)


def plan(graph: Graph, budget: int, method: str) -> PlanResult:
    """Plan ``graph`` under ``budget`` bytes with ``method``; the result is always re-simulated."""
    available = methods()
    if method not in available:
        raise ConfigurationError(f"unknown method {method!r}; choose one of {', '.join(available)}")
    check_budget(graph, budget)
    started = time.perf_counter()
    schedule = available[method](graph, budget)
    wall_time = time.perf_counter() - started
    simulation = simulate(graph, schedule)
    status = PlanStatus.WITHIN_BUDGET if simulation.fits(budget) else PlanStatus.OVER_BUDGET
    log.info("%s on %s: peak %d (budget %d), TDI %.2f%%", method, graph.name, simulation.peak, budget, simulation.tdi)
    return PlanResult(
        graph_name=graph.name,
        graph_hash=graph.content_hash,
        method=method,
        budget=budget,
        reference_peak=input_order_peak(graph),
        status=status,
        schedule=schedule,
        simulation=simulation,
        wall_time=wall_time,
    )
