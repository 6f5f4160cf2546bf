import json
import time

import numpy as np
import pytest
from model_suite import SUITE, mixed_continuous

from remat_models.backends import available, get_backend, names, register
from remat_models.backends.base import LoweringBackend, SolveLimits, SolveStatus
from remat_models.backends.export import export
from remat_models.errors import (
    BackendUnavailableError,
    ConfigurationError,
    ModelTooLargeError,
    UnsupportedConstructError,
)
from remat_models.model import Model

BACKENDS = available()


def _takes(backend, model):
    """Whether the backend can take the model (native or lowered)."""
    try:
        backend.compile(model)
    except UnsupportedConstructError:
        return False
    return True


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", [*SUITE, "mixed"])
def test_suite_optimum_and_solution_checks(backend, name):
    model, opt = SUITE[name]() if name in SUITE else mixed_continuous()
    be = get_backend(backend)
    if not _takes(be, model):
        pytest.skip(f"{backend} does not take {name}")
    res = be.solve(model, SolveLimits(time_limit=20))
    assert res.status == SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(opt, abs=1e-6)
    assert res.bound == pytest.approx(opt, abs=1e-6)
    assert res.gap == pytest.approx(0, abs=1e-6)
    assert model.check(res.values) == []
    assert set(res.values) == set(model.blocks)
    assert json.loads(res.to_json())["status"] == "optimal"


def test_both_solvers_in_one_process():
    import highspy
    import ortools

    assert highspy.Highs().version().startswith("1.14")  # newer HiGHS clashes with OR-Tools 9.15 in one process
    assert ortools.__version__.startswith("9.15")
    model, opt = SUITE["knapsack"]()
    assert [get_backend(b).solve(model).objective for b in ("cpsat", "highs")] == [opt, opt]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hinted_optimum_is_first_incumbent(backend):
    model, opt = SUITE["knapsack"]()
    best = get_backend(backend).solve(model)
    res = get_backend(backend).solve(model, hints={"x": best.values["x"]})
    assert res.trajectory and res.trajectory[0][1] == pytest.approx(opt)
    assert res.time_to_first is not None


def _market_split(m_rows=4, n=36, seed=1):
    """Cornuéjols-Dawande market split as min total slack: hard for MIP and CP alike."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, size=(m_rows, n))
    model = Model("market_split")
    x = model.bool_block("x", n)
    sp = model.int_block("sp", m_rows, 0, 10_000)
    sm = model.int_block("sm", m_rows, 0, 10_000)
    rows = np.r_[np.repeat(np.arange(m_rows), n), np.arange(m_rows), np.arange(m_rows)]
    cols = np.r_[np.tile(x.cols, m_rows), sp.cols, sm.cols]
    coefs = np.r_[a.ravel(), np.ones(m_rows), -np.ones(m_rows)]
    rhs = a.sum(axis=1) // 2
    model.add_rows(rows, cols, coefs, rhs, rhs)
    model.minimize(sp.sum() + sm.sum())
    return model


@pytest.mark.parametrize("backend", BACKENDS)
def test_time_limit_is_respected(backend):
    model = _market_split()
    start = time.perf_counter()
    res = get_backend(backend).solve(model, SolveLimits(time_limit=1.0))
    assert time.perf_counter() - start < 1.0 + 5.0  # generous: the machine is shared
    assert res.status in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION)
    if res.status == SolveStatus.FEASIBLE:
        assert model.check(res.values) == [] and res.gap > 0


def test_continuous_rejected_by_cpsat_naming_takers():
    model, _ = mixed_continuous()
    with pytest.raises(UnsupportedConstructError, match=r"'continuous'.*natively: .*highs"):
        get_backend("cpsat").solve(model)


def test_fractional_coefficient_rejected_by_cpsat():
    model = Model()
    x = model.int_block("x", 2, 0, 3)
    model.add(0.5 * x[0] + x[1] <= 2)
    with pytest.raises(UnsupportedConstructError, match="fractional"):
        get_backend("cpsat").solve(model)


def test_size_limit():
    model, _ = SUITE["scheduling"]()
    with pytest.raises(ModelTooLargeError) as err:
        get_backend("highs").solve(model, SolveLimits(max_nonzeros=50))
    assert err.value.estimate["nonzeros"] > 50


def test_lp_relaxation():
    model = Model()
    x = model.bool_block("x", 2)
    model.add(2 * x[0] + 2 * x[1] <= 3)
    model.maximize(x.sum())
    assert get_backend("highs").solve(model).objective == 1.0
    for be in (get_backend("highs:lp"), get_backend("highs").__class__(relax=True)):
        res = be.solve(model)
        assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(1.5)
        assert res.values["x"].dtype == np.float64


class MissingBackend(LoweringBackend):
    name = "missing"
    native_constructs = frozenset()
    module = "no_such_solver_module"
    install_hint = "pip install no-such-solver"

    def _solve_lowered(self, model, limits, hint):
        raise AssertionError


def test_registry_errors():
    with pytest.raises(ConfigurationError, match="unknown backend"):
        get_backend("nope")
    with pytest.raises(ConfigurationError, match="no option"):
        get_backend("cpsat:gecode")
    register("missing", f"{__name__}:MissingBackend")
    assert "missing" in names() and "missing" not in available()
    with pytest.raises(BackendUnavailableError, match="pip install no-such-solver"):
        get_backend("missing")


@pytest.mark.parametrize("suffix", [".lp", ".mps"])
@pytest.mark.parametrize("name", ["scheduling", "implications"])
def test_export_round_trip(tmp_path, suffix, name):
    import highspy

    model, opt = SUITE[name]()
    path = export(model, tmp_path / f"m{suffix}")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(opt)


def test_export_failure_leaves_nothing(tmp_path):
    model = Model()
    b = model.bool_block("b", 1)
    y = model.int_block("y", 1, 0, np.inf)
    model.add_indicator(b[0], y[0] <= 3)  # unbounded: big-M lowering fails
    with pytest.raises(UnsupportedConstructError):
        export(model, tmp_path / "m.lp")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigurationError):
        export(model, tmp_path / "m.xyz")
