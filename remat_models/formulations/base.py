"""The interface every formulation implements: build a model from a graph, decode a solution."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from remat_models.graph import Graph
from remat_models.schedule import Schedule


class Formulation(Protocol):
    """Graph + budget -> abstract model; solution -> Schedule (which the simulator then checks)."""

    name: ClassVar[str]

    def build(self, graph: Graph, budget: int, options: dict[str, Any] | None = None) -> Any:
        """Build the abstract optimization model for ``graph`` under ``budget`` bytes."""
        ...

    def decode(self, graph: Graph, solution: Any) -> Schedule:
        """Turn a solver's solution into a Schedule."""
        ...

    def hints(self, graph: Graph, schedule: Schedule) -> dict[str, Any]:
        """Map any Schedule to variable hints for a warm start."""
        ...
