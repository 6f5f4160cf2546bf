"""The abstract optimization model: variable blocks, vectorized linear rows, globals and their lowerings."""

from remat_models.model.blocks import IntervalBlock, VarBlock
from remat_models.model.constructs import ALL_CONSTRUCTS
from remat_models.model.core import Model
from remat_models.model.expr import LinConstraint, LinExpr, NotVar, Var, quicksum
from remat_models.model.lowering import LoweredModel, estimate, lower
from remat_models.model.result import PlanStatus, SolveResult, SolveStatus, Status
from remat_models.model.size import SizeEstimate

__all__ = [
    "ALL_CONSTRUCTS",
    "IntervalBlock",
    "LinConstraint",
    "LinExpr",
    "LoweredModel",
    "Model",
    "NotVar",
    "PlanStatus",
    "SizeEstimate",
    "SolveResult",
    "SolveStatus",
    "Status",
    "Var",
    "VarBlock",
    "estimate",
    "lower",
    "quicksum",
]
