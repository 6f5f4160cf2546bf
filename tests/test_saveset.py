"""The save-set heuristic: plans simulated within budget, the range it spans, registration, random nodes kept."""

from __future__ import annotations

import numpy as np
import pytest

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, simulate
from remat_models.heuristics.recompute import forward_nodes
from remat_models.heuristics.saveset import saveset_range, saveset_schedule, saveset_search
from remat_models.io.generators import linear_chain, transformer
from remat_models.planning.plan import plan

GRAPHS = [linear_chain(20), transformer(4)]


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.name)
@pytest.mark.parametrize("share", [1.0, 0.75, 0.5, 0.25, 0.0])
def test_plan_fits_every_share_of_its_range(graph: Graph, share: float) -> None:
    least, most = saveset_range(graph)
    assert least < most
    budget = least + int(share * (most - least))
    choice = saveset_search(graph, budget)
    result = simulate(graph, saveset_schedule(graph, choice.saved))
    assert result.peak == choice.peak <= budget
    assert result.total_cost == pytest.approx(choice.cost)
    if share == 1.0:
        assert result.recomputations == 0  # saving everything fits: nothing is recomputed
    else:
        assert result.recomputations > 0


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.name)
def test_tighter_budgets_never_cost_less(graph: Graph) -> None:
    least, most = saveset_range(graph)
    costs = [saveset_search(graph, least + int(s * (most - least))).cost for s in (1.0, 0.5, 0.0)]
    assert costs[0] <= costs[1] <= costs[2]


def test_below_its_least_peak_it_returns_the_lowest_peak_found() -> None:
    graph = transformer(4)
    least, _ = saveset_range(graph)
    choice = saveset_search(graph, least - 1)
    assert choice.peak == least
    assert simulate(graph, saveset_schedule(graph, choice.saved)).peak == least


def test_non_recomputable_forward_nodes_are_computed_once() -> None:
    base = linear_chain(12)
    fixed = [2, 5]
    graph = base.with_recomputable(dict.fromkeys(fixed, False))
    least, _ = saveset_range(graph)
    schedule = saveset_schedule(graph, saveset_search(graph, least).saved)
    computes = [step.node for step in schedule if isinstance(step, Compute)]
    assert all(computes.count(v) == 1 for v in fixed)
    assert len(computes) > graph.n  # other nodes were recomputed
    simulate(graph, schedule)


def test_registered_as_a_method_of_plan() -> None:
    graph = transformer(4)
    least, most = saveset_range(graph)
    budget = (least + most) // 2
    result = plan(graph, budget, "saveset")
    checked = simulate(graph, result.schedule)
    assert checked.peak <= budget
    kept = np.setdiff1d(forward_nodes(graph), saveset_search(graph, budget).saved)
    assert kept.size > 0  # some forward values are dropped and recomputed


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.name)
def test_replay_recomputes_every_dropped_value_at_the_backward_start(graph: Graph) -> None:
    """The checkpoint-style model: valid, each dropped value recomputed once, never a lower peak than on demand."""
    least, most = saveset_range(graph)
    choice = saveset_search(graph, least)
    on_demand = simulate(graph, saveset_schedule(graph, choice.saved))
    replayed = simulate(graph, saveset_schedule(graph, choice.saved, replay=True))
    dropped = np.setdiff1d(forward_nodes(graph), choice.saved).size
    assert replayed.recomputations == dropped
    assert replayed.peak >= on_demand.peak
    replay_least, replay_most = saveset_range(graph, replay=True)
    assert replay_most == most and least <= replay_least <= replay_most
    fit = saveset_search(graph, replay_least, replay=True)
    assert simulate(graph, saveset_schedule(graph, fit.saved, replay=True)).peak == fit.peak == replay_least
