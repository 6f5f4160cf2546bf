"""Stored constraint batches: linear rows and the global constructs (all numpy arrays)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from remat_models.model.expr import AffineBatch

# Construct names, as used in ``Backend.native_constructs`` and errors.
INTERVAL = "interval"
INDICATOR = "indicator"
PRODUCT = "product"
CUMULATIVE = "cumulative"
RESERVOIR = "reservoir"
ALL_DIFFERENT = "all_different"
CONTINUOUS = "continuous"
ALL_CONSTRUCTS = frozenset({INTERVAL, INDICATOR, PRODUCT, CUMULATIVE, RESERVOIR, ALL_DIFFERENT, CONTINUOUS})


@dataclass(frozen=True)
class RowBatch:
    """Linear rows in COO form: ``lb[r] <= sum(coefs[k] * x[cols[k]] for rows[k] == r) <= ub[r]``."""

    rows: np.ndarray
    cols: np.ndarray
    coefs: np.ndarray
    lb: np.ndarray
    ub: np.ndarray

    @property
    def num_rows(self) -> int:
        """Number of rows."""
        return len(self.lb)

    @property
    def nnz(self) -> int:
        """Number of stored entries."""
        return len(self.cols)

    @staticmethod
    def make(
        rows: object, cols: object, coefs: object, lb: object, ub: object, num_rows: int | None = None
    ) -> RowBatch:
        """Validate and convert to contiguous numpy arrays (bounds broadcast to the number of rows)."""
        r = np.asarray(rows, dtype=np.int64).ravel()
        c = np.asarray(cols, dtype=np.int64).ravel()
        v = np.asarray(coefs, dtype=np.float64)
        v = np.broadcast_to(v, c.shape).copy() if v.ndim == 0 else v.ravel()  # a scalar applies to every entry
        if not len(r) == len(c) == len(v):
            raise ValueError(f"rows, cols and coefs differ in length: {len(r)}, {len(c)}, {len(v)}")
        if num_rows is None:  # from the array bounds, else from the row ids
            sized = [np.size(b) for b in (lb, ub) if np.ndim(b) > 0]
            num_rows = sized[0] if sized else (int(r.max()) + 1 if len(r) else 0)
        lo = np.broadcast_to(np.asarray(lb, dtype=np.float64), (num_rows,)).copy()
        hi = np.broadcast_to(np.asarray(ub, dtype=np.float64), (num_rows,)).copy()
        if len(r) and (r.min() < 0 or r.max() >= num_rows):
            raise ValueError(f"row ids must lie in 0..{num_rows - 1}")
        if np.any(lo > hi):
            raise ValueError("a row has lb > ub")
        return RowBatch(r, c, v, lo, hi)

    def to_affine(self) -> AffineBatch:
        """The rows' left-hand sides as a CSR batch of expressions (entries sorted by row)."""
        order = np.argsort(self.rows, kind="stable")
        indptr = np.concatenate([[0], np.cumsum(np.bincount(self.rows, minlength=self.num_rows))]).astype(np.int64)
        return AffineBatch(indptr, self.cols[order], self.coefs[order], np.zeros(self.num_rows))

    def activities(self, x: np.ndarray) -> np.ndarray:
        """Row activities on a flat column vector."""
        return np.bincount(self.rows, weights=self.coefs * x[self.cols], minlength=self.num_rows)


@dataclass(frozen=True)
class IndicatorBatch:
    """Row r of ``rows`` must hold when literal r is true (``x[lit_cols[r]] == 1``, or ``== 0`` if negated)."""

    lit_cols: np.ndarray
    lit_neg: np.ndarray
    rows: RowBatch


@dataclass(frozen=True)
class ProductBatch:
    """``x[z] == x[b] * x[x]`` elementwise, b bool and x bounded."""

    z: np.ndarray
    b: np.ndarray
    x: np.ndarray


@dataclass(frozen=True)
class Cumulative:
    """Sum of ``demands`` of present intervals running at any time ``<= capacity (+ x[capacity_col])``."""

    interval_ids: np.ndarray
    demands: np.ndarray
    capacity: int
    capacity_col: int = -1  # >= 0: the capacity is ``capacity + x[capacity_col]`` (a variable capacity)


@dataclass(frozen=True)
class Reservoir:
    """CP-SAT reservoir with actives: for all t, ``min_level <= sum(changes[active & time <= t]) <= max_level``."""

    times: AffineBatch
    changes: np.ndarray
    active_cols: np.ndarray  # -1: always active
    active_neg: np.ndarray
    min_level: int
    max_level: int
    max_level_col: int = -1  # >= 0: the upper level is ``max_level + x[max_level_col]`` (from a cumulative)


@dataclass(frozen=True)
class AllDifferent:
    """The integer expressions take pairwise different values."""

    exprs: AffineBatch


def literal_terms(cols: np.ndarray, neg: np.ndarray, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear terms of ``coef * lit`` for literals (col, neg): returns (cols, coefs, constant per literal).

    A negated literal is ``1 - x``; an always-true literal (col -1) is the constant 1.
    """
    coef = np.broadcast_to(np.asarray(coef, dtype=np.float64), cols.shape)
    const = np.where((cols < 0) | neg, coef, 0.0)
    return cols, np.where(cols < 0, 0.0, np.where(neg, -coef, coef)), const
