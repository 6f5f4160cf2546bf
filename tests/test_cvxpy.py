"""The cvxpy[:SOLVER] backend (issue 17): solver choice, every installed MILP solver, Checkmate through CVXPY.

The generic backend tests (tests/test_backends.py: suite optima, hints, time limits) run on it too,
since it is in ``available()`` wherever CVXPY and a MILP solver are installed.
"""

from __future__ import annotations

import pytest
from checkmate_graphs import tiny_unet
from model_suite import SUITE, mixed_continuous

from remat_models.backends import available, get_backend
from remat_models.backends.base import SolveLimits, SolveStatus
from remat_models.core.schedule import simulate
from remat_models.errors import BackendUnavailableError, ConfigurationError, UnsupportedConstructError
from remat_models.model import Model
from remat_models.planning.plan import PlanStatus, plan

pytestmark = pytest.mark.skipif("cvxpy" not in available(), reason="cvxpy (with a MILP solver) is not installed")


def _installed() -> list[str]:
    from remat_models.backends.cvxpy import installed_milp_solvers

    return installed_milp_solvers() if "cvxpy" in available() else []


@pytest.mark.parametrize("solver", ["highs", "scipy", "scip", "glpk_mi", "cbc"])
def test_each_installed_milp_solver_reaches_the_optima(solver: str) -> None:
    if solver.upper() not in _installed():
        pytest.skip(f"CVXPY has no {solver.upper()} here")
    backend = get_backend(f"cvxpy:{solver}")
    for name, build in [*SUITE.items(), ("mixed", mixed_continuous)]:
        model, optimum = build()
        try:
            backend.compile(model)
        except UnsupportedConstructError:  # no linear lowering of this construct: not this test's concern
            continue
        result = backend.solve(model, SolveLimits(time_limit=20))
        assert result.status == SolveStatus.OPTIMAL, name
        assert result.objective == pytest.approx(optimum, abs=1e-6), name
        assert model.check(result.values) == [], name


def test_solver_names_and_the_default() -> None:
    with pytest.raises(ConfigurationError, match="no option 'nonsense'"):
        get_backend("cvxpy:nonsense")
    absent = [s for s in ("scip", "cbc", "glpk_mi", "cplex", "mosek") if s.upper() not in _installed()]
    if absent:
        with pytest.raises(BackendUnavailableError, match=f"CVXPY has no {absent[0].upper()} solver here"):
            get_backend(f"cvxpy:{absent[0]}")
    assert get_backend("cvxpy").solver == _installed()[0]


def test_infeasible_and_continuous_models() -> None:
    model = Model()
    k = model.int_block("k", 2, 0, 5)
    model.add(k[0] + k[1] >= 11)
    assert get_backend("cvxpy").solve(model).status == SolveStatus.INFEASIBLE
    lp = Model()
    c = lp.cont_block("c", 2, 0, 1)
    lp.add(c[0] + 2 * c[1] <= 1.5)
    lp.maximize(c.sum())
    result = get_backend("cvxpy").solve(lp)
    assert result.status == SolveStatus.OPTIMAL and result.objective == pytest.approx(1.25) and result.gap == 0


def test_checkmate_through_cvxpy_matches_highs() -> None:
    graph = tiny_unet()
    budget = graph.lower_bound + 2
    ours = plan(graph, budget, formulation="checkmate", backend="cvxpy", time_limit=60)
    reference = plan(graph, budget, formulation="checkmate", backend="highs", time_limit=60)
    assert ours.status is PlanStatus.WITHIN_BUDGET and ours.schedule is not None
    assert simulate(graph, ours.schedule).peak <= budget
    assert ours.details["solver_status"] == "optimal_in_model"
    assert ours.simulation is not None and reference.simulation is not None
    assert ours.simulation.total_cost == pytest.approx(reference.simulation.total_cost)


def test_solve_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    model, _ = SUITE["knapsack"]()
    get_backend("cvxpy").solve(model, SolveLimits(time_limit=5))
    assert capfd.readouterr() == ("", "")


class AbsentBackend:
    """A registered backend whose solver is not installed anywhere."""

    name = "absent"
    install_hint = "pip install no-such-solver-package"
    native_constructs = frozenset()
    options = ()

    @classmethod
    def available(cls) -> bool:
        import importlib.util

        return importlib.util.find_spec("no_such_solver_package") is not None


def test_available_says_what_is_missing_and_how_to_install_it() -> None:
    from typer.testing import CliRunner

    from remat_models.backends import register
    from remat_models.cli.app import app

    register("absent", f"{__name__}:AbsentBackend")
    found = available()
    assert "absent" not in found and "cvxpy" in found
    assert found.missing["absent"] == "pip install no-such-solver-package"
    assert "missing absent: pip install no-such-solver-package" in str(found)
    run = CliRunner().invoke(app, ["backends"])
    assert run.exit_code == 0 and "no-such-solver-package" in run.output and "usable" in run.output
