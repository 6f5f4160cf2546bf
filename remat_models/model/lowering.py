"""Lowering transforms: rewrite global constructs into linear rows so MILP backends can take them.

Each transform replaces one construct by linear rows (and auxiliary columns appended after the
original ones, so a solution maps back by truncation). Sizes produced (see docs/model.md):

- ``all_different`` over n expressions with domains D_i: ``sum |D_i|`` binaries, ``2n + |U|`` rows
  (U = hull of the domains), ``3 sum |D_i| + nnz(exprs)`` nonzeros.
- ``cumulative`` over n intervals: a reservoir with 2 events per interval of positive demand; a variable
  capacity becomes a variable upper level, i.e. one more row per time step (``level[t] - cap <= const``).
- ``reservoir`` with m events of time domains T_i over horizon H: ``sum |T_i|`` binaries and H
  integer levels, ``3m + H`` rows, ``O(sum |T_i| + H)`` nonzeros, i.e. O(#events * horizon).
- ``interval``: one row per interval (an indicator on presence when optional).
- ``product``: 4 rows (McCormick, exact for a binary factor), 10 nonzeros per product.
- ``indicator``: one big-M row per finite side of the row, M derived from the column bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from remat_models.errors import UnsupportedConstructError
from remat_models.model import constructs as C
from remat_models.model import size as S
from remat_models.model.blocks import IntervalTable
from remat_models.model.core import Model
from remat_models.model.expr import AffineBatch
from remat_models.model.size import SizeEstimate

# Order matters: a transform may emit constructs handled by a later one.
ORDER = (C.ALL_DIFFERENT, C.CUMULATIVE, C.RESERVOIR, C.INTERVAL, C.PRODUCT, C.INDICATOR)


@dataclass(frozen=True)
class LoweredModel:
    """A model holding only native constructs, and how to map its solutions back."""

    model: Model
    original: Model

    def restore(self, x: np.ndarray) -> np.ndarray:
        """Flat values of the original columns from flat values of the lowered model."""
        return x[: self.original.num_cols]


def effective_native(native: frozenset[str]) -> frozenset[str]:
    """Native constructs that can be kept: a native cumulative needs native intervals."""
    return native - {C.CUMULATIVE} if C.INTERVAL not in native else native


def lower(model: Model, native: frozenset[str]) -> LoweredModel:
    """Rewrite every non-native construct into linear rows; raise if one has no transform."""
    native = _with_variable_levels(model, effective_native(native))
    missing = model.constructs() - native - set(ORDER)
    if missing:
        raise UnsupportedConstructError(f"no lowering for construct(s) {', '.join(sorted(missing))}")
    m = model.copy()
    for construct in ORDER:
        if construct not in native:
            _TRANSFORMS[construct](m)
    return LoweredModel(m, model)


def estimate(model: Model, native: frozenset[str] | None = None) -> SizeEstimate:
    """Size of the model after lowering for ``native`` (None: as it stands), without building it."""
    if native is None:
        return S.model_size(model)
    return S.model_size(model) + lowering_delta(model, _with_variable_levels(model, effective_native(native)))


def _with_variable_levels(model: Model, native: frozenset[str]) -> frozenset[str]:
    """A lowered variable-capacity cumulative is a reservoir with a variable upper level: that one is lowered too."""
    if C.CUMULATIVE not in native and any(cu.capacity_col >= 0 for cu in model.cumulatives):
        return native - {C.RESERVOIR}
    return native


def lowering_delta(model: Model, native: frozenset[str]) -> SizeEstimate:
    """Change in size caused by lowering every construct outside ``native``."""
    delta = SizeEstimate()
    lb, ub = model.col_lb, model.col_ub
    if C.ALL_DIFFERENT not in native:
        for ad in model.all_different:
            lo, hi = _int_bounds(ad.exprs, lb, ub, C.ALL_DIFFERENT)
            d = int((hi - lo + 1).sum())
            n = ad.exprs.size
            u = int(hi.max() - lo.min() + 1) if n else 0
            delta += SizeEstimate(d, d, 2 * n + u, 3 * d + len(ad.exprs.cols)) - S.all_different(ad)
    reservoirs = list(model.reservoirs)
    if C.CUMULATIVE not in native:
        for cu in model.cumulatives:
            res = _cumulative_reservoir(model, cu)
            delta += S.reservoir(res) - S.cumulative(cu)
            reservoirs.append(res)
    if C.RESERVOIR not in native:
        for res in reservoirs:
            lo, hi = _int_bounds(res.times, lb, ub, C.RESERVOIR)
            t = (hi - lo + 1).astype(np.int64)
            h = int(hi.max() - lo.min() + 1) if res.times.size else 0
            n_act = int((res.active_cols >= 0).sum())
            ev = res.times.size
            nnz = int(t.sum()) + n_act + 2 * (len(res.times.cols) + int(t.sum()) + n_act)
            nnz += max(2 * h - 1, 0) + int(t[res.changes != 0].sum())
            cap_rows = h if res.max_level_col >= 0 else 0
            nnz += 2 * cap_rows
            delta += SizeEstimate(int(t.sum()) + h, int(t.sum()) + h, 3 * ev + h + cap_rows, nnz) - S.reservoir(res)
    indicators = list(model.indicators)
    if C.INTERVAL not in native:
        iv = model.intervals
        n, opt = len(iv.start), iv.presence >= 0
        row_nnz = 2 + (iv.size_col >= 0).astype(np.int64)
        plain = SizeEstimate(0, 0, int((~opt).sum()), int(row_nnz[~opt].sum()))
        delta += plain - SizeEstimate(0, 0, n, int(S.interval_nnz(iv)))
        if opt.any():
            ind = _interval_indicators(iv, opt)
            delta += S.indicator(ind)
            indicators.append(ind)
    if C.PRODUCT not in native:
        for p in model.products:
            delta += SizeEstimate(0, 0, 4 * len(p.z), 10 * len(p.z)) - S.product(p)
    if C.INDICATOR not in native:
        for ind in indicators:
            finite = np.isfinite(ind.rows.lb).astype(np.int64) + np.isfinite(ind.rows.ub)
            per_row = np.bincount(ind.rows.rows, minlength=ind.rows.num_rows) + 1
            delta += SizeEstimate(0, 0, int(finite.sum()), int((finite * per_row).sum())) - S.indicator(ind)
    return delta


# ------------------------------------------------------------------------------------- transforms
def _lower_all_different(m: Model) -> None:
    lb, ub = m.col_lb, m.col_ub
    for k, ad in enumerate(m.all_different):
        e = ad.exprs
        lo, hi = _int_bounds(e, lb, ub, C.ALL_DIFFERENT)
        dom = (hi - lo + 1).astype(np.int64)
        owner = np.repeat(np.arange(e.size), dom)  # expression of each assignment binary
        value = lo[owner] + _ranks(dom)
        b = m.bool_block(f"_lower.all_different{k}.assign", int(dom.sum())).offset + np.arange(len(owner))
        m.add_rows(owner, b, np.ones(len(b)), 1.0, 1.0)
        m.add_rows(
            np.concatenate([e.rows(), owner]),
            np.concatenate([e.cols, b]),
            np.concatenate([e.coefs, -value]),
            -e.const,
            -e.const,
        )
        vmin = int(lo.min()) if e.size else 0
        n_vals = int(hi.max()) - vmin + 1 if e.size else 0
        m.add_rows((value - vmin).astype(np.int64), b, np.ones(len(b)), -np.inf, np.ones(n_vals))
    m.all_different = []


def _lower_cumulative(m: Model) -> None:
    m.reservoirs = m.reservoirs + [_cumulative_reservoir(m, cu) for cu in m.cumulatives]
    m.cumulatives = []


def _lower_reservoir(m: Model) -> None:
    lb, ub = m.col_lb, m.col_ub
    for k, res in enumerate(m.reservoirs):
        e = res.times
        lo, hi = _int_bounds(e, lb, ub, C.RESERVOIR)
        dom = (hi - lo + 1).astype(np.int64)
        owner = np.repeat(np.arange(e.size), dom)
        tval = lo[owner] + _ranks(dom)
        w = m.bool_block(f"_lower.reservoir{k}.at", int(dom.sum())).offset + np.arange(len(owner))
        t0 = int(lo.min()) if e.size else 0
        h = int(hi.max()) - t0 + 1 if e.size else 0
        top = res.max_level + (ub[res.max_level_col] if res.max_level_col >= 0 else 0)
        level = m.int_block(f"_lower.reservoir{k}.level", h, res.min_level, top).offset + np.arange(h)
        if res.max_level_col >= 0:  # level[t] - x[col] <= max_level: linear with a variable right-hand side
            steps = np.arange(h)
            m.add_rows(
                np.r_[steps, steps],
                np.r_[level, np.full(h, res.max_level_col)],
                np.r_[np.ones(h), -np.ones(h)],
                -np.inf,
                float(res.max_level),
            )
        act = res.active_cols >= 0
        ev = np.arange(e.size)
        # sum_t w[i, t] == active_i, i.e. sum_t w - coef * x == const (literal = x or 1 - x or 1)
        a_cols, a_coef, a_const = C.literal_terms(res.active_cols, res.active_neg, 1.0)
        m.add_rows(
            np.concatenate([owner, ev[act]]),
            np.concatenate([w, a_cols[act]]),
            np.concatenate([np.ones(len(w)), -a_coef[act]]),
            a_const,
            a_const,
        )
        # time_i - sum_t t w[i, t] in [lo_i (1 - active_i), hi_i (1 - active_i)]: equal when active, free otherwise
        for bound, is_lower in ((lo, True), (hi, False)):
            _, b_coef, b_const = C.literal_terms(res.active_cols, res.active_neg, bound)
            rhs = bound - b_const - e.const
            m.add_rows(
                np.concatenate([e.rows(), owner, ev[act]]),
                np.concatenate([e.cols, w, a_cols[act]]),
                np.concatenate([e.coefs, -tval, b_coef[act]]),
                rhs if is_lower else -np.inf,
                np.inf if is_lower else rhs,
            )
        # level[t] - level[t-1] - sum_i change_i w[i, t] == 0
        moving = res.changes[owner] != 0
        steps = np.arange(1, h)
        m.add_rows(
            np.concatenate([np.arange(h), steps, (tval - t0)[moving]]),
            np.concatenate([level, level[:-1], w[moving]]),
            np.concatenate([np.ones(h), -np.ones(h - 1), -res.changes[owner][moving]]),
            0.0,
            np.zeros(h),
        )
    m.reservoirs = []


def _lower_interval(m: Model) -> None:
    iv = m.intervals
    opt = iv.presence >= 0
    m.append_batch(_interval_rows(iv, np.flatnonzero(~opt)), name="_lower.interval")
    if opt.any():
        m.indicators = [*m.indicators, _interval_indicators(iv, opt)]
    m.interval_blocks = []


def _lower_product(m: Model) -> None:
    lb, ub = m.col_lb, m.col_ub
    for p in m.products:
        lo, hi = lb[p.x], ub[p.x]
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            raise UnsupportedConstructError("product lowering needs finite bounds on the factor x")
        n = len(p.z)
        r = np.arange(n)
        one = np.ones(n)
        # z - U b <= 0; z - L b >= 0; z - x - L b <= -L; z - x - U b >= -U
        m.add_rows(np.r_[r, r], np.r_[p.z, p.b], np.r_[one, -hi], -np.inf, 0.0)
        m.add_rows(np.r_[r, r], np.r_[p.z, p.b], np.r_[one, -lo], 0.0, np.inf)
        m.add_rows(np.r_[r, r, r], np.r_[p.z, p.x, p.b], np.r_[one, -one, -lo], -np.inf, -lo)
        m.add_rows(np.r_[r, r, r], np.r_[p.z, p.x, p.b], np.r_[one, -one, -hi], -hi, np.inf)
    m.products = []


def _lower_indicator(m: Model) -> None:
    lb, ub = m.col_lb, m.col_ub
    for ind in m.indicators:
        rb = ind.rows
        act_lo, act_hi = rb.to_affine().bounds(lb, ub)
        for side, is_upper in ((rb.ub, True), (rb.lb, False)):
            sel = np.flatnonzero(np.isfinite(side))
            big_m = (act_hi[sel] - side[sel]) if is_upper else (side[sel] - act_lo[sel])
            if not np.isfinite(big_m).all():
                raise UnsupportedConstructError("indicator lowering (big-M) needs finite bounds on the row's columns")
            big_m = np.maximum(big_m, 0.0)
            # upper: a.x <= ub + M (1 - lit); lower: a.x >= lb - M (1 - lit); lit = x or 1 - x
            sign = 1.0 if is_upper else -1.0
            _, lit_coef, lit_const = C.literal_terms(ind.lit_cols[sel], ind.lit_neg[sel], sign * big_m)
            rhs = side[sel] + sign * big_m - lit_const
            pos = np.full(rb.num_rows, -1, dtype=np.int64)
            pos[sel] = np.arange(len(sel))
            keep = pos[rb.rows] >= 0
            m.add_rows(
                np.concatenate([pos[rb.rows][keep], np.arange(len(sel))]),
                np.concatenate([rb.cols[keep], ind.lit_cols[sel]]),
                np.concatenate([rb.coefs[keep], lit_coef]),
                -np.inf if is_upper else rhs,
                rhs if is_upper else np.inf,
            )
    m.indicators = []


_TRANSFORMS: dict[str, Callable[[Model], None]] = {
    C.ALL_DIFFERENT: _lower_all_different,
    C.CUMULATIVE: _lower_cumulative,
    C.RESERVOIR: _lower_reservoir,
    C.INTERVAL: _lower_interval,
    C.PRODUCT: _lower_product,
    C.INDICATOR: _lower_indicator,
}


# ---------------------------------------------------------------------------------------- helpers
def _ranks(lengths: np.ndarray) -> np.ndarray:
    """0, 1, ..., lengths[0]-1, 0, 1, ..., lengths[1]-1, ... (vectorized)."""
    total = int(lengths.sum())
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(total, dtype=np.int64) - starts


def _int_bounds(e: AffineBatch, lb: np.ndarray, ub: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = e.bounds(lb, ub)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise UnsupportedConstructError(
            f"{what} lowering needs bounded integer expressions (time-indexed/value-indexed)"
        )
    return np.ceil(lo - 1e-9), np.floor(hi + 1e-9)


def _cumulative_reservoir(m: Model, cu: C.Cumulative) -> C.Reservoir:
    """A cumulative as a reservoir: +demand at each start, -demand at each end (intervals of demand > 0)."""
    iv = m.intervals
    ids, d = cu.interval_ids[cu.demands > 0], cu.demands[cu.demands > 0]
    return C.Reservoir(
        times=AffineBatch.from_cols(np.concatenate([iv.start[ids], iv.end[ids]])),
        changes=np.concatenate([d, -d]),
        active_cols=np.concatenate([iv.presence[ids], iv.presence[ids]]),
        active_neg=np.zeros(2 * len(ids), bool),
        min_level=0,
        max_level=cu.capacity,
        max_level_col=cu.capacity_col,
    )


def _interval_rows(iv: IntervalTable, sel: np.ndarray) -> C.RowBatch:
    """``start + size - end == 0`` for the intervals ``sel``."""
    has_size = iv.size_col[sel] >= 0
    n = len(sel)
    rhs = -iv.fixed_size[sel] * ~has_size
    return C.RowBatch.make(
        np.concatenate([np.arange(n), np.arange(n), np.flatnonzero(has_size)]),
        np.concatenate([iv.start[sel], iv.end[sel], iv.size_col[sel][has_size]]),
        np.concatenate([np.ones(n), -np.ones(n), np.ones(int(has_size.sum()))]),
        rhs,
        rhs,
        num_rows=n,
    )


def _interval_indicators(iv: IntervalTable, opt: np.ndarray) -> C.IndicatorBatch:
    """``presence => start + size - end == 0`` for the optional intervals."""
    sel = np.flatnonzero(opt)
    return C.IndicatorBatch(iv.presence[sel], np.zeros(len(sel), bool), _interval_rows(iv, sel))
