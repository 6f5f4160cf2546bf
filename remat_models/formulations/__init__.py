"""Rematerialization formulations written once against the abstract model (Checkmate, Moccasin, ...)."""

from __future__ import annotations

import importlib

from remat_models.errors import ConfigurationError
from remat_models.formulations.base import BuiltModel, Formulation

__all__ = ["BuiltModel", "Formulation", "formulation_names", "get_formulation", "register_formulation"]

# name -> "module:attribute" of a Formulation instance (imported lazily)
_REGISTRY: dict[str, str] = {
    "checkmate": "remat_models.formulations.checkmate:CHECKMATE",
    "moccasin": "remat_models.formulations.moccasin:MOCCASIN",
}


def register_formulation(name: str, target: str) -> None:
    """Register a formulation instance given as ``"module:attribute"``."""
    _REGISTRY[name] = target


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
