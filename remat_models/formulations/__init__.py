"""Rematerialization formulations written once against the abstract model (Checkmate, Moccasin, ...)."""

from remat_models.formulations.base import Formulation

__all__ = ["Formulation"]
