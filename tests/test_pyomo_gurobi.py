import time

import numpy as np
import pytest
from model_suite import SUITE, mixed_continuous

from remat_models.backends import available, get_backend
from remat_models.backends.base import SolveLimits, SolveStatus
from remat_models.errors import BackendUnavailableError, ConfigurationError, ModelTooLargeError
from remat_models.model import Model

needs_pyomo = pytest.mark.skipif("pyomo" not in available(), reason="pyomo (with appsi_highs) is not installed")
needs_gurobi = pytest.mark.skipif("gurobi" not in available(), reason="gurobipy is not installed")


def _pyomo_solver_usable(name):
    try:
        get_backend(f"pyomo:{name}")
    except BackendUnavailableError:
        return False
    return True


# ------------------------------------------------------------------------------------------ pyomo
@needs_pyomo
@pytest.mark.parametrize("solver", ["cbc", "glpk", "highs"])
def test_pyomo_other_solvers_reach_the_optimum(solver):
    if not _pyomo_solver_usable(solver):
        pytest.skip(f"Pyomo finds no {solver} here")
    be = get_backend(f"pyomo:{solver}")
    for name, build in [*SUITE.items(), ("mixed", mixed_continuous)]:
        model, opt = build()
        res = be.solve(model, SolveLimits(time_limit=20))
        assert res.status == SolveStatus.OPTIMAL, name
        assert res.objective == pytest.approx(opt), name
        assert model.check(res.values) == [], name


@needs_pyomo
def test_pyomo_solver_names():
    with pytest.raises(ConfigurationError, match="no option 'nonsense'"):
        get_backend("pyomo:nonsense")
    if not _pyomo_solver_usable("cplex"):  # a name Pyomo knows, whose solver is absent
        with pytest.raises(BackendUnavailableError, match="pyomo:cplex"):
            get_backend("pyomo:cplex")
    assert get_backend("pyomo").solver_name == "appsi_highs"


@needs_pyomo
def test_pyomo_glpk_time_limit_and_hint():
    if not _pyomo_solver_usable("glpk"):
        pytest.skip("Pyomo finds no glpk here")
    model, opt = SUITE["knapsack"]()
    res = get_backend("pyomo:glpk").solve(model, SolveLimits(time_limit=0.5), hints={"x": [1, 0, 1, 1, 0, 0]})
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(opt)


@pytest.mark.bench
@needs_pyomo
def test_pyomo_build_10k_rows():
    from remat_models.backends.pyomo import build

    rng = np.random.default_rng(0)
    n = 10_000
    m = Model("bench")
    x = m.bool_block("x", n)
    m.add_rows(np.repeat(np.arange(n), 5), rng.integers(0, n, 5 * n), rng.integers(1, 9, 5 * n), -np.inf, 10)
    m.maximize(x.sum())
    start = time.perf_counter()
    pm = build(m)
    assert len(pm.rows) == n
    assert time.perf_counter() - start < 5


# ----------------------------------------------------------------------------------------- gurobi
@needs_gurobi
def test_gurobi_takes_indicators_natively():
    import gurobipy as gp

    from remat_models.backends.gurobi import GurobiBackend, build

    model, _ = SUITE["implications"]()
    lowered = GurobiBackend().compile(model).model
    assert lowered.indicators and lowered.num_rows == model.num_rows
    with gp.Env(params={"OutputFlag": 0}) as env, gp.Model(env=env) as gm:
        build(gm, lowered)
        gm.update()
        assert gm.NumGenConstrs == 3 and gm.NumBinVars == 4 and gm.NumIntVars == 6


@needs_gurobi
def test_gurobi_license_size_limit():
    model = Model("big")
    x = model.bool_block("x", 2500)
    model.add(x.sum() <= 10)
    model.maximize(x.sum())
    try:
        res = get_backend("gurobi").solve(model)
    except ModelTooLargeError as err:
        assert "license" in str(err) and "2500 variables" in str(err)
        assert err.estimate["variables"] == 2500
    else:  # a full license is installed here
        assert res.objective == 10


@needs_gurobi
def test_gurobi_gap_log_and_silence(capfd):
    model, opt = SUITE["scheduling"]()
    res = get_backend("gurobi").solve(model, SolveLimits(mip_gap=0.5, log=True, workers=2))
    assert res.status == SolveStatus.OPTIMAL and res.objective <= opt
    assert res.log and "Gurobi" in res.log
    assert capfd.readouterr() == ("", "")


@needs_gurobi
def test_gurobi_infeasible_and_lp():
    m = Model()
    k = m.int_block("k", 2, 0, 5)
    m.add(k[0] + k[1] >= 11)
    assert get_backend("gurobi").solve(m).status == SolveStatus.INFEASIBLE
    lp = Model()
    c = lp.cont_block("c", 2, 0, 1)
    lp.add(c[0] + 2 * c[1] <= 1.5)
    lp.maximize(c.sum())
    res = get_backend("gurobi").solve(lp)
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(1.25) and res.gap == 0
    assert res.trajectory and res.time_to_first is not None


@pytest.mark.parametrize("backend", ["pyomo", "gurobi"])
def test_solve_prints_nothing(capfd, backend):
    if backend not in available():
        pytest.skip(f"{backend} is not installed")
    model, _ = SUITE["reservoir"]()
    get_backend(backend).solve(model, SolveLimits(time_limit=5), hints={"time": [0, 1, 2]})
    assert capfd.readouterr() == ("", "")


@needs_pyomo
def test_pyomo_leaves_nothing_in_sys_modules_that_breaks_pickling() -> None:
    """Pyomo's placeholders for missing optional modules raise on getattr; pickle.whichmodule walks sys.modules.

    (torch inductor's cache key pickles such objects: a torch.compile after a Pyomo solve failed in one process.)
    """
    import pickle

    from remat_models.backends.pyomo import pyomo_environ

    pyomo_environ()
    assert pickle.whichmodule(5, "no_such_attribute") == "__main__"  # an int has no __module__: every module is asked
