"""The ``hilp`` formulation: H-ILP's level model (:mod:`.level`) plus the hierarchical HiREmate solve (:mod:`.solver`).

With ``partition`` off (or "auto", the default, on a graph of at most ``flat_max_nodes`` nodes) it is the flat
model solved once; otherwise ``build`` defers and ``solve`` runs H-Partition, the cluster alternatives bottom-up,
H-ILP at the top and the refinement, from the warm start (``init``). It chooses operator implementations itself
(``chooses_impls``) only hierarchically with ``leaf=monet`` on a graph without aux values: MONeT's leaf solves pick
each cluster's implementations; elsewhere ``plan`` gives it the default view.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.formulations import get_formulation
from remat_models.formulations.base import BuiltModel, SolveChain
from remat_models.formulations.hilp.level import HilpDeferred, HilpLevel
from remat_models.formulations.hilp.options import HilpOptions, leaf_spec
from remat_models.formulations.hilp.solver import HierarchicalSolver
from remat_models.formulations.outcome import SolveOutcome

HIERARCHY_SECONDS_PER_NODE = 5e-4  # H-Partition, W sets, local graphs and induced options before any ILP
TOP_MIN_SECONDS = 1.0  # the least time the top ILP gets
ESTIMATED_FROM_NODES = 1000  # graphs from this size on are not solved under a limit below ``least_seconds``


class Hilp(HilpLevel):
    """H-ILP: the flat model of a graph, or (``partition`` on, the default) the hierarchical HiREmate solve."""

    def least_seconds(self, graph: Graph) -> float | None:
        """The least time limit worth starting the hierarchical solve for, on graphs of 1,000 nodes or more.

        Before its first ILP the solve partitions the graph, sets every cluster's W, builds the clusters' local
        graphs and the options the warm starts induce: 4.8 s on the 9,607-node transformer (a shared 2-core
        machine at load 4), so under a 5 s limit it could only return the warm start after the limit (issue #31,
        6.2 s for a 4.8 s limit). Below this the solve is not started and ``plan`` returns the warm start at once.
        """
        if graph.n < ESTIMATED_FROM_NODES:
            return None
        return HIERARCHY_SECONDS_PER_NODE * graph.n + TOP_MIN_SECONDS

    def chooses_impls(self, graph: Graph, options: HilpOptions | Mapping[str, Any] | None = None) -> bool:
        """Whether the solve of ``graph`` with ``options`` chooses its implementations (hierarchical, leaf=monet)."""
        opts = self.options(options).validated()
        table = graph.impl_table
        no_aux = table is None or table.n_aux == 0
        chooser = get_formulation(leaf_spec(opts.leaf)[0]).supports_impls  # a leaf formulation that chooses them
        return chooser and opts.hierarchical(graph.n) and no_aux

    def solve(
        self, built: BuiltModel, backend: str | SolveChain, limits: SolveLimits, init: Schedule | None = None
    ) -> SolveOutcome:
        """The flat model's one solve, or the hierarchical solve (its top level within ``limits``) on the same chain.

        The hierarchical schedule comes simulated (the solver's own simulation travels with it).
        """
        chain = SolveChain.of(self, backend)
        if not isinstance(built, HilpDeferred):
            return super().solve(built, chain, limits, init)
        started = time.perf_counter()
        result = HierarchicalSolver(built.graph, built.budget, chain, built.options, limits).run(init)
        return SolveOutcome(
            schedule=result.schedule,
            simulation=result.simulation,
            formulation=self.name,
            backend=chain.spec,
            status=result.status,
            objective=result.objective,
            bound=None,  # the top ILP's bound holds for its cached options only, not for every schedule
            model_peak=result.model_peak,
            solve_time=float(sum(t for _, t, _ in result.ilp_times)),
            wall_time=time.perf_counter() - started,
            details={**result.summary(), "top_bound": result.bound},
        )


HILP = Hilp()
