"""The public planning entry point (stable path): ``from remat_models.planner import plan``.

Re-exports :mod:`remat_models.planning.plan` (``plan``, ``PlanResult``, ``PlanStatus``, the method names and
parser); docs/architecture.md shows where planning lives.
"""

from remat_models.planning import plan as _plan
from remat_models.planning.plan import *  # noqa: F403

__all__ = _plan.__all__
