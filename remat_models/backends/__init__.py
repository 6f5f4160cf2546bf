"""Solver backends and their registry: ``get_backend("highs")``, ``get_backend("minizinc:gecode")``."""

from __future__ import annotations

import importlib

from remat_models.backends.base import Backend, LoweringBackend, SolveLimits, SolveResult, SolveStatus
from remat_models.errors import BackendUnavailableError, ConfigurationError

__all__ = [
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

# name -> "module:Class" (imported lazily, so that listing backends never imports a solver)
_REGISTRY: dict[str, str] = {
    "cpsat": "remat_models.backends.cpsat:CpSatBackend",
    "gurobi": "remat_models.backends.gurobi:GurobiBackend",
    "highs": "remat_models.backends.highs:HighsBackend",
    "minizinc": "remat_models.backends.minizinc:MiniZincBackend",
    "pyomo": "remat_models.backends.pyomo:PyomoBackend",
}


def register(name: str, target: str) -> None:
    """Register a backend class given as ``"module:Class"``."""
    _REGISTRY[name] = target


def names() -> list[str]:
    """All registered backend names (installed or not)."""
    return sorted(_REGISTRY)


def backend_class(name: str) -> type[Backend]:
    """The class registered under ``name`` (without importing its solver)."""
    try:
        module, cls = _REGISTRY[name].split(":")
    except KeyError:
        raise ConfigurationError(f"unknown backend {name!r}; known: {', '.join(names())}") from None
    return getattr(importlib.import_module(module), cls)


def get_backend(spec: str) -> Backend:
    """A backend instance from ``"name"`` or ``"name:option"``."""
    name, _, option = spec.partition(":")
    cls = backend_class(name)
    if option and option not in getattr(cls, "options", ()):
        raise ConfigurationError(
            f"backend {name!r} has no option {option!r}; options: {', '.join(cls.options) or 'none'}"
        )
    if not cls.available():
        raise BackendUnavailableError(f"backend {name!r} is not installed here: {cls.install_hint}")
    return cls(option or None)


def available() -> list[str]:
    """Names of the backends usable in this process."""
    return [n for n in names() if backend_class(n).available()]


def natively_taking(construct: str) -> list[str]:
    """Names of the registered backends that take ``construct`` natively."""
    return [n for n in names() if construct in backend_class(n).native_constructs]
