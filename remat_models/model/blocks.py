"""Named, numpy-shaped blocks of variables and interval variables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from remat_models.model.expr import LinExpr, Var

VAR_KINDS = ("bool", "int", "cont")


@dataclass(frozen=True)
class VarBlock:
    """A named block of ``size`` consecutive columns starting at ``offset``, viewed with ``shape``."""

    name: str
    offset: int
    shape: tuple[int, ...]
    kind: str  # one of VAR_KINDS

    @property
    def size(self) -> int:
        """Number of variables in the block."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def cols(self) -> np.ndarray:
        """Column ids shaped like the block."""
        return np.arange(self.offset, self.offset + self.size, dtype=np.int64).reshape(self.shape)

    def __getitem__(self, idx: Any) -> Var:
        """The variable at a full (scalar) index, e.g. ``x[t, i]``."""
        col = self.cols[idx]
        if np.ndim(col) != 0:
            raise IndexError(f"block {self.name!r}: x[...] takes a full index; use .cols[...] or .sum(...) for slices")
        return Var(int(col))

    def sum(self, idx: Any = ...) -> LinExpr:
        """Sum of the variables of ``self.cols[idx]`` (all by default)."""
        cols = np.ravel(self.cols[idx])
        return LinExpr(cols, np.ones(len(cols)))

    def dot(self, weights: np.ndarray, idx: Any = ...) -> LinExpr:
        """``sum(weights * x[idx])`` with ``weights`` broadcastable to ``self.cols[idx]``."""
        cols = self.cols[idx]
        w = np.broadcast_to(np.asarray(weights, dtype=np.float64), cols.shape)
        return LinExpr(np.ravel(cols), np.ravel(w))


@dataclass(frozen=True)
class IntervalBlock:
    """Interval variables ``[start, end)`` with ``start + size == end`` (only when ``presence`` is true)."""

    name: str
    shape: tuple[int, ...]
    start: VarBlock
    end: VarBlock
    size: VarBlock | None  # None: the size is fixed_size
    fixed_size: np.ndarray | None
    presence: VarBlock | None  # None: always present
    first_id: int  # global interval ids are first_id .. first_id + n - 1

    @property
    def ids(self) -> np.ndarray:
        """Global interval ids shaped like the block (for selecting intervals of a cumulative)."""
        return np.arange(self.first_id, self.first_id + self.start.size, dtype=np.int64).reshape(self.shape)


@dataclass(frozen=True)
class IntervalTable:
    """All intervals of a model as flat arrays indexed by global interval id (-1 = none)."""

    start: np.ndarray
    end: np.ndarray
    size_col: np.ndarray
    fixed_size: np.ndarray  # used where size_col == -1
    presence: np.ndarray

    @staticmethod
    def of(blocks: list[IntervalBlock]) -> IntervalTable:
        """Concatenate the intervals of ``blocks`` (in id order)."""

        def cat(parts: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)

        def col_or_none(b: VarBlock | None, n: int) -> np.ndarray:
            return np.ravel(b.cols) if b is not None else np.full(n, -1, dtype=np.int64)

        n = [b.start.size for b in blocks]
        return IntervalTable(
            start=cat([np.ravel(b.start.cols) for b in blocks]),
            end=cat([np.ravel(b.end.cols) for b in blocks]),
            size_col=cat([col_or_none(b.size, k) for b, k in zip(blocks, n, strict=True)]),
            fixed_size=cat(
                [
                    np.ravel(b.fixed_size) if b.fixed_size is not None else np.zeros(k)
                    for b, k in zip(blocks, n, strict=True)
                ]
            ),
            presence=cat([col_or_none(b.presence, k) for b, k in zip(blocks, n, strict=True)]),
        )
