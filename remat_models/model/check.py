"""Evaluate every constraint of a model (globals included) on a solution: the test oracle."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from remat_models.model.constructs import Reservoir, RowBatch

if TYPE_CHECKING:
    from remat_models.model.core import Model


def violations(model: Model, x: np.ndarray, tol: float = 1e-6) -> list[str]:
    """Human-readable violations of ``model`` at the flat column vector ``x``."""
    if len(x) != model.num_cols:
        return [f"expected {model.num_cols} values, got {len(x)}"]
    if np.isnan(x).any():
        return [f"{int(np.isnan(x).sum())} values missing (NaN)"]
    out: list[str] = []
    lb, ub = model.col_lb, model.col_ub
    _report(out, "bound", np.flatnonzero((x < lb - tol) | (x > ub + tol)))
    _report(out, "integrality", np.flatnonzero(model.col_integer & (np.abs(x - np.rint(x)) > tol)))
    for k, batch in enumerate(model.row_batches):
        _report(out, f"row batch {k}", _row_violations(batch, x, np.ones(batch.num_rows, bool), tol))
    for k, ind in enumerate(model.indicators):
        on = np.rint(x[ind.lit_cols]).astype(bool) != ind.lit_neg
        _report(out, f"indicator batch {k}", _row_violations(ind.rows, x, on, tol))
    for k, p in enumerate(model.products):
        _report(out, f"product batch {k}", np.flatnonzero(np.abs(x[p.z] - x[p.b] * x[p.x]) > tol))
    iv = model.intervals
    present = _lit_values(x, iv.presence, np.zeros(len(iv.presence), bool))
    size = np.where(iv.size_col >= 0, x[np.maximum(iv.size_col, 0)], iv.fixed_size)
    _report(out, "interval", np.flatnonzero(present & (np.abs(x[iv.start] + size - x[iv.end]) > tol)))
    for k, cu in enumerate(model.cumulatives):
        ids = cu.interval_ids
        times = np.concatenate([x[iv.start[ids]], x[iv.end[ids]]])
        act = np.concatenate([present[ids], present[ids]])
        cap = cu.capacity + (x[cu.capacity_col] if cu.capacity_col >= 0 else 0)
        bad = _level_violations(times, np.concatenate([cu.demands, -cu.demands]), act, -np.inf, cap + tol)
        _report(out, f"cumulative {k} at times", bad)
    for k, r in enumerate(model.reservoirs):
        act = _lit_values(x, r.active_cols, r.active_neg)
        _report(
            out,
            f"reservoir {k} at times",
            _level_violations(r.times.values(x), r.changes, act, r.min_level, _upper(r, x) + tol),
        )
    for k, ad in enumerate(model.all_different):
        vals = np.rint(ad.exprs.values(x))
        uniq, counts = np.unique(vals, return_counts=True)
        _report(out, f"all_different {k} repeats values", uniq[counts > 1])
    return out


def _upper(r: Reservoir, x: np.ndarray) -> float:
    """A reservoir's upper level at ``x``."""
    return r.max_level + (x[r.max_level_col] if r.max_level_col >= 0 else 0)


def _report(out: list[str], what: str, bad: np.ndarray) -> None:
    if len(bad):
        shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in bad[:10].tolist())
        out.append(f"{what}: {len(bad)} violated ({shown}{', ...' if len(bad) > 10 else ''})")


def _row_violations(batch: RowBatch, x: np.ndarray, on: np.ndarray, tol: float) -> np.ndarray:
    act = batch.activities(x)
    slack_lo = tol * np.maximum(1.0, np.abs(np.where(np.isfinite(batch.lb), batch.lb, 0)))
    slack_hi = tol * np.maximum(1.0, np.abs(np.where(np.isfinite(batch.ub), batch.ub, 0)))
    return np.flatnonzero(on & ((act < batch.lb - slack_lo) | (act > batch.ub + slack_hi)))


def _lit_values(x: np.ndarray, cols: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """Truth of literals (col -1 = always true)."""
    val = np.rint(x[np.maximum(cols, 0)]).astype(bool) != neg
    return np.where(cols < 0, True, val)


def _level_violations(times: np.ndarray, changes: np.ndarray, active: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Times at which the level (sum of active changes at times <= t) leaves [lo, hi]."""
    t, ch = np.rint(times[active]), changes[active]
    order = np.argsort(t, kind="stable")
    t, level = t[order], np.cumsum(ch[order])
    last = np.ones(len(t), bool)
    last[:-1] = t[1:] != t[:-1]
    t, level = t[last], level[last]
    return t[(level < lo) | (level > hi)]
