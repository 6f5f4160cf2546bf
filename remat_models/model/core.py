"""The abstract optimization model: variable blocks, vectorized linear rows, global constructs."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import numpy as np

from remat_models.errors import ConfigurationError
from remat_models.model import constructs as C
from remat_models.model.blocks import VAR_KINDS, IntervalBlock, IntervalTable, VarBlock
from remat_models.model.expr import AffineBatch, LinConstraint, LinExpr, Literal, Number, literal
from remat_models.model.index import IndexMap

Bounds = tuple[Any, Any]
_DICT_ATTRS = ("blocks", "indexes", "cumulative_names", "reservoir_names")
_LIST_ATTRS = (
    "interval_blocks",
    "_lb",
    "_ub",
    "row_batches",
    "row_names",
    "indicators",
    "products",
    "cumulatives",
    "reservoirs",
    "all_different",
)


class Model:
    """A solver-independent MILP/CP model; see docs/model.md for the API."""

    def __init__(self, name: str = "model") -> None:
        self.name = name
        self.blocks: dict[str, VarBlock] = {}
        self.interval_blocks: list[IntervalBlock] = []
        self._lb: list[np.ndarray] = []
        self._ub: list[np.ndarray] = []
        self.num_cols = 0
        self.row_batches: list[C.RowBatch] = []
        self.row_names: list[str] = []  # one per batch, unique
        self.indexes: dict[str, IndexMap] = {}  # block name -> its cells on named axes (see ``index``)
        self._columns_cache: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None  # see _column_table
        self.cumulative_names: dict[str, int] = {}
        self.reservoir_names: dict[str, int] = {}
        self.indicators: list[C.IndicatorBatch] = []
        self.products: list[C.ProductBatch] = []
        self.cumulatives: list[C.Cumulative] = []
        self.reservoirs: list[C.Reservoir] = []
        self.all_different: list[C.AllDifferent] = []
        self.obj_cols = np.empty(0, dtype=np.int64)
        self.obj_coefs = np.empty(0)
        self.obj_offset = 0.0
        self.sense = "min"

    # ----------------------------------------------------------------- variables
    def _new_block(self, name: str, shape: int | tuple[int, ...], kind: str, lb: Any, ub: Any) -> VarBlock:
        if name in self.blocks:
            raise ConfigurationError(f"block {name!r} exists already")
        if kind not in VAR_KINDS:
            raise ConfigurationError(f"unknown variable kind {kind!r}")
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)
        block = VarBlock(name, self.num_cols, shape, kind)
        lo = np.broadcast_to(np.asarray(lb, dtype=np.float64), shape).ravel().copy()
        hi = np.broadcast_to(np.asarray(ub, dtype=np.float64), shape).ravel().copy()
        if kind != "cont":
            lo, hi = np.ceil(lo), np.floor(hi)
        if np.any(lo > hi):
            raise ConfigurationError(f"block {name!r}: a variable has lb > ub")
        self._lb.append(lo)
        self._ub.append(hi)
        self.num_cols += block.size
        self.blocks[name] = block
        return block

    def bool_block(self, name: str, shape: int | tuple[int, ...]) -> VarBlock:
        """A block of binaries."""
        return self._new_block(name, shape, "bool", 0, 1)

    def int_block(self, name: str, shape: int | tuple[int, ...], lb: Any, ub: Any) -> VarBlock:
        """A block of integers with bounds (scalars or arrays shaped like the block; may be +-inf)."""
        return self._new_block(name, shape, "int", lb, ub)

    def cont_block(self, name: str, shape: int | tuple[int, ...], lb: Any = 0.0, ub: Any = np.inf) -> VarBlock:
        """A block of continuous variables."""
        return self._new_block(name, shape, "cont", lb, ub)

    def interval_block(
        self,
        name: str,
        shape: int | tuple[int, ...],
        start: Bounds,
        size: Any,
        end: Bounds | None = None,
        optional: bool = False,
    ) -> IntervalBlock:
        """Integer intervals ``[start, end)``: ``size`` is a fixed integer array/scalar or (lb, ub) bounds."""
        first_id = sum(b.start.size for b in self.interval_blocks)
        s = self.int_block(f"{name}.start", shape, *start)
        fixed = None
        size_block = None
        if isinstance(size, tuple):
            size_block = self.int_block(f"{name}.size", shape, *size)
            size_lo, size_hi = self.col_lb[size_block.cols.ravel()], self.col_ub[size_block.cols.ravel()]
        else:
            fixed = np.broadcast_to(np.asarray(size, dtype=np.int64), s.shape).copy()
            size_lo = size_hi = fixed.ravel().astype(np.float64)
        if np.any(size_lo < 0):
            raise ConfigurationError(f"interval block {name!r}: sizes must be >= 0")
        if end is None:
            end = (self.col_lb[s.cols.ravel()] + size_lo, self.col_ub[s.cols.ravel()] + size_hi)
        e = self.int_block(f"{name}.end", shape, *(np.reshape(np.asarray(b, dtype=np.float64), -1) for b in end))
        p = self.bool_block(f"{name}.presence", shape) if optional else None
        block = IntervalBlock(name, s.shape, s, e, size_block, fixed, p, first_id)
        self.interval_blocks.append(block)
        return block

    def block(self, name: str) -> VarBlock:
        """The variable block called ``name``."""
        try:
            return self.blocks[name]
        except KeyError:
            raise ConfigurationError(f"no block {name!r}; blocks: {', '.join(self.blocks)}") from None

    @property
    def col_lb(self) -> np.ndarray:
        """Lower bound of every column."""
        return np.concatenate(self._lb) if self._lb else np.empty(0)

    @property
    def col_ub(self) -> np.ndarray:
        """Upper bound of every column."""
        return np.concatenate(self._ub) if self._ub else np.empty(0)

    @property
    def col_kind(self) -> np.ndarray:
        """Kind of every column as a string array ("bool", "int", "cont")."""
        return np.repeat(np.array([b.kind for b in self.blocks.values()]), [b.size for b in self.blocks.values()])

    @property
    def col_integer(self) -> np.ndarray:
        """Whether every column is integer (bools included)."""
        return self.col_kind != "cont"

    @property
    def intervals(self) -> IntervalTable:
        """All intervals as flat arrays."""
        return IntervalTable.of(self.interval_blocks)

    def set_index(self, index: IndexMap) -> None:
        """Publish the cells of block ``index.block`` on named axes (formulations do, for extensions and exports)."""
        block = self.block(index.block)
        if index.cols.size and (index.cols.min() < block.offset or index.cols.max() >= block.offset + block.size):
            raise ConfigurationError(f"index of {index.block!r} names columns outside the block")
        self.indexes[index.block] = index

    def index(self, name: str) -> IndexMap:
        """Block ``name``'s cells on named axes: as published by the formulation, else the block's own shape."""
        if name in self.indexes:
            return self.indexes[name]
        cols = np.atleast_1d(self.block(name).cols)  # a scalar block is one cell on one axis
        return IndexMap.dense(name, tuple(f"i{k}" for k in range(cols.ndim)), cols)

    def col_names(self) -> list[str]:
        """A readable name per column: ``block[coords]`` with the published labels (node names) where there are."""
        names = [""] * self.num_cols
        for block in self.blocks.values():
            index = self.index(block.name)
            for col, label in zip(index.cols.tolist(), index.cell_names(), strict=True):
                names[col] = label
            for col in range(block.offset, block.offset + block.size):
                names[col] = names[col] or f"{block.name}[{col - block.offset}]"
        return names

    def row_labels(self) -> list[str]:
        """A readable name per linear row: ``batch[local row]``."""
        return [
            f"{name}[{r}]" for name, b in zip(self.row_names, self.row_batches, strict=True) for r in range(b.num_rows)
        ]

    # --------------------------------------------------------------- constraints
    def add_rows(
        self, rows: Any, cols: Any, coefs: Any, lb: Any = -np.inf, ub: Any = np.inf, name: str | None = None
    ) -> str:
        """Add linear rows in COO form (row ids local to this batch, 0..R-1; bounds scalars or length R).

        ``name`` (unique) lets extensions find the batch again (``rows``, ``add_terms``); unnamed
        batches get ``rows<k>``. Returns the batch's name.
        """
        return self.append_batch(C.RowBatch.make(rows, cols, coefs, lb, ub), name)

    def append_batch(self, batch: C.RowBatch, name: str | None = None) -> str:
        """Add a ready row batch under ``name`` (unique; default ``rows<k>``); returns the name."""
        self._check_cols(batch.cols)
        name = f"rows{len(self.row_batches)}" if name is None else name
        if name in self.row_names:
            raise ConfigurationError(f"a row batch called {name!r} exists already")
        self.row_batches.append(batch)
        self.row_names.append(name)
        return name

    def rows(self, name: str) -> C.RowBatch:
        """The row batch called ``name`` (its current state, terms added by extensions included)."""
        return self.row_batches[self._batch_position(name)]

    def add_terms(self, name: str, rows: Any, cols: Any, coefs: Any) -> None:
        """Append ``coefs * x[cols]`` to rows ``rows`` (local ids) of batch ``name``; bounds stay as they are."""
        k = self._batch_position(name)
        old = self.row_batches[k]
        extra = C.RowBatch.make(rows, cols, coefs, old.lb, old.ub, num_rows=old.num_rows)
        self._check_cols(extra.cols)
        self.row_batches[k] = C.RowBatch(
            np.concatenate([old.rows, extra.rows]),
            np.concatenate([old.cols, extra.cols]),
            np.concatenate([old.coefs, extra.coefs]),
            old.lb,
            old.ub,
        )

    def _batch_position(self, name: str) -> int:
        try:
            return self.row_names.index(name)
        except ValueError:
            named = [n for n in self.row_names if not n.startswith("rows")]
            raise ConfigurationError(f"no row batch {name!r}; named batches: {', '.join(named)}") from None

    def add(self, con: LinConstraint) -> None:
        """Add one constraint built with the expression API, e.g. ``m.add(x[0] + y[1] <= 1)``."""
        if not isinstance(con, LinConstraint):
            raise TypeError(f"expected a constraint like `expr <= 3`, got {con!r}")
        self.add_rows(np.zeros(len(con.cols)), con.cols, con.coefs, [con.lb], [con.ub])

    def add_indicator(self, lit: Literal, con: LinConstraint) -> None:
        """``lit`` true implies ``con`` (a constraint from the expression API)."""
        col, neg = literal(lit)
        self.add_indicators([col], np.zeros(len(con.cols)), con.cols, con.coefs, [con.lb], [con.ub], negated=[neg])

    def add_indicators(
        self, lit_cols: Any, rows: Any, cols: Any, coefs: Any, lb: Any, ub: Any, negated: Any = None
    ) -> None:
        """Row r (COO batch as in ``add_rows``) must hold when literal r is true (false if ``negated[r]``)."""
        lits = np.asarray(lit_cols, dtype=np.int64).ravel()
        batch = C.RowBatch.make(rows, cols, coefs, lb, ub, num_rows=len(lits))
        neg = np.zeros(len(lits), bool) if negated is None else np.asarray(negated, dtype=bool).ravel()
        self._check_cols(batch.cols)
        self._check_bool(lits, "indicator literal")
        self.indicators.append(C.IndicatorBatch(lits, neg, batch))

    def add_product(self, z: LinExpr, b: LinExpr, x: LinExpr) -> None:
        """``z == b * x`` for single variables: b bool, x bounded."""
        self.add_products(*(self._single_col(v) for v in (z, b, x)))

    def add_products(self, z_cols: Any, b_cols: Any, x_cols: Any) -> None:
        """``x[z] == x[b] * x[x]`` elementwise over column arrays."""
        z, b, x = (np.asarray(a, dtype=np.int64).ravel() for a in (z_cols, b_cols, x_cols))
        if not len(z) == len(b) == len(x):
            raise ValueError("z, b and x differ in length")
        for a in (z, b, x):
            self._check_cols(a)
        self._check_bool(b, "product factor b")
        self.products.append(C.ProductBatch(z, b, x))

    def add_cumulative(
        self, intervals: IntervalBlock | Any, demands: Any, capacity: int | LinExpr, name: str | None = None
    ) -> None:
        """Sum of demands of present intervals running at any time <= capacity (an int or ``int var + const``).

        A ``name`` lets extensions add intervals later (``extend_cumulative``).
        """
        ids, d = self._interval_demands(intervals, demands)
        col, const = self._capacity(capacity)
        if const + (self.col_lb[col] if col >= 0 else 0) < 0:
            raise ValueError("the capacity must be >= 0")
        self._name_global(self.cumulative_names, name, len(self.cumulatives), "cumulative")
        self.cumulatives.append(C.Cumulative(ids, d, const, col))

    def extend_cumulative(self, name: str, intervals: IntervalBlock | Any, demands: Any) -> None:
        """Add intervals (with their demands) to the cumulative called ``name``."""
        k = self._global(self.cumulative_names, name, "cumulative")
        ids, d = self._interval_demands(intervals, demands)
        old = self.cumulatives[k]
        self.cumulatives[k] = C.Cumulative(
            np.concatenate([old.interval_ids, ids]), np.concatenate([old.demands, d]), old.capacity, old.capacity_col
        )

    def _interval_demands(self, intervals: IntervalBlock | Any, demands: Any) -> tuple[np.ndarray, np.ndarray]:
        ids = np.ravel(intervals.ids if isinstance(intervals, IntervalBlock) else np.asarray(intervals, dtype=np.int64))
        d = np.broadcast_to(np.asarray(demands, dtype=np.int64), ids.shape).copy()
        n_iv = sum(b.start.size for b in self.interval_blocks)
        if len(ids) and (ids.min() < 0 or ids.max() >= n_iv):
            raise ValueError(f"interval ids must lie in 0..{n_iv - 1}")
        if np.any(d < 0):
            raise ValueError("demands must be >= 0")
        return ids, d

    def add_reservoir(
        self,
        times: Iterable[LinExpr | Number],
        changes: Any,
        actives: Iterable[Literal | bool] | None = None,
        min_level: int = 0,
        max_level: int = 2**62,
        name: str | None = None,
    ) -> None:
        """CP-SAT's ``AddReservoirConstraintWithActive`` (level starts at 0; needs min_level <= 0 <= max_level).

        A ``name`` lets extensions add events later (``extend_reservoir``).
        """
        t, ch, cols, neg = self._reservoir_events(times, changes, actives)
        if not min_level <= 0 <= max_level:
            raise ValueError("a reservoir needs min_level <= 0 <= max_level")
        self._name_global(self.reservoir_names, name, len(self.reservoirs), "reservoir")
        self.reservoirs.append(C.Reservoir(t, ch, cols, neg, int(min_level), int(max_level)))

    def extend_reservoir(
        self,
        name: str,
        times: Iterable[LinExpr | Number],
        changes: Any,
        actives: Iterable[Literal | bool] | None = None,
    ) -> None:
        """Add events (times, level changes, active literals) to the reservoir called ``name``."""
        k = self._global(self.reservoir_names, name, "reservoir")
        t, ch, cols, neg = self._reservoir_events(times, changes, actives)
        old = self.reservoirs[k]
        times_all = AffineBatch(
            np.concatenate([old.times.indptr, old.times.indptr[-1] + t.indptr[1:]]),
            np.concatenate([old.times.cols, t.cols]),
            np.concatenate([old.times.coefs, t.coefs]),
            np.concatenate([old.times.const, t.const]),
        )
        self.reservoirs[k] = C.Reservoir(
            times_all,
            np.concatenate([old.changes, ch]),
            np.concatenate([old.active_cols, cols]),
            np.concatenate([old.active_neg, neg]),
            old.min_level,
            old.max_level,
            old.max_level_col,
        )

    def _reservoir_events(
        self, times: Iterable[LinExpr | Number], changes: Any, actives: Iterable[Literal | bool] | None
    ) -> tuple[AffineBatch, np.ndarray, np.ndarray, np.ndarray]:
        t = AffineBatch.from_exprs(times)
        ch = np.broadcast_to(np.asarray(changes, dtype=np.int64), (t.size,)).copy()
        cols = np.full(t.size, -1, dtype=np.int64)
        neg = np.zeros(t.size, bool)
        for i, a in enumerate(actives if actives is not None else []):
            if a is not True:
                cols[i], neg[i] = literal(a)
        self._check_cols(t.cols)
        self._check_bool(cols[cols >= 0], "reservoir active literal")
        return t, ch, cols, neg

    @staticmethod
    def _name_global(names: dict[str, int], name: str | None, position: int, what: str) -> None:
        if name is None:
            return
        if name in names:
            raise ConfigurationError(f"a {what} called {name!r} exists already")
        names[name] = position

    @staticmethod
    def _global(names: dict[str, int], name: str, what: str) -> int:
        try:
            return names[name]
        except KeyError:
            raise ConfigurationError(f"no {what} {name!r}; named: {', '.join(names) or 'none'}") from None

    def add_all_different(self, exprs: Iterable[LinExpr | Number]) -> None:
        """The integer expressions take pairwise different values."""
        batch = AffineBatch.from_exprs(exprs)
        self._check_cols(batch.cols)
        self.all_different.append(C.AllDifferent(batch))

    # ----------------------------------------------------------------- objective
    def set_objective(self, cols: Any, coefs: Any, sense: str = "min", offset: float = 0.0) -> None:
        """Set the linear objective from (cols, coefs) arrays; ``sense`` is "min" or "max"."""
        if sense not in ("min", "max"):
            raise ConfigurationError(f"objective sense must be 'min' or 'max', not {sense!r}")
        self.obj_cols = np.asarray(cols, dtype=np.int64).ravel()
        self.obj_coefs = np.broadcast_to(np.asarray(coefs, dtype=np.float64), self.obj_cols.shape).copy()
        self._check_cols(self.obj_cols)
        self.obj_offset = float(offset)
        self.sense = sense

    def add_objective_terms(self, cols: Any, coefs: Any) -> None:
        """Add ``coefs * x[cols]`` to the objective (in its sense: a cost when minimizing)."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        self._check_cols(cols)
        self.obj_cols = np.concatenate([self.obj_cols, cols])
        self.obj_coefs = np.concatenate(
            [self.obj_coefs, np.broadcast_to(np.asarray(coefs, dtype=np.float64), cols.shape)]
        )

    def minimize(self, expr: LinExpr | Number) -> None:
        """Minimize a linear expression."""
        self._set_expr_objective(expr, "min")

    def maximize(self, expr: LinExpr | Number) -> None:
        """Maximize a linear expression."""
        self._set_expr_objective(expr, "max")

    def _set_expr_objective(self, expr: LinExpr | Number, sense: str) -> None:
        e = expr if isinstance(expr, LinExpr) else LinExpr(np.empty(0), np.empty(0), float(expr))
        self.set_objective(e.cols, e.coefs, sense, e.const)

    def objective_vector(self) -> np.ndarray:
        """Dense objective coefficients (duplicates summed)."""
        return np.bincount(self.obj_cols, weights=self.obj_coefs, minlength=self.num_cols)

    # ------------------------------------------------------------------- queries
    @property
    def num_rows(self) -> int:
        """Number of linear rows (globals excluded)."""
        return sum(b.num_rows for b in self.row_batches)

    @property
    def num_nonzeros(self) -> int:
        """Number of stored linear entries (duplicates counted)."""
        return sum(b.nnz for b in self.row_batches)

    def constructs(self) -> set[str]:
        """Names of the global constructs present."""
        present = {
            C.INTERVAL: bool(self.interval_blocks),
            C.INDICATOR: any(b.rows.num_rows for b in self.indicators),
            C.PRODUCT: any(len(b.z) for b in self.products),
            C.CUMULATIVE: bool(self.cumulatives),
            C.RESERVOIR: bool(self.reservoirs),
            C.ALL_DIFFERENT: bool(self.all_different),
            C.CONTINUOUS: any(b.kind == "cont" for b in self.blocks.values()),
        }
        return {k for k, v in present.items() if v}

    def linear_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All linear rows as CSR (indptr, cols, coefs, lb, ub), duplicate entries summed, zeros dropped."""
        offsets = np.cumsum([0] + [b.num_rows for b in self.row_batches])
        n_rows = int(offsets[-1])
        if not self.row_batches:
            return np.zeros(1, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty(0)
        rows = np.concatenate([b.rows + o for b, o in zip(self.row_batches, offsets, strict=False)])
        cols = np.concatenate([b.cols for b in self.row_batches])
        vals = np.concatenate([b.coefs for b in self.row_batches])
        key = rows * max(self.num_cols, 1) + cols
        order = np.argsort(key, kind="stable")
        key, vals = key[order], vals[order]
        first = np.ones(len(key), bool)
        first[1:] = key[1:] != key[:-1]
        starts = np.flatnonzero(first)
        key, vals = key[starts], np.add.reduceat(vals, starts) if len(starts) else vals
        keep = vals != 0
        key, vals = key[keep], vals[keep]
        rows, cols = np.divmod(key, max(self.num_cols, 1))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_rows))]).astype(np.int64)
        lb = np.concatenate([b.lb for b in self.row_batches])
        ub = np.concatenate([b.ub for b in self.row_batches])
        return indptr, cols, vals, lb, ub

    # ------------------------------------------------------------------ values
    def flatten(self, values: dict[str, Any], fill: float = np.nan) -> np.ndarray:
        """Flat column vector from values by block name (missing blocks -> ``fill``)."""
        x = np.full(self.num_cols, fill, dtype=np.float64)
        for name, v in values.items():
            b = self.block(name)
            x[b.offset : b.offset + b.size] = np.broadcast_to(np.asarray(v, dtype=np.float64), b.shape).ravel()
        return x

    def split(self, x: np.ndarray, round_integers: bool = True) -> dict[str, np.ndarray]:
        """Values by block name, shaped like the blocks (integer blocks rounded to int64 unless told not to)."""
        out = {}
        for b in self.blocks.values():
            v = x[b.offset : b.offset + b.size].reshape(b.shape)
            out[b.name] = np.rint(v).astype(np.int64) if round_integers and b.kind != "cont" else v
        return out

    def objective_value(self, values: dict[str, Any] | np.ndarray) -> float:
        """The objective on a solution."""
        x = values if isinstance(values, np.ndarray) else self.flatten(values)
        return float(self.obj_coefs @ x[self.obj_cols] + self.obj_offset)

    def check(self, values: dict[str, Any] | np.ndarray, tol: float = 1e-6) -> list[str]:
        """Violations of bounds, integrality, rows and globals on a solution (empty list: feasible)."""
        from remat_models.model.check import violations

        return violations(self, values if isinstance(values, np.ndarray) else self.flatten(values), tol)

    def copy(self) -> Model:
        """A copy sharing the (immutable) arrays; lists of blocks and batches are new."""
        m = copy.copy(self)
        for attr in _DICT_ATTRS:
            setattr(m, attr, dict(getattr(self, attr)))
        for attr in _LIST_ATTRS:
            setattr(m, attr, list(getattr(self, attr)))
        return m

    # ----------------------------------------------------------------- helpers
    def _check_cols(self, cols: np.ndarray) -> None:
        if len(cols) and (cols.min() < 0 or cols.max() >= self.num_cols):
            raise ValueError(f"column ids must lie in 0..{self.num_cols - 1}")

    def _column_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lb, ub, integer) of every column, kept until a block is added (blocks' arrays are never changed)."""
        cached = self._columns_cache
        if cached is None or cached[0] != len(self._lb):
            cached = (len(self._lb), self.col_lb, self.col_ub, self.col_integer)
            self._columns_cache = cached
        return cached[1], cached[2], cached[3]

    def _check_bool(self, cols: np.ndarray, what: str) -> None:
        self._check_cols(cols)
        col_lb, col_ub, col_integer = self._column_table()
        lb, ub, integer = col_lb[cols], col_ub[cols], col_integer[cols]
        if not np.all(integer & (lb >= 0) & (ub <= 1)):
            raise ConfigurationError(f"{what} must be a bool (0/1 integer) variable")

    def _capacity(self, capacity: int | LinExpr) -> tuple[int, int]:
        """(column or -1, integer constant) of a capacity given as an int or as ``integer variable + int``."""
        if not isinstance(capacity, LinExpr):
            return -1, int(capacity)
        if len(capacity.cols) != 1 or capacity.coefs[0] != 1 or capacity.const != round(capacity.const):
            raise TypeError(f"a variable capacity is one integer variable plus an integer, got {capacity!r}")
        col = int(capacity.cols[0])
        self._check_cols(np.array([col]))
        if not self.col_integer[col]:
            raise ConfigurationError("a variable capacity must be an integer variable")
        return col, int(capacity.const)

    @staticmethod
    def _single_col(v: LinExpr) -> int:
        if len(v.cols) != 1 or v.coefs[0] != 1 or v.const != 0:
            raise TypeError(f"expected a single variable, got {v!r}")
        return int(v.cols[0])
