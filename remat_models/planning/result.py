"""What planning returns: one ``PlanResult`` (the schedule, its simulation, the solver's typed outcome)."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

from remat_models.core.schedule import Schedule, SimulationResult
from remat_models.errors import BudgetExceededError
from remat_models.formulations.outcome import SolveOutcome, jsonable
from remat_models.model import PlanStatus, SolveStatus, Status
from remat_models.model.result import relative_gap
from remat_models.planning.bounds import Bound, PeakBound


@dataclass(frozen=True)
class PlanResult:
    """A method's schedule with its simulation, the inputs that produced it and, for a solver, its outcome.

    ``outcome`` is the formulation solve's typed record (status enum, objective, bound, phases) or None for
    heuristics and portfolios; ``details`` holds the JSON-ready numbers written beside a schedule.
    ``interrupted_by``: the signal (SIGINT, SIGTERM) that stopped the method early; its schedule is the best
    it had found by then.

    ``status`` (a ``Status``): ``within_budget`` / ``over_budget`` for a schedule; without one ``infeasible`` (a
    proof that no schedule of the graph fits), ``no_schedule_in_model`` (the method's model holds none: proves
    nothing about the budget) or ``no_schedule``; ``solver_error`` whenever the solver failed (a warm start may
    still stand as the schedule). The solver's own claim is ``solver_status``.
    """

    graph_name: str
    graph_hash: str
    method: str
    budget: int
    reference_peak: int
    status: Status
    schedule: Schedule | None
    simulation: SimulationResult | None
    wall_time: float
    details: dict[str, Any] = field(default_factory=dict)
    outcome: SolveOutcome | None = None
    interrupted_by: signal.Signals | None = None
    lower_bound: Bound | None = None  # on the total cost of every schedule within the budget (planning.bounds)
    peak_lower_bound: PeakBound | None = None  # on the peak of every schedule of the graph

    @property
    def lower_bound_gap(self) -> float | None:
        """(plan's cost - lower bound) / plan's cost for a schedule within the budget; None without either."""
        sim = self.simulation
        if self.lower_bound is None or sim is None or not sim.fits(self.budget):
            return None
        return relative_gap(sim.total_cost, self.lower_bound.value)

    @property
    def interrupted(self) -> bool:
        """Whether a signal stopped the method before it finished."""
        return self.interrupted_by is not None

    @property
    def solver_status(self) -> SolveStatus | None:
        """The solver's own status (None when no solver ran)."""
        return None if self.outcome is None else self.outcome.status

    @property
    def peak_fraction(self) -> float:
        """Simulated peak as a fraction of the input-order peak (0 without a schedule)."""
        if self.simulation is None or not self.reference_peak:
            return 0.0
        return self.simulation.peak / self.reference_peak

    def metadata(self) -> dict[str, object]:
        """JSON-ready summary stored beside a schedule on disk (infinities and NaN as None).

        The plan's own fields win over the method's details of the same name (``wall_time_s`` is the whole
        call's, not the solver's). The lower bounds (``lower_bound``: total cost, with its TDI, method, pivot
        and the plan's gap to it; ``peak_lower_bound`` with its method) are None where none was computed.
        """
        sim = self.simulation
        cost, peak = self.lower_bound, self.peak_lower_bound
        return jsonable(
            {
                **self.details,
                "lower_bound": None if cost is None else cost.value,
                "lower_bound_tdi": None if cost is None else cost.tdi,
                "lower_bound_method": None if cost is None else cost.method,
                "lower_bound_at": None if cost is None else cost.at,
                "lower_bound_gap": self.lower_bound_gap,
                "peak_lower_bound": None if peak is None else peak.value,
                "peak_lower_bound_method": None if peak is None else peak.proof,
                "graph_name": self.graph_name,
                "graph_hash": self.graph_hash,
                "method": self.method,
                "budget": self.budget,
                "status": self.status.value,
                "peak": None if sim is None else sim.peak,
                "total_cost": None if sim is None else sim.total_cost,
                "tdi": None if sim is None else sim.tdi,
                "recomputations": None if sim is None else sim.recomputations,
                "wall_time_s": self.wall_time,
                **({} if self.interrupted_by is None else {"interrupted_by": self.interrupted_by.name}),
            }
        )


__all__ = ["MethodRun", "PlanResult", "PlanStatus", "SolveStatus", "Status", "over_budget_error"]


def over_budget_error(result: PlanResult) -> BudgetExceededError:
    """The error for a schedule whose simulated peak exceeds its budget (the result rides along)."""
    assert result.simulation is not None
    peak = result.simulation.peak
    return BudgetExceededError(
        f"{result.method} on {result.graph_name!r}: peak {peak:,} B exceeds the budget {result.budget:,} B "
        f"by {peak - result.budget:,} B (pass allow_over_budget=True to get the schedule anyway)",
        peak=peak,
        budget=result.budget,
        result=result,
    )


@dataclass(frozen=True)
class MethodRun:
    """What running one method gives ``plan()``: its label, schedule (with its simulation when known) and outcome.

    ``infeasible``: the solver proved its model has no solution (and no warm start was returned instead); the
    outcome's status says whether that model holds every schedule (``infeasible``) or not (``no_schedule_in_model``);
    ``interrupted_by``: the signal that stopped the method early.
    """

    label: str
    schedule: Schedule | None
    details: dict[str, Any] = field(default_factory=dict)
    outcome: SolveOutcome | None = None
    simulation: SimulationResult | None = None
    infeasible: bool = False
    interrupted_by: signal.Signals | None = None

    def no_schedule_status(self) -> Status:
        """The plan's status when this run has no schedule: the outcome's proof of no schedule, or none."""
        if self.infeasible:
            proof = None if self.outcome is None else self.outcome.status
            return Status.INFEASIBLE if proof is Status.INFEASIBLE else Status.NO_SCHEDULE_IN_MODEL
        return Status.NO_SCHEDULE
