"""Limits, seeds and solver options out of a solver's range: fitted to it, or refused naming them (real solvers)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from checkmate_graphs import budgets, tiny_unet
from model_suite import SUITE
from test_auto import members_run
from test_cli import remat
from test_deadline import _cover

from remat_models.backends import SolveLimits, get_backend
from remat_models.backends.base import Backend
from remat_models.backends.deadline import hard_deadline, run_with_deadline
from remat_models.backends.interrupt import Stopper
from remat_models.budget import parse_budget
from remat_models.core.limits import INT32_MAX, MAX_COUNT, MAX_WAIT, fit_seed, fit_time_limit, wait_slice
from remat_models.errors import BackendUnavailableError, ConfigurationError
from remat_models.heuristics.fastsa import fastsa
from remat_models.io import transformer, write_graph
from remat_models.model import SolveResult, SolveStatus
from remat_models.planning.plan import PlanStatus, plan

BACKENDS = ["cpsat", "highs", "gurobi", "minizinc", "pyomo", "pyomo:cbc", "pyomo:glpk", "cvxpy", "cvxpy:gurobi"]
HUGE_SEED = 2**64  # 18446744073709551616
NO_INCUMBENT = {"mip_max_nodes": 0, "mip_heuristic_effort": 0.0, "presolve": "off"}  # HiGHS: the root LP only


def _backend(spec: str) -> Backend:
    """The backend ``spec``, or a skip where its solver is not installed here."""
    try:
        backend = get_backend(spec)
    except BackendUnavailableError as error:
        pytest.skip(str(error))
    if not backend.available():
        pytest.skip(f"{spec} is not usable here")
    return backend


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The tiny U-Net as a file, and its tightest test budget in bytes."""
    graph = tiny_unet()
    path = tmp_path_factory.mktemp("tiny") / "tiny.json"
    write_graph(graph, path)
    return path, str(budgets(graph)[0])


# 1. Time limits above a solver's range (MiniZinc took --time-limit in int32 milliseconds: 1e12 s answered at once).


@pytest.mark.parametrize("seconds", [3e6, 1e12, 1e300])
@pytest.mark.parametrize("spec", BACKENDS)
def test_huge_time_limits_reach_every_solver_within_its_range(spec: str, seconds: float) -> None:
    model, optimum = SUITE["knapsack"]()
    result = _backend(spec).solve(model, SolveLimits(time_limit=seconds))
    assert result.status == SolveStatus.OPTIMAL and result.objective == pytest.approx(optimum)


def test_minizinc_logs_the_clamped_time_limit(caplog: pytest.LogCaptureFixture) -> None:
    model, optimum = SUITE["knapsack"]()
    with caplog.at_level(logging.WARNING, logger="remat_models"):
        result = _backend("minizinc").solve(model, SolveLimits(time_limit=1e12))
    assert result.status == SolveStatus.OPTIMAL and result.objective == pytest.approx(optimum)
    assert "minizinc: time limit 1e+12 s clamped to 1e+06 s" in caplog.text


def test_cli_minizinc_with_a_huge_time_limit_solves_to_the_optimum(tiny: tuple[Path, str]) -> None:
    _backend("minizinc")
    path, budget = tiny
    command = [sys.executable, "-m", "remat_models.cli.app", "solve", str(path), "-b", budget, "-f", "checkmate"]
    command += ["--backend", "minizinc", "--time-limit", "1e12"]
    env = {"COLUMNS": "200", "PATH": os.environ.get("PATH", "")}  # the minizinc binary
    run = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "optimal_in_model" in run.stdout and "no_solution_within_limit" not in run.stdout


def test_limits_are_fitted_and_waits_sliced() -> None:
    assert fit_time_limit(5.0, 1e6, "s") == 5.0 and fit_time_limit(1e12, 1e6, "s") == 1e6
    assert wait_slice(1e12) == MAX_WAIT and wait_slice(-3.0) == 0.0 and wait_slice(2.5) == 2.5


