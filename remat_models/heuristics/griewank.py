"""Griewank–Walther binomial checkpointing (revolve) for chain-shaped training graphs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.errors import GraphError
from remat_models.heuristics import _sequence_kernels as kernels
from remat_models.heuristics.recompute import (
    Score,
    best_item,
    best_sequence,
    forward_mask,
    forward_nodes,
    sequence_schedule,
    sequence_score,
)

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

    def step_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """The reversal steps as (indptr, indices)."""
        sizes = np.array([len(step) for step in self.steps], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return indptr, np.array([v for step in self.steps for v in step], dtype=np.int64)


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
    grouped = readers[np.argsort(step[readers], kind="stable")]  # by step, input order within each
    bounds = np.searchsorted(step[grouped], np.arange(length + 1))
    steps = tuple(tuple(grouped[bounds[k] : bounds[k + 1]].tolist()) for k in range(length))
    return Chain(forward=fwd, steps=steps)


def revolve_table(length: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Optimal forward-step counts C[l, s] and first splits J[l, s] for l <= length, s <= slots.

    C(l, s) is the fewest forward computations to reverse l uniform steps from a resident start
    value with s further snapshot slots: C(1, s) = 0, C(l, 0) = l(l-1)/2 and
    C(l, s) = min_j [j + C(l-j, s-1) + C(j, s)]. This is revolve's binomial optimum
    (Griewank & Walther 2000): C(l, s) = r*l - binom(s+1+r, r-1) with r minimal such that
    binom(s+1+r, r) >= l, i.e. s+1 checkpoints counting the start. J is the smallest optimal split
    (1 where there is none to make). :func:`griewank` evaluates both in closed form, entry by entry.
    """
    cost = np.zeros((length + 1, slots + 1), dtype=np.int64)
    split = np.ones((length + 1, slots + 1), dtype=np.int64)
    for size in range(length + 1):
        cost[size] = [kernels.revolve_cost(size, s) for s in range(slots + 1)]
        if size >= 2:
            split[size, 1:] = [kernels.revolve_split(size, s) for s in range(1, slots + 1)]
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
    return sequence_schedule(graph, griewank_sequence(graph, slots, chain))


def griewank_sequence(
    graph: Graph, slots: int, chain: Chain, steps: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """Compute sequence of :func:`griewank` (``steps``: the chain's :meth:`Chain.step_csr`, if already built)."""
    step_ptr, step_idx = chain.step_csr() if steps is None else steps
    return kernels.revolve_sequence(
        graph.order,
        graph.pred_ptr,
        graph.pred_idx,
        graph.position,
        graph.recomputable,
        chain.forward,
        step_ptr,
        step_idx,
        min(slots, max_useful_slots(chain)),
    )


def griewank_budget(graph: Graph, budget: int) -> Schedule:
    """Cheapest revolve schedule within ``budget`` over the slot counts, else the lowest-peak one.

    The no-recomputation slot count comes first and ends the search if it fits. Otherwise, when
    every s = 0..L-3 costs at most ``EXHAUSTIVE_WORK`` computations in all, every s is tried, since
    with non-uniform sizes the peak is not monotone in s and stopping at the first miss can skip a
    fitting, cheaper count. Beyond that (long chains) see :func:`_slot_search`.
    """
    chain = chain_of(graph)
    top = max_useful_slots(chain)
    steps = chain.step_csr()
    length = chain.length

    def sequence(slots: int) -> np.ndarray:
        return griewank_sequence(graph, slots, chain, steps)

    work = top * graph.n
    if work <= EXHAUSTIVE_WORK:
        work += sum(kernels.revolve_cost(length, s) for s in range(top))
    if work <= EXHAUSTIVE_WORK:
        sequences = (sequence(s) for s in [top, *range(top)])
        best = best_sequence(graph, sequences, budget, until=lambda k, score: k == 0 and score[0] <= budget)
        return sequence_schedule(graph, best)
    return sequence_schedule(graph, sequence(_slot_search(graph, budget, top, length, sequence)))


EXHAUSTIVE_WORK = 20_000_000  # computations over all slot counts up to which griewank_budget tries every count
LONG_SEQUENCE = 64  # beyond that many computations per node, a slot count is not tried on long chains
SEARCH_WINDOW = 16  # slot counts tried on each side of the bisection's answer


def _slot_search(graph: Graph, budget: int, top: int, length: int, sequence: Callable[[int], np.ndarray]) -> int:
    """Slot count for long chains: bisection for the largest fitting s, then a window around it.

    Counts recomputing more than ``LONG_SEQUENCE`` times the node count (s = 0, 1 on long chains) are
    skipped. The bisection assumes the peak grows with s; ``SEARCH_WINDOW`` counts on each side of
    its answer are also tried, and the best of all tried (rank as in best_sequence, ties to the
    smallest s after ``top``) is returned.
    """
    scores: dict[int, Score] = {}

    def score(slots: int) -> Score:
        if slots not in scores:
            scores[slots] = sequence_score(graph, sequence(slots))
        return scores[slots]

    if score(top)[0] <= budget:
        return top
    floor = next((s for s in range(top) if kernels.revolve_cost(length, s) <= LONG_SEQUENCE * graph.n), top - 1)
    low = floor
    if score(low)[0] <= budget:
        high = top  # low fits, high does not
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if score(middle)[0] <= budget else (low, middle)
    for slots in range(max(floor, low - SEARCH_WINDOW), min(top, low + SEARCH_WINDOW + 1)):
        score(slots)
    tried = [top, *sorted(set(scores) - {top})]
    logger.debug("griewank: %d of %d slot counts tried (chain of %d steps)", len(tried), top + 1, length)
    return best_item(tried, score, budget)
