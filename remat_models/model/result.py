"""The result of a solve, common to all backends; JSON-serialisable summary."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np


class SolveStatus(StrEnum):
    """Outcome of a solve, shared by all backends."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no_solution_within_limit"
    INTERRUPTED = "interrupted"  # stopped by Ctrl-C (SIGINT); values hold the incumbent when there is one
    ERROR = "error"


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
        if include_values:
            out["values"] = {k: v.tolist() for k, v in self.values.items()}
        return out

    def to_json(self, include_values: bool = False) -> str:
        """``summary()`` as a JSON string."""
        return json.dumps(self.summary(include_values))


def _num(v: float | None) -> float | None:
    """JSON has no inf/nan: write them as null."""
    return v if v is None or math.isfinite(v) else None
