"""Constraint plug-ins (``Extension``s) for the formulations: ``paging`` (offload to the host and prefetch back)."""

from remat_models.extensions.paging import Paging

__all__ = ["Paging"]
