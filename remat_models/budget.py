"""Budgets and sizes (stable path): ``from remat_models.budget import parse_budget``.

Re-exports :mod:`remat_models.core.budget`; see docs/architecture.md for the core layer.
"""

from remat_models.core.budget import check_budget, parse_budget, parse_size

__all__ = ["check_budget", "parse_budget", "parse_size"]
