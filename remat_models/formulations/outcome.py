"""The one result shape of a formulation solve or approximation: solver numbers plus the simulated schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, SimulationResult, simulate
from remat_models.core.transfer import TransferModel
from remat_models.model import SolveResult, SolveStatus
from remat_models.model.result import relative_gap


@dataclass
class SolveOutcome:
    """Status, objective/bound in graph cost units, timings, trajectory, the schedule and its simulation.

    ``phases`` holds each backend solve by name (``solve``; Moccasin ``phase1``/``phase2``; LP rounding ``lp``);
    ``details`` holds method-specific numbers (LP rounding candidates, ...).
    """

    formulation: str
    backend: str
    status: SolveStatus  # a claim about the user's problem (``FormulationBase.claim``); phases keep the solver's
    schedule: Schedule | None = None
    simulation: SimulationResult | None = None
    objective: float | None = None
    bound: float | None = None
    model_peak: float | None = None
    build_time: float = 0.0
    solve_time: float = 0.0
    wall_time: float = 0.0
    time_to_first: float | None = None
    time_to_best: float | None = None
    trajectory: list[tuple[float, float]] = field(default_factory=list)
    solver_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    warm_start: bool = False
    phases: dict[str, SolveResult] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    message: str | None = None  # the solver's reason for a SOLVER_ERROR

    @classmethod
    def of(
        cls, *, graph: Graph, schedule: Schedule | None, transfer: TransferModel | None = None, **fields: Any
    ) -> SolveOutcome:
        """An outcome whose schedule (if any) is simulated on ``graph`` (transfer steps priced by ``transfer``)."""
        simulation = None if schedule is None else simulate(graph, schedule, transfer)
        return cls(schedule=schedule, simulation=simulation, **fields)

    @property
    def has_schedule(self) -> bool:
        """Whether a schedule was found."""
        return self.schedule is not None

    @property
    def gap(self) -> float | None:
        """Relative gap between the objective and the bound (None without both)."""
        return relative_gap(self.objective, self.bound)

    @property
    def total_cost(self) -> float | None:
        """Simulated total cost (graph cost units)."""
        return None if self.simulation is None else self.simulation.total_cost

    @property
    def tdi(self) -> float | None:
        """Simulated total duration increase in %."""
        return None if self.simulation is None else self.simulation.tdi

    @property
    def peak(self) -> int | None:
        """Simulated peak memory in bytes."""
        return None if self.simulation is None else self.simulation.peak

    @property
    def interrupt_signal(self) -> int | None:
        """The signal that interrupted the solve (its first phase that recorded one), None if not interrupted."""
        if self.status is not SolveStatus.INTERRUPTED:
            return None
        return next((p.interrupt_signal for p in self.phases.values() if p.interrupt_signal is not None), None)

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers (no schedule)."""
        return {
            "formulation": self.formulation,
            "backend": self.backend,
            "solver_status": self.status.value,
            "objective": finite(self.objective),
            "bound": finite(self.bound),
            "gap": finite(self.gap),
            "model_peak": finite(self.model_peak),
            "build_time_s": self.build_time,
            "solve_time_s": self.solve_time,
            "wall_time_s": self.wall_time,
            "time_to_first_s": self.time_to_first,
            "time_to_best_s": self.time_to_best,
            "trajectory": [[finite(t), finite(v)] for t, v in self.trajectory],
            "solver_version": self.solver_version,
            "options": self.options,
            "warm_start": self.warm_start,
            "phases": {name: phase.summary() for name, phase in self.phases.items()},
            **({"solver_message": self.message} if self.message else {}),
            **self.details,
        }


def finite(value: float | None) -> float | None:
    """``value``, or None for infinity and NaN (JSON has neither: a solver without a bound reports -inf)."""
    return None if value is None or not math.isfinite(value) else value


def jsonable(value: Any) -> Any:
    """A JSON-ready copy of a value (arrays and tuples as lists, inf and NaN as None, other objects as strings)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, float):
        return finite(value)
    return value if isinstance(value, (str, int, bool, type(None))) else str(value)
