"""The interface every formulation implements: build a model from a graph, decode values, map schedules to hints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from remat_models.formulations.scaling import Units
from remat_models.graph import Graph
from remat_models.model import Model
from remat_models.schedule import Schedule


@dataclass
class BuiltModel:
    """An abstract model with what decoding needs: the graph, the budget in bytes, the units used."""

    model: Model
    graph: Graph
    budget: int
    units: Units

    def cost(self, model_objective: float | None) -> float | None:
        """A model objective (or bound) in the graph's original cost units."""
        return None if model_objective is None else float(model_objective) * self.units.cost_unit


class Formulation(Protocol):
    """Graph + budget -> abstract model; solution values -> Schedule (which the simulator then checks)."""

    name: ClassVar[str]

    def build(self, graph: Graph, budget: int, options: Any = None) -> BuiltModel:
        """Build the abstract optimization model for ``graph`` under ``budget`` bytes."""
        ...

    def decode(self, built: BuiltModel, values: dict[str, np.ndarray]) -> Schedule:
        """Turn a solution's values (by block name) into a Schedule."""
        ...

    def hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Map a Schedule to values by block name for a warm start."""
        ...
