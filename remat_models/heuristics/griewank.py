"""Griewank–Walther binomial checkpointing (revolve) for chain-shaped training graphs."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from remat_models.errors import GraphError
from remat_models.graph import Graph
from remat_models.heuristics.recompute import SequenceBuilder, best_schedule, forward_mask, forward_nodes
from remat_models.schedule import Schedule

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Chain:
    """A chain-shaped graph: forward nodes f_0..f_{L-1} and the reversal step of each forward index."""

    forward: np.ndarray
    steps: tuple[tuple[int, ...], ...]

    @property
    def length(self) -> int:
        """Number of reversal steps, up to the last forward index any non-forward node reads."""
        return len(self.steps)


def chain_of(graph: Graph) -> Chain:
    """Check that ``graph`` is chain-shaped and group its non-forward nodes into reversal steps.

    Chain-shaped: forward node k (input order) reads exactly one forward node, k-1 (none for
    k = 0); non-forward nodes, in input order, read forward values at non-increasing maximum
    forward index. Reversal step k holds the non-forward nodes whose maximum is k. Non-forward
    nodes without forward input belong to no step (they run when needed, or at the end).
    """
    forward = forward_mask(graph)
    fwd = forward_nodes(graph)
    index = np.full(graph.n, -1, dtype=np.int64)
    index[fwd] = np.arange(fwd.size)
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    inner = forward[u] & forward[v]
    count = np.bincount(index[v[inner]], minlength=fwd.size)
    expected = (np.arange(fwd.size) > 0).astype(np.int64)
    bad = np.flatnonzero(count != expected)
    if bad.size:
        k = int(bad[0])
        raise GraphError(
            f"griewank needs a chain: forward node {graph.names[fwd[k]]!r} has {count[k]} forward predecessors"
        )
    jumps = np.flatnonzero(inner & (index[u] != index[v] - 1))
    if jumps.size:
        a, b = graph.edges[jumps[0]]
        raise GraphError(
            f"griewank needs a chain: forward node {graph.names[b]!r} reads {graph.names[a]!r}, "
            f"not the forward node just before it"
        )
    reads = forward[u] & ~forward[v]
    step = np.full(graph.n, -1, dtype=np.int64)
    np.maximum.at(step, v[reads], index[u[reads]])
    readers = graph.order[step[graph.order] >= 0]
    rising = np.flatnonzero(np.diff(step[readers]) > 0)
    if rising.size:
        early, late = readers[rising[0]], readers[rising[0] + 1]
        raise GraphError(
            f"griewank needs a chain: node {graph.names[late]!r} reads forward node "
            f"{graph.names[fwd[step[late]]]!r} after {graph.names[early]!r} read only up to "
            f"{graph.names[fwd[step[early]]]!r} (the reversal must run backwards)"
        )
    length = int(step.max()) + 1
    steps = tuple(tuple(readers[step[readers] == k].tolist()) for k in range(length))
    return Chain(forward=fwd, steps=steps)


@lru_cache(maxsize=16)
def revolve_table(length: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Optimal forward-step counts C[l, s] and first splits J[l, s] for l <= length, s <= slots.

    C(l, s) is the fewest forward computations to reverse l uniform steps from a resident start
    value with s further snapshot slots: C(1, s) = 0, C(l, 0) = l(l-1)/2 and
    C(l, s) = min_j [j + C(l-j, s-1) + C(j, s)]. This is revolve's binomial optimum
    (Griewank & Walther 2000): C(l, s) = r*l - binom(s+1+r, r-1) with r minimal such that
    binom(s+1+r, r) >= l, i.e. s+1 checkpoints counting the start.
    """
    lengths = np.arange(length + 1, dtype=np.int64)
    cost = np.zeros((length + 1, slots + 1), dtype=np.int64)
    split = np.ones((length + 1, slots + 1), dtype=np.int64)
    cost[:, 0] = np.maximum(lengths * (lengths - 1) // 2, 0)
    columns = np.arange(slots)
    for size in range(2, length + 1):
        j = np.arange(1, size)
        total = j[:, None] + cost[size - j, :-1] + cost[j, 1:]
        best = np.argmin(total, axis=0)
        cost[size, 1:] = total[best, columns]
        split[size, 1:] = j[best]
    cost.setflags(write=False)
    split.setflags(write=False)
    return cost, split


def max_useful_slots(chain: Chain) -> int:
    """Slots beyond which griewank recomputes nothing (C(l, s) = l-1 once s >= l-2)."""
    return max(chain.length - 2, 0)


def griewank(graph: Graph, slots: int, chain: Chain | None = None) -> Schedule:
    """Revolve schedule with ``slots`` snapshot slots besides the start value (raises GraphError off chains).

    reverse(a, b, s), with f_a resident, runs reversal steps b-1..a: one step if b-a == 1; with
    s == 0, recompute f_{a+1}..f_i then run step i for i = b-1..a; else advance to the optimal
    split m keeping only f_m, reverse(m, b, s-1), drop f_m, reverse(a, m, s). Missing inputs
    (e.g. a step reading other forward values) are recomputed by the engine's minimal closure.
    """
    if slots < 0:
        raise ValueError(f"griewank needs slots >= 0, got {slots}")
    chain = chain_of(graph) if chain is None else chain
    length, fwd, steps = chain.length, chain.forward, chain.steps
    builder = SequenceBuilder(graph)
    if length:
        top = max_useful_slots(chain)
        slots = min(slots, top)
        _, split = revolve_table(length, top)
        builder.ensure(int(fwd[0]))
        tasks: list[tuple[int, int, int]] = [(0, length, slots)]  # (a, b, s), or (m, -1, -1): drop f_m
        while tasks:
            a, b, s = tasks.pop()
            if b < 0:
                builder.drop([int(fwd[a])])
            elif b - a == 1:
                _run_step(builder, steps[a])
            elif s == 0:
                for i in range(b - 1, a - 1, -1):
                    if steps[i]:
                        builder.ensure(int(fwd[i]))
                        _run_step(builder, steps[i])
                        builder.drop(fwd[a + 1 : i + 1])
            else:
                m = a + int(split[b - a, s])
                builder.ensure(int(fwd[m]))
                builder.drop(fwd[a + 1 : m])
                tasks.extend([(a, m, s), (m, -1, -1), (m, b, s - 1)])
    builder.ensure_rest()
    return builder.schedule()


def _run_step(builder: SequenceBuilder, nodes: tuple[int, ...]) -> None:
    for v in nodes:
        builder.ensure(v)


def griewank_budget(graph: Graph, budget: int) -> Schedule:
    """Cheapest revolve schedule within ``budget`` over all slot counts, else the lowest-peak one.

    The no-recomputation slot count comes first and ends the search if it fits; otherwise every
    s = 0..L-3 is tried (L simulations), since with non-uniform sizes the peak is not monotone
    in s and stopping at the first miss can skip a fitting, cheaper count.
    """
    chain = chain_of(graph)
    top = max_useful_slots(chain)
    schedules = (griewank(graph, s, chain) for s in [top, *range(top)])
    return best_schedule(graph, schedules, budget, until=lambda k, result: k == 0 and result.fits(budget))
