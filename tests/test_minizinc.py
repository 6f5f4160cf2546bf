import json
import subprocess
import time

import numpy as np
import pytest
from model_suite import SUITE, mixed_continuous

from remat_models.backends import available, get_backend
from remat_models.backends.base import SolveLimits, SolveStatus
from remat_models.backends.export import export
from remat_models.backends.minizinc import DEFAULT_SOLVER, solver_problem
from remat_models.errors import BackendUnavailableError, ConfigurationError, UnsupportedConstructError
from remat_models.model import Model

pytestmark = pytest.mark.skipif(
    "minizinc" not in available(), reason=f"MiniZinc is not usable here: {solver_problem(DEFAULT_SOLVER)}"
)


def solve_with_binary(path, timeout: float = 60):
    """Run the real `minizinc` binary on an exported .mzn/.dzn pair; return x of the best solution."""
    out = subprocess.run(
        ["minizinc", "--solver", "gecode", "--output-mode", "json", str(path), str(path.with_suffix(".dzn"))],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    ).stdout
    assert "==========" in out  # search complete: optimal
    solutions = [json.loads(chunk) for chunk in out.split("----------") if chunk.strip().startswith("{")]
    return np.array(solutions[-1]["x"], dtype=float)


@pytest.mark.parametrize("name", list(SUITE))
def test_exported_mzn_solved_by_binary_matches_optimum(tmp_path, name):
    model, opt = SUITE[name]()
    path = export(model, tmp_path / "m.mzn")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.dzn", "m.mzn"]
    x = solve_with_binary(path)[: model.num_cols]
    assert model.check(x) == []
    assert model.objective_value(x) == pytest.approx(opt)
    assert get_backend("cpsat").solve(model).objective == pytest.approx(opt)


def test_export_lowers_what_minizinc_lacks_and_rejects_continuous(tmp_path):
    with pytest.raises(UnsupportedConstructError, match=r"'continuous'.*highs"):
        export(mixed_continuous()[0], tmp_path / "m.mzn")
    assert list(tmp_path.iterdir()) == []


def test_continuous_rejected_naming_takers():
    with pytest.raises(UnsupportedConstructError, match=r"'continuous'.*natively: .*gurobi.*highs"):
        get_backend("minizinc").solve(mixed_continuous()[0])


def test_unknown_and_missing_solvers():
    with pytest.raises(ConfigurationError, match="no option 'nonsense'"):
        get_backend("minizinc:nonsense")
    with pytest.raises(BackendUnavailableError, match=r"minizinc:chuffed.*minizinc\.org"):
        if solver_problem("chuffed") is None:
            pytest.skip("chuffed is installed here")
        get_backend("minizinc:chuffed")
    assert get_backend("minizinc:gecode").spec == "minizinc:gecode"


def test_configured_solver_without_library_is_unavailable():
    import minizinc

    try:
        minizinc.Solver.lookup("xpress")
    except LookupError:
        pytest.skip("MiniZinc lists no Xpress configuration here")
    if solver_problem("xpress") is None:
        pytest.skip("Xpress runs here")
    with pytest.raises(BackendUnavailableError, match="configured but does not run"):
        get_backend("minizinc:xpress")


def test_fractional_coefficients_are_scaled():
    m = Model()
    x = m.int_block("x", 2, 0, 10)
    m.add(0.5 * x[0] + 0.25 * x[1] <= 2.6)  # 2 x0 + x1 <= 10
    m.maximize(1.5 * x[0] + 0.1 * x[1])
    res = get_backend("minizinc").solve(m)
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(get_backend("highs").solve(m).objective)
    assert m.check(res.values) == []
    bad = Model()
    y = bad.int_block("y", 1, 0, 3)
    bad.add(y[0] * (1 / 3) <= 1)
    with pytest.raises(UnsupportedConstructError, match="decimals"):
        get_backend("minizinc").solve(bad)


def test_unbounded_integers_infeasible_and_satisfy():
    m = Model()
    k = m.int_block("k", 2, -np.inf, np.inf)
    m.add(k[0] - k[1] == 7)
    m.add(k[0] >= -3)
    m.minimize(k[0])
    res = get_backend("minizinc").solve(m)
    assert res.status == SolveStatus.OPTIMAL and res.values["k"].tolist() == [-3, -10]
    m.add(k[1] >= 0)
    m.add(k[0] <= 5)
    assert get_backend("minizinc").solve(m).status == SolveStatus.INFEASIBLE
    free = Model()
    b = free.bool_block("b", 3)
    free.add(b.sum() == 2)
    res = get_backend("minizinc").solve(free)
    assert res.status == SolveStatus.OPTIMAL and res.values["b"].sum() == 2


def test_partial_hint_accepted():
    model, opt = SUITE["scheduling"]()
    hint = {"t.presence": [1, np.nan, 1, 1]}
    res = get_backend("minizinc").solve(model, hints=hint)
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(opt)


