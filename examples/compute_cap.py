"""A user-defined extension: each node may be computed at most ``cap`` times (Checkmate and Moccasin).

Use it from Python (``plan(graph, budget, formulation="checkmate", extensions=[ComputeCap(2)])``) or from the
command line (``remat solve GRAPH -b 80% -f moccasin --with examples/compute_cap.py:ComputeCap:cap=2``).
"""

from dataclasses import dataclass

import numpy as np

from remat_models.formulations import BuiltModel

# the block holding "node v is computed (at stage t / in copy k)" and its node axis, per formulation
COMPUTE_BLOCKS = {"checkmate": "R", "moccasin": "retain.presence"}


@dataclass(frozen=True)
class ComputeCap:
    """At most ``cap`` computations of every node (of ``nodes`` by name, if given)."""

    cap: int = 1
    nodes: tuple[str, ...] | None = None
    name: str = "compute-cap"
    supports: frozenset[str] = frozenset(COMPUTE_BLOCKS)

    def apply(self, built: BuiltModel) -> None:
        """One row per capped node: the sum of its compute cells <= cap."""
        index = built.index(COMPUTE_BLOCKS[built.formulation])
        node = index.coords[index.axis("node")]  # graph node id of each cell
        capped = np.ones(built.graph.n, dtype=bool) if self.nodes is None else np.isin(built.graph.names, self.nodes)
        keep = capped[node]
        rows = np.unique(node[keep], return_inverse=True)[1]  # one row per capped node
        built.model.add_rows(rows, index.cols[keep], 1.0, ub=float(self.cap), name="compute_cap")

