"""FastSA as the warm start of the exact formulations, and as a CLI method."""

import pytest
from test_cli import remat

from remat_models.core.budget import parse_budget
from remat_models.core.schedule import simulate
from remat_models.heuristics.fastsa import fastsa
from remat_models.io import read_schedule, write_graph
from remat_models.io.generators import random_layered
from remat_models.planning.plan import PlanStatus, plan


@pytest.mark.parametrize(
    ("formulation", "backend"), [("checkmate", "highs"), ("checkmate", "cpsat"), ("moccasin", "cpsat")]
)
def test_solver_started_from_fastsa_is_never_worse(formulation: str, backend: str) -> None:
    graph = random_layered(12, seed=4)  # 80 % is above its lower bound; FastSA recomputes
    budget = parse_budget("80%", graph)
    start = fastsa(graph, budget, seed=1, iterations=(200_000, 100_000))
    assert start.met_budget and simulate(graph, start.schedule).peak <= budget
    # a tiny time limit: the solver may find nothing better, and must then hand the warm start back
    result = plan(graph, budget, formulation=formulation, backend=backend, init=start.schedule, time_limit=1)
    assert result.status is PlanStatus.WITHIN_BUDGET
    check = simulate(graph, result.schedule)
    assert check.peak <= budget
    assert check.total_cost <= start.cost


def test_checkmate_stages_follow_the_warm_start_order() -> None:
    graph = random_layered(12, seed=4)
    budget = parse_budget("80%", graph)
    start = fastsa(graph, budget, seed=0, iterations=(100_000, 100_000))
    result = plan(graph, budget, formulation="checkmate", backend="highs", init=start.schedule, time_limit=20)
    assert result.details["warm_start"] is True  # the hints matched the stages built in FastSA's order
    assert result.details["options"]["order"] == start.schedule.first_computation_order().tolist()


def test_cli_fastsa_with_knobs(tmp_path) -> None:
    path, out = tmp_path / "g.json", tmp_path / "plan.json"
    graph = random_layered(20, seed=4)
    write_graph(graph, path)
    run = remat("solve", path, "-b", "80%", "-m", "fastsa", "--iterations", "100000,100000", "--seed", "2", "-o", out)
    assert run.returncode == 0, run.stderr
    assert simulate(graph, read_schedule(out, graph)).peak <= parse_budget("80%", graph)
    bad = remat("solve", path, "-b", "80%", "-m", "chen-greedy", "--iterations", "1,1")
    assert bad.returncode == 1 and "method 'chen-greedy' takes no options (such as --iterations)" in bad.stderr
