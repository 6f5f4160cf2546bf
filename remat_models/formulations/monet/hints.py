"""Warm-start values of the MONeT program from a MONeT-shaped schedule (forward pass, then stage by stage)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from remat_models.core.schedule import Compute, Free, Schedule
from remat_models.errors import ConfigurationError

if TYPE_CHECKING:
    from remat_models.formulations.monet.formulation import MonetModel


def hint_values(built: MonetModel, schedule: Schedule) -> dict[str, np.ndarray]:
    """Values of every block for a MONeT-shaped schedule (forward pass, then stage by stage)."""
    lay, graph = built.layout, built.graph
    T, P = lay.n_stages, lay.n_positions
    position = np.full(graph.n, -1, dtype=np.int64)
    position[lay.forward] = np.arange(P)
    stage_index = {int(v): t for t, v in enumerate(lay.stage_nodes.tolist(), start=1)}
    R = np.zeros((T, P), dtype=bool)
    impl = np.zeros((T, P), dtype=np.int64)
    stage_impl = np.zeros(T, dtype=np.int64)
    S = np.zeros((T + 1, P), dtype=bool)
    resident = np.zeros(graph.n, dtype=bool)
    forward_done = int((~lay.is_aux).sum())
    t, last, done, seen = 0, -1, False, 0  # stage, last position in it, b_t run, stage-0 computes
    for step in schedule.steps:
        v = step.node
        if isinstance(step, Free):
            resident[v] = False
            continue
        if not isinstance(step, Compute):
            raise ConfigurationError(f"monet warm start: unsupported step {step!r}")
        if (t == 0 and seen == forward_done) or done:  # the first compute of the next stage
            t, last, done = t + 1, -1, False
            if t >= T:
                raise ConfigurationError(f"monet warm start: {graph.names[v]!r} computed after the last stage")
            S[t] = resident[lay.forward]
        if v in stage_index:
            if stage_index[v] != t:
                raise ConfigurationError(f"monet warm start: stage node {graph.names[v]!r} out of MONeT's order")
            kept = [k for k, b in enumerate(lay.b_impls[t - 1]) if b.index == step.impl]
            if not kept:
                raise ConfigurationError(f"monet warm start: impl {step.impl} of {graph.names[v]!r} is not allowed")
            stage_impl[t], done = kept[0], True
            if lay.b_impls[t - 1][kept[0]].inplace >= 0:
                resident[lay.b_impls[t - 1][kept[0]].inplace] = False
        else:
            p = int(position[v])
            if p < 0 or p <= last or (t == 0 and p != last + 1 + int(lay.is_aux[last + 1 : p].sum())):
                raise ConfigurationError(f"monet warm start: {graph.names[v]!r} computed out of MONeT's order")
            kept = [k for k, op in enumerate(lay.f_impls[p]) if op.index == step.impl]
            if not kept or built.r_col[t, p] < 0:
                raise ConfigurationError(f"monet warm start: {graph.names[v]!r} cannot be computed in stage {t} so")
            op = lay.f_impls[p][kept[0]]
            R[t, p], impl[t, p], last = True, kept[0], p
            R[t, op.aux] = True
            seen += t == 0
            if op.inplace >= 0:
                resident[lay.forward[op.inplace]] = False
            resident[lay.forward[op.aux]] = True
        resident[v] = True
    if t != T - 1 or (T > 1 and not done) or seen != forward_done:
        raise ConfigurationError("monet warm start: the schedule does not run every stage node in MONeT's order")
    S[T] = resident[lay.forward]
    return _assignment(built, R, impl, stage_impl, S)


def _assignment(
    built: MonetModel, R: np.ndarray, impl: np.ndarray, stage_impl: np.ndarray, S: np.ndarray
) -> dict[str, np.ndarray]:
    """Every block's values implied by R, the impl choices and S (P, SIGMA derived)."""
    m = built.model
    x = np.zeros(m.num_cols)
    cells = built.r_col >= 0
    x[built.r_col[cells]] = R[cells]
    x[built.s_col[1:].ravel()] = S[1:].ravel()
    for t, row in enumerate(built.delta_cols):
        for p, cols in enumerate(row):
            if len(cols) > 1 and R[t, p]:
                x[cols[impl[t, p]]] = 1.0
        if t >= 1:
            x[built.dhat_cols[t][stage_impl[t]]] = 1.0
    for (t, u), col in zip(built.p_cells, m.block("P").cols.tolist(), strict=True):
        consumed = sum(x[c] for c in built.ip.get((t, u), []))
        x[col] = float(R[t, u] and consumed < 0.5)
    for batch in m.products:  # SIGMA = DHAT * S[t+1]
        x[batch.z] = x[batch.b] * x[batch.x]
    if built.prefix is not None:
        _fill_prefix(built, x)
    return m.split(x)


def _fill_prefix(built: MonetModel, x: np.ndarray) -> None:
    """ASUF, APRE and KPRE from their definitions (sums over S and K's variable terms)."""
    asuf, apre, kpre = built.prefix  # type: ignore[misc]
    M = built.mem_units
    T, P = built.r_col.shape
    for t in range(T):
        s_now = x[built.s_col[t]] * M if t >= 1 else np.zeros(P)
        suffix = np.cumsum(s_now[::-1])[::-1]
        cells = asuf[t, :P] >= 0
        x[asuf[t, :P][cells]] = suffix[cells]
        x[apre[t, 1:]] = np.cumsum(x[built.s_col[t + 1]] * M)
        ki, kc, kf = built.k_terms[t]
        if ki.size and (kpre[t, 1:] >= 0).all():
            per_position = np.bincount(ki, weights=kf * M[ki] * x[kc], minlength=P)
            x[kpre[t, 1:]] = np.cumsum(per_position)

