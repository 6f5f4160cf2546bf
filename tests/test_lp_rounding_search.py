"""LP rounding's allowance search: the rounded schedule fits where plain rounding overshoots."""

from __future__ import annotations

from pathlib import Path

import pytest

from remat_models.backends import SolveLimits
from remat_models.core.budget import parse_budget
from remat_models.core.schedule import simulate
from remat_models.formulations.checkmate.rounding import lp_rounding
from remat_models.io import read_graph

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "graphs"


@pytest.mark.parametrize(
    ("graph_file", "budget"),
    [("unet_train.json", "60%"), ("chain32_train.json", "50%"), ("transformer2_train.json", "60%")],
)
def test_allowance_search_fits_where_plain_rounding_does_not(graph_file: str, budget: str) -> None:
    graph = read_graph(EXAMPLES / graph_file)
    limit = parse_budget(budget, graph)
    limits = SolveLimits(time_limit=60)
    plain = lp_rounding(graph, limit, limits=limits, search=False)
    assert plain.simulation.peak > limit  # the S* of the LP at the full budget rounds over it
    found = lp_rounding(graph, limit, limits=limits)
    assert simulate(graph, found.schedule).peak == found.simulation.peak <= limit
    assert found.details["allowances"][0] == 0.0 and len(found.details["allowances"]) > 1
    assert found.bound == plain.bound <= found.simulation.total_cost


def test_allowance_search_on_a_paper_graph(shared_graphs_dir: Path) -> None:
    graph = read_graph(shared_graphs_dir / "cm1_fcn8_vgg_train.json")
    limit = parse_budget("70%", graph)
    found = lp_rounding(graph, limit, limits=SolveLimits(time_limit=60))
    assert simulate(graph, found.schedule).peak <= limit
