"""Paging on Checkmate (POET's SRam/SSd/MIn/MOut, spec C.4): blocks ``H``, ``IN``, ``OUT`` on S's cells.

- ``H[t, i]``: i has a host copy when stage t starts; ``OUT[t, i]``: offloaded at the start of stage t;
  ``IN[t, i]``: prefetched at the end of stage t, so resident (counted through S) from stage t+1.
- Rows: ``OUT <= S``; ``H[t+1] = H[t] + OUT[t]`` (nothing on the host at first; host copies persist,
  as in the simulator); ``OUT + H <= 1`` (one host copy); ``IN <= H``; ``IN[t] <= S[t+1]``; the carry
  rows (1c) take ``-IN``: ``S[t+1, i] <= R[t, i] + S[t, i] + IN[t, i]``; optionally
  ``sum_i M_i (H[t, i] + OUT[t, i]) <= host_capacity`` per stage.
- Objective: ``+ t_out(i) OUT + t_in(i) IN`` in model cost units.
The prefetch runs when the device holds a subset of S[t+1], so its memory is at most
``U[t+1, first cell] <= budget``: the model peak is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from remat_models.core.schedule import TRANSFER_STEPS, Offload, Prefetch, Schedule
from remat_models.formulations.base import PagingPart
from remat_models.formulations.base import PagingPlugin as Paging  # what the calling extension offers
from remat_models.formulations.rows import Rows
from remat_models.model.index import IndexMap


@dataclass(frozen=True)
class CheckmatePaging:
    """Column ids (dense, (T, n) by graph node id, -1: no cell) of the paging blocks."""

    h: np.ndarray
    out: np.ndarray
    inn: np.ndarray


def apply(paging: Paging, built: Any) -> None:
    """Add H, IN, OUT, their rows, the carry terms and the transfer costs to a Checkmate model."""
    state = add_blocks(paging, built)
    (tt, ii), (ft, fi) = np.nonzero(state.out >= 0), np.nonzero(state.inn >= 0)
    transfer, unit, mem = paging.transfer, built.units.cost_unit, built.graph.mem.astype(np.float64)
    built.model.add_objective_terms(state.out[tt, ii], transfer.out_time(mem[ii]) / unit)
    built.model.add_objective_terms(state.inn[ft, fi], transfer.in_time(mem[fi]) / unit)


def add_blocks(paging: Paging, built: Any) -> CheckmatePaging:
    """H, IN, OUT, their rows and the carry terms (no objective terms); the state is ``built.extensions[name]``."""
    m, graph = built.model, built.graph
    s_ids = built.index("S").ids  # (T, n) by node id
    T, n = s_ids.shape
    eligible = np.zeros(n, dtype=bool)
    eligible[paging.paged_nodes(graph)] = True
    cell = (s_ids >= 0) & eligible[None, :]
    in_cell = np.zeros_like(cell)
    in_cell[:-1] = cell[:-1] & (s_ids[1:] >= 0)
    h = _block(m, "H", cell)
    out = _block(m, "OUT", cell)
    inn = _block(m, "IN", in_cell)
    names = graph.names
    for block, ids in (("H", h), ("OUT", out), ("IN", inn)):
        m.set_index(IndexMap.dense(block, ("stage", "node"), ids, labels=(None, names)))
    tt, ii = np.nonzero(cell)
    k = tt.size
    Rows(k).term(out[tt, ii], 1.0).term(s_ids[tt, ii], -1.0).add_to(m, ub=0.0, name="paging_out")
    previous, has_previous = np.maximum(tt - 1, 0), tt >= 1  # no cell before: H starts at 0
    host = Rows(k).term(h[tt, ii], 1.0).term(np.where(has_previous, h[previous, ii], -1), -1.0)
    host.term(np.where(has_previous, out[previous, ii], -1), -1.0).add_to(m, lb=0.0, ub=0.0, name="paging_host")
    Rows(k).term(out[tt, ii], 1.0).term(h[tt, ii], 1.0).add_to(m, ub=1.0, name="paging_once")
    ft, fi = np.nonzero(in_cell)
    f = ft.size
    Rows(f).term(inn[ft, fi], 1.0).term(h[ft, fi], -1.0).add_to(m, ub=0.0, name="paging_in")
    Rows(f).term(inn[ft, fi], 1.0).term(s_ids[ft + 1, fi], -1.0).add_to(m, ub=0.0, name="paging_resident")
    carry_rows = built.hooks["carry"].lookup(ft + 1, fi)
    has_row = carry_rows >= 0
    m.add_terms("carry", carry_rows[has_row], inn[ft, fi][has_row], np.full(int(has_row.sum()), -1.0))
    transfer, mem = paging.transfer, graph.mem.astype(np.float64)
    if transfer.host_capacity is not None and k:
        coefs = mem[ii] / built.mem_scale
        capacity = transfer.host_capacity / built.mem_scale
        if np.array_equal(coefs, np.round(coefs)):  # integral left-hand side: an integral bound
            capacity = float(np.floor(capacity))
        rows = Rows(T).term(h[tt, ii], coefs, rows=tt).term(out[tt, ii], coefs, rows=tt)
        rows.add_to(m, ub=capacity, name="paging_capacity")
    state = built.extensions[paging.name] = CheckmatePaging(h=h, out=out, inn=inn)
    return state


def _block(m: Any, name: str, mask: np.ndarray) -> np.ndarray:
    """A boolean block over ``mask``'s cells; dense column ids (-1 elsewhere)."""
    block = m.bool_block(name, int(mask.sum()))
    ids = np.full(mask.shape, -1, dtype=np.int64)
    ids[mask] = block.cols
    return ids


def events(paging: Paging, built: Any, values: Mapping[str, np.ndarray], sequence: list[Any]) -> list[Any]:
    """Offloads at each stage's start, prefetches at its end (after the frees that follow its last compute)."""
    state: CheckmatePaging = built.extensions[paging.name]
    x = _dense(built, values)
    R, _ = built.matrices(values)
    per_stage = R.sum(axis=1)
    offloads = [np.flatnonzero(row > 0.5) for row in _take(x, state.out)]
    prefetches = [np.flatnonzero(row > 0.5) for row in _take(x, state.inn)]
    result: list[Any] = []
    position = 0
    for stage, computes in enumerate(per_stage.tolist()):
        result.extend(Offload(int(i)) for i in offloads[stage])
        while computes:
            item = sequence[position]
            position += 1
            result.append(item)
            computes -= not isinstance(item, TRANSFER_STEPS)
        result.extend(Prefetch(int(i)) for i in prefetches[stage])
    result.extend(sequence[position:])
    return result


def _dense(built: Any, values: Mapping[str, np.ndarray]) -> np.ndarray:
    """The flat solution vector of the paging blocks (zeros where a block has no values)."""
    m = built.model
    x = np.zeros(m.num_cols)
    for name in ("H", "OUT", "IN"):
        if name in values:
            x[m.block(name).cols] = np.asarray(values[name], dtype=np.float64)
    return x


def _take(x: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return np.where(ids >= 0, x[np.maximum(ids, 0)], 0.0)


def hints(paging: Paging, built: Any, schedule: Schedule) -> dict[str, np.ndarray]:
    """No paging: all paging blocks zero."""
    m = built.model
    return {name: np.zeros(m.block(name).cols.size) for name in ("H", "OUT", "IN")}


class CheckmatePagingPart(PagingPart):
    """Checkmate's paging part (``Checkmate.paging_part``): H, OUT and IN per stage."""

    apply = staticmethod(apply)
    events = staticmethod(events)
    hints = staticmethod(hints)
