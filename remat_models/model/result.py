"""The result of a solve, common to all backends; JSON-serialisable summary."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np


class Status(StrEnum):
    """Every status of the package, one vocabulary (string values, so JSON and plan files keep them).

    The contract (docs/semantics.md, "Status"): ``OPTIMAL`` and ``INFEASIBLE`` are proofs about the problem the
    user asked (every schedule of the graph under the budget); a model that holds only some schedules (a fixed
    order, Moccasin's C intervals, MONeT's or H-ILP's option spaces) proves ``OPTIMAL_IN_MODEL`` and
    ``NO_SCHEDULE_IN_MODEL`` only. A backend's ``SolveResult`` speaks about the model it was given (for it the
    model is the problem); a formulation turns its solver's proofs into claims about the user's problem
    (``FormulationBase.claim``). ``SOLVER_ERROR``: the solver failed (``SolveResult.message`` says why).

    Plans (``PlanResult.status``) use ``WITHIN_BUDGET`` / ``OVER_BUDGET`` for a schedule, the proofs and
    ``NO_SCHEDULE`` / ``SOLVER_ERROR`` without one; bench records add the ends of a run's process (``ERROR``: the
    run raised, ``OOM``, ``TIMEOUT``, ``CRASHED``, ``INTERRUPTED``).
    """

    # proofs about the whole problem
    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    # proofs about a restricted model only
    OPTIMAL_IN_MODEL = "optimal_in_model"
    NO_SCHEDULE_IN_MODEL = "no_schedule_in_model"
    # no proof
    FEASIBLE = "feasible"
    NO_SOLUTION = "no_solution_within_limit"
    INTERRUPTED = "interrupted"  # stopped by a signal (SIGINT, SIGTERM); values hold the incumbent when there is one
    SOLVER_ERROR = "solver_error"
    # a plan's schedule against its budget, or why there is none
    WITHIN_BUDGET = "within_budget"
    OVER_BUDGET = "over_budget"
    NO_SCHEDULE = "no_schedule"  # no schedule within the limits, nothing proven
    # how a bench run's process ended without a plan
    ERROR = "error"  # the run raised (files before the solver_error status: a solver error too)
    OOM = "oom"
    TIMEOUT = "timeout"
    CRASHED = "crashed"

    @classmethod
    def _missing_(cls, value: object) -> Status | None:
        """Older spellings: max batch's ``no_solution``."""
        return _LEGACY.get(value) if isinstance(value, str) else None

    @classmethod
    def read(cls, value: object) -> Status:
        """A status from a file (older spellings included); ``ValueError`` naming the known ones otherwise."""
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown status {value!r}; known: {known}") from None

    @property
    def is_optimal(self) -> bool:
        """A proof of optimality, of the whole problem or of the solver's model (``OPTIMAL``, ``OPTIMAL_IN_MODEL``)."""
        return self in (Status.OPTIMAL, Status.OPTIMAL_IN_MODEL)

    @property
    def is_no_schedule_proof(self) -> bool:
        """A proof that nothing fits, in the whole problem or in the solver's model."""
        return self in (Status.INFEASIBLE, Status.NO_SCHEDULE_IN_MODEL)

    @property
    def is_proof(self) -> bool:
        """Either proof, of either reach."""
        return self.is_optimal or self.is_no_schedule_proof

    def in_model(self) -> Status:
        """The status as a restricted model's claim: its proofs speak about the model only."""
        return _IN_MODEL.get(self, self)


_LEGACY: dict[str, Status] = {"no_solution": Status.NO_SOLUTION}
_IN_MODEL = {Status.OPTIMAL: Status.OPTIMAL_IN_MODEL, Status.INFEASIBLE: Status.NO_SCHEDULE_IN_MODEL}

SolveStatus = Status  # the names of the two enums this one replaced (issue #30); the same class
PlanStatus = Status


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|objective - bound| / max(|objective|, 1e-9)`` (0 when they agree; None without both)."""
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    diff = abs(objective - bound)
    return 0.0 if diff <= 1e-9 else diff / max(abs(objective), 1e-9)


@dataclass
class SolveResult:
    """Status, objective, bound, timings, incumbent trajectory and values by block of one solve."""

    status: SolveStatus
    objective: float | None = None
    bound: float | None = None
    wall_time: float = 0.0
    time_to_first: float | None = None
    trajectory: list[tuple[float, float]] = field(default_factory=list)
    values: dict[str, np.ndarray] = field(default_factory=dict)
    backend: str = ""
    solver_version: str = ""
    log: str | None = None
    x: np.ndarray | None = field(default=None, repr=False)  # flat column values of the solved model
    interrupt_signal: int | None = None  # the signal (SIGINT, SIGTERM) that stopped an INTERRUPTED solve
    message: str | None = None  # why a SOLVER_ERROR solve failed, in the solver's words

    @property
    def has_solution(self) -> bool:
        """Whether values are available (optimal, feasible, or interrupted with an incumbent)."""
        if self.status is SolveStatus.INTERRUPTED:
            return self.x is not None
        return self.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)

    @property
    def gap(self) -> float | None:
        """Relative gap between objective and bound (see ``relative_gap``)."""
        return relative_gap(self.objective, self.bound)

    def summary(self, include_values: bool = False) -> dict[str, Any]:
        """A JSON-serialisable dict (values as nested lists only if asked)."""
        out: dict[str, Any] = {
            "status": self.status.value,
            "objective": _num(self.objective),
            "bound": _num(self.bound),
            "gap": _num(self.gap),
            "wall_time": self.wall_time,
            "time_to_first": self.time_to_first,
            "trajectory": [[t, _num(v)] for t, v in self.trajectory],
            "backend": self.backend,
            "solver_version": self.solver_version,
        }
        if self.message:
            out["message"] = self.message
        if include_values:
            out["values"] = {k: v.tolist() for k, v in self.values.items()}
        return out

    def to_json(self, include_values: bool = False) -> str:
        """``summary()`` as a JSON string."""
        return json.dumps(self.summary(include_values))


def _num(v: float | None) -> float | None:
    """JSON has no inf/nan: write them as null."""
    return v if v is None or math.isfinite(v) else None
