"""The ``hilp`` formulation: H-ILP's level model (:mod:`.level`) plus the hierarchical HiREmate solve (:mod:`.solver`).

With ``partition`` off (or "auto", the default, on a graph of at most ``flat_max_nodes`` nodes) it is the flat
model solved once; otherwise ``build`` defers and ``solve`` runs H-Partition, the cluster alternatives bottom-up,
H-ILP at the top and the refinement, from the warm start (``init``).
"""

from __future__ import annotations

import time

from remat_models.backends import SolveLimits
from remat_models.core.schedule import Schedule
from remat_models.formulations.base import BuiltModel
from remat_models.formulations.hilp.level import HilpDeferred, HilpLevel
from remat_models.formulations.hilp.solver import HierarchicalSolver
from remat_models.formulations.outcome import SolveOutcome


class Hilp(HilpLevel):
    """H-ILP: the flat model of a graph, or (``partition`` on, the default) the hierarchical HiREmate solve."""

    def solve(self, built: BuiltModel, backend: str, limits: SolveLimits, init: Schedule | None = None) -> SolveOutcome:
        """The flat model's one solve, or the hierarchical solve (its top level within ``limits``)."""
        if not isinstance(built, HilpDeferred):
            return super().solve(built, backend, limits, init)
        started = time.perf_counter()
        result = HierarchicalSolver(built.graph, built.budget, backend, built.options, limits).run(init)
        return SolveOutcome.of(
            graph=built.graph,
            schedule=result.schedule,
            formulation=self.name,
            backend=backend,
            status=result.status,
            objective=result.objective,
            bound=None,  # the top ILP's bound holds for its cached options only, not for every schedule
            model_peak=result.model_peak,
            solve_time=float(sum(t for _, t, _ in result.ilp_times)),
            wall_time=time.perf_counter() - started,
            details={**result.summary(), "top_bound": result.bound},
        )


HILP = Hilp()
