"""Exhaustive search over all valid schedules of a tiny graph (Dijkstra over resident sets): ground truth for tests.

A state is (resident set, progress, stage, last position in the stage). Steps are a compute
(cost = its implementation's cost, or recompute cost when the node was computed before;
allowed if the implementation's reads are resident and fixed + resident + allocation +
workspace fits the budget; an in-place step allocates nothing and consumes its target, aux
values are allocated with their producer) or a free (cost 0). Structures:

- ``"free"``: any order (the unrestricted optimum).
- ``"staged"``: Checkmate's frontier-advancing stages over ``order``: stage t computes an
  increasing run of positions ending with the first computation of ``order[t]``.
- ``"runs"``: Checkmate's unpartitioned model: at most ``stages`` (default n) increasing runs of
  positions of ``order``, in any first-computation order.
- ``"forward-once"``: MONeT's structure: the forward nodes (kind forward or loss) once each in input
  order, then each other node once in input order, with an increasing run of forward
  recomputations before each.

Aux nodes (graphs with implementations) are never computed directly and take no place in an order.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Free, Schedule, Step
from remat_models.errors import ConfigurationError

Structure = Literal["free", "staged", "runs", "forward-once"]
STRUCTURES: tuple[Structure, ...] = ("free", "staged", "runs", "forward-once")
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
    aux = graph.aux_of >= 0
    if order is None:
        order = graph.order
    order = np.asarray([v for v in np.asarray(order).tolist() if not aux[v]], dtype=np.int64)
    search = _Search(graph, budget, structure, order, stages)
    return search.run()


@dataclass(frozen=True)
class _Option:
    """One implementation of a node as bit masks."""

    impl: int
    reads: int
    consumes: int  # the in-place target's bit, or 0
    aux: int
    alloc: int  # bytes allocated: output (0 in place) + aux values
    need: int  # alloc + workspace
    cost: float
    recompute_cost: float


def _options(graph: Graph, v: int) -> list[_Option]:
    mem = graph.mem.tolist()
    if graph.impl_table is None:
        reads = sum(1 << int(u) for u in graph.preds(v))
        c = float(graph.cost[v])
        return [_Option(0, reads, 0, 0, mem[v], mem[v] + int(graph.workspace[v]), c, c)]
    table = graph.impl_table
    options = []
    for li, impl in enumerate(table.impls[v]):
        target = table.inplace[v][li]
        alloc = (0 if target >= 0 else mem[v]) + sum(mem[int(a)] for a in impl.aux)
        options.append(
            _Option(
                li,
                sum(1 << u for u in table.reads[v][li]),
                0 if target < 0 else 1 << target,
                sum(1 << int(a) for a in impl.aux),
                alloc,
                alloc + int(impl.workspace),
                impl.step_cost(False),
                impl.step_cost(True),
            )
        )
    return options


class _Search:
    def __init__(self, graph: Graph, budget: int, structure: Structure, order: np.ndarray, stages: int | None) -> None:
        self.n = graph.n
        self.structure = structure
        self.room = budget - graph.fixed_mem
        self.mem = graph.mem.tolist()
        self.recomputable = graph.recomputable.tolist()
        self.options = [_options(graph, v) for v in range(self.n)]  # [] for aux nodes
        self.position = [-1] * self.n
        for p, v in enumerate(order.tolist()):
            self.position[v] = p
        self.order = [int(v) for v in order]
        self.n_real = len(self.order)
        self.max_stage = (self.n_real if stages is None else stages) - 1
        self.outputs = sum(1 << int(v) for v in graph.outputs)
        self.everything = sum(1 << v for v in self.order)
        forward = {NodeKind.FORWARD, NodeKind.LOSS}
        self.forward = [v for v in self.order if graph.kind[v] in forward]
        self.stage_nodes = [v for v in self.order if graph.kind[v] not in forward]
        self.f_position = {v: j for j, v in enumerate(self.forward)}

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
        if self.structure == "staged":
            complete = progress == self.n_real
        elif self.structure == "forward-once":
            complete = progress == len(self.forward) + len(self.stage_nodes)
        else:
            complete = progress == self.everything
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
            fits = [
                o
                for o in self.options[v]
                if resident & o.reads == o.reads and not resident & o.aux and in_use + o.need <= self.room
            ]
            if not fits:
                continue
            for nxt, again in self._advance(v, progress, stage, last):
                for o in fits:
                    after = (resident | bit | o.aux) & ~o.consumes
                    cost = o.recompute_cost if again else o.cost
                    moves.append((Compute(v, o.impl), (after, *nxt), cost))
        return moves

    def _advance(self, v: int, progress: int, stage: int, last: int) -> list[tuple[tuple[int, int, int], bool]]:
        """Structure bookkeeping after computing v: the (progress, stage, last) that may follow, each with a flag.

        The flag says whether the step is a recomputation.
        """
        if self.structure == "forward-once":
            return self._advance_monet(v, progress, last)
        p = self.position[v]
        if self.structure == "staged":
            if progress == self.n_real or p <= last or p > progress or (p < progress and not self.recomputable[v]):
                return []
            return [((progress + 1, 0, -1), False)] if p == progress else [((progress, 0, p), True)]
        bit = 1 << v
        again = bool(progress & bit)
        if again and not self.recomputable[v]:
            return []
        if self.structure == "free":
            return [((progress | bit, 0, -1), again)]
        options = [((progress | bit, stage, p), again)] if p > last else []
        if stage < self.max_stage:
            options.append(((progress | bit, stage + 1, p), again))
        return options

    def _advance_monet(self, v: int, progress: int, last: int) -> list[tuple[tuple[int, int, int], bool]]:
        n_forward = len(self.forward)
        if progress < n_forward:
            return [((progress + 1, 0, -1), False)] if self.forward[progress] == v else []
        t = progress - n_forward
        if t < len(self.stage_nodes) and self.stage_nodes[t] == v:
            return [((progress + 1, 0, -1), False)]
        j = self.f_position.get(v, -1)
        if t < len(self.stage_nodes) and j > last and self.recomputable[v]:
            return [((progress, 0, j), True)]
        return []

    @staticmethod
    def _path(parent: dict[State, tuple[State, Step]], state: State) -> list[Step]:
        steps: list[Step] = []
        while state in parent:
            state, step = parent[state]
            steps.append(step)
        steps.reverse()
        return steps
