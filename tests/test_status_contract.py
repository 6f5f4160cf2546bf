"""Statuses are a contract (issue #34, "Status without proof"; issue #30, one status enum).

``optimal`` and ``infeasible`` claim a proof about the whole problem (every schedule of the graph under the
budget). A restricted model (Checkmate's order and stages, Moccasin's C intervals, MONeT's and H-ILP's option
spaces) proves ``optimal_in_model`` / ``no_schedule_in_model`` only. A solver error is the status
``solver_error`` with the solver's message, and the CLI exits 4. Real solvers, no mocks; every schedule a test
obtains is checked by the simulator.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import remat

from remat_models.backends import SolveLimits, get_backend
from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, simulate
from remat_models.formulations import get_formulation
from remat_models.io import GENERATORS, read_graph, read_schedule, write_graph, write_schedule
from remat_models.io.generators import linear_chain
from remat_models.model import PlanStatus, SolveStatus, Status
from remat_models.planning.plan import PlanResult, plan

LIMIT = 60.0  # seconds; these models solve in a few


def chain8() -> Graph:
    return linear_chain(8)  # remat graph generate chain --size 8


def unet3() -> Graph:
    return GENERATORS["unet"].build(size=3, seed=0)  # remat graph generate unet --size 3


def fits(graph: Graph, budget: int, schedule: Schedule | None) -> float:
    """The simulated total cost of ``schedule``, which must exist and fit ``budget``."""
    assert schedule is not None
    sim = simulate(graph, schedule)
    assert sim.peak <= budget, (sim.peak, budget)
    return sim.total_cost


def checked(graph: Graph, budget: int, result: PlanResult) -> float | None:
    """The plan's cost, re-simulated (its status agrees with the simulator); None without a schedule."""
    if result.schedule is None:
        assert result.status in (Status.NO_SCHEDULE, Status.NO_SCHEDULE_IN_MODEL, Status.INFEASIBLE)
        return None
    sim = simulate(graph, result.schedule)
    assert result.simulation is not None and sim.peak == result.simulation.peak
    assert sim.total_cost == pytest.approx(result.simulation.total_cost)
    expected = Status.WITHIN_BUDGET if sim.peak <= budget else Status.OVER_BUDGET
    assert result.status in (expected, Status.SOLVER_ERROR)
    return sim.total_cost


# --- 1. restricted models never claim the plain words ------------------------------------------------------


def test_one_enum_for_solvers_and_plans() -> None:
    assert SolveStatus is Status and PlanStatus is Status
    for name in ("checkmate", "moccasin", "monet", "hilp", "saveset-exact", "saveset-intervals"):
        form = get_formulation(name)
        assert not form.exact_model, name  # no family's model holds every schedule
        assert form.claim(Status.OPTIMAL) is Status.OPTIMAL_IN_MODEL
        assert form.claim(Status.INFEASIBLE) is Status.NO_SCHEDULE_IN_MODEL
        assert form.claim(Status.FEASIBLE) is Status.FEASIBLE


def test_moccasin_at_chain8_40_percent_does_not_say_infeasible() -> None:
    """Moccasin's C = 2 intervals hold no schedule at 40 %; Checkmate finds one: no proof about the budget."""
    graph = chain8()
    budget = parse_budget("40%", graph)
    bare = plan(graph, budget, formulation="moccasin", backend="cpsat", init=None, time_limit=LIMIT)
    assert bare.solver_status is Status.NO_SCHEDULE_IN_MODEL
    assert bare.status is Status.NO_SCHEDULE_IN_MODEL and bare.schedule is None
    assert checked(graph, budget, bare) is None
    started = plan(graph, budget, formulation="moccasin", backend="cpsat", time_limit=LIMIT)  # warm start kept
    assert started.status is Status.WITHIN_BUDGET and started.solver_status is Status.NO_SCHEDULE_IN_MODEL
    fits(graph, budget, started.schedule)
    checkmate = plan(graph, budget, formulation="checkmate", backend="highs", init=None, time_limit=LIMIT)
    assert checkmate.status is Status.WITHIN_BUDGET and checkmate.solver_status is Status.OPTIMAL_IN_MODEL
    assert fits(graph, budget, checkmate.schedule) == pytest.approx(26)


def test_cli_moccasin_at_chain8_40_percent(tmp_path: Path) -> None:
    path = tmp_path / "chain8.json"
    write_graph(chain8(), path)
    run = remat("solve", path, "-b", "40%", "-f", "moccasin", "--backend", "cpsat", "--init", "none")
    assert run.returncode == 3, run.stderr
    assert "no_schedule_in_model" in run.stderr and "proves nothing about the budget" in run.stderr
    assert "infeasible" not in run.stdout + run.stderr
    out = tmp_path / "plan.json"
    run = remat("solve", path, "-b", "40%", "-f", "moccasin", "--backend", "cpsat", "-o", out)
    assert run.returncode == 0, run.stderr
    assert "no_schedule_in_model" in run.stdout and "infeasible" not in run.stdout
    graph = read_graph(path)
    fits(graph, parse_budget("40%", graph), read_schedule(out, graph))
    assert json.loads(out.read_text())["metadata"]["solver_status"] == "no_schedule_in_model"


def test_monet_and_moccasin_never_say_optimal_where_another_model_is_cheaper() -> None:
    """unet3 at 50 %: MONeT's optimum (11,119) is above Moccasin's (11,110): neither says the plain word.

    (Checkmate's restricted claim is asserted on chain8 above and below; on unet3 it only runs into the limit.)
    """
    graph = unet3()
    budget = parse_budget("50%", graph)
    costs: dict[str, float] = {}
    for method in ("monet/highs", "moccasin/cpsat"):
        result = plan(graph, budget, method, time_limit=LIMIT)
        cost = checked(graph, budget, result)
        assert cost is not None and result.status is Status.WITHIN_BUDGET, method
        assert result.solver_status not in (Status.OPTIMAL, Status.INFEASIBLE), method
        assert result.details["solver_status"] != "optimal", method
        costs[method] = cost
    assert costs["monet/highs"] > costs["moccasin/cpsat"]  # the case of the issue: a restricted optimum above another