def _random_reservoir(seed):
    rng = np.random.default_rng(seed)
    m = Model(f"res{seed}")
    n = 5
    t = m.int_block("t", n, 0, 4)
    act = m.bool_block("act", n)
    changes = rng.integers(-3, 4, size=n)
    lits = [act[i] if rng.random() < 0.5 else ~act[i] for i in range(n)]
    m.add_reservoir([t[i] for i in range(n)], changes, lits, min_level=-2, max_level=3)
    m.maximize(t.dot(rng.integers(-2, 3, size=n)) + act.dot(rng.integers(-3, 4, size=n)))
    return m


@pytest.mark.parametrize("seed", range(6))
def test_reservoir_decomposition_agrees_with_cpsat(seed):
    model = _random_reservoir(seed)
    ref = get_backend("cpsat").solve(model)
    res = get_backend("minizinc").solve(model)
    assert res.status == ref.status == SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(ref.objective)
    assert model.check(res.values) == []


def test_solve_prints_nothing(capfd):
    model, _ = SUITE["scheduling"]()
    get_backend("minizinc").solve(model, SolveLimits(log=True))
    assert capfd.readouterr() == ("", "")


@pytest.mark.bench
def test_write_100k_variables_quickly(tmp_path):
    from remat_models.backends import mzn

    rng = np.random.default_rng(0)
    n = 100_000
    m = Model("big")
    x = m.bool_block("x", n)
    m.add_rows(np.repeat(np.arange(n), 3), rng.integers(0, n, 3 * n), np.ones(3 * n), -np.inf, 2)
    m.maximize(x.dot(rng.integers(1, 10, n)))
    start = time.perf_counter()
    mzn.write(m, tmp_path / "m.mzn", tmp_path / "m.dzn")
    assert time.perf_counter() - start < 5


def _byte_graph(big: int, small: int):
    """A 7-node training graph with values of ``big`` and ``small`` bytes (byte gcd 1 when small is 1)."""
    from remat_models import Graph, Node, NodeKind

    F, L, B = NodeKind.FORWARD, NodeKind.LOSS, NodeKind.BACKWARD
    sizes = {"a": (big, F), "b": (small, F), "c": (big, F), "L": (small, L), "gc": (big, B), "gb": (small, B)}
    nodes = [Node(name, 1.0, mem, kind=kind) for name, (mem, kind) in {**sizes, "ga": (big, B)}.items()]
    edges = [("a", "b"), ("b", "c"), ("c", "L"), ("L", "gc"), ("c", "gc"), ("gc", "gb"), ("b", "gb")]
    return Graph(nodes, [*edges, ("gb", "ga"), ("a", "ga")])


@pytest.mark.parametrize("method", ["checkmate", "hilp"])
def test_byte_capacities_past_1e9_are_not_clipped(method):
    """Regression: finite bounds were clipped to 10**9, so a capacity of 1.2e9 bytes (byte gcd 1) became 1e9 and
    MiniZinc claimed a cost-8 schedule optimal; the optimum (CP-SAT, same model) is 7."""
    from remat_models.core.schedule import input_order_peak
    from remat_models.planning.plan import plan

    graph = _byte_graph(4 * 10**8, 1)
    budget = input_order_peak(graph)  # 1,200,000,002 bytes: in Gecode's range, past the old clip
    ours, ref = (plan(graph, budget, f"{method}/{b}", init=None) for b in ("minizinc", "cpsat"))
    assert ours.solver_status == ref.solver_status == SolveStatus.OPTIMAL_IN_MODEL
    assert ours.simulation.total_cost == ref.simulation.total_cost == 7.0
    assert ours.simulation.peak <= budget


def test_integers_past_gecodes_range_raise_naming_them(tmp_path):
    """Regression (H-ILP on ~1,000-node graphs): a capacity or size past 2**31 - 2 model units reached Gecode's
    FlatZinc reader as 'invalid integer literal ... syntax error'; now a typed error names the number."""
    from remat_models.planning.plan import plan

    graph = _byte_graph(2**33, 4)  # unit 4 bytes: values of 2**31 units
    with pytest.raises(UnsupportedConstructError, match=r"minizinc:gecode takes integers within \+-2,147,483,646"):
        plan(graph, 5 * 2**33, "hilp/minizinc", init=None)
    m = Model()
    x = m.bool_block("x", 3)
    m.add(x.sum() >= 1)
    m.maximize(x.dot(np.full(3, 2e9)))  # each coefficient fits; the objective's range (6e9) does not
    with pytest.raises(UnsupportedConstructError, match=r"6,000,000,000 \(a value the objective can take"):
        get_backend("minizinc").solve(m)
    big = Model()
    y = big.int_block("y", 1, 0, 3e9)
    big.add(y[0] >= 2e9)
    big.minimize(y.sum())
    with pytest.raises(UnsupportedConstructError, match=r"3,000,000,000 \(a column bound: col_ub\)"):
        get_backend("minizinc").solve(big)
    path = export(big, tmp_path / "big.mzn")  # exports are for any solver: MiniZinc's own integers are 64-bit
    assert "col_ub = [3000000000];" in path.with_suffix(".dzn").read_text()
    checked = subprocess.run(
        ["minizinc", "--instance-check-only", str(path), str(path.with_suffix(".dzn"))], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
