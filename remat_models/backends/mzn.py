"""MiniZinc writer: one generic ``.mzn`` model (``MODEL``) plus the model's data as ``.dzn`` text.

Everything model-specific is data: bounds, linear rows in CSR form (row pointer / column /
coefficient arrays, guarded by an optional literal for indicators), intervals, cumulatives,
reservoirs (an O(events^2) decomposition), all-different groups, products, objective and hints.
Columns are 1-based in the data; a literal is (column, value) with column 0 meaning "true".
All numbers are integers: rows and the objective with fractional coefficients are scaled by a
power of ten (up to ``MAX_DIGITS`` decimals), else ``UnsupportedConstructError`` is raised. So is a
number (or an objective or expression value) beyond the solver's integer range: Gecode's FlatZinc
reader rejects a literal past 32 bits as a syntax error, and an objective that may overflow its
variable gives wrong optima; finite bounds are never clipped (only infinite ones become +-``BOUND``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from remat_models.errors import UnsupportedConstructError
from remat_models.model import Model
from remat_models.model import constructs as C

log = logging.getLogger(__name__)

# Constructs the generic model takes natively (continuous columns are not: the model is integer).
NATIVE = frozenset({C.INTERVAL, C.INDICATOR, C.PRODUCT, C.CUMULATIVE, C.RESERVOIR, C.ALL_DIFFERENT})
BOUND = 10**9  # infinite integer bounds become +-BOUND (Gecode's integers stop at 2^31 - 2)
MAX_DIGITS = 6  # fractional coefficients are scaled by at most 10**MAX_DIGITS
INT32_LIMIT = 2**31 - 2  # Gecode's and Chuffed's integers: |v| <= 2^31 - 2
EXACT_LIMIT = 2**53  # integers every MiniZinc solver holds exactly (MIP solvers read them as doubles)
Data = np.ndarray | int | str  # a .dzn value: an integer array, an integer, or literal text
# what each .dzn array holds, for error messages
_WHAT = {
    "col": "a column bound",
    "row_coef": "a linear row coefficient",
    "row_lo": "a linear row bound",
    "row_hi": "a linear row bound",
    "expr": "a reservoir/all_different expression",
    "ev": "a reservoir change",
    "res": "a reservoir level",
    "iv": "an interval length",
    "cum": "a cumulative demand or capacity",
    "obj": "an objective coefficient",
    "objective": "a value the objective can take",
    "hint": "a hint value",
}

MODEL = """\
% remat_models generic integer model; all model data comes from the .dzn (remat_models/backends/mzn.py)
include "cumulative.mzn";
include "alldifferent.mzn";

int: n_cols;
array[1..n_cols] of int: col_lb;
array[1..n_cols] of int: col_ub;
array[1..n_cols] of var int: x;
constraint forall(j in 1..n_cols)(x[j] in col_lb[j]..col_ub[j]);

% a literal: column 0 is "true", else x[col] = val
function var bool: lit(int: col, int: val) = if col = 0 then true else x[col] = val endif;

% linear rows (CSR); kind 0: sum = lo, 1: sum <= hi, 2: sum >= lo, 3: lo <= sum <= hi; guarded by a literal
int: n_rows;
array[1..n_rows + 1] of int: row_ptr;
array[int] of int: row_col;
array[int] of int: row_coef;
array[1..n_rows] of int: row_kind;
array[1..n_rows] of int: row_lo;
array[1..n_rows] of int: row_hi;
array[1..n_rows] of int: row_lit;
array[1..n_rows] of int: row_lit_val;
function var int: row_sum(int: r) = sum(k in row_ptr[r]..row_ptr[r + 1] - 1)(row_coef[k] * x[row_col[k]]);
constraint forall(r in 1..n_rows)(lit(row_lit[r], row_lit_val[r]) -> (
  if row_kind[r] = 0 then row_sum(r) = row_lo[r]
  elseif row_kind[r] = 1 then row_sum(r) <= row_hi[r]
  elseif row_kind[r] = 2 then row_sum(r) >= row_lo[r]
  else row_sum(r) >= row_lo[r] /\\ row_sum(r) <= row_hi[r] endif));

