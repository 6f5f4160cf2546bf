"""Exhaustive search over all valid schedules of a tiny graph (Dijkstra over resident sets): ground truth for tests.

A state is (resident set, progress, stage, last position in the stage). Steps are a compute
(cost = the node's cost, allowed if its inputs are resident and fixed + resident + output +
workspace fits the budget) or a free (cost 0). Structures:

- ``"free"``: any order (the unrestricted optimum).
- ``"staged"``: Checkmate's frontier-advancing stages over ``order``: stage t computes an
  increasing run of positions ending with the first computation of ``order[t]``.
- ``"runs"``: Checkmate's unpartitioned model: at most ``stages`` (default n) increasing runs of
  positions of ``order``, in any first-computation order.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from remat_models.errors import ConfigurationError
from remat_models.graph import Graph
from remat_models.schedule import Compute, Free, Schedule, Step

Structure = Literal["free", "staged", "runs"]
STRUCTURES: tuple[Structure, ...] = ("free", "staged", "runs")
MAX_NODES = 12

State = tuple[int, int, int, int]  # resident mask, progress (computed mask, or first computations), stage, last


@dataclass(frozen=True)
class ExhaustiveResult:
    """The cheapest schedule within the budget, its cost and the number of states settled."""

    cost: float
    schedule: Schedule
    states: int


def exhaustive_optimum(
    graph: Graph,
    budget: int,
    structure: Structure = "free",
    order: Sequence[int] | np.ndarray | None = None,
    stages: int | None = None,
) -> ExhaustiveResult | None:
    """Cheapest schedule of ``graph`` under ``budget`` with the given structure; None if none fits."""
    if structure not in STRUCTURES:
        raise ConfigurationError(f"unknown structure {structure!r}; choose one of {', '.join(STRUCTURES)}")
    if graph.n > MAX_NODES:
        raise ConfigurationError(f"exhaustive search is for graphs of at most {MAX_NODES} nodes, not {graph.n}")
    search = _Search(graph, budget, structure, graph.order if order is None else np.asarray(order), stages)
    return search.run()


class _Search:
    def __init__(self, graph: Graph, budget: int, structure: Structure, order: np.ndarray, stages: int | None) -> None:
        self.n = graph.n
        self.structure = structure
        self.max_stage = (self.n if stages is None else stages) - 1
        self.room = budget - graph.fixed_mem
        self.mem = graph.mem.tolist()
        self.need = (graph.mem + graph.workspace).tolist()
        self.cost = graph.cost.tolist()
        self.recomputable = graph.recomputable.tolist()
        self.pred_mask = [sum(1 << int(u) for u in graph.preds(v)) for v in range(self.n)]
        self.position = [0] * self.n
        for p, v in enumerate(order.tolist()):
            self.position[v] = p
        self.order = [int(v) for v in order]
        self.outputs = sum(1 << int(v) for v in graph.outputs)
        self.everything = (1 << self.n) - 1

    def run(self) -> ExhaustiveResult | None:
        start: State = (0, 0, 0, -1)
        best: dict[State, float] = {start: 0.0}
        parent: dict[State, tuple[State, Step]] = {}
        tie = itertools.count()
        heap = [(0.0, next(tie), start)]
        settled = 0
        while heap:
            cost, _, state = heapq.heappop(heap)
            if cost > best[state]:
                continue
            settled += 1
            if self._done(state):
                return ExhaustiveResult(cost, Schedule(tuple(self._path(parent, state))), settled)
            for step, nxt, step_cost in self._moves(state):
                total = cost + step_cost
                if total < best.get(nxt, float("inf")):
                    best[nxt] = total
                    parent[nxt] = (state, step)
                    heapq.heappush(heap, (total, next(tie), nxt))
        return None

    def _done(self, state: State) -> bool:
        resident, progress, _, _ = state
        complete = progress == self.n if self.structure == "staged" else progress == self.everything
        return complete and resident & self.outputs == self.outputs

    def _moves(self, state: State) -> list[tuple[Step, State, float]]:
        resident, progress, stage, last = state
        moves: list[tuple[Step, State, float]] = []
        in_use = sum(self.mem[v] for v in range(self.n) if resident >> v & 1)
        for v in range(self.n):
            bit = 1 << v
            if resident & bit:
                moves.append((Free(v), (resident & ~bit, progress, stage, last), 0.0))
                continue
            if resident & self.pred_mask[v] != self.pred_mask[v] or in_use + self.need[v] > self.room:
                continue
            for nxt in self._advance(v, progress, stage, last):
                moves.append((Compute(v), (resident | bit, *nxt), self.cost[v]))
        return moves

    def _advance(self, v: int, progress: int, stage: int, last: int) -> list[tuple[int, int, int]]:
        """Structure bookkeeping after computing v: the possible (progress, stage, last) that follow."""
        p = self.position[v]
        if self.structure == "staged":
            if progress == self.n or p <= last or p > progress or (p < progress and not self.recomputable[v]):
                return []
            return [(progress + 1, 0, -1)] if p == progress else [(progress, 0, p)]
        bit = 1 << v
        if progress & bit and not self.recomputable[v]:
            return []
        if self.structure == "free":
            return [(progress | bit, 0, -1)]
        options = [(progress | bit, stage, p)] if p > last else []
        if stage < self.max_stage:
            options.append((progress | bit, stage + 1, p))
        return options

    @staticmethod
    def _path(parent: dict[State, tuple[State, Step]], state: State) -> list[Step]:
        steps: list[Step] = []
        while state in parent:
            state, step = parent[state]
            steps.append(step)
        steps.reverse()
        return steps
