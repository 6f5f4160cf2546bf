"""Rematerialization formulations written once against the abstract model (Checkmate, Moccasin, ...).

Two registries, both by ``"module:attribute"`` and imported lazily: formulations (Formulation
instances) and approximations (functions ``fn(graph, budget, *, backend, limits, seed, extensions,
**options) -> SolveOutcome`` tied to one formulation, e.g. Checkmate's LP rounding).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Literal

from remat_models.errors import ConfigurationError
from remat_models.formulations.base import (
    BuiltModel,
    Extension,
    Formulation,
    FormulationBase,
    apply_extensions,
    options_of,
)
from remat_models.formulations.outcome import SolveOutcome

__all__ = [
    "DEFAULT_FORMULATION",
    "BuiltModel",
    "Extension",
    "Formulation",
    "FormulationBase",
    "SolveOutcome",
    "apply_extensions",
    "approximation_names",
    "approximation_options",
    "auto_formulation",
    "formulation_names",
    "get_approximation",
    "get_formulation",
    "leaf_formulations",
    "options_of",
    "paper_family",
    "register_approximation",
    "register_formulation",
]

DEFAULT_FORMULATION = "checkmate"  # what `remat export` builds and max batch solves when no formulation is named

# name -> "module:attribute" of a Formulation instance (imported lazily)
_REGISTRY: dict[str, str] = {
    "checkmate": "remat_models.formulations.checkmate.formulation:CHECKMATE",
    "moccasin": "remat_models.formulations.moccasin.formulation:MOCCASIN",
    "hilp": "remat_models.formulations.hilp.formulation:HILP",
    "monet": "remat_models.formulations.monet.formulation:MONET",
    "checkmate-impls": "remat_models.formulations.checkmate.impls:CHECKMATE_IMPLS",
    "saveset-exact": "remat_models.formulations.saveset.formulation:SAVESET",
    "saveset-intervals": "remat_models.formulations.saveset.intervals:SAVESET_INTERVALS",
}

# What other layers ask of a formulation by role rather than by name (code outside a formulation's package never
# names one): auto's exact worker (planning/portfolio.py) runs the "large" formulation first above its option
# hilp_nodes, else the "small" one up to checkmate_nodes, then the "every" one on every graph.
AutoRole = Literal["small", "large", "every"]
_AUTO_ROLES: dict[str, str] = {"small": "checkmate", "large": "hilp", "every": "moccasin"}
# The formulations that may solve a leaf cluster's option grid in H-ILP (its ``leaf`` option).
_LEAF_SOLVERS: list[str] = ["hilp", "checkmate", "moccasin", "monet"]
# formulation -> the method family of the papers' result tables (/work/shared/reference) its runs compare with.
_PAPER_FAMILIES: dict[str, str] = {"checkmate": "checkmate_milp", "moccasin": "moccasin"}

# name -> (formulation it approximates, "module:function")
_APPROXIMATIONS: dict[str, tuple[str, str]] = {
    "lp-rounding": ("checkmate", "remat_models.formulations.checkmate.rounding:lp_rounding"),
}


def register_formulation(
    name: str,
    target: str,
    *,
    auto_role: AutoRole | None = None,
    leaf_solver: bool = False,
    paper_family: str | None = None,
) -> None:
    """Register a formulation instance given as ``"module:attribute"``, with the roles it takes (see above)."""
    if auto_role is not None and auto_role not in _AUTO_ROLES:
        raise ConfigurationError(f"auto_role must be one of {', '.join(_AUTO_ROLES)}, got {auto_role!r}")
    _REGISTRY[name] = target
    if auto_role is not None:
        _AUTO_ROLES[auto_role] = name
    if leaf_solver and name not in _LEAF_SOLVERS:
        _LEAF_SOLVERS.append(name)
    if paper_family is not None:
        _PAPER_FAMILIES[name] = paper_family


def auto_formulation(role: AutoRole) -> str:
    """The formulation ``auto``'s exact worker runs in ``role`` ("small", "large" or "every" graph)."""
    return _AUTO_ROLES[role]


def leaf_formulations() -> tuple[str, ...]:
    """The formulations that may solve a leaf cluster's option grid in H-ILP."""
    return tuple(_LEAF_SOLVERS)


def paper_family(formulation: str | None) -> str | None:
    """The papers' result family ``formulation``'s runs compare with, if any."""
    return None if formulation is None else _PAPER_FAMILIES.get(formulation)


def formulation_names() -> list[str]:
    """All registered formulation names."""
    return sorted(_REGISTRY)


def get_formulation(name: str) -> Formulation:
    """The formulation registered under ``name``."""
    try:
        module, attribute = _REGISTRY[name].split(":")
    except KeyError:
        raise ConfigurationError(f"unknown formulation {name!r}; known: {', '.join(formulation_names())}") from None
    return getattr(importlib.import_module(module), attribute)


def register_approximation(name: str, formulation: str, target: str) -> None:
    """Register an approximation of ``formulation`` given as ``"module:function"``."""
    _APPROXIMATIONS[name] = (formulation, target)


def approximation_names(formulation: str | None = None) -> list[str]:
    """Registered approximations (of ``formulation`` if given)."""
    return sorted(name for name, (form, _) in _APPROXIMATIONS.items() if formulation in (None, form))


def approximation_options(name: str, formulation: str) -> list[str]:
    """The option names the approximation ``name`` of ``formulation`` takes (its keyword parameters)."""
    parameters = list(inspect.signature(get_approximation(name, formulation)).parameters)[2:]  # after graph, budget
    return [p for p in parameters if p not in _APPROXIMATION_ARGUMENTS]


_APPROXIMATION_ARGUMENTS = frozenset({"backend", "limits", "seed", "extensions"})  # passed by the caller


def get_approximation(name: str, formulation: str) -> Callable[..., SolveOutcome]:
    """The approximation ``name`` of ``formulation``."""
    entry = _APPROXIMATIONS.get(name)
    if entry is None or entry[0] != formulation:
        known = ", ".join(approximation_names(formulation)) or "none"
        raise ConfigurationError(f"unknown approximation {name!r} for {formulation!r}; it has: {known}")
    module, function = entry[1].split(":")
    return getattr(importlib.import_module(module), function)