% affine expressions (CSR): reservoir event times first, then all-different members
int: n_expr;
array[1..n_expr + 1] of int: expr_ptr;
array[int] of int: expr_col;
array[int] of int: expr_coef;
array[1..n_expr] of int: expr_const;
function var int: expr(int: i) =
  sum(k in expr_ptr[i]..expr_ptr[i + 1] - 1)(expr_coef[k] * x[expr_col[k]]) + expr_const[i];

% intervals [start, end): start + size = end when present (size: column, or the fixed length if 0)
int: n_iv;
array[1..n_iv] of int: iv_start;
array[1..n_iv] of int: iv_end;
array[1..n_iv] of int: iv_size;
array[1..n_iv] of int: iv_len;
array[1..n_iv] of int: iv_pres;
function var int: iv_dur(int: i) = if iv_size[i] = 0 then iv_len[i] else x[iv_size[i]] endif;
constraint forall(i in 1..n_iv)(lit(iv_pres[i], 1) -> x[iv_start[i]] + iv_dur(i) = x[iv_end[i]]);

% cumulatives over intervals; an absent interval demands nothing
int: n_cum;
array[1..n_cum + 1] of int: cum_ptr;
array[int] of int: cum_iv;
array[int] of int: cum_demand;
array[1..n_cum] of int: cum_cap;
array[1..n_cum] of int: cum_cap_col;
function var int: cum_capacity(int: g) = cum_cap[g] + if cum_cap_col[g] = 0 then 0 else x[cum_cap_col[g]] endif;
constraint forall(g in 1..n_cum)(
  cumulative([x[iv_start[cum_iv[k]]] | k in cum_ptr[g]..cum_ptr[g + 1] - 1],
             [iv_dur(cum_iv[k]) | k in cum_ptr[g]..cum_ptr[g + 1] - 1],
             [cum_demand[k] * bool2int(lit(iv_pres[cum_iv[k]], 1)) | k in cum_ptr[g]..cum_ptr[g + 1] - 1],
             cum_capacity(g)));

% reservoirs (events 1..n_ev use expressions 1..n_ev as times): at every active event's time t,
% min <= sum of the active changes at times <= t <= max
int: n_res;
int: n_ev;
array[1..n_res + 1] of int: res_ptr;
array[1..n_res] of int: res_min;
array[1..n_res] of int: res_max;
array[1..n_ev] of int: ev_change;
array[1..n_ev] of int: ev_lit;
array[1..n_ev] of int: ev_lit_val;
array[1..n_ev] of var int: ev_time = [expr(i) | i in 1..n_ev];
array[1..n_ev] of var bool: ev_on = [lit(ev_lit[i], ev_lit_val[i]) | i in 1..n_ev];
constraint forall(g in 1..n_res, j in res_ptr[g]..res_ptr[g + 1] - 1)(ev_on[j] -> (
  let { var int: level = sum(i in res_ptr[g]..res_ptr[g + 1] - 1 where ev_change[i] != 0)(
          ev_change[i] * bool2int(ev_on[i] /\\ ev_time[i] <= ev_time[j])) }
  in res_min[g] <= level /\\ level <= res_max[g]));

% all-different groups over expressions n_ev + ad_ptr[g] .. n_ev + ad_ptr[g + 1] - 1
int: n_ad;
array[1..n_ad + 1] of int: ad_ptr;
constraint forall(g in 1..n_ad)(alldifferent([expr(n_ev + k) | k in ad_ptr[g]..ad_ptr[g + 1] - 1]));

% products z = b * x
array[int] of int: prod_z;
array[int] of int: prod_b;
array[int] of int: prod_x;
constraint forall(k in index_set(prod_z))(x[prod_z[k]] = x[prod_b[k]] * x[prod_x[k]]);

% objective (already scaled to integers; obj_sign -1 turns a maximization into a minimization)
int: obj_sign;
array[int] of int: obj_col;
array[int] of int: obj_coef;
var int: objective = obj_sign * sum(k in index_set(obj_col))(obj_coef[k] * x[obj_col[k]]);

