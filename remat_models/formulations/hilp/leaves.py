"""Leaf clusters' option grids solved by another registered formulation (``leaf`` option; docs/hilp.md).

A leaf cluster (no child clusters) has no layers, so its local level is a flat schedule of its local
training graph: any formulation of a whole graph can solve it. The grid point (peak, save) becomes one
:func:`~remat_models.formulations.solving.solve_model` call of the named formulation's own code on the
local graph under the budget ``peak``. The save cap (memory held across the virtual loss ``l_C``) is
expressed in the graph, so every formulation that counts workspace takes it unchanged: ``l_C`` gets the
workspace ``peak - save``, and ``resident + workspace <= peak`` at its step is ``resident <= save``.
MONeT splits a graph by node kind (forward positions, then stage nodes), so its copy labels the in-data
sources and V forward, ``l_C`` loss, and the rest backward. The copy keeps the local graph's implementations
(the cluster's own, in local ids): MONeT chooses one per step. Non-leaf clusters stay H-ILP.
"""

from __future__ import annotations

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.impls import Impl
from remat_models.core.schedule import Compute
from remat_models.formulations import get_formulation
from remat_models.formulations.hilp.local import LocalGraph
from remat_models.formulations.hilp.options import leaf_spec
from remat_models.formulations.solving import solve_model


def leaf_graph(lg: LocalGraph, peak: int, save: int, formulation: str) -> Graph:
    """``lg``'s graph with the save cap as ``l_C``'s workspace (``peak - save``); for MONeT, kinds by role.

    Only MONeT gets the implementations; the others plan the default ones (the local graph's edges are every
    implementation's reads).
    """
    g = lg.graph
    workspace = g.workspace.copy()
    workspace[lg.loss] = max(0, int(peak) - int(save))
    kind = list(g.kind)
    chooser = get_formulation(formulation).supports_impls  # MONeT: kinds by role, and the implementations
    if chooser:
        kind = [NodeKind.FORWARD] * lg.loss + [NodeKind.LOSS] + [NodeKind.BACKWARD] * (g.n - lg.loss - 1)
    impls = _impls(lg) if g.impl_table is not None and chooser else None
    return g.replaced(workspace=workspace, kind=kind, impls=impls)


def _impls(lg: LocalGraph) -> dict[int, tuple[Impl, ...]]:
    """The local graph's implementations but ``l_C``'s (its default follows the save cap's workspace)."""
    return {v: impls for v, impls in enumerate(lg.graph.impl_table.impls) if v != lg.loss}


def solve_leaf(
    lg: LocalGraph, peak: int, save: int, spec: str, limits: SolveLimits
) -> tuple[list[tuple[int, int]] | None, str]:
    """The local (node, implementation) steps the formulation ``spec`` ("NAME[/BACKEND]") finds at (peak, save).

    With the solve's status. The steps are None without a schedule; the caller splits them at ``l_C`` and measures
    them on ``lg``. On a local graph with implementations MONeT chooses them.
    """
    formulation, backend = leaf_spec(spec)
    outcome = solve_model(leaf_graph(lg, peak, save, formulation), int(peak), formulation, backend, limits=limits)
    if outcome.schedule is None:
        return None, outcome.status.value
    steps = [(step.node, step.impl) for step in outcome.schedule.steps if isinstance(step, Compute)]
    return steps, outcome.status.value
