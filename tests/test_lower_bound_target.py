"""A proven lower bound on cost as a target: FastSA and ``auto`` stop once a fitting schedule reaches it."""

from __future__ import annotations

import pytest

from remat_models.core.schedule import input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.fastsa import fastsa
from remat_models.io import linear_chain
from remat_models.planning.bounds import cost_lower_bound
from remat_models.planning.plan import plan

CHAIN_BUDGET = 8  # chain(8) at 80 % of its input-order peak: the cut at 'b7' proves 19, FastSA finds 19


def test_fastsa_stops_its_annealing_at_the_target() -> None:
    graph = linear_chain(8)
    bound = cost_lower_bound(graph, CHAIN_BUDGET).value
    assert bound == pytest.approx(19)
    free = fastsa(graph, CHAIN_BUDGET, time_limit=30, iterations=(20_000, 2_000_000))
    stopped = fastsa(graph, CHAIN_BUDGET, time_limit=30, iterations=(20_000, 2_000_000), target_cost=bound)
    for result in (free, stopped):
        assert simulate(graph, result.schedule).fits(CHAIN_BUDGET) and result.simulation.total_cost == 19
    assert free.iterations[1] == 2_000_000  # without a target stage 2 runs all its attempts
    assert stopped.iterations[1] < free.iterations[1] // 10  # with it, a chunk or a few once the bound is reached


@pytest.mark.parametrize("target", [-1.0, float("nan"), float("inf")])
def test_a_bad_target_is_refused_naming_it(target: float) -> None:
    with pytest.raises(ConfigurationError, match="target_cost must be a finite number >= 0"):
        fastsa(linear_chain(4), 100, time_limit=1, target_cost=target)


def test_auto_returns_a_fallback_at_the_bound_without_its_members() -> None:
    graph = linear_chain(8)
    result = plan(graph, input_order_peak(graph), "auto", time_limit=60)  # knapsack keeps everything: cost n
    assert [member["method"] for member in result.details["portfolio"]] == ["knapsack"]
    assert result.lower_bound_gap == pytest.approx(0, abs=1e-9)
    assert simulate(graph, result.schedule).fits(input_order_peak(graph))


def test_auto_stops_its_members_once_fastsa_reaches_the_bound() -> None:
    graph = linear_chain(8)
    result = plan(graph, CHAIN_BUDGET, "auto", time_limit=60, options={"cheapen_share": 0})  # else Chen's reaches it
    methods = [member["method"] for member in result.details["portfolio"]]
    assert result.details["chosen"] == "fastsa" and result.simulation.total_cost == 19
    assert not any(method.startswith(("checkmate", "moccasin")) for method in methods), methods  # never waited for
    assert result.lower_bound_gap == pytest.approx(0, abs=1e-9) and simulate(graph, result.schedule).fits(CHAIN_BUDGET)


def test_auto_cheapens_its_fallbacks_down_to_the_bound() -> None:
    """Chen's greedy at 8 costs 20 on chain(8); less the recomputation the budget does not need, 19: the bound."""
    graph = linear_chain(8)
    result = plan(graph, CHAIN_BUDGET, "auto", time_limit=60)
    members = {member["method"]: member for member in result.details["portfolio"]}
    assert result.details["chosen"] == "chen-greedy" and members["chen-greedy"].get("cheapened")
    assert simulate(graph, BASELINES["chen-greedy"](graph, CHAIN_BUDGET)).total_cost == 20
    assert result.simulation.total_cost == 19 and result.lower_bound_gap == pytest.approx(0, abs=1e-9)
    assert simulate(graph, result.schedule).fits(CHAIN_BUDGET)
