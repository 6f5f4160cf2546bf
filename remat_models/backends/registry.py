"""The backend registry by name, imported lazily so that listing backends never imports a solver."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from remat_models.errors import BackendUnavailableError, ConfigurationError

if TYPE_CHECKING:
    from remat_models.backends.base import Backend

# name -> "module:Class" (imported lazily, so that listing backends never imports a solver)
_REGISTRY: dict[str, str] = {
    "cpsat": "remat_models.backends.cpsat:CpSatBackend",
    "cvxpy": "remat_models.backends.cvxpy:CvxpyBackend",
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


class Availability(list[str]):
    """The names of the usable backends (a list), and ``missing``: each unusable one with how to install it."""

    def __init__(self, usable: list[str], missing: dict[str, str]) -> None:
        super().__init__(usable)
        self.missing = missing

    def __str__(self) -> str:
        lines = [f"usable: {', '.join(self) or 'none'}"]
        lines += [f"missing {name}: {hint}" for name, hint in self.missing.items()]
        return "\n".join(lines)


def available() -> Availability:
    """Names of the backends usable in this process; ``.missing`` says which are not, and how to install them."""
    usable, missing = [], {}
    for name in names():
        cls = backend_class(name)
        if cls.available():
            usable.append(name)
        else:
            missing[name] = cls.install_hint
    return Availability(usable, missing)


def natively_taking(construct: str) -> list[str]:
    """Names of the registered backends that take ``construct`` natively."""
    return [n for n in names() if construct in backend_class(n).native_constructs]
