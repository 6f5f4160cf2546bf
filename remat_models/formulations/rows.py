"""Vectorized row assembly for formulations: terms are (row, column, coefficient) arrays; column -1 means "absent"."""

from __future__ import annotations

import numpy as np

from remat_models.model import Model


class Rows:
    """A batch of ``count`` linear rows collected term-array by term-array, then added in one ``add_rows``."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._coefs: list[np.ndarray] = []

    def term(self, cols: np.ndarray, coefs: float | np.ndarray, rows: np.ndarray | None = None) -> Rows:
        """Add ``coef * x[col]`` to each row (row r by default gets cols[r]); entries with col < 0 are dropped."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        row_ids = np.arange(self.count, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64).ravel()
        coef_array = np.broadcast_to(np.asarray(coefs, dtype=np.float64), cols.shape)
        keep = cols >= 0
        self._rows.append(row_ids[keep])
        self._cols.append(cols[keep])
        self._coefs.append(coef_array[keep])
        return self

    def extend(self, other: Rows, scale: float = 1.0) -> Rows:
        """Add ``scale`` times every term of ``other`` (a batch with the same row count)."""
        rows, cols, coefs = other.arrays()
        return self.term(cols, scale * coefs, rows)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, coefs) of every term so far."""
        if not self._rows:
            return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
        return np.concatenate(self._rows), np.concatenate(self._cols), np.concatenate(self._coefs)

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """Each row's left-hand side at the flat solution ``x``."""
        rows, cols, coefs = self.arrays()
        return np.bincount(rows, weights=coefs * x[cols], minlength=self.count)

    def add_to(
        self,
        model: Model,
        lb: float | np.ndarray = -np.inf,
        ub: float | np.ndarray = np.inf,
        name: str | None = None,
    ) -> None:
        """Add the rows to ``model`` with bounds ``lb <= row <= ub`` (scalars or length ``count``), as batch ``name``.

        A named batch is added even when empty, so that extensions always find it.
        """
        if self.count == 0 and name is None:
            return
        rows, cols, coefs = self.arrays()
        lb_array = np.broadcast_to(np.asarray(lb, dtype=np.float64), (self.count,))
        ub_array = np.broadcast_to(np.asarray(ub, dtype=np.float64), (self.count,))
        model.add_rows(rows, cols, coefs, lb=lb_array, ub=ub_array, name=name)


def index_of(mask: np.ndarray, offset: int = 0) -> np.ndarray:
    """Column ids of the True cells of ``mask`` (row-major, starting at ``offset``), -1 elsewhere."""
    ids = np.full(mask.shape, -1, dtype=np.int64)
    ids[mask] = offset + np.arange(int(mask.sum()), dtype=np.int64)
    return ids