% hints: search tries x[col] = val first (CP solvers), and warm_start for solvers that read it
array[int] of int: hint_col;
array[int] of int: hint_val;
solve :: seq_search([bool_search([x[hint_col[k]] = hint_val[k] | k in index_set(hint_col)], input_order, indomain_max,
                                 complete)])
      :: warm_start([x[c] | c in hint_col], hint_val)
      minimize objective;
"""


def reject(constructs: set[str]) -> None:
    """Raise ``UnsupportedConstructError`` for the first of ``constructs`` (the ones the MiniZinc model lacks)."""
    if constructs:
        from remat_models.backends import natively_taking

        construct = sorted(constructs)[0]
        raise UnsupportedConstructError(
            f"minizinc: the MiniZinc model is integer-only and cannot take construct {construct!r};"
            f" backends that take it natively: {', '.join(natively_taking(construct)) or 'none'}"
        )


def lowered(model: Model) -> Model:
    """``model`` with every construct the MiniZinc model lacks lowered (continuous columns rejected)."""
    from remat_models.model.lowering import ORDER, lower

    reject(model.constructs() - NATIVE - set(ORDER))
    return lower(model, NATIVE).model


def write(
    model: Model,
    mzn: Path,
    dzn: Path,
    hint: np.ndarray | None = None,
    readable: bool = False,
    limit: int = EXACT_LIMIT,
    solver: str = "MiniZinc",
) -> float:
    """Write ``MODEL`` to ``mzn`` and the data of ``model`` (holding only ``NATIVE`` constructs) to ``dzn``.

    ``readable`` also declares one array per variable block, named as the block, with its cells'
    coordinates on the block's axes (see ``block_views``). Returns the objective scale: the MiniZinc
    ``objective`` equals ``scale * sign * model objective`` (up to the objective offset). A number or
    objective value beyond +-``limit`` (the integer range of ``solver``) raises ``UnsupportedConstructError``.
    """
    data, scale = dzn_items(model, hint)
    check_range(data, limit, solver)
    text = MODEL
    if readable:
        declarations, view_data = block_views(model)
        text += declarations
        data += view_data
    mzn.write_text(text)
    with dzn.open("w") as f:
        for name, value in data:
            f.write(f"{name} = {value if isinstance(value, str | int) else _ints(value)};\n")
    return scale


def check_range(data: list[tuple[str, Data]], limit: int, solver: str) -> None:
    """Raise ``UnsupportedConstructError`` if a number of ``data`` lies beyond +-``limit``.

    So does a value the objective or an affine expression can take (they become solver variables). Data
    past 32 bits within the limit is logged: Gecode and Chuffed could not read it.
    """
    items = dict(data)
    ranges = [
        (
            "objective",
            _affine_reach(np.array([1, len(items["obj_col"]) + 1]), items["obj_col"], items["obj_coef"], items),
        ),
        ("expr", _affine_reach(items["expr_ptr"], items["expr_col"], items["expr_coef"], items, items["expr_const"])),
    ]
    largest = ("", 0.0)
    for name, value in [*data, *ranges]:
        if isinstance(value, str) or np.size(value) == 0:
            continue
        top = float(np.max(np.abs(np.asarray(value, dtype=np.float64))))
        if top > limit:
            what = _WHAT.get(name, _WHAT.get(name.split("_")[0], name))
            raise UnsupportedConstructError(
                f"{solver} takes integers within +-{limit:,} but the model has {top:,.0f} ({what}: {name})"
                " (construct 'large_integer'); use a backend with 64-bit integers (cpsat, highs) or coarser units"
            )
        largest = max(largest, (name, top), key=lambda p: p[1])
    if largest[1] > INT32_LIMIT:
        log.info("minizinc: %s holds %d, past 32 bits: Gecode and Chuffed cannot solve this model", *largest)


def _affine_reach(ptr: Data, cols: Data, coefs: Data, items: dict[str, Data], const: Data | None = None) -> np.ndarray:
    """The lowest and highest values of each affine expression (1-based CSR over the columns)."""
    ptr, cols = np.asarray(ptr, dtype=np.int64) - 1, np.asarray(cols, dtype=np.int64) - 1
    a = np.asarray(coefs, dtype=np.float64)
    lb, ub = (np.asarray(items[k], dtype=np.float64)[cols] for k in ("col_lb", "col_ub"))
    lo, hi = np.minimum(a * lb, a * ub), np.maximum(a * lb, a * ub)
    rows = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    base = np.zeros(len(ptr) - 1) if const is None else np.asarray(const, dtype=np.float64)
    return np.concatenate([base + np.bincount(rows, lo, len(base)), base + np.bincount(rows, hi, len(base))])


def block_views(model: Model) -> tuple[str, list[tuple[str, str]]]:
    """Declarations of one array per block of the model (lowering's own blocks excluded) and their data.

    Block ``R`` on axes (stage, node) becomes ``array[1..K] of var int: b_R`` (cell k is column
    ``b_R_col[k]``) with ``b_R_stage`` and ``b_R_node`` holding each cell's 0-based coordinates; axes with
    labels (node names) get a string array ``b_R_node_names``.
    """
    lines = ["", "% ---- the model's variable blocks, named (cell k of a block is at the coordinates below) ----"]
    data: list[tuple[str, str]] = []
    for block in model.blocks.values():
        if block.name.startswith("_lower"):
            continue
        index = model.index(block.name)
        name = f"b_{_identifier(block.name)}"  # the prefix keeps block names apart from the generic model's
        lines.append(f"% {block.name}: {index.cols.size} cells on axes ({', '.join(index.axes)})")
        lines.append(f"array[int] of int: {name}_col;")
        lines.append(f"array[int] of var int: {name} = [x[{name}_col[k]] | k in index_set({name}_col)];")
        data.append((f"{name}_col", _ints(index.cols + 1)))
        for a, axis in enumerate(index.axes):
            lines.append(f"array[int] of int: {name}_{_identifier(axis)};")
            data.append((f"{name}_{_identifier(axis)}", _ints(index.coords[a])))
            labels = index.labels[a] if a < len(index.labels) else None
            if labels is not None:
                lines.append(f"array[int] of string: {name}_{_identifier(axis)}_names;")
                data.append(
                    (f"{name}_{_identifier(axis)}_names", "[" + ",".join(json.dumps(str(v)) for v in labels) + "]")
                )
    return "\n".join(lines) + "\n", data


def _identifier(text: str) -> str:
    """A block or axis name as MiniZinc identifier characters (``retain.start`` -> ``retain_start``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def dzn_items(model: Model, hint: np.ndarray | None = None) -> tuple[list[tuple[str, Data]], float]:
    """The ``.dzn`` assignments of ``model`` as (name, value) pairs, and the objective scale."""
    reject(model.constructs() - NATIVE)
    items: list[tuple[str, Data]] = [("n_cols", int(model.num_cols))]
    items += [("col_lb", _clip(model.col_lb)), ("col_ub", _clip(model.col_ub))]
    items += _rows(model)
    items += _exprs_and_reservoirs(model)
    items += _intervals(model)
    prods = model.products
    for name, attr in (("prod_z", "z"), ("prod_b", "b"), ("prod_x", "x")):
        items.append((name, np.concatenate([getattr(p, attr) for p in prods] or [[]]) + 1))
    obj_items, scale = _objective(model)
    items += obj_items
    idx = np.flatnonzero(~np.isnan(hint)) if hint is not None else np.empty(0, np.int64)
    items += [("hint_col", idx + 1), ("hint_val", np.rint(hint[idx]) if len(idx) else idx)]
    return items, scale


# ------------------------------------------------------------------------------------ sections
def _rows(model: Model) -> list[tuple[str, Data]]:
    """Linear rows, then indicator rows (guarded by their literal), as one CSR table."""
    indptr, cols, vals, lo, hi = model.linear_csr()
    parts = [(indptr, cols, vals, lo, hi, np.full(len(lo), -1), np.zeros(len(lo), bool))]
    for ind in model.indicators:
        a = ind.rows.to_affine()
        parts.append((a.indptr, a.cols, a.coefs, ind.rows.lb, ind.rows.ub, ind.lit_cols, ind.lit_neg))
    ptr = _concat_ptr([p[0] for p in parts])
    cols = np.concatenate([p[1] for p in parts])
    vals = np.concatenate([p[2] for p in parts])
    lo, hi = np.concatenate([p[3] for p in parts]), np.concatenate([p[4] for p in parts])
    lit, neg = np.concatenate([p[5] for p in parts]), np.concatenate([p[6] for p in parts])
    coefs, scale = integer_rows(ptr, vals, "linear row")
    has_lo, has_hi = np.isfinite(lo), np.isfinite(hi)
    lo = np.where(has_lo, np.ceil(np.where(has_lo, lo, 0) * scale - 1e-9), 0)  # integer rows: round inwards
    hi = np.where(has_hi, np.floor(np.where(has_hi, hi, 0) * scale + 1e-9), 0)
    kind = np.select([has_lo & has_hi & (lo == hi), has_hi & ~has_lo, has_lo & ~has_hi], [0, 1, 2], 3)
    keep = has_lo | has_hi  # free rows are dropped
    ptr, cols, coefs = _select_rows(ptr, cols, coefs, keep)
    return [
        ("n_rows", int(keep.sum())),
        ("row_ptr", ptr + 1),
        ("row_col", cols + 1),
        ("row_coef", coefs),
        ("row_kind", kind[keep]),
        ("row_lo", lo[keep]),
        ("row_hi", hi[keep]),
        ("row_lit", lit[keep] + 1),
        ("row_lit_val", ~neg[keep]),
    ]


def _exprs_and_reservoirs(model: Model) -> list[tuple[str, Data]]:
    """Affine expressions (reservoir times, then all-different members), reservoirs and all-different groups."""
    res, ads = model.reservoirs, model.all_different
    batches = [r.times for r in res] + [a.exprs for a in ads]
    ptr = _concat_ptr([b.indptr for b in batches])
    cols = np.concatenate([b.cols for b in batches] or [np.empty(0, np.int64)])
    coefs = _exact_ints(np.concatenate([b.coefs for b in batches] or [[]]), "reservoir/all_different expression")
    const = _exact_ints(np.concatenate([b.const for b in batches] or [[]]), "reservoir/all_different constant")
    changes = np.concatenate([r.changes for r in res] or [[]])
    lit = np.concatenate([r.active_cols for r in res] or [[]])
    neg = np.concatenate([r.active_neg for r in res] or [[]]).astype(bool)
    pos = [np.maximum(r.changes, 0).sum() for r in res]
    negs = [np.minimum(r.changes, 0).sum() for r in res]
    return [
        ("n_expr", len(const)),
        ("expr_ptr", ptr + 1),
        ("expr_col", cols + 1),
        ("expr_coef", coefs),
        ("expr_const", const),
        ("n_res", len(res)),
        ("n_ev", len(changes)),
        ("res_ptr", _group_ptr([r.times.size for r in res])),
        # levels lie within [sum of negative changes, sum of positive ones]: clip the (maybe huge) limits
        ("res_min", np.asarray([max(r.min_level, n) for r, n in zip(res, negs, strict=True)])),
        ("res_max", np.asarray([min(r.max_level, p) for r, p in zip(res, pos, strict=True)])),
        ("ev_change", changes),
        ("ev_lit", lit + 1),
        ("ev_lit_val", ~neg),
        ("n_ad", len(ads)),
        ("ad_ptr", _group_ptr([a.exprs.size for a in ads])),
    ]


def _intervals(model: Model) -> list[tuple[str, Data]]:
    """Interval table and cumulative groups."""
    iv = model.intervals
    cums = model.cumulatives
    return [
        ("n_iv", len(iv.start)),
        ("iv_start", iv.start + 1),
        ("iv_end", iv.end + 1),
        ("iv_size", iv.size_col + 1),
        ("iv_len", np.where(iv.size_col >= 0, 0, iv.fixed_size)),
        ("iv_pres", iv.presence + 1),
        ("n_cum", len(cums)),
        ("cum_ptr", _group_ptr([len(c.interval_ids) for c in cums])),
        ("cum_iv", np.concatenate([c.interval_ids for c in cums] or [[]]) + 1),
        ("cum_demand", np.concatenate([c.demands for c in cums] or [[]])),
        ("cum_cap", np.asarray([c.capacity for c in cums])),
        ("cum_cap_col", np.asarray([c.capacity_col + 1 for c in cums])),
    ]


def _objective(model: Model) -> tuple[list[tuple[str, Data]], float]:
    coefs = model.objective_vector()
    cols = np.flatnonzero(coefs)
    ints, scale = integer_rows(np.array([0, len(cols)]), coefs[cols], "objective")
    sign = 1 if model.sense == "min" else -1
    items = [("obj_sign", sign), ("obj_col", cols + 1), ("obj_coef", ints)]
    return items, float(scale[0]) if len(scale) else 1.0


# ------------------------------------------------------------------------------------- helpers
def integer_rows(indptr: np.ndarray, vals: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Scale each CSR row by the smallest power of ten making it integral: (int coefficients, scale per row)."""
    digits = np.full(len(vals), MAX_DIGITS + 1)
    for d in range(MAX_DIGITS, -1, -1):
        v = vals * 10.0**d
        digits[np.abs(v - np.rint(v)) <= 1e-9 * np.maximum(1.0, np.abs(v))] = d
    if np.any(digits > MAX_DIGITS):
        raise UnsupportedConstructError(
            f"minizinc: a {what} coefficient has more than {MAX_DIGITS} decimals (construct"
            " 'fractional_coefficient'); scale the model to integers"
        )
    n_rows = len(indptr) - 1
    row_digits = np.zeros(n_rows, np.int64)
    nonempty = np.flatnonzero(np.diff(indptr) > 0)
    if len(vals):
        row_digits[nonempty] = np.maximum.reduceat(digits, indptr[nonempty])
    scale = 10.0**row_digits
    entry_scale = np.repeat(scale, np.diff(indptr))
    return np.rint(vals * entry_scale).astype(np.int64), scale


def _exact_ints(a: np.ndarray, what: str) -> np.ndarray:
    """``a`` as int64, refusing fractional values (expressions of globals cannot be rescaled)."""
    r = np.rint(a)
    if not np.allclose(a, r, rtol=0, atol=1e-9):
        raise UnsupportedConstructError(f"minizinc: fractional coefficient in a {what}; scale the model to integers")
    return r.astype(np.int64)


def _select_rows(
    indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR sub-matrix of the rows where ``keep``."""
    lengths = np.diff(indptr)
    entry_keep = np.repeat(keep, lengths)
    return np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64), cols[entry_keep], vals[entry_keep]


def _concat_ptr(ptrs: Iterable[np.ndarray]) -> np.ndarray:
    """Stack CSR row pointers of consecutive blocks into one (0-based)."""
    out, base = [np.zeros(1, np.int64)], 0
    for p in ptrs:
        p = np.asarray(p, dtype=np.int64)
        out.append(p[1:] - p[0] + base)
        base = int(out[-1][-1]) if len(p) > 1 else base
    return np.concatenate(out)


def _group_ptr(sizes: list[int]) -> np.ndarray:
    """1-based start pointers of consecutive groups of the given sizes (plus the end)."""
    return np.cumsum([0, *sizes], dtype=np.int64) + 1


def _clip(b: np.ndarray) -> np.ndarray:
    """Infinite bounds as +-``BOUND``; finite ones kept (clipping them would change the model)."""
    return np.where(np.isinf(b), np.sign(b) * BOUND, b)


def _ints(a: Iterable[object] | np.ndarray) -> str:
    """A MiniZinc integer array literal."""
    arr = np.asarray(a)
    return "[" + ",".join(map(str, arr.astype(np.int64).tolist())) + "]"
