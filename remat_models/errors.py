"""The one error hierarchy of remat_models (see DESIGN.md, "Errors")."""

from __future__ import annotations


class RematError(Exception):
    """Base class of every error the library raises on purpose."""


class ConfigurationError(RematError):
    """An unknown method, backend, format or option name, or an option value out of range."""


class InputTypeError(RematError, TypeError):
    """An argument of the wrong type (a string where a Graph or a byte count is expected); names the value."""


class GraphError(RematError):
    """A graph (or a file describing one) is malformed."""


class OutputError(RematError):
    """An output file cannot be written completely: missing folder, no permission, not a regular file, disk full."""


class BudgetError(RematError):
    """A budget is unreadable (bad number or unit)."""


class BudgetInfeasibleError(BudgetError):
    """No schedule can fit the budget; ``lower_bound`` is a proven minimum feasible budget."""

    def __init__(self, message: str, *, budget: int, lower_bound: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.lower_bound = lower_bound


class BudgetExceededError(BudgetError):
    """A schedule's simulated peak exceeds its budget (``plan(..., allow_over_budget=False)``, the default).

    ``result`` is the PlanResult (schedule and simulation included) for callers that still want it.
    """

    def __init__(self, message: str, *, peak: int, budget: int, result: object = None) -> None:
        super().__init__(message)
        self.peak = peak
        self.budget = budget
        self.result = result


class ModelTooLargeError(RematError):
    """An optimization model would exceed a configured (or licensed) size."""

    def __init__(self, message: str, *, estimate: dict[str, int] | None = None) -> None:
        super().__init__(message)
        self.estimate = estimate or {}


class BackendUnavailableError(RematError):
    """A solver backend is not installed or not usable here; the message says how to install it."""


class UnsupportedConstructError(RematError):
    """A model construct has no native support nor lowering for the chosen backend."""


class InvalidScheduleError(RematError):
    """A schedule breaks the execution semantics; ``step`` is the offending step index."""

    def __init__(self, message: str, *, step: int | None = None) -> None:
        super().__init__(message if step is None else f"step {step}: {message}")
        self.step = step


class SolverError(RematError):
    """A solver failed in a way that is not a plain infeasibility or time-out."""
