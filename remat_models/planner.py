"""The public planning entry point (stable path): ``from remat_models.planner import plan``.

Re-exports :mod:`remat_models.planning.plan`; see docs/architecture.md for where planning lives.
"""

from remat_models.planning.plan import (
    DEFAULT_METHOD,
    MethodRef,
    PlanResult,
    PlanStatus,
    method_names,
    methods,
    over_budget_error,
    parse_method_name,
    plan,
)

__all__ = [
    "DEFAULT_METHOD",
    "MethodRef",
    "PlanResult",
    "PlanStatus",
    "method_names",
    "methods",
    "over_budget_error",
    "parse_method_name",
    "plan",
]