def test_a_hard_deadline_past_what_poll_takes_is_waited_in_slices() -> None:
    """``poll(1e12)`` overflows; the child's answer still comes back (HiGHS and CP-SAT take this path too)."""
    answer = SolveResult(SolveStatus.OPTIMAL, x=np.ones(3))
    result = run_with_deadline("test", lambda: answer, hard_deadline(1e12), Stopper())
    assert result.status == SolveStatus.OPTIMAL and result.x is not None and result.x.tolist() == [1.0] * 3


# 2. auto with a huge limit (OverflowError in multiprocessing's wait).


def test_auto_takes_a_huge_time_limit() -> None:
    graph, budget = members_run()
    result = plan(graph, budget, "auto", time_limit=1e12)  # returns once Checkmate is optimal and FastSA ran
    assert result.status == PlanStatus.WITHIN_BUDGET
    assert {m["method"] for m in result.details["portfolio"]} >= {"fastsa", "checkmate/highs"}


def test_cli_auto_with_a_huge_time_limit(tiny: tuple[Path, str]) -> None:
    path, budget = tiny
    run = remat("solve", path, "-b", budget, "-m", "auto", "--time-limit", "1e12")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "fits" in run.stdout


# 3. Seeds: refused from 2**63 on; below, reduced into each solver's range (CP-SAT's is an int32).


@pytest.mark.parametrize(
    "method",
    [
        {"method": "fastsa"},
        {"method": "auto"},
        {"formulation": "moccasin", "backend": "cpsat"},
        {"formulation": "checkmate", "backend": "highs"},
    ],
)
def test_seeds_from_two_to_the_63_are_refused_naming_them(method: dict[str, str]) -> None:
    graph = tiny_unet()
    with pytest.raises(ConfigurationError, match=f"seed must be <= {MAX_COUNT}, got {HUGE_SEED}"):
        plan(graph, budgets(graph)[0], seed=HUGE_SEED, time_limit=10, **method)


def test_seed_limits_of_solve_limits_and_fastsa() -> None:
    with pytest.raises(ConfigurationError, match=f"seed must be <= {MAX_COUNT}, got {2**63}"):
        SolveLimits(seed=2**63)
    with pytest.raises(ConfigurationError, match="seed must be >= 0, got -1"):
        SolveLimits(seed=-1)
    graph = tiny_unet()
    with pytest.raises(ConfigurationError, match=f"FastSA seed must be <= {MAX_COUNT}, got {HUGE_SEED}"):
        fastsa(graph, budgets(graph)[0], seed=HUGE_SEED)


def test_a_seed_is_reduced_deterministically() -> None:
    assert fit_seed(7, INT32_MAX, "s") == 7 and fit_seed(INT32_MAX, INT32_MAX, "s") == INT32_MAX
    assert fit_seed(2**40 + 5, INT32_MAX, "s") == (2**40 + 5) % 2**31 == fit_seed(2**40 + 5, INT32_MAX, "s")


@pytest.mark.parametrize("spec", [*BACKENDS, "cvxpy:scipy"])
def test_the_largest_seed_reaches_every_solver(spec: str) -> None:
    model, optimum = SUITE["knapsack"]()
    result = _backend(spec).solve(model, SolveLimits(time_limit=30, seed=MAX_COUNT))
    assert result.status == SolveStatus.OPTIMAL and result.objective == pytest.approx(optimum)


def test_cli_seeds(tiny: tuple[Path, str]) -> None:
    path, budget = tiny
    args = ("solve", path, "-b", budget, "-f", "moccasin", "--backend", "cpsat", "--time-limit", "20", "--seed")
    refused = remat(*args, str(HUGE_SEED))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert f"seed must be <= {MAX_COUNT}, got {HUGE_SEED}" in refused.stderr
    largest = remat(*args, str(MAX_COUNT))
    assert largest.returncode == 0, largest.stderr


# 4. Solver options the solver does not know: one ConfigurationError naming them, on every plug-in.


