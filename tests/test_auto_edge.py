"""``auto`` fits just above the least peak of a zoo model where only a long least-peak descent gets there (issue #31).

On ResNet (833 nodes) the least peak (18.8 % of the input order's) is reached from Chen's greedy schedule after
some 250 recomputations; no fallback of ``auto`` and no FastSA run comes near it.
"""

from __future__ import annotations

from pathlib import Path

from remat_models.core.schedule import input_order_peak, simulate
from remat_models.heuristics.least_peak import least_peak_search
from remat_models.io import read_graph
from remat_models.planning.plan import plan
from remat_models.planning.result import PlanStatus

ZOO = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo"


def test_auto_fits_zoo_resnet_just_above_its_least_peak() -> None:
    graph = read_graph(ZOO / "zoo_resnet.json")
    budget = least_peak_search(graph, time_limit=6).peak + input_order_peak(graph) // 1000
    result = plan(graph, budget, "auto", time_limit=15)
    assert result.status == PlanStatus.WITHIN_BUDGET
    assert simulate(graph, result.schedule).peak <= budget