def test_lp_rounding_never_says_infeasible() -> None:
    graph = chain8()
    budget = graph.lower_bound
    result = plan(graph, budget, "checkmate/lp-rounding", time_limit=LIMIT, allow_over_budget=True)
    checked(graph, budget, result)
    assert result.solver_status not in (Status.OPTIMAL, Status.INFEASIBLE)


# --- 2. a solver error is a status with the solver's message ---------------------------------------------


def test_cpsat_model_invalid_is_a_solver_error_with_its_message() -> None:
    graph = chain8()
    built = get_formulation("checkmate").build(graph, parse_budget("80%", graph), {"integral_memory": True})
    result = get_backend("cpsat").solve(built.model, SolveLimits(time_limit=LIMIT, workers=100_000))
    assert result.status is Status.SOLVER_ERROR and not result.has_solution
    assert result.message is not None and "MODEL_INVALID" in result.message and "num_workers" in result.message
    assert result.summary()["status"] == "solver_error" and "num_workers" in result.summary()["message"]


def test_plan_reports_the_solver_error_and_keeps_the_warm_start() -> None:
    graph = chain8()
    budget = parse_budget("40%", graph)
    result = plan(graph, budget, formulation="moccasin", backend="cpsat", workers=100_000, time_limit=LIMIT)
    assert result.status is Status.SOLVER_ERROR and result.solver_status is Status.SOLVER_ERROR
    assert "num_workers" in result.details["solver_message"]
    assert result.metadata()["status"] == "solver_error"
    fits(graph, budget, result.schedule)  # the fitting warm start stands, the status says the solve failed
    bare = plan(graph, budget, formulation="moccasin", backend="cpsat", workers=100_000, init=None)
    assert bare.status is Status.SOLVER_ERROR and bare.schedule is None


def test_cli_solver_error_exits_4_with_the_solvers_message(tmp_path: Path) -> None:
    path = tmp_path / "chain8.json"
    write_graph(chain8(), path)
    out = tmp_path / "plan.json"
    run = remat("solve", path, "-b", "40%", "-f", "moccasin", "--workers", "100000", "-o", out)
    assert run.returncode == 4, run.stderr
    assert "the solver failed: MODEL_INVALID" in run.stderr and "num_workers" in run.stderr
    assert "solver_error" in run.stdout and "feasible" not in run.stdout
    graph = read_graph(path)
    fits(graph, parse_budget("40%", graph), read_schedule(out, graph))  # a new file: written, marked
    assert json.loads(out.read_text())["metadata"]["status"] == "solver_error"


# --- 3. files keep their strings; old ones load ----------------------------------------------------------

OLD_STRINGS = {
    "optimal": Status.OPTIMAL,
    "feasible": Status.FEASIBLE,
    "infeasible": Status.INFEASIBLE,
    "no_solution_within_limit": Status.NO_SOLUTION,
    "no_solution": Status.NO_SOLUTION,  # max batch before the one enum
    "interrupted": Status.INTERRUPTED,
    "error": Status.ERROR,  # a solver error before ``solver_error``; a bench run that raised
    "within_budget": Status.WITHIN_BUDGET,
    "over_budget": Status.OVER_BUDGET,
    "no_schedule": Status.NO_SCHEDULE,
    "oom": Status.OOM,
    "timeout": Status.TIMEOUT,
    "crashed": Status.CRASHED,
}


@pytest.mark.parametrize(("text", "status"), OLD_STRINGS.items())
def test_old_status_strings_load(text: str, status: Status) -> None:
    assert Status(text) is status and Status.read(text) is status
    assert json.dumps({"status": Status.read(text)}) == json.dumps({"status": status.value})


def test_unknown_status_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown status 'proven'; known: optimal, infeasible"):
        Status.read("proven")


def test_an_old_plan_file_loads(tmp_path: Path) -> None:
    graph = chain8()
    budget = parse_budget("80%", graph)
    result = plan(graph, budget, "chen-greedy")
    path = tmp_path / "old.json"
    old = {"status": "infeasible", "solver_status": "error", "method": "checkmate/cpsat"}  # strings of old files
    write_schedule(path, result.schedule, graph, metadata=old)
    schedule = read_schedule(path, graph)
    fits(graph, budget, schedule)
    metadata = json.loads(path.read_text())["metadata"]
    assert Status.read(metadata["status"]) is Status.INFEASIBLE
    assert Status.read(metadata["solver_status"]) is Status.ERROR
    write_graph(graph, tmp_path / "graph.json")
    run = remat("simulate", tmp_path / "graph.json", path)
    assert run.returncode == 0, run.stderr


def test_new_plan_files_keep_string_values(tmp_path: Path) -> None:
    graph = chain8()
    budget = parse_budget("60%", graph)
    result = plan(graph, budget, formulation="checkmate", backend="highs", time_limit=LIMIT)
    fits(graph, budget, result.schedule)
    path = tmp_path / "plan.json"
    write_schedule(path, result.schedule, graph, metadata=result.metadata())
    metadata = json.loads(path.read_text())["metadata"]
    assert (metadata["status"], metadata["solver_status"]) == ("within_budget", "optimal_in_model")
    assert metadata["phases"]["solve"]["status"] == "optimal"  # the backend's status, about the model it solved
