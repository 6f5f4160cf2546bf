"""Checkmate gives the same optimum on every available backend and through the .lp / .mzn exports."""

from __future__ import annotations

import re
import shutil
import subprocess

import highspy
import pytest
from checkmate_graphs import random_dag, tiny_unet

from remat_models.backends import SolveLimits, SolveStatus, available
from remat_models.backends.export import export
from remat_models.core.schedule import simulate
from remat_models.formulations.checkmate.formulation import CHECKMATE
from remat_models.formulations.solving import build_for_backend, solve_model
from remat_models.io import linear_chain, random_layered

LIMITS = SolveLimits(time_limit=60)
# chains, a U-Net-like graph, random DAGs of 8-15 nodes, at budgets that force recomputation
CASES = [
    (linear_chain(4), 4),
    (tiny_unet(), 14),
    (random_layered(11, seed=4), 9601),
    (random_layered(11, seed=6), 11424),
    (random_dag(12, 5, fixed=True), 33),
]
IDS = [graph.name for graph, _ in CASES]


def reference(graph, budget) -> float:
    outcome = solve_model(graph, budget, "checkmate", "highs", limits=LIMITS)
    assert outcome.status == SolveStatus.OPTIMAL_IN_MODEL
    return outcome.objective


@pytest.fixture(scope="module")
def optima() -> dict[str, float]:
    return {graph.name: reference(graph, budget) for graph, budget in CASES}


@pytest.mark.parametrize("backend", available())
@pytest.mark.parametrize(("graph", "budget"), CASES, ids=IDS)
def test_same_optimum_on_every_backend(backend, graph, budget, optima) -> None:
    outcome = solve_model(graph, budget, "checkmate", backend, limits=LIMITS)
    assert outcome.status == SolveStatus.OPTIMAL_IN_MODEL, outcome
    assert outcome.objective == pytest.approx(optima[graph.name])
    sim = simulate(graph, outcome.schedule)
    assert sim.peak <= budget
    assert sim.total_cost == pytest.approx(optima[graph.name])


@pytest.mark.parametrize(("graph", "budget"), CASES, ids=IDS)
def test_lp_export_solves_to_the_same_optimum(graph, budget, optima, tmp_path) -> None:
    built = CHECKMATE.build(graph, budget)
    path = export(built.model, tmp_path / "checkmate.lp")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert built.cost(h.getInfo().objective_function_value) == pytest.approx(optima[graph.name])


@pytest.mark.skipif(shutil.which("minizinc") is None, reason="the minizinc binary is not installed")
@pytest.mark.parametrize(("graph", "budget"), CASES[:2], ids=IDS[:2])
def test_mzn_export_solves_to_the_same_optimum(graph, budget, optima, tmp_path) -> None:
    built = build_for_backend(graph, budget, "checkmate", "cpsat")  # integral memory, as for MiniZinc
    path = export(built.model, tmp_path / "checkmate.mzn")
    run = subprocess.run(
        ["minizinc", "--solver", "gecode", str(path), str(path.with_suffix(".dzn")), "--output-objective"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "==========" in run.stdout  # proven optimal
    objectives = [float(v) for v in re.findall(r"_objective\s*=\s*(-?[0-9.e+]+)", run.stdout)]
    assert objectives and built.cost(objectives[-1]) == pytest.approx(optima[graph.name])
