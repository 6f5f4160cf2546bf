"""Linear expressions over model columns: ``Var``, ``LinExpr``, negated literals, constraints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

Number = int | float | np.integer | np.floating
_INT = np.int64


class LinExpr:
    """An affine expression ``sum(coefs * x[cols]) + const`` over model columns (numpy-backed)."""

    __slots__ = ("coefs", "cols", "const")
    __hash__ = None  # type: ignore[assignment]  # ``==`` builds a constraint

    def __init__(self, cols: np.ndarray, coefs: np.ndarray, const: float = 0.0) -> None:
        self.cols = np.asarray(cols, dtype=_INT)
        self.coefs = np.asarray(coefs, dtype=np.float64)
        self.const = float(const)

    def __add__(self, other: LinExpr | Number) -> LinExpr:
        o = as_expr(other)
        return LinExpr(np.concatenate([self.cols, o.cols]), np.concatenate([self.coefs, o.coefs]), self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> LinExpr:
        return LinExpr(self.cols, -self.coefs, -self.const)

    def __sub__(self, other: LinExpr | Number) -> LinExpr:
        return self + (-as_expr(other))

    def __rsub__(self, other: LinExpr | Number) -> LinExpr:
        return as_expr(other) - self

    def __mul__(self, k: Number) -> LinExpr:
        if isinstance(k, LinExpr):
            raise TypeError("only linear expressions: use Model.add_product for b * x")
        return LinExpr(self.cols, self.coefs * float(k), self.const * float(k))

    __rmul__ = __mul__

    def __le__(self, other: LinExpr | Number) -> LinConstraint:  # type: ignore[override]
        d = self - other
        return LinConstraint(d.cols, d.coefs, -np.inf, -d.const)

    def __ge__(self, other: LinExpr | Number) -> LinConstraint:  # type: ignore[override]
        d = self - other
        return LinConstraint(d.cols, d.coefs, -d.const, np.inf)

    def __eq__(self, other: object) -> LinConstraint:  # type: ignore[override]
        d = self - as_expr(other)  # type: ignore[arg-type]
        return LinConstraint(d.cols, d.coefs, -d.const, -d.const)

    def value(self, x: np.ndarray) -> float:
        """Evaluate on a flat column vector."""
        return float(self.coefs @ x[self.cols] + self.const)

    def __repr__(self) -> str:
        terms = " + ".join(f"{c:g}*x{j}" for j, c in zip(self.cols.tolist(), self.coefs.tolist(), strict=True))
        return f"LinExpr({terms or '0'} + {self.const:g})"


class Var(LinExpr):
    """One column as an expression; ``~v`` is its negation when it is a bool."""

    __slots__ = ("col",)

    def __init__(self, col: int) -> None:
        super().__init__(np.array([col], dtype=_INT), np.ones(1), 0.0)
        self.col = int(col)

    def __invert__(self) -> NotVar:
        return NotVar(self.col)

    def __repr__(self) -> str:
        return f"Var({self.col})"


@dataclass(frozen=True)
class NotVar:
    """The negation of a bool column, usable as a literal (not in linear expressions)."""

    col: int

    def __invert__(self) -> Var:
        return Var(self.col)


Literal = Var | NotVar


@dataclass(frozen=True)
class LinConstraint:
    """``lb <= coefs . x[cols] <= ub`` (constants already moved into the bounds)."""

    cols: np.ndarray
    coefs: np.ndarray
    lb: float
    ub: float


def as_expr(v: LinExpr | Number) -> LinExpr:
    """Wrap a number as a constant expression; pass expressions through."""
    if isinstance(v, LinExpr):
        return v
    if isinstance(v, NotVar):
        raise TypeError("a negated literal is not a linear expression: write 1 - x instead of ~x")
    return LinExpr(np.empty(0, dtype=_INT), np.empty(0), float(v))


def literal(lit: Literal) -> tuple[int, bool]:
    """(column, negated) of a literal."""
    if isinstance(lit, NotVar):
        return lit.col, True
    if isinstance(lit, Var):
        return lit.col, False
    raise TypeError(f"expected a bool Var or ~Var as literal, got {lit!r}")


def quicksum(exprs: Iterable[LinExpr | Number]) -> LinExpr:
    """Sum many expressions with one concatenation."""
    parts = [as_expr(e) for e in exprs]
    if not parts:
        return as_expr(0)
    return LinExpr(
        np.concatenate([p.cols for p in parts]),
        np.concatenate([p.coefs for p in parts]),
        sum(p.const for p in parts),
    )


@dataclass(frozen=True)
class AffineBatch:
    """A vector of affine expressions in CSR form: expression i is ``coefs[s:e] . x[cols[s:e]] + const[i]``."""

    indptr: np.ndarray
    cols: np.ndarray
    coefs: np.ndarray
    const: np.ndarray

    @property
    def size(self) -> int:
        """Number of expressions."""
        return len(self.const)

    @staticmethod
    def from_exprs(exprs: Iterable[LinExpr | Number]) -> AffineBatch:
        """Pack expressions (or numbers) into one batch."""
        parts = [as_expr(e) for e in exprs]
        lengths = np.array([len(p.cols) for p in parts], dtype=_INT)
        cols = np.concatenate([p.cols for p in parts]) if parts else np.empty(0, dtype=_INT)
        coefs = np.concatenate([p.coefs for p in parts]) if parts else np.empty(0)
        const = np.array([p.const for p in parts], dtype=np.float64)
        return AffineBatch(np.concatenate([[0], np.cumsum(lengths)]).astype(_INT), cols, coefs, const)

    @staticmethod
    def from_cols(cols: np.ndarray) -> AffineBatch:
        """One expression per column (``x[col]``)."""
        cols = np.asarray(cols, dtype=_INT).ravel()
        return AffineBatch(np.arange(len(cols) + 1, dtype=_INT), cols, np.ones(len(cols)), np.zeros(len(cols)))

    def rows(self) -> np.ndarray:
        """Expression index of each stored term."""
        return np.repeat(np.arange(self.size, dtype=_INT), np.diff(self.indptr))

    def values(self, x: np.ndarray) -> np.ndarray:
        """Evaluate every expression on a flat column vector."""
        return np.bincount(self.rows(), weights=self.coefs * x[self.cols], minlength=self.size) + self.const

    def bounds(self, lb: np.ndarray, ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Interval-arithmetic bounds of every expression given column bounds."""
        with np.errstate(invalid="ignore"):
            lo_t = np.where(self.coefs > 0, self.coefs * lb[self.cols], self.coefs * ub[self.cols])
            hi_t = np.where(self.coefs > 0, self.coefs * ub[self.cols], self.coefs * lb[self.cols])
        zero = self.coefs == 0
        lo_t[zero] = 0.0
        hi_t[zero] = 0.0
        rows = self.rows()
        lo = np.bincount(rows, weights=lo_t, minlength=self.size) + self.const
        hi = np.bincount(rows, weights=hi_t, minlength=self.size) + self.const
        return lo, hi