@pytest.mark.parametrize("time_limit", [None, 30.0])
@pytest.mark.parametrize(
    "spec",
    [
        "pyomo",
        "pyomo:highs",
        "pyomo:cbc",
        "pyomo:appsi_cbc",
        "pyomo:glpk",
        "pyomo:gurobi_direct",
        "pyomo:appsi_gurobi",
        "cvxpy",
        "cvxpy:gurobi",
        "cvxpy:scipy",
    ],
)
def test_an_unknown_solver_option_is_a_configuration_error_naming_it(spec: str, time_limit: float | None) -> None:
    backend = _backend(spec)
    limits = SolveLimits(time_limit=time_limit, solver_options={"bogus_kw": 1})
    with pytest.raises(ConfigurationError, match=r"solver option bogus_kw=1 rejected"):
        backend.solve(_cover(40, 12), limits)


@pytest.mark.parametrize(
    ("spec", "options"),
    [("pyomo", {"mip_rel_gap": 0.5}), ("pyomo:cbc", {"ratio": 0.5}), ("cvxpy", {"mip_rel_gap": 0.5})],
)
def test_a_known_solver_option_still_reaches_the_solver(spec: str, options: dict[str, float]) -> None:
    """A 50 % gap ends the cover MIP at once as optimal (without it HiGHS runs to the 30 s limit)."""
    result = _backend(spec).solve(_cover(), SolveLimits(time_limit=30, solver_options=options))
    assert result.status == SolveStatus.OPTIMAL and result.wall_time < 25


@pytest.mark.parametrize("backend", ["pyomo", "cvxpy"])
def test_cli_unknown_solver_option(tiny: tuple[Path, str], backend: str) -> None:
    path, budget = tiny
    run = remat("solve", path, "-b", budget, "-f", "checkmate", "--backend", backend, "-S", "bogus_kw=1")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "solver option bogus_kw=1 rejected" in run.stderr


def test_pyomo_persistent_plugins_get_the_model() -> None:
    model, optimum = SUITE["knapsack"]()
    result = _backend("pyomo:gurobi_persistent").solve(model, SolveLimits(time_limit=30))
    assert result.status == SolveStatus.OPTIMAL and result.objective == pytest.approx(optimum)


# 5. Pyomo and CVXPY hold the time limit; values at a limit that are no solution are no solution.


@pytest.mark.parametrize("spec", ["cvxpy", "pyomo"])
def test_values_at_a_limit_without_an_incumbent_are_no_solution(spec: str) -> None:
    """HiGHS stopped at the root without heuristics hands CVXPY its fractional LP values (status user_limit)."""
    result = _backend(spec).solve(_cover(), SolveLimits(solver_options=NO_INCUMBENT))
    assert result.status == SolveStatus.NO_SOLUTION and result.x is None and not result.values


@pytest.mark.exclusive  # its outcome depends on time within a limit (tests/conftest.py)
@pytest.mark.parametrize("backend", ["pyomo", "cvxpy"])
def test_pyomo_and_cvxpy_hold_the_time_limit_and_fall_back_to_the_warm_start(backend: str) -> None:
    """Checkmate of a 199-node transformer: Pyomo took 6 s to build it and ran 15-30 s under a 5 s limit."""
    _backend(backend)
    graph = transformer(8, 1)  # remat graph generate transformer --size 8 --seed 1
    budget = parse_budget("70%", graph)
    started = time.perf_counter()
    result = plan(graph, budget, formulation="checkmate", backend=backend, time_limit=3)
    wall = time.perf_counter() - started
    assert result.outcome is not None
    solve = result.outcome.phases["solve"]
    assert solve.wall_time < hard_deadline(3) + 2.0, solve.wall_time  # fork, lowering and the answer's way back
    assert result.solver_status in (SolveStatus.NO_SOLUTION, SolveStatus.FEASIBLE, SolveStatus.OPTIMAL_IN_MODEL)
    assert result.status == PlanStatus.WITHIN_BUDGET  # no solution: the warm start (never an undecodable one)
    assert wall < 30, wall
