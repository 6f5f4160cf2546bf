"""Exact maximum batch size on a Checkmate or Moccasin base (Checkmate section 6.4, eq. (10); spec B.3).

Both methods need memory proportional to the batch (every ``mem_const``/``ws_const`` zero; fixed memory
may be affine). The base formulation is built on the per-sample graph (memory = slopes, fixed memory =
``fixed_slope``) with a variable capacity ``PEAK``: Checkmate gets rows ``U[cell] + ws R[cell] <= PEAK``,
Moccasin uses its phase-1 cumulative with a variable capacity. The cost cap is one row on the base
objective (``sum cost R <= cap``). A schedule with per-sample peak p fits batch B iff
``B p + fixed_const <= memory``, so:

- ``min-peak`` minimizes PEAK; ``B* = floor((memory - fixed_const) / p*)``. The solver's bound on PEAK gives
  an upper bound on B within the formulation.
- ``product`` writes ``B = B0 + sum_k 2^k beta_k`` (beta bool, B0 the batch of the checkpoint-all start in
  the model's accounting) and ``z_k = beta_k * PEAK`` with the model's bool x int product (native on
  CP-SAT and MiniZinc, McCormick rows on MILP backends, exact because beta is binary); the row
  ``B0 PEAK + sum 2^k z_k <= memory - fixed_const`` (per-sample offsets added) replaces the quadratic
  constraint of the paper, and ``sum 2^k beta_k`` is maximized.

The batch reported is computed from the decoded schedule's simulated per-sample peak (never smaller than
the model's), capped by the lower-bound limit; callers re-simulate it at that batch.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, input_order_schedule, simulate
from remat_models.errors import ConfigurationError
from remat_models.formulations import DEFAULT_FORMULATION, get_formulation
from remat_models.formulations.base import SolveChain
from remat_models.formulations.peak import PeakModel, peak_model_of
from remat_models.model import SolveStatus

log = logging.getLogger(__name__)

EXACT_METHODS = ("min-peak", "product")


@dataclass(frozen=True)
class ExactBatch:
    """One exact solve: the batch its schedule reaches, a proven upper bound (None if none), the solver status."""

    batch: int
    schedule: Schedule | None
    upper_bound: int | None
    status: SolveStatus
    details: dict[str, Any] = field(default_factory=dict)
    per_sample_peak: int | None = None  # the schedule's simulated peak on the per-sample graph


def solve_exact(
    graph: Graph,
    memory: int,
    cap: float,
    *,
    method: str,
    base: str = DEFAULT_FORMULATION,
    backend: str = "highs",
    lower: int = 0,
    upper: int,
    time_limit: float | None = None,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    start: Schedule | None = None,
) -> ExactBatch:
    """Largest batch of ``graph`` (carrying a proportional batch scaling) by ``min-peak`` or ``product``.

    ``lower`` is a batch known to fit (checkpoint-all's, or ``start``'s), ``upper`` the lower-bound limit;
    ``start`` (a schedule meeting the cap, default checkpoint-all) is the solver's warm start.
    """
    if method not in EXACT_METHODS:
        raise ConfigurationError(f"unknown exact max-batch method {method!r}; choose one of {EXACT_METHODS}")
    peak_part = peak_model_of(base, method)
    scaling = graph.batch_scaling
    if scaling is None:
        raise ConfigurationError(f"graph {graph.name!r} has no batch scaling")
    if not scaling.proportional_memory:
        raise ConfigurationError(
            f"max-batch {method} needs memory proportional to the batch; graph {graph.name!r} has constant"
            " parts in node memory or workspace: use method 'bisection'"
        )
    if upper < 1:
        return ExactBatch(0, None, 0, SolveStatus.INFEASIBLE, {"reason": "nothing fits at batch 1"})
    per_sample = scaling.per_sample(graph)
    initial = input_order_schedule(per_sample) if start is None else start
    chain = SolveChain(get_formulation(base), backend)  # builds the peak model and solves it
    pm = peak_part.build(per_sample, chain, options, initial)
    unit = pm.built.units.cost_unit
    cap_units = cap / unit
    if pm.built.units.cost_exact:
        cap_units = math.floor(cap_units + 1e-9)
    m = pm.built.model
    m.add_rows(np.zeros(pm.cost_cols.size), pm.cost_cols, pm.cost_coefs, ub=[cap_units], name="max_batch_cap")
    room = memory - scaling.fixed_const
    hints = dict(pm.start)
    if method == "min-peak":
        _enough_peak(pm, room, upper, hints)
        m.set_objective([pm.peak_col], [1.0], "min")
        base_batch = 0
    else:
        base_batch, hints = _product_rows(pm, room, lower, upper, hints)
    limits = SolveLimits(time_limit=time_limit, seed=seed)
    result = chain.run(m, limits, hints)
    details: dict[str, Any] = {
        "solver_status": result.status.in_model().value,  # the peak model is the family's: a restricted one
        "solve_time_s": result.wall_time,
        "model_columns": m.num_cols,
        "model_rows": m.num_rows,
    }
    schedule = pm.decode(pm.built, result.values) if result.has_solution else start
    if result.has_solution:
        details["model_per_sample_peak"] = pm.peak_bytes(float(np.ravel(result.values[pm.peak_block])[0]))
    elif start is not None:  # nothing within the limits: the warm start (which meets the cap) stands
        details["returned_warm_start"] = True
    batch, peak = 0, None
    if schedule is not None:
        peak = simulate(per_sample, schedule).peak
        batch = min(upper, room // peak) if peak > 0 else upper
    bound = _upper_bound(pm, method, result.status, result.bound, room, base_batch, upper)
    if bound is not None:
        bound = max(bound, batch)
    log.info("max-batch %s on %s/%s: batch %d, bound %s (%s)", method, base, backend, batch, bound, result.status.value)
    return ExactBatch(batch, schedule, bound, result.status, details, peak)


def _upper_bound(
    pm: PeakModel, method: str, status: SolveStatus, bound: float | None, room: int, base_batch: int, upper: int
) -> int | None:
    """A proven upper bound on the batch from the solver's bound (None when the solver gives none)."""
    if status == SolveStatus.INFEASIBLE:  # the product model starts at B0: infeasible proves nothing below it
        return 0 if method == "min-peak" or base_batch == 0 else None
    if bound is None or not math.isfinite(bound):
        return None
    if method == "min-peak":
        least = pm.peak_bytes(bound) * (1 - 1e-9)
        return upper if least <= 0 else min(upper, int(room // least))
    return min(upper, base_batch + math.floor(bound + 1e-6))


def _enough_peak(pm: PeakModel, room: int, upper: int, hints: dict[str, np.ndarray]) -> None:
    """Raise PEAK's lower bound to the per-sample peak that already reaches the lower-bound limit ``upper``.

    A smaller peak cannot give a larger batch, so the solver may stop as soon as it reaches this one.
    """
    enough = ((room // upper) - pm.offset) / pm.unit
    if pm.built.model.col_integer[pm.peak_col]:
        enough = math.floor(enough)
    enough = min(enough, float(pm.built.model.col_ub[pm.peak_col]))
    pm.built.model.add_rows([0], [pm.peak_col], [1.0], lb=[enough], name="max_batch_enough")
    hints[pm.peak_block] = np.maximum(np.asarray(hints[pm.peak_block], dtype=np.float64), enough)


def _product_rows(
    pm: PeakModel, room: int, lower: int, upper: int, hints: dict[str, np.ndarray]
) -> tuple[int, dict[str, np.ndarray]]:
    """``B = B0 + sum 2^k beta_k`` with ``z_k = beta_k PEAK`` and ``B PEAK unit + B offset <= room``; maximize B."""
    m = pm.built.model
    start_bytes = pm.peak_bytes(pm.start_peak)
    base_batch = max(0, min(lower, int(room // start_bytes))) if start_bytes > 0 else lower
    span = upper - base_batch
    bits = max(1, math.ceil(math.log2(span + 1))) if span > 0 else 1
    weights = 2.0 ** np.arange(bits)
    beta = m.bool_block("BATCH_BIT", bits)
    peak_ub = float(m.col_ub[pm.peak_col])
    integral = bool(m.col_integer[pm.peak_col])
    z = m.int_block("BATCH_Z", bits, 0, peak_ub) if integral else m.cont_block("BATCH_Z", bits, 0.0, peak_ub)
    m.add_products(z.cols, beta.cols, np.full(bits, pm.peak_col))
    cols = np.concatenate([[pm.peak_col], z.cols, beta.cols])
    coefs = np.concatenate([[pm.unit * base_batch], pm.unit * weights, pm.offset * weights])
    m.add_rows(np.zeros(cols.size), cols, coefs, ub=[room - pm.offset * base_batch], name="max_batch_memory")
    m.add_rows(np.zeros(bits), beta.cols, weights, ub=[max(span, 0)], name="max_batch_span")
    m.set_objective(beta.cols, weights, "max")
    return base_batch, {**hints, "BATCH_BIT": np.zeros(bits), "BATCH_Z": np.zeros(bits)}
