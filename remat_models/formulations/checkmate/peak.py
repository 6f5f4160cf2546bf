"""Checkmate's peak model for exact max batch: ``U[t, v] + ws_v R[t, v] <= PEAK`` on the per-sample graph."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.formulations.base import SolveChain
from remat_models.formulations.peak import PeakModel, PeakPart, start_hints


class CheckmatePeak(PeakPart):
    """Checkmate's peak part (``Checkmate.peak_model``)."""

    @classmethod
    def build(
        cls, graph: Graph, chain: SolveChain, options: Mapping[str, Any] | None, initial: Schedule
    ) -> PeakModel:
        """Checkmate on the per-sample graph with ``U[t, v] + ws_v R[t, v] <= PEAK`` (capacity: every byte)."""
        everything = graph.fixed_mem + int(graph.mem.sum()) + int(graph.workspace.max())
        built = chain.build(graph, everything, options)
        m = built.model
        cost_cols, cost_coefs = m.obj_cols.copy(), m.obj_coefs.copy()
        u = built.index("U")
        stage, node = u.coords
        r_cols = built.index("R").lookup(stage, node)
        workspace = graph.workspace[node] / built.mem_scale
        integral = bool(m.col_integer[u.cols[0]])
        peak = m.int_block("PEAK", 1, 0, built.capacity) if integral else m.cont_block("PEAK", 1, 0.0, built.capacity)
        count = u.cols.size
        rows = np.concatenate([np.arange(count)] * 3)
        cols = np.concatenate([u.cols, r_cols, np.full(count, peak.cols[0])])
        coefs = np.concatenate([np.ones(count), workspace, -np.ones(count)])
        m.add_rows(rows, cols, coefs, ub=np.zeros(count), name="max_batch_peak")
        start = start_hints(chain.form, built, initial, graph)
        x = m.flatten(start, fill=0.0)
        start_peak = float((x[u.cols] + workspace * x[r_cols]).max())
        start["PEAK"] = np.array([start_peak])
        return PeakModel(built, chain.form.decode, "PEAK", built.mem_scale, 0, cost_cols, cost_coefs, start, start_peak)
