"""remat_models: tensor rematerialization planning (formulations, solvers, heuristics, simulator)."""

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
    "simulate",
]
