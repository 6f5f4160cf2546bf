"""The interface every solver backend implements (the backends themselves come with the model layer)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Protocol


class SolveStatus(str, Enum):
    """Outcome of a solve, shared by all backends."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no_solution_within_limit"
    ERROR = "error"


@dataclass(frozen=True)
class SolveLimits:
    """Limits and knobs common to all backends."""

    time_limit: float | None = None
    workers: int = 1
    seed: int = 0
    mip_gap: float | None = None


class Backend(Protocol):
    """A solver plug-in: takes the abstract model, returns a solution (values per variable block)."""

    name: ClassVar[str]
    native_constructs: ClassVar[frozenset[str]]

    def available(self) -> bool:
        """Whether the solver is installed and usable in this process."""
        ...

    def solve(self, model: Any, limits: SolveLimits, hints: dict[str, Any] | None = None) -> Any:
        """Solve ``model`` within ``limits``, starting from ``hints`` where the solver takes them."""
        ...
