"""Solver backends: each compiles the abstract model for one solver (CP-SAT, HiGHS, Gurobi, ...)."""

from remat_models.backends.base import Backend, SolveLimits, SolveStatus

__all__ = ["Backend", "SolveLimits", "SolveStatus"]
