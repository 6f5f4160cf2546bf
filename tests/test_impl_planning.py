"""Planning graphs with operator implementations through the planner (default view, greedy implementations)."""

from __future__ import annotations

from impl_graphs import a2_mask, a4_conv

from remat_models.planner import PlanStatus, plan
from remat_models.schedule import input_order_peak


def test_planner_runs_other_methods_on_the_default_view() -> None:
    graph = a4_conv()
    greedy = plan(graph, 8, "checkpoint-all")
    assert greedy.method == "checkpoint-all+greedy-impls" and greedy.simulation.total_cost == 2
    plain = plan(graph, 8, "checkpoint-all", impls=False)
    assert plain.method == "checkpoint-all" and plain.simulation.total_cost == 4
    checkmate = plan(a2_mask(), 12, formulation="checkmate")
    assert checkmate.status is PlanStatus.WITHIN_BUDGET and checkmate.graph_hash == a2_mask().content_hash
    monet = plan(a2_mask(), 9, formulation="monet")
    assert monet.method == "monet/highs" and monet.simulation.total_cost == 5.5
    assert input_order_peak(a2_mask()) == 12
