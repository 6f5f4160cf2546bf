"""remat_models: tensor rematerialization planning (formulations, solvers, heuristics, simulator)."""

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
from remat_models.graph import Graph, Node, NodeKind
from remat_models.schedule import Compute, Free, Schedule, SimulationResult, eager_frees, simulate

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailableError",
    "BudgetError",
    "BudgetInfeasibleError",
    "Compute",
    "ConfigurationError",
    "Free",
    "Graph",
    "GraphError",
    "InvalidScheduleError",
    "ModelTooLargeError",
    "Node",
    "NodeKind",
    "RematError",
    "Schedule",
    "SimulationResult",
    "SolverError",
    "UnsupportedConstructError",
    "eager_frees",
    "simulate",
]
