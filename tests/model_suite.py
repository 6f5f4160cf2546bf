"""Small models shared by the model and backend tests: name -> builder returning (model, optimum)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from remat_models.model import Model


def knapsack() -> tuple[Model, float]:
    m = Model("knapsack")
    x = m.bool_block("x", 6)
    m.add(x.dot([3, 4, 5, 6, 2, 7]) <= 14)
    m.maximize(x.dot([4, 5, 7, 8, 2, 9]))
    return m, 19.0


def assignment() -> tuple[Model, float]:
    m = Model("assignment")
    cost = np.array([[4, 2, 8], [4, 3, 7], [3, 1, 6]])
    x = m.bool_block("x", (3, 3))
    r = np.arange(3)
    m.add_rows(np.repeat(r, 3), x.cols.ravel(), np.ones(9), 1, 1)  # one task per worker
    m.add_rows(np.tile(r, 3), x.cols.ravel(), np.ones(9), 1, 1)  # one worker per task
    m.minimize(x.dot(cost))
    return m, 12.0


def implications() -> tuple[Model, float]:
    m = Model("implications")
    a = m.bool_block("a", 4)
    k = m.int_block("k", 2, 0, 3)
    m.add_indicator(a[0], a[1] + a[2] <= 0)
    m.add_indicator(~a[3], k[0] - k[1] >= 2)
    m.add_indicator(a[1], k[0] + k[1] <= 2)
    m.add(a[2] + a[3] <= 1)
    m.maximize(3 * a.sum((slice(0, 3),)) + 2 * a[3] + k.sum())
    return m, 11.0


def scheduling() -> tuple[Model, float]:
    m = Model("scheduling")
    iv = m.interval_block("t", 4, start=(0, 5), size=[2, 3, 2, 1], optional=True)
    m.add_cumulative(iv, [2, 1, 2, 3], 3)
    mk = m.int_block("mk", (), 0, 10)
    m.add_rows(np.repeat(np.arange(4), 2), np.c_[iv.end.cols, np.full(4, mk.offset)].ravel(), np.tile([1, -1], 4), ub=0)
    m.maximize(10 * iv.presence.dot([2, 3, 2, 4]) - mk.sum())
    return m, 105.0


def variable_capacity() -> tuple[Model, float]:
    """A cumulative whose capacity is ``k + 1`` for a variable k: minimize 4 k + the sum of the ends."""
    m = Model("variable_capacity")
    iv = m.interval_block("t", 3, start=(0, 2), size=[2, 1, 2])
    k = m.int_block("k", 1, 0, 5)
    m.add_cumulative(iv, [2, 3, 1], k[0] + 1)
    m.minimize(4 * k[0] + iv.end.sum())
    return m, 15.0  # k = 2 (demand 3 alone), t0 and t2 together at 0, t1 at 2: 8 + 2 + 3 + 2


def reservoir() -> tuple[Model, float]:
    m = Model("reservoir")
    t = m.int_block("time", 3, 0, 2)
    act = m.bool_block("act", 3)
    m.add_reservoir([t[0], t[1], t[2] + 1], [2, -1, -2], [act[0], act[1], ~act[2]], min_level=0, max_level=2)
    m.maximize(2 * act[1] + act[2] + t.sum() - 2 * act[0])
    return m, 7.0


def product() -> tuple[Model, float]:
    m = Model("product")
    b = m.bool_block("b", 2)
    x = m.int_block("x", 2, [1, 0], [3, 4])
    z = m.int_block("z", 2, 0, 4)
    m.add_products(z.cols, b.cols, x.cols)
    m.add(b.sum() <= 1)
    m.add(x.sum() <= 5)
    m.maximize(3 * z.sum() + x[0] - 2 * b[1])
    return m, 12.0


def all_different() -> tuple[Model, float]:
    m = Model("all_different")
    x = m.int_block("x", 3, 0, 3)
    m.add_all_different([x[0], x[1], x[2] + 1])
    m.add(x[0] + x[1] >= 3)
    m.minimize(x.dot([2, 3, 1]))
    return m, 6.0


def mixed_continuous() -> tuple[Model, float]:
    m = Model("mixed")
    y = m.bool_block("y", 2)
    c = m.cont_block("c", 2, 0.0, 2.5)
    m.add(c[0] + c[1] <= 3.5)
    m.add_indicator(~y[0], c[0] <= 0)
    m.add_indicator(~y[1], c[1] <= 0)
    m.maximize(2 * c.sum() - y.sum())
    return m, 5.0


SUITE: dict[str, Callable[[], tuple[Model, float]]] = {
    f.__name__: f
    for f in (knapsack, assignment, implications, scheduling, variable_capacity, reservoir, product, all_different)
}
BRUTE_FORCE = ("knapsack", "assignment", "implications", "variable_capacity", "reservoir", "product", "all_different")


def brute_force(m: Model) -> float:
    """Optimum of a tiny all-integer model by enumerating every assignment and checking it."""
    lb, ub = m.col_lb.astype(int), m.col_ub.astype(int)
    best = None
    for point in itertools.product(*(range(lo, hi + 1) for lo, hi in zip(lb, ub, strict=True))):
        x = np.array(point, dtype=float)
        if not m.check(x):
            v = m.objective_value(x)
            if best is None or (v < best if m.sense == "min" else v > best):
                best = v
    assert best is not None, "infeasible"
    return best
