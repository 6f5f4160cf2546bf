"""Moccasin on every available backend (MILP ones through the time-indexed lowering) and exported files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_minizinc import solve_with_binary

from remat_models.backends import SolveLimits, available, get_backend
from remat_models.backends.export import export
from remat_models.core.schedule import simulate
from remat_models.formulations.moccasin.formulation import export_moccasin, solve_moccasin
from remat_models.formulations.moccasin.model import MoccasinOptions, build_model
from remat_models.io.generators import linear_chain
from remat_models.model import SolveStatus

GRAPH = linear_chain(2)  # 5 nodes; its lower-bound budget needs one recomputation
BUDGET = GRAPH.lower_bound
OPTIMUM = 6.0  # five unit-cost nodes, one recomputed (exhaustive search agrees: tests/test_moccasin.py)

SLOW = {("minizinc", "free"): "Gecode does not finish the free-order model of a 5-node chain within a minute"}


@pytest.mark.parametrize("order", ["input", "free"])
@pytest.mark.parametrize("backend", available())
def test_same_optimum_on_every_backend(backend: str, order: str) -> None:
    if (backend, order) in SLOW:
        pytest.skip(SLOW[backend, order])
    result = solve_moccasin(GRAPH, BUDGET, backend=backend, order=order, workers=1, time_limit=60)  # type: ignore[arg-type]
    assert result.status == SolveStatus.OPTIMAL_IN_MODEL  # optimal for C intervals: never the plain "optimal"
    assert result.schedule is not None
    simulation = simulate(GRAPH, result.schedule)
    assert simulation.peak <= BUDGET
    assert simulation.total_cost == pytest.approx(OPTIMUM)


@pytest.mark.parametrize("backend", available())
def test_phase_1_with_its_variable_capacity_on_every_backend(backend: str) -> None:
    result = solve_moccasin(GRAPH, BUDGET, backend=backend, workers=1, time_limit=60, greedy=False)
    assert result.phases.get("phase1") is not None and result.phases.get("phase1").status == SolveStatus.OPTIMAL
    assert result.status == SolveStatus.OPTIMAL_IN_MODEL and result.schedule is not None
    assert simulate(GRAPH, result.schedule).total_cost == pytest.approx(OPTIMUM)


def test_exported_lp_has_the_same_optimum(tmp_path: Path) -> None:
    import highspy

    path = export_moccasin(GRAPH, BUDGET, tmp_path / "moccasin.lp", order="input")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(OPTIMUM)  # unit costs: scaled = original


@pytest.mark.parametrize("order", ["input", "free"])
def test_exported_mzn_solved_by_the_minizinc_binary_has_the_same_optimum(tmp_path: Path, order: str) -> None:
    if shutil.which("minizinc") is None:
        pytest.skip("the minizinc binary is not installed")
    if order == "free":
        pytest.skip(SLOW["minizinc", "free"])
    built = build_model(GRAPH, BUDGET, MoccasinOptions(order=order))  # type: ignore[arg-type]
    path = export(built.model, tmp_path / "moccasin.mzn")
    x = solve_with_binary(path, timeout=120)[: built.model.num_cols]
    assert built.model.check(x) == []
    assert built.model.objective_value(x) == pytest.approx(OPTIMUM)
    schedule = get_backend("cpsat").solve(built.model, SolveLimits(workers=1))
    assert schedule.objective == pytest.approx(OPTIMUM)
