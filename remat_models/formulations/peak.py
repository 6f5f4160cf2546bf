"""The variable-capacity model exact max batch needs, and the capability a formulation declares to build it.

A family that supports exact max batch declares its ``PeakPart`` subclass on its formulation (``peak_model =
CheckmatePeak``); ``PeakPart.build(per_sample_graph, chain, options, initial) -> PeakModel`` builds its model with a
PEAK column on the family's solve chain (``SolveChain``: the backend looked up once).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, input_order_schedule
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.formulations import formulation_names, get_formulation
from remat_models.formulations.base import BuiltModel, SolveChain

log = logging.getLogger(__name__)

@dataclass
class PeakModel:
    """A base model on the per-sample graph with a variable capacity column and its cost row's terms.

    The per-sample peak of a solution is ``unit * PEAK + offset`` bytes; ``start`` are the hints of the
    checkpoint-all schedule (which meets any cap >= one plain pass), ``start_peak`` its PEAK value.
    """

    built: BuiltModel
    decode: Any  # (built, values) -> Schedule
    peak_block: str  # a one-cell block
    unit: float
    offset: int
    cost_cols: np.ndarray
    cost_coefs: np.ndarray
    start: dict[str, np.ndarray]
    start_peak: float

    @property
    def peak_col(self) -> int:
        """The PEAK column."""
        return int(self.built.model.block(self.peak_block).cols[0])

    def peak_bytes(self, peak_units: float) -> float:
        """Per-sample bytes for a PEAK value."""
        return self.unit * peak_units + self.offset


class PeakPart(ABC):
    """A family's part of exact max batch, declared as ``peak_model`` on its formulation class."""

    @classmethod
    @abstractmethod
    def build(cls, graph: Graph, chain: SolveChain, options: Any, initial: Schedule) -> PeakModel:
        """The family's model of the per-sample ``graph`` with a PEAK column, built on ``chain``, from ``initial``."""


def peak_model_bases() -> list[str]:
    """The formulations that declare a peak model (the bases of exact max batch)."""
    return [name for name in formulation_names() if get_formulation(name).peak_model is not None]


def peak_model_of(base: str, method: str) -> type[PeakPart]:
    """The peak part the formulation ``base`` declares; ConfigurationError naming the bases if none."""
    form = get_formulation(base) if base in formulation_names() else None
    part = None if form is None else form.peak_model
    if part is None:
        bases = " or ".join(peak_model_bases())
        raise ConfigurationError(f"max-batch {method} runs on {bases}, not {base!r} (use bisection)")
    return part


def start_hints(form: Any, built: BuiltModel, initial: Schedule, graph: Graph) -> dict[str, np.ndarray]:
    """Warm-start values of ``initial``, or of checkpoint-all when ``initial`` does not fit the model's structure."""
    try:
        return form.hints(built, initial)
    except (ConfigurationError, InvalidScheduleError) as error:
        log.warning("max-batch warm start dropped (%s): starting from checkpoint-all", error)
        return form.hints(built, input_order_schedule(graph))
