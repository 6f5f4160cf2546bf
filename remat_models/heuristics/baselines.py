"""Checkmate's baselines (Table 1, Sec. 6.1, App. B) and a saved-set knapsack (PyTorch's budget, roughly).

Checkpoint-all, Chen sqrt(n) and greedy, Griewank; ``knapsack`` saves the values dearest to recompute
per byte, as PyTorch's activation-memory budget does (:func:`knapsack_sequences`).

Chen's heuristics choose a checkpoint set among candidates — articulation points of the forward
graph ("ap") or every forward node of the input order, Checkmate's G_lin ("linearized") — and the
cheapest recomputation implied by it is backed out by :func:`checkpoint_schedule`. Every function
returns a Schedule valid under :func:`~remat_models.core.schedule.simulate`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Literal

import networkx as nx
import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, input_order_schedule
from remat_models.heuristics import _sequence_kernels as kernels
from remat_models.heuristics.griewank import griewank, griewank_budget
from remat_models.heuristics.recompute import (
    best_schedule,
    best_sequence,
    checkpoint_schedule,
    checkpoint_sequence,
    forward_mask,
    forward_nodes,
    saved_set_sequence,
    sequence_schedule,
)

logger = logging.getLogger(__name__)

CandidateKind = Literal["ap", "linearized"]
Candidates = CandidateKind | Sequence[int] | np.ndarray
CANDIDATE_KINDS: tuple[CandidateKind, ...] = ("ap", "linearized")

__all__ = [
    "BASELINES",
    "CANDIDATE_KINDS",
    "articulation_candidates",
    "best_schedule",
    "candidate_nodes",
    "checkpoint_all",
    "checkpoint_schedule",
    "chen_greedy",
    "chen_greedy_checkpoints",
    "chen_greedy_sequences",
    "chen_greedy_sweep",
    "chen_sqrtn",
    "chen_sqrtn_checkpoints",
    "greedy_baseline",
    "greedy_segment_grid",
    "griewank",
    "griewank_budget",
    "knapsack_baseline",
    "knapsack_order",
    "knapsack_sequences",
    "sqrtn_baseline",
]


def checkpoint_all(graph: Graph, budget: int | None = None) -> Schedule:
    """Every node once, in input order, with eager frees (the budget is ignored; no kernel to load)."""
    return input_order_schedule(graph)


def articulation_candidates(graph: Graph) -> np.ndarray:
    """Articulation points of the undirected forward graph, in input order.

    As in Checkmate's ``DFGraph.checkpoint_set``, a virtual source is attached to the first
    forward node and a virtual sink to the last, so on a chain every forward node is one (AP and
    linearized candidates coincide). A graph without any yields no candidates, i.e. no checkpoints,
    which behaves as checkpoint-all.
    """
    fwd = forward_nodes(graph)
    if fwd.size == 0:
        return fwd
    forward = forward_mask(graph)
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    keep = forward[u] & forward[v] & graph.recomputable[u]  # a value never recomputed stays resident: no tie
    undirected = nx.Graph()
    undirected.add_nodes_from(fwd.tolist())
    undirected.add_edges_from(zip(u[keep].tolist(), v[keep].tolist(), strict=True))
    undirected.add_edges_from([(-1, int(fwd[0])), (int(fwd[-1]), -2)])
    points = np.array([p for p in nx.articulation_points(undirected) if p >= 0], dtype=np.int64)
    return points[np.argsort(graph.position[points])]


def candidate_nodes(graph: Graph, candidates: Candidates) -> np.ndarray:
    """Resolve a candidate kind ("ap" or "linearized") or an explicit list to node indices."""
    if isinstance(candidates, str):
        if candidates == "ap":
            return articulation_candidates(graph)
        if candidates == "linearized":
            return forward_nodes(graph)
        raise ValueError(f"unknown candidate kind {candidates!r} (expected one of {CANDIDATE_KINDS})")
    return np.asarray(candidates, dtype=np.int64)


def chen_sqrtn_checkpoints(candidates: np.ndarray) -> np.ndarray:
    """Every k-th candidate, k = floor(sqrt(#candidates)) (Checkmate's ``solve_chen_sqrtn``)."""
    k = max(1, math.isqrt(len(candidates)))
    return candidates[k - 1 :: k]


def chen_greedy_checkpoints(graph: Graph, segment_bytes: int, candidates: np.ndarray) -> np.ndarray:
    """Checkpoint a candidate once the forward bytes since the last checkpoint exceed ``segment_bytes``."""
    is_candidate = np.zeros(graph.n, dtype=bool)
    is_candidate[candidates] = True
    return kernels.greedy_checkpoints(forward_nodes(graph), is_candidate, graph.mem, int(segment_bytes))


def chen_sqrtn(graph: Graph, candidates: Candidates = "linearized") -> Schedule:
    """Chen et al.'s sqrt(n) checkpointing over the given candidates."""
    return checkpoint_schedule(graph, chen_sqrtn_checkpoints(candidate_nodes(graph, candidates)))


def chen_greedy(graph: Graph, segment_bytes: int, candidates: Candidates = "linearized") -> Schedule:
    """Chen et al.'s greedy checkpointing with segment size ``segment_bytes`` over the given candidates."""
    return checkpoint_schedule(graph, chen_greedy_checkpoints(graph, segment_bytes, candidate_nodes(graph, candidates)))


def greedy_segment_grid(graph: Graph, points: int = 20, prefix_limit: int = 64) -> np.ndarray:
    """Segment sizes to sweep: 0, linear and geometric points from min to total forward bytes, few prefix sums."""
    mem = graph.mem[forward_nodes(graph)]
    total = int(mem.sum())
    low = int(mem[mem > 0].min()) if total > 0 else 0
    grid = [np.zeros(1), np.linspace(low, total, points)]
    if low > 0:
        grid.append(np.geomspace(low, total, points))
    prefix = np.unique(np.cumsum(mem))
    if prefix.size <= prefix_limit:
        grid.append(prefix)
    return np.unique(np.concatenate(grid).astype(np.int64))


def chen_greedy_sequences(graph: Graph, candidates: Candidates = "linearized") -> Iterator[np.ndarray]:
    """Compute sequences of the greedy over the segment-size grid, one per distinct checkpoint set."""
    nodes = candidate_nodes(graph, candidates)
    is_candidate = np.zeros(graph.n, dtype=bool)
    is_candidate[nodes] = True
    forward = forward_mask(graph)
    fwd = graph.order[forward[graph.order]]
    seen: set[bytes] = set()
    for segment_bytes in greedy_segment_grid(graph).tolist():
        checkpoints = kernels.greedy_checkpoints(fwd, is_candidate, graph.mem, segment_bytes)
        if checkpoints.tobytes() not in seen:
            seen.add(checkpoints.tobytes())
            yield checkpoint_sequence(graph, checkpoints, forward)


def chen_greedy_sweep(graph: Graph, candidates: Candidates = "linearized") -> Iterator[Schedule]:
    """Greedy schedules over the segment-size grid, one per distinct checkpoint set."""
    return (sequence_schedule(graph, sequence) for sequence in chen_greedy_sequences(graph, candidates))


KNAPSACK_CAPS = 48  # saved-bytes caps swept by the knapsack baseline (linear and geometric points)


def knapsack_order(graph: Graph) -> np.ndarray:
    """Recomputable forward nodes by recompute cost per byte, highest first (the greedy 0/1 knapsack's order)."""
    nodes = forward_nodes(graph)
    nodes = nodes[graph.recomputable[nodes]]
    per_byte = graph.cost[nodes] / np.maximum(graph.mem[nodes], 1)
    return nodes[np.argsort(-per_byte, kind="stable")]


def knapsack_sequences(graph: Graph) -> Iterator[np.ndarray]:
    """Compute sequences saving the knapsack's choice under each cap of a saved-bytes grid (the rest recomputed).

    Under a cap on saved bytes the greedy knapsack keeps the values that are dearest to recompute per
    byte, a prefix of :func:`knapsack_order` (PyTorch's ``activation_memory_budget`` partitioner solves
    this knapsack over the compute-heavy ops its min-cut would save; here every recomputable forward
    value is a candidate and a value's own cost is its recompute cost). The other values are recomputed
    in the backward pass, from what is available then (:func:`saved_set_sequence`), or with the kept
    values as Chen's checkpoints, a segment at a time (:func:`checkpoint_sequence`): two sequences a cap.
    """
    ranked = knapsack_order(graph)
    saved = np.cumsum(graph.mem[ranked])
    total = int(saved[-1]) if saved.size else 0
    caps = np.linspace(0, total, KNAPSACK_CAPS // 2)
    if total > 0:
        smallest = max(1.0, float(graph.mem[ranked].min()))
        caps = np.concatenate([caps, np.geomspace(smallest, total, KNAPSACK_CAPS // 2)])
    forward = forward_mask(graph)
    for count in np.unique(np.searchsorted(saved, caps, side="right")).tolist():
        yield saved_set_sequence(graph, ranked[:count], forward)
        yield checkpoint_sequence(graph, ranked[:count], forward)


def knapsack_baseline(graph: Graph, budget: int) -> Schedule:
    """The cheapest fitting schedule (else the lowest peak) of :func:`knapsack_sequences`."""
    return sequence_schedule(graph, best_sequence(graph, knapsack_sequences(graph), budget))


def sqrtn_baseline(graph: Graph, budget: int, kinds: Sequence[CandidateKind] = CANDIDATE_KINDS) -> Schedule:
    """Best sqrt(n) schedule over the candidate kinds (cheapest within budget, else lowest peak)."""
    sequences = (checkpoint_sequence(graph, chen_sqrtn_checkpoints(candidate_nodes(graph, kind))) for kind in kinds)
    return sequence_schedule(graph, best_sequence(graph, sequences, budget))


def greedy_baseline(graph: Graph, budget: int, kinds: Sequence[CandidateKind] = CANDIDATE_KINDS) -> Schedule:
    """Best greedy schedule over the segment-size sweeps of the candidate kinds."""
    sequences = (sequence for kind in kinds for sequence in chen_greedy_sequences(graph, kind))
    return sequence_schedule(graph, best_sequence(graph, sequences, budget))


BASELINES: dict[str, Callable[[Graph, int], Schedule]] = {
    "checkpoint-all": checkpoint_all,
    "chen-sqrtn": sqrtn_baseline,
    "chen-greedy": greedy_baseline,
    "ap-sqrtn": partial(sqrtn_baseline, kinds=("ap",)),
    "ap-greedy": partial(greedy_baseline, kinds=("ap",)),
    "linearized-sqrtn": partial(sqrtn_baseline, kinds=("linearized",)),
    "linearized-greedy": partial(greedy_baseline, kinds=("linearized",)),
    "griewank": griewank_budget,
    "knapsack": knapsack_baseline,
}
