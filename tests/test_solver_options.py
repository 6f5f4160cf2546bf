"""The solver's own options (``SolveLimits.solver_options``, ``plan(solver_options=...)``, ``remat solve -S``)."""

from __future__ import annotations

import pytest
from checkmate_graphs import budgets, tiny_unet
from test_cli import remat
from test_deadline import _cover

from remat_models.backends import SolveLimits, get_backend
from remat_models.core.schedule import simulate
from remat_models.errors import ConfigurationError
from remat_models.io import write_graph
from remat_models.model import SolveStatus
from remat_models.planning.plan import plan


def test_highs_takes_its_own_options() -> None:
    """A 50 % gap ends the cover MIP at once as optimal; with the default gap it runs to the 30 s limit."""
    result = get_backend("highs").solve(_cover(), SolveLimits(time_limit=30, solver_options={"mip_rel_gap": 0.5}))
    assert result.status == SolveStatus.OPTIMAL
    assert result.gap is not None and 1e-3 < result.gap <= 0.5


def test_cpsat_takes_sat_parameters() -> None:
    options = {"stop_after_first_solution": True}
    result = get_backend("cpsat").solve(_cover(), SolveLimits(time_limit=30, solver_options=options))
    assert result.status == SolveStatus.FEASIBLE and len(result.trajectory) == 1


@pytest.mark.parametrize(
    ("backend", "options", "message"),
    [
        ("highs", {"no_such_option": 1}, "no_such_option=1 rejected"),
        ("highs", {"mip_rel_gap": "wide"}, "mip_rel_gap='wide' rejected"),
        ("cpsat", {"no_such_field": 1}, "no_such_field=1 rejected"),
        ("cpsat", {"num_workers": 1.5}, "num_workers=1.5 rejected"),
        ("gurobi", {"NoSuchParameter": 1}, "NoSuchParameter=1 rejected"),
        ("minizinc", {"x": 1}, "takes no solver options"),
    ],
)
def test_a_rejected_option_is_a_configuration_error_naming_it(backend: str, options: dict, message: str) -> None:
    if not get_backend(backend).available():
        pytest.skip(f"{backend} is not installed")
    with pytest.raises(ConfigurationError, match=message):
        get_backend(backend).solve(_cover(40, 12), SolveLimits(time_limit=5, solver_options=options))


def test_plan_passes_solver_options_to_the_solver() -> None:
    graph = tiny_unet()
    budget = budgets(graph)[0]
    exact = {"mip_rel_gap": 0.0}
    result = plan(graph, budget, formulation="checkmate", backend="highs", time_limit=30, solver_options=exact)
    assert simulate(graph, result.schedule).peak <= budget
    with pytest.raises(ConfigurationError, match="no_such_option"):
        plan(graph, budget, formulation="checkmate", time_limit=30, solver_options={"no_such_option": 1})
    with pytest.raises(ConfigurationError, match="solver options apply to formulations"):
        plan(graph, budget, "fastsa", solver_options={"mip_rel_gap": 0.0})


def test_cli_solver_options(tmp_path) -> None:
    graph = tiny_unet()
    path = tmp_path / "g.json"
    write_graph(graph, path)
    budget = str(budgets(graph)[0])
    ok = remat("solve", path, "-b", budget, "-f", "checkmate", "-S", "mip_rel_gap=0", "--time-limit", "30")
    assert ok.returncode == 0, ok.stderr
    bad = remat("solve", path, "-b", budget, "-f", "checkmate", "-S", "no_such_option=1", "--time-limit", "30")
    assert bad.returncode != 0 and "no_such_option=1 rejected" in bad.stderr
    no_pair = remat("solve", path, "-b", budget, "-f", "checkmate", "-S", "mip_rel_gap")
    assert no_pair.returncode != 0 and "NAME=VALUE" in no_pair.stderr
    heuristic = remat("solve", path, "-b", budget, "-m", "fastsa", "-S", "mip_rel_gap=0")
    assert heuristic.returncode != 0 and "--solver-option need --formulation" in heuristic.stderr


def test_a_plan_file_records_the_whole_calls_wall_time_not_the_solvers() -> None:
    from remat_models.core.schedule import input_order_peak
    from remat_models.io.generators import linear_chain
    from remat_models.planning.plan import plan

    graph = linear_chain(6)
    result = plan(graph, int(0.8 * input_order_peak(graph)), formulation="checkmate", backend="highs", time_limit=20)
    assert simulate(graph, result.schedule).peak <= result.budget
    metadata = result.metadata()
    assert metadata["wall_time_s"] == result.wall_time
    assert metadata["wall_time_s"] >= result.details["solve_time_s"]
