"""Planning a graph with operator implementations with a method that does not choose implementations.

Such a method plans the graph's default view (impl 0 everywhere, aux values dropped); its schedule
is lifted back to the graph and, with ``greedy``, post-optimized by the greedy implementation
chooser (MONeT's "Checkmate-O"). The result is re-simulated on the full graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak, lift_schedule, simulate
from remat_models.formulations import get_formulation
from remat_models.heuristics.impl_greedy import greedy_impls
from remat_models.planning.result import PlanResult, PlanStatus, over_budget_error


def supports_impls(formulation: str | None, graph: Graph, options: Mapping[str, Any] | None = None) -> bool:
    """Whether the formulation called ``formulation`` chooses ``graph``'s implementations itself (heuristics do not).

    A formulation declares it with ``supports_impls``, or per graph and options with ``chooses_impls(graph, options)``.
    """
    return formulation is not None and get_formulation(formulation).chooses_impls(graph, options)


def plan_default_view(
    graph: Graph,
    budget: int,
    plan_view: Callable[[Graph], PlanResult],
    *,
    greedy: bool,
    allow_over_budget: bool,
) -> PlanResult:
    """``plan_view`` (a plan of any graph, over budget allowed) on the default view, lifted to ``graph``."""
    result = plan_view(graph.default_view())
    if result.schedule is None:  # the view holds the default implementations only: its proofs are the view's
        status = PlanStatus.NO_SCHEDULE_IN_MODEL if result.status is PlanStatus.INFEASIBLE else result.status
        return replace(result, graph_name=graph.name, graph_hash=graph.content_hash, status=status)
    schedule = lift_schedule(graph, result.schedule)
    label = result.method
    if greedy:
        schedule = greedy_impls(graph, schedule, budget)
        label = f"{label}+greedy-impls"
    simulation = simulate(graph, schedule)
    status = PlanStatus.WITHIN_BUDGET if simulation.fits(budget) else PlanStatus.OVER_BUDGET
    if result.status is PlanStatus.SOLVER_ERROR:
        status = PlanStatus.SOLVER_ERROR
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
    if status is PlanStatus.OVER_BUDGET and not allow_over_budget:
        raise over_budget_error(lifted)
    return lifted
