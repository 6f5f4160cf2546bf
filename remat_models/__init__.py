"""remat_models: tensor rematerialization planning (formulations, solvers, heuristics, simulator).

``remat_models.plan(graph, "80%")`` plans a graph under a budget (method ``auto`` unless given).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph, Node, NodeKind
from remat_models.core.schedule import (
    Compute,
    Free,
    FreeHost,
    Offload,
    Prefetch,
    Schedule,
    SimulationResult,
    eager_frees,
    simulate,
)
from remat_models.core.transfer import TransferModel
from remat_models.errors import (
    BackendUnavailableError,
    BudgetError,
    BudgetInfeasibleError,
    ConfigurationError,
    GraphError,
    InvalidScheduleError,
    ModelTooLargeError,
    RematError,
    SolverError,
    UnsupportedConstructError,
)

if TYPE_CHECKING:
    from remat_models.planning.plan import MethodRef, PlanResult

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailableError",
    "BudgetError",
    "BudgetInfeasibleError",
    "Compute",
    "ConfigurationError",
    "Free",
    "FreeHost",
    "Graph",
    "GraphError",
    "InvalidScheduleError",
    "ModelTooLargeError",
    "Node",
    "NodeKind",
    "Offload",
    "Prefetch",
    "RematError",
    "Schedule",
    "SimulationResult",
    "SolverError",
    "TransferModel",
    "UnsupportedConstructError",
    "eager_frees",
    "parse_budget",
    "plan",
    "simulate",
]


def plan(graph: Graph, budget: str | int | float, method: str | MethodRef | None = None, **keywords: Any) -> PlanResult:
    """Plan ``graph`` under ``budget`` with ``method`` (default ``auto``): :func:`remat_models.planner.plan`.

    ``budget`` is bytes (an int) or text :func:`parse_budget` reads: ``"80%"`` or ``"0.8"`` (of the input-order
    peak), ``"11.3GiB"``, ``"13484795520"``; a float is a fraction. Text it cannot read raises BudgetError naming
    it. ``keywords`` are those of :func:`remat_models.planner.plan` (``formulation=``, ``time_limit=``, ...).
    Importing planning is deferred to the first call, so ``import remat_models`` stays light.
    """
    from remat_models.planning.plan import plan as plan_bytes

    if isinstance(graph, Graph) and isinstance(budget, (str, float)):
        budget = parse_budget(budget, graph)
    return plan_bytes(graph, budget, method, **keywords)  # type: ignore[arg-type]  # it checks the type
