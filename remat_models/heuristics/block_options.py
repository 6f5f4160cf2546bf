"""A block's exact trade-off between the bytes it keeps and the recomputation its backward then needs.

For one block of a chain (:mod:`remat_models.heuristics.rotor`), the values its backward reads (and the value
leaving it) are either kept after its forward pass or recomputed in its backward from kept values, values of
other blocks and resident (pinned) ones. Which values to keep within ``limit`` bytes at the least recomputation
is a small integer programme, solved exactly here with HiGHS at several limits from the least the block can keep
to all it reads. The model: ``k[v] + r[v] >= 1`` for each value read later, ``k[u] + r[u] >= r[v]`` for each
edge ``u -> v`` inside the block (a recomputed value's inputs are kept or recomputed too), the leaving value
kept, values that cannot be recomputed never recomputed, ``sum(mem * k) <= limit``; minimise ``sum(cost * r)``.
Identical blocks (same costs, bytes, edges and reads, in order) share one solve.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

import numpy as np

from remat_models.backends import SolveLimits, get_backend
from remat_models.backends.interrupt import Stopper, stop_event, stop_on_signals
from remat_models.core.graph import Graph
from remat_models.model import Model

LEVELS = 12  # limits per block, evenly spaced from the least it can keep to all it reads
SOLVE_SECONDS = 2.0  # the most one block's solve at one limit may take (blocks have tens of nodes)
BACKEND = "highs"


@dataclass(frozen=True)
class BlockProblem:
    """One block in local indices: candidates (its non-pinned values), their reads later, edges among them."""

    nodes: np.ndarray  # global ids of the candidates
    needed: np.ndarray  # bool per candidate: read after the forward pass (by the backward, or the next block)
    leaving: int  # local index of the value entering the next block (-1: none)
    edges: np.ndarray  # (E, 2) local (input, reader) pairs among the candidates

    def key(self, graph: Graph) -> tuple:
        """What identical blocks share: costs, bytes, recomputability, reads and edges in local order."""
        nodes = self.nodes
        return (
            graph.cost[nodes].tobytes(),
            graph.mem[nodes].tobytes(),
            graph.recomputable[nodes].tobytes(),
            self.needed.tobytes(),
            self.leaving,
            self.edges.tobytes(),
        )


def block_problem(
    graph: Graph, nodes: np.ndarray, pinned: np.ndarray, read_later: np.ndarray, leaving: int
) -> BlockProblem:
    """The problem of the block of forward ``nodes`` (input order) whose value ``leaving`` enters the next one."""
    candidates = nodes[~pinned[nodes]]
    local = np.full(graph.n, -1, dtype=np.int64)
    local[candidates] = np.arange(candidates.size)
    source, target = graph.edges[:, 0], graph.edges[:, 1]
    inside = (local[source] >= 0) & (local[target] >= 0)
    edges = np.stack([local[source[inside]], local[target[inside]]], axis=1)
    edges = edges[np.lexsort((edges[:, 0], edges[:, 1]))] if edges.size else edges.reshape(0, 2)
    return BlockProblem(candidates, read_later[candidates], int(local[leaving]) if leaving >= 0 else -1, edges)


def exact_kept_sets(graph: Graph, problem: BlockProblem, levels: int = LEVELS) -> list[np.ndarray]:
    """The optimal kept sets (global ids) at ``levels`` limits: the block's exact cost/bytes trade-off.

    SIGINT or SIGTERM stops the solves; the signal then goes on to whoever handled it before where no enclosing
    phase listens for it (an ``auto`` worker whose parent died ends), else that phase stops too.
    """
    mem = graph.mem[problem.nodes].astype(float)
    forced = problem.needed & ~graph.recomputable[problem.nodes]
    least = float(mem[forced].sum()) + (float(mem[problem.leaving]) if problem.leaving >= 0 else 0.0)
    most = float(mem[problem.needed].sum())
    if most <= least:
        return []
    found: dict[bytes, np.ndarray] = {}
    stopper = Stopper()
    with stop_on_signals(stopper):
        for limit in np.linspace(least, most, levels).tolist():
            if stopper.stopped.is_set():
                break
            kept = optimal_kept(graph, problem, limit)
            if kept is not None:
                found.setdefault(kept.tobytes(), kept)
    if stopper.signal is not None and not stopper.inherited and stop_event() is None:
        signal.raise_signal(stopper.signal)
    return [] if stopper.stopped.is_set() else list(found.values())


def optimal_kept(graph: Graph, problem: BlockProblem, limit: float) -> np.ndarray | None:
    """The kept set (global ids) of least recomputation within ``limit`` bytes (None: none found in time)."""
    result = get_backend(BACKEND).solve(_model(graph, problem, limit), SolveLimits(time_limit=SOLVE_SECONDS))
    if not result.has_solution or result.interrupt_signal is not None:
        return None
    kept = _used(problem, result.values["keep"] > 0.5, result.values["again"] > 0.5)
    return problem.nodes[kept]


def _used(problem: BlockProblem, kept: np.ndarray, again: np.ndarray) -> np.ndarray:
    """``kept`` less values nothing reads: neither read later nor an input of a recomputed value."""
    used = problem.needed.copy()
    if problem.leaving >= 0:
        used[problem.leaving] = True
    inputs = problem.edges[again[problem.edges[:, 1]], 0]
    used[inputs] = True
    return kept & used


def _model(graph: Graph, problem: BlockProblem, limit: float) -> Model:
    """The block's model at ``limit`` bytes: blocks ``keep`` and ``again`` (recomputed in the backward)."""
    size = problem.nodes.size
    lower = np.zeros(size)
    if problem.leaving >= 0:
        lower[problem.leaving] = 1.0
    model = Model(f"block options of {graph.name}")
    keep = model.int_block("keep", size, lower, np.ones(size)).cols
    again = model.int_block("again", size, np.zeros(size), graph.recomputable[problem.nodes].astype(float)).cols
    needed = np.flatnonzero(problem.needed)
    pairs = np.stack([keep[needed], again[needed]], axis=1).ravel()
    model.add_rows(np.repeat(np.arange(needed.size), 2), pairs, np.ones(pairs.size), lb=1.0)
    u, v = problem.edges[:, 0], problem.edges[:, 1]
    if u.size:
        triples = np.stack([keep[u], again[u], again[v]], axis=1).ravel()
        model.add_rows(np.repeat(np.arange(u.size), 3), triples, np.tile([1.0, 1.0, -1.0], u.size), lb=0.0)
    model.add_rows(np.zeros(size, dtype=np.int64), keep, graph.mem[problem.nodes].astype(float), ub=limit)
    model.set_objective(again, graph.cost[problem.nodes].astype(float))
    return model
