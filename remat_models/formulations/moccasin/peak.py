"""Moccasin's peak model for exact max batch: its phase-1 cumulative with the capacity ``peak`` as the variable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.formulations.base import SolveChain
from remat_models.formulations.moccasin.model import build_model
from remat_models.formulations.peak import PeakModel, PeakPart, start_hints


class MoccasinPeak(PeakPart):
    """Moccasin's peak part (``MoccasinFormulation.peak_model``)."""

    @classmethod
    def build(
        cls, graph: Graph, chain: SolveChain, options: Mapping[str, Any] | None, initial: Schedule
    ) -> PeakModel:
        """Moccasin's phase-1 model on the per-sample graph: the cumulative's capacity ``peak`` is the variable."""
        opts = chain.options(options)
        everything = graph.fixed_mem + int(graph.mem.sum()) + int(graph.workspace.max())
        built = build_model(graph, graph.lower_bound, opts, phase1_peak=everything + graph.lower_bound)
        assert built.layout is not None and built.scaled is not None
        m = built.model
        presence = m.block("retain.presence").cols
        start = start_hints(chain.form, built, initial, graph)
        start_peak = float(start["peak"][0])
        return PeakModel(
            built,
            chain.form.decode,
            "peak",
            float(built.units.mem_unit),
            graph.fixed_mem,
            presence.copy(),
            built.scaled.cost[built.layout.owner].astype(np.float64),
            start,
            start_peak,
        )
