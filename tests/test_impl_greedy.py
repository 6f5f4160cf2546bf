"""Greedy implementation choice (Checkmate-O) over any schedule."""

from __future__ import annotations

import pytest
from impl_graphs import A4_OPTIMA, a4_conv, random_impl_training

from remat_models.core.schedule import input_order_schedule, lift_schedule, simulate
from remat_models.heuristics.impl_greedy import greedy_impls


def default_plan(graph):
    return lift_schedule(graph, input_order_schedule(graph.default_view()))


def test_greedy_picks_the_fastest_conv_algorithm_that_fits() -> None:
    graph = a4_conv()
    for budget, expected in A4_OPTIMA.items():
        if expected is None:
            continue
        for mode in ("same-reads", "any"):
            result = simulate(graph, greedy_impls(graph, default_plan(graph), budget, mode))
            assert result.peak <= budget and result.total_cost == expected


@pytest.mark.parametrize("seed", range(6))
def test_greedy_never_costs_more_nor_exceeds_the_budget(seed: int) -> None:
    graph = random_impl_training(seed)
    start = default_plan(graph)
    base = simulate(graph, start)
    for mode in ("same-reads", "any"):
        result = simulate(graph, greedy_impls(graph, start, base.peak, mode))
        assert result.peak <= base.peak and result.total_cost <= base.total_cost
