"""The brute force used as ground truth: its schedules simulate, its structures nest."""

from __future__ import annotations

import pytest
from checkmate_graphs import budgets, tiny_graphs

from remat_models.core.schedule import input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.io import linear_chain


@pytest.mark.parametrize("graph", tiny_graphs(), ids=lambda g: g.name)
def test_structures_nest_and_schedules_simulate(graph) -> None:
    for budget in budgets(graph):
        found = {s: exhaustive_optimum(graph, budget, s) for s in ("free", "runs", "staged")}
        for result in found.values():
            if result is not None:
                sim = simulate(graph, result.schedule)
                assert sim.peak <= budget
                assert sim.total_cost == pytest.approx(result.cost)
        costs = [found[s].cost if found[s] else float("inf") for s in ("free", "runs", "staged")]
        assert costs == sorted(costs)


def test_input_order_peak_needs_no_recomputation() -> None:
    graph = linear_chain(3)
    result = exhaustive_optimum(graph, input_order_peak(graph), "staged")
    assert result is not None and result.cost == graph.total_cost


def test_below_the_lower_bound_nothing_fits() -> None:
    graph = linear_chain(2)
    assert exhaustive_optimum(graph, graph.lower_bound - 1) is None


def test_rejects_large_graphs_and_unknown_structures() -> None:
    with pytest.raises(ConfigurationError, match="at most"):
        exhaustive_optimum(linear_chain(8), 10)
    with pytest.raises(ConfigurationError, match="unknown structure"):
        exhaustive_optimum(linear_chain(2), 10, "sideways")  # type: ignore[arg-type]
