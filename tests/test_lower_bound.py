"""The lower bound includes the end state: every graph output resident after the last computation."""

from __future__ import annotations

import numpy as np
import pytest

from remat_models import Graph
from remat_models.core.budget import check_budget
from remat_models.core.schedule import input_order_peak
from remat_models.errors import BudgetInfeasibleError
from remat_models.planning.plan import plan


def test_end_state_raises_the_bound_above_the_largest_step() -> None:
    wide = Graph.from_arrays(["a", "b", "c"], [1, 1, 1], [5, 5, 5], [(0, 1)], outputs=[0, 1, 2])
    assert wide.lower_bound == 15 == input_order_peak(wide)  # the largest step holds only 10
    # x -> h -> g with two 'gradient' outputs: the last step (g) also holds its non-output input h
    names = ["x", "h", "gx", "gh"]
    edges = [(0, 1), (1, 3), (0, 2), (3, 2)]
    grads = Graph.from_arrays(names, np.ones(4), [2, 3, 7, 7], edges, outputs=[2, 3], fixed_mem=1)
    assert grads.lower_bound == 1 + 14 + 2  # fixed + both outputs + x, read by gx (the cheapest last step)
    assert grads.lower_bound <= input_order_peak(grads)


def test_budgets_below_the_end_state_fail_at_once_and_the_bound_is_reachable() -> None:
    graph = Graph.from_arrays(["a", "b", "c"], [1, 1, 1], [10, 10, 10], [(0, 1), (1, 2)], outputs=[0, 1, 2])
    assert graph.lower_bound == 30 == input_order_peak(graph)
    with pytest.raises(BudgetInfeasibleError, match="below the lower bound 30 B") as caught:
        check_budget(graph, 29)
    assert caught.value.lower_bound == 30
    with pytest.raises(BudgetInfeasibleError):
        plan(graph, 29, "fastsa")
    assert plan(graph, 30, "chen-greedy").simulation.peak <= 30
