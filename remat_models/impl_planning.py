"""Planning a graph with operator implementations with a method that does not choose implementations.

Such a method plans the graph's default view (impl 0 everywhere, aux values dropped); its schedule
is lifted back to the graph and, with ``greedy``, post-optimized by the greedy implementation
chooser (MONeT's "Checkmate-O"). The result is re-simulated on the full graph.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from remat_models.heuristics.impl_greedy import greedy_impls
from remat_models.impls import lift_schedule
from remat_models.schedule import Schedule, input_order_peak, simulate

if TYPE_CHECKING:
    from remat_models.graph import Graph
    from remat_models.planner import PlanResult

log = logging.getLogger(__name__)


def supports_impls(formulation: str | None) -> bool:
    """Whether the formulation called ``formulation`` chooses implementations itself (heuristics do not)."""
    if formulation is None:
        return False
    from remat_models.formulations import get_formulation

    return bool(getattr(get_formulation(formulation), "supports_impls", False))


def plan_default_view(graph: Graph, budget: int, *, greedy: bool, **arguments: Any) -> PlanResult:
    """``plan`` on ``graph.default_view()``, lifted to ``graph`` (and greedy implementation choice if asked)."""
    from remat_models import planner
    from remat_models.planner import PlanStatus, plan

    allow = bool(arguments.get("allow_over_budget", False))
    if "allow_over_budget" in arguments:
        arguments["allow_over_budget"] = True
    if isinstance(arguments.get("init"), Schedule):
        log.warning("warm start dropped: a schedule of the full graph does not fit its default view")
        arguments["init"] = None
    arguments["impls"] = False
    view = graph.default_view()
    result = plan(view, budget, **arguments)
    if result.schedule is None:
        return replace(result, graph_name=graph.name, graph_hash=graph.content_hash)
    schedule = lift_schedule(graph, result.schedule)
    label = result.method
    if greedy:
        schedule = greedy_impls(graph, schedule, budget)
        label = f"{label}+greedy-impls"
    simulation = simulate(graph, schedule)
    status = PlanStatus.WITHIN_BUDGET if simulation.fits(budget) else PlanStatus.OVER_BUDGET
    lifted = replace(
        result,
        graph_name=graph.name,
        graph_hash=graph.content_hash,
        method=label,
        reference_peak=input_order_peak(graph),
        status=status,
        schedule=schedule,
        simulation=simulation,
    )
    if status is PlanStatus.OVER_BUDGET and "allow_over_budget" in arguments and not allow:
        raise planner.over_budget_error(lifted)
    return lifted
