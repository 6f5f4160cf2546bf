"""Solver backends and their registry: ``get_backend("highs")``, ``get_backend("minizinc:gecode")``."""

from __future__ import annotations

from remat_models.backends.base import Backend, LoweringBackend, SolveLimits, SolveResult, SolveStatus
from remat_models.backends.registry import (
    Availability,
    available,
    backend_class,
    get_backend,
    names,
    natively_taking,
    register,
)

__all__ = [
    "Availability",
    "Backend",
    "LoweringBackend",
    "SolveLimits",
    "SolveResult",
    "SolveStatus",
    "available",
    "backend_class",
    "get_backend",
    "names",
    "natively_taking",
    "register",
]
