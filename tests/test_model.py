import numpy as np
import pytest
from model_suite import BRUTE_FORCE, SUITE, brute_force, mixed_continuous

from remat_models.errors import ConfigurationError, ModelTooLargeError, UnsupportedConstructError
from remat_models.model import ALL_CONSTRUCTS, Model, estimate, lower, quicksum
from remat_models.model.size import model_size


def test_blocks_and_expressions():
    m = Model()
    x = m.bool_block("x", (2, 3))
    k = m.int_block("k", 3, lb=[0, 1, 2], ub=5)
    assert (x.offset, x.shape, x.size) == (0, (2, 3), 6)
    assert k.offset == 6 and x[1, 2].col == 5 and k.cols.tolist() == [6, 7, 8]
    m.add(x[0, 1] + 2 * k[0] - 1 <= 3)
    m.add(quicksum(x[0, i] for i in range(3)) == 2)
    m.add(x.sum((1, slice(None))) >= 1)
    m.minimize(k.sum() - x.dot(np.ones(3), (0, slice(None))))
    indptr, _, _, lb, ub = m.linear_csr()
    assert indptr.tolist() == [0, 2, 5, 8]
    assert lb.tolist() == [-np.inf, 2, 1] and ub.tolist() == [4, 2, np.inf]
    assert m.objective_value({"x": np.ones((2, 3)), "k": [1, 1, 2]}) == 1.0
    with pytest.raises(IndexError):
        x[0]
    with pytest.raises(ConfigurationError):
        m.bool_block("x", 2)


def test_duplicate_entries_are_summed_and_zeros_dropped():
    m = Model()
    m.bool_block("x", 3)
    m.add_rows([0, 0, 0, 1], [1, 1, 2, 0], [1.0, 2.0, 0.0, 1.0], lb=0, ub=[3, 1])
    indptr, cols, vals, _, _ = m.linear_csr()
    assert indptr.tolist() == [0, 1, 2] and cols.tolist() == [1, 0] and vals.tolist() == [3.0, 1.0]


def test_check_reports_violations():
    m, _ = SUITE["scheduling"]()
    x = np.zeros(m.num_cols)
    assert any("interval" in v for v in m.check(x)) is False  # all absent: intervals free
    x[m.block("t.presence").cols] = 1
    assert any("interval" in v for v in m.check(x))
    assert m.check(np.full(m.num_cols, np.nan)) == [f"{m.num_cols} values missing (NaN)"]


@pytest.mark.parametrize("name", BRUTE_FORCE)
def test_brute_force_matches_stated_optimum(name):
    m, opt = SUITE[name]()
    assert brute_force(m) == pytest.approx(opt)


NATIVE_SETS = [frozenset(), frozenset({"continuous"}), frozenset({"indicator", "interval"}), ALL_CONSTRUCTS]


@pytest.mark.parametrize("native", NATIVE_SETS, ids=lambda s: "+".join(sorted(s)) or "none")
@pytest.mark.parametrize("name", [*SUITE, "mixed"])
def test_estimate_equals_lowered_size(name, native):
    m, _ = SUITE[name]() if name in SUITE else mixed_continuous()
    lowered = lower(m, native | {"continuous"})
    assert estimate(m, native | {"continuous"}) == model_size(lowered.model)
    assert lowered.model.constructs() <= native | {"continuous"}


def test_lowering_keeps_original_columns():
    m, _ = SUITE["scheduling"]()
    lowered = lower(m, frozenset())
    assert all(lowered.model.blocks[name] == block for name, block in m.blocks.items())
    x = np.arange(lowered.model.num_cols, dtype=float)
    assert lowered.restore(x).tolist() == list(range(m.num_cols))


def test_unsupported_without_lowering():
    m, _ = mixed_continuous()
    with pytest.raises(UnsupportedConstructError, match="continuous"):
        lower(m, frozenset())


def test_unbounded_indicator_cannot_be_lowered():
    m = Model()
    b = m.bool_block("b", 1)
    y = m.int_block("y", 1, 0, np.inf)
    m.add_indicator(b[0], y[0] <= 3)
    with pytest.raises(UnsupportedConstructError, match="big-M"):
        lower(m, frozenset())


def test_model_too_large_carries_estimate():
    m, _ = SUITE["scheduling"]()
    est = estimate(m, frozenset())
    with pytest.raises(ModelTooLargeError, match="too large") as err:
        est.check(max_variables=10, max_nonzeros=None)
    assert err.value.estimate["variables"] == est.variables


def test_time_indexed_size_grows_with_horizon():
    def build(h):
        m = Model()
        iv = m.interval_block("t", 10, start=(0, h), size=2)
        m.add_cumulative(iv, 1, 3)
        return estimate(m, frozenset())

    small, large = build(10), build(100)
    assert large.variables - small.variables == 2 * 10 * 90 + 90  # 2 events per interval + one level per step


def test_flatten_split_roundtrip():
    m, _ = SUITE["product"]()
    vals = {"b": [1, 0], "x": [2, 3], "z": [2, 0]}
    out = m.split(m.flatten(vals))
    assert {k: v.tolist() for k, v in out.items()} == vals
    assert m.check(vals) == []


def test_variable_capacity_is_checked_and_lowered_with_its_reservoir():
    m, _ = SUITE["variable_capacity"]()
    x = m.flatten({"t.start": [0, 2, 0], "t.end": [2, 3, 2], "k": [2]})
    assert m.check(x) == [] and m.objective_value(x) == 15.0
    x[m.block("k").cols] = 1  # capacity 2 < the demand 3 of t1
    assert any("cumulative" in v for v in m.check(x))
    native = frozenset({"reservoir", "interval", "continuous"})  # a reservoir with a variable level is lowered too
    lowered = lower(m, native)
    assert lowered.model.reservoirs == [] and lowered.model.cumulatives == []
    assert estimate(m, native) == model_size(lowered.model)


def test_variable_capacity_must_be_one_integer_variable():
    m = Model()
    iv = m.interval_block("t", 2, start=(0, 3), size=1)
    k = m.int_block("k", 1, 0, 3)
    c = m.cont_block("c", 1, 0, 3)
    for bad in (2 * k[0], k[0] + c[0], k[0] + 0.5):
        with pytest.raises(TypeError, match="variable capacity"):
            m.add_cumulative(iv, 1, bad)
    with pytest.raises(ConfigurationError, match="integer variable"):
        m.add_cumulative(iv, 1, c[0])
    with pytest.raises(ValueError, match=">= 0"):
        m.add_cumulative(iv, 1, k[0] - 1)
