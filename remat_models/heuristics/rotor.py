"""Rotor: checkpointing over a chain of blocks by dynamic programming (Beaumont et al. 2019; Rockmate's rotor).

A training graph's forward pass is cut where a single recomputable value crosses (a transformer's residual
stream between layers and half-layers, a CNN's feature map between stages); values read across more than
``PINNED_SPAN`` of the forward pass (attention masks, rotary tables) and non-recomputable ones stay resident and
do not count as crossing. Each backward node joins the latest block whose forward values it reads (no later than
the blocks of the backward nodes it reads), so the blocks' backward parts run latest block first.

For a segment of blocks s..t whose input is resident, the programme chooses, as rotor does, between running
block s storing what its backward reads (an *option*: all of it, or with the cheapest bytes per unit of cost
dropped, recomputed in its backward, or a repeated block's exact kept set at one of several byte limits:
:mod:`~remat_models.heuristics.block_options`) and recursing on s+1..t, or running s..s'-1 keeping only the value that
enters s' (a checkpoint), solving s'..t, then s..s'-1 again. Memory is counted in units of 1/``BUCKETS`` of the
budget (up to what storing everything takes), so one table answers every storage limit; the limit is then bisected
on the simulator's peak of the emitted compute sequence (frees eager), keeping the cheapest schedule within the budget.
The table is exact for its model (each block's cost and stored bytes; a second table also holds each option's
recomputed bytes during its backward); the rest of the transient memory is left to the bisection.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
from numba import njit

from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.heuristics import _sequence_kernels as kernels
from remat_models.heuristics.block_options import BlockProblem, block_problem, exact_kept_sets
from remat_models.heuristics.recompute import Score, best_sequence, forward_mask, sequence_schedule, sequence_score
from remat_models.heuristics.saveset import past, saveset_search

log = logging.getLogger(__name__)

PINNED_SPAN = 0.25  # share of the forward pass a value's readers span beyond which it stays resident
MIN_BLOCKS = 3  # fewer blocks than this: no chain (the search is then the input order's)
MAX_BLOCKS = 80  # adjacent blocks merge, smallest first, down to this many (the table is blocks^2 x size)
BUCKETS = 400  # memory units per budget
MAX_UNITS = 1600  # the table's memory axis stops here (storing four budgets never fits)
SCAN = 16  # storage limits scored on each side of the bisection's last, and from the smallest if none fits
SAVE_SET_NODES = 2000  # above: no save-set options (its search takes seconds per level: 40 s at 9.6k nodes)
SAVE_SET_LEVELS = (0.25, 0.5, 0.75, 1.0)  # options per block from the save-set search at these shares of the budget
EXACT_PROBLEMS = 8  # distinct repeated blocks whose kept values are solved exactly (the zoo's models have 2-8)
DROP_SHARES = (0.0, 0.25, 0.5, 0.75)  # and dropping these shares of its stored bytes, cheapest per unit of cost first
INFEASIBLE = np.inf
UNSCORED: Score = (2**63 - 1, INFEASIBLE)  # a storage limit left unscored past the deadline: above every budget


@dataclass(frozen=True)
class BlockChain:
    """A graph's forward blocks (input order), each block's backward nodes, and the value entering each block."""

    forward: tuple[np.ndarray, ...]
    backward: tuple[np.ndarray, ...]
    entering: np.ndarray  # per block: the node whose value enters it (-1: the first block)
    pinned: np.ndarray  # mask of values that stay resident

    @property
    def length(self) -> int:
        """Number of blocks."""
        return len(self.forward)


def block_chain(graph: Graph) -> BlockChain | None:
    """The chain of blocks of ``graph``, or None when it has no backward pass or fewer than ``MIN_BLOCKS`` blocks."""
    forward = forward_mask(graph)
    if forward.all():
        return None
    fwd = graph.order[forward[graph.order]]
    k = fwd.size
    index = np.full(graph.n, -1, dtype=np.int64)
    index[fwd] = np.arange(k)
    source, target = graph.edges[:, 0], graph.edges[:, 1]
    inner = forward[source] & forward[target]
    last = np.full(graph.n, -1, dtype=np.int64)
    np.maximum.at(last, source[inner], index[target[inner]])
    span = np.where(last >= 0, last - index, 0)
    pinned = ~graph.recomputable | (forward & (span > PINNED_SPAN * k))
    crossing = fwd[(last[fwd] > index[fwd]) & ~pinned[fwd]]
    count = np.zeros(k + 1, dtype=np.int64)
    ids = np.zeros(k + 1, dtype=np.int64)
    np.add.at(count, index[crossing] + 1, 1)
    np.add.at(count, last[crossing] + 1, -1)
    np.add.at(ids, index[crossing] + 1, crossing)
    np.add.at(ids, last[crossing] + 1, -crossing)
    count, ids = np.cumsum(count), np.cumsum(ids)
    cuts = np.flatnonzero(count[1:k] == 1) + 1
    if cuts.size + 1 < MIN_BLOCKS:
        return None
    starts = _merged(np.concatenate([[0], cuts]), k)
    entering = np.where(starts > 0, ids[np.maximum(starts, 0)], -1)
    entering[0] = -1
    block = np.searchsorted(starts, np.arange(k), side="right") - 1
    forward_block = np.full(graph.n, -1, dtype=np.int64)
    forward_block[fwd] = block
    backward = _backward_blocks(graph, forward, pinned, forward_block, entering, starts.size)
    parts = np.split(fwd, starts[1:])
    rest = graph.order[~forward[graph.order]]
    return BlockChain(
        tuple(parts),
        tuple(rest[backward[rest] == b] for b in range(starts.size)),
        entering,
        pinned,
    )


def _merged(starts: np.ndarray, k: int) -> np.ndarray:
    """Block starts with adjacent blocks merged, smallest pair first, down to ``MAX_BLOCKS``."""
    starts = starts.tolist()
    while len(starts) > MAX_BLOCKS:
        sizes = np.diff([*starts, k])
        pair = int(np.argmin(sizes[:-1] + sizes[1:]))
        del starts[pair + 1]
    return np.asarray(starts, dtype=np.int64)


def _backward_blocks(
    graph: Graph, forward: np.ndarray, pinned: np.ndarray, forward_block: np.ndarray, entering: np.ndarray, blocks: int
) -> np.ndarray:
    """Each non-forward node's block: the latest block whose forward values it reads, capped by its inputs' blocks."""
    as_input = forward_block.copy()
    valid = entering >= 0
    as_input[entering[valid]] = np.flatnonzero(valid)  # a block's entering value counts as that block's
    assigned = np.full(graph.n, blocks - 1, dtype=np.int64)
    for v in graph.order[~forward[graph.order]].tolist():
        preds = graph.preds(v)
        from_forward = preds[forward[preds] & ~pinned[preds]]  # pinned values are resident throughout
        block = int(as_input[from_forward].max()) if from_forward.size else blocks - 1
        from_backward = preds[~forward[preds]]
        if from_backward.size:
            block = min(block, int(assigned[from_backward].min()))
        assigned[v] = block
    return assigned


@dataclass(frozen=True)
class _Options:
    """Per block: forward cost (recomputable part), backward cost, entering bytes; per option: bytes, cost, drops."""

    forward_cost: np.ndarray
    backward_cost: np.ndarray
    entering_bytes: np.ndarray
    stored: list[list[int]]  # [block][option] bytes stored by the option
    extra: list[list[float]]  # [block][option] recomputation cost in the backward
    again: list[list[int]]  # [block][option] bytes recomputed in the backward (held there on top of the stored)
    dropped: list[list[np.ndarray]]  # [block][option] nodes dropped after the block's forward (all but what it stores)


def _options(graph: Graph, chain: BlockChain, save_sets: list[np.ndarray]) -> _Options:
    """Each block's options: what its backward reads less ``DROP_SHARES`` of it, what ``save_sets`` keep, its output.

    An option's cost is the recomputation its backward then needs within the block, its bytes those of the kept
    values read after the forward pass (by the backward or by that recomputation).
    """
    forward = forward_mask(graph)
    read_later = np.zeros(graph.n, dtype=bool)
    read_later[graph.edges[~forward[graph.edges[:, 1]], 0]] = True
    read_later[chain.entering[chain.entering >= 0]] = True
    block_of = np.full(graph.n, -1, dtype=np.int64)
    for b, nodes in enumerate(chain.forward):
        block_of[nodes] = b
    stored, extra, again, dropped = [], [], [], []
    leaving_of = [*chain.entering[1:].tolist(), -1]
    problems = [
        block_problem(graph, nodes, chain.pinned, read_later, leaving)
        for nodes, leaving in zip(chain.forward, leaving_of, strict=True)
    ]
    keys = [problem.key(graph) for problem in problems]
    solved = _exact_options(graph, problems, keys)
    for b, nodes in enumerate(chain.forward):
        keep = nodes[read_later[nodes] & ~chain.pinned[nodes]]
        leaving, problem = leaving_of[b], problems[b]
        droppable = keep[(keep != leaving) & (graph.mem[keep] > 0)]
        droppable = droppable[np.argsort(graph.cost[droppable] / graph.mem[droppable], kind="stable")]
        bytes_dropped = np.cumsum(graph.mem[droppable])
        shares = np.searchsorted(bytes_dropped, np.array(DROP_SHARES) * (bytes_dropped[-1] if droppable.size else 0))
        kept_sets = [keep[~np.isin(keep, droppable[:count])] for count in shares.tolist()]
        kept_sets += [keep[keep == leaving]] + [nodes[np.isin(nodes, saved)] for saved in save_sets]
        kept_sets += [problem.nodes[positions] for positions in solved.get(keys[b], [])]
        options: dict[tuple[int, ...], tuple[int, float, int, np.ndarray]] = {}
        for kept in kept_sets:
            kept = np.union1d(kept, keep[keep == leaving])
            key = tuple(kept.tolist())
            if key not in options:
                drop = nodes[~np.isin(nodes, kept) & ~chain.pinned[nodes]]
                cost, sources, recomputed = _recomputation(graph, keep, kept, block_of, b)
                held = np.union1d(kept[read_later[kept]], sources)
                options[key] = (int(graph.mem[held].sum()), cost, recomputed, drop)
        stored.append([o[0] for o in options.values()])
        extra.append([o[1] for o in options.values()])
        again.append([o[2] for o in options.values()])
        dropped.append([o[3] for o in options.values()])
    recomputable = graph.recomputable
    return _Options(
        np.array([graph.cost[nodes[recomputable[nodes]]].sum() for nodes in chain.forward]),
        np.array([graph.cost[nodes].sum() for nodes in chain.backward]),
        np.array([graph.mem[v] if v >= 0 else 0 for v in chain.entering], dtype=np.int64),
        stored,
        extra,
        again,
        dropped,
    )


def _exact_options(graph: Graph, problems: list[BlockProblem], keys: list[tuple]) -> dict[tuple, list[np.ndarray]]:
    """Exact kept sets (local positions) of the blocks that repeat, each distinct one solved once.

    Up to ``EXACT_PROBLEMS`` distinct blocks, first come first; a block that occurs once keeps the other options
    only (its solves would not be shared: a transformer's layers repeat, a generated graph's random costs do not).
    """
    counts = Counter(keys)
    solved: dict[tuple, list[np.ndarray]] = {}
    for key, problem in zip(keys, problems, strict=True):
        if counts[key] < 2 or key in solved or len(solved) >= EXACT_PROBLEMS:
            continue
        local = np.full(graph.n, -1, dtype=np.int64)
        local[problem.nodes] = np.arange(problem.nodes.size)
        solved[key] = [local[kept] for kept in exact_kept_sets(graph, problem)]
    return solved


def _recomputation(
    graph: Graph, needed: np.ndarray, kept: np.ndarray, block_of: np.ndarray, block: int
) -> tuple[float, np.ndarray, int]:
    """(cost, kept values it reads, bytes) of recomputing, once, ``needed`` values not ``kept`` and unkept ancestors."""
    available = np.zeros(graph.n, dtype=bool)
    available[kept] = True
    stack = [int(v) for v in needed if not available[v]]
    seen, sources = set(stack), set()
    while stack:
        v = stack.pop()
        for u in graph.preds(v).tolist():
            if available[u]:
                sources.add(u)
            elif u not in seen and block_of[u] == block and graph.recomputable[u]:
                seen.add(u)
                stack.append(u)
    recomputed = list(seen)
    cost = float(graph.cost[recomputed].sum()) if seen else 0.0
    return cost, np.array(sorted(sources), dtype=np.int64), int(graph.mem[recomputed].sum()) if seen else 0


class _Table:
    """The programme's table: cost[s, t, m] and its choice (option -1-o, or the checkpointed block s')."""

    def __init__(self, options: _Options, unit: int, size: int, transient: bool) -> None:
        length = options.forward_cost.size
        self.cost = np.full((length, length, size), INFEASIBLE)
        self.choice = np.zeros((length, length, size), dtype=np.int32)
        counts = [len(stored) for stored in options.stored]
        need = [-(-stored // unit) for block in options.stored for stored in block]
        again = [-(-extra // unit) if transient else 0 for block in options.again for extra in block]
        _fill_table(
            self.cost,
            self.choice,
            np.asarray(options.forward_cost, dtype=np.float64),
            np.asarray(options.backward_cost, dtype=np.float64),
            -(-options.entering_bytes // unit),
            np.concatenate([[0.0], np.cumsum(options.forward_cost)]),
            np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            np.array(need, dtype=np.int64),
            np.array(need, dtype=np.int64) + np.array(again, dtype=np.int64),  # + what its backward recomputes
            np.array([extra for block in options.extra for extra in block], dtype=np.float64),
        )


@njit(cache=True)
def _fill_table(
    cost: np.ndarray,
    choice: np.ndarray,
    forward_cost: np.ndarray,
    backward_cost: np.ndarray,
    entering: np.ndarray,
    prefix: np.ndarray,
    first_option: np.ndarray,
    need: np.ndarray,
    low: np.ndarray,
    extra: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Fill the table span by span: for each segment s..t, each option of block s, then each checkpoint s'.

    Per memory cell, a candidate replaces the best so far only where strictly cheaper, in that order (numpy per
    option and per s' did the same sums: 3.6 s of a 5 s limit for 80 blocks x 886 units under load).
    """
    length, _, size = cost.shape
    for span in range(length):
        for s in range(length - span):
            t = s + span
            for o in range(first_option[s], first_option[s + 1]):
                if low[o] >= size:
                    continue
                here = forward_cost[s] + backward_cost[s] + extra[o]
                for m in range(low[o], size):
                    candidate = here if s == t else here + cost[s + 1, t, m - need[o]]
                    if candidate < cost[s, t, m]:
                        cost[s, t, m] = candidate
                        choice[s, t, m] = -1 - (o - first_option[s])
            for split in range(s + 1, t + 1):
                if entering[split] >= size:
                    continue
                before = prefix[split] - prefix[s]
                for m in range(entering[split], size):
                    candidate = before + cost[split, t, m - entering[split]] + cost[s, split - 1, m]
                    if candidate < cost[s, t, m]:
                        cost[s, t, m] = candidate
                        choice[s, t, m] = split


def _program(chain: BlockChain, options: _Options, table: _Table, memory: int, unit: int) -> np.ndarray:
    """The (op, node) programme of the table's plan with ``memory`` buckets (op 0 ensure, 1 drop)."""
    rows: list[tuple[int, int]] = []
    entering = -(-options.entering_bytes // unit)

    def run_forward(blocks: range) -> None:
        for b in blocks:
            rows.extend((0, int(v)) for v in chain.forward[b])

    def drop(nodes: np.ndarray) -> None:
        rows.extend((1, int(v)) for v in nodes if not chain.pinned[v])

    stack: list[tuple[str, int, int, int]] = [("segment", 0, chain.length - 1, memory)]
    while stack:
        what, s, t, m = stack.pop()
        if what == "backward":
            rows.extend((0, int(v)) for v in chain.backward[s])
            continue
        choice = int(table.choice[s, t, m])
        if choice < 0:
            option = -1 - choice
            run_forward(range(s, s + 1))
            drop(options.dropped[s][option])
            stack.append(("backward", s, s, 0))
            if s < t:
                need = -(-options.stored[s][option] // unit)
                stack.append(("segment", s + 1, t, m - need))
        elif choice > s:
            run_forward(range(s, choice))
            keep = chain.entering[choice]
            drop(np.concatenate([nodes[nodes != keep] for nodes in chain.forward[s:choice]]))
            stack.append(("segment", s, choice - 1, m))  # runs after the segment pushed next
            stack.append(("segment", choice, t, m - int(entering[choice])))
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def _save_sets(graph: Graph, budget: int, deadline: float | None) -> list[np.ndarray]:
    """The save-set search's plans at ``SAVE_SET_LEVELS`` of ``budget`` and of the input order's peak."""
    top = sequence_score(graph, graph.order)[0]
    levels = {int(share * budget) for share in SAVE_SET_LEVELS} | {int(share * top) for share in SAVE_SET_LEVELS}
    return [saveset_search(graph, level, descend=False, deadline=deadline).saved for level in sorted(levels)]


def rotor_search(graph: Graph, budget: int, deadline: float | None = None) -> np.ndarray | None:
    """The compute sequence of the cheapest plan found within ``budget`` (else the lowest peak); None: no chain.

    ``deadline`` (a ``time.perf_counter()`` instant): past it the search stops between steps with the plans scored
    so far (the first table and one plan always).
    """
    chain = block_chain(graph)
    if chain is None:
        return None
    options = _options(graph, chain, _save_sets(graph, budget, deadline) if graph.n <= SAVE_SET_NODES else [])
    unit = max(1, -(-budget // BUCKETS))
    found: list[np.ndarray] = []
    for transient in (False, True):
        if not (found and past(deadline)):
            found += _limits(graph, budget, chain, options, unit, transient, deadline)
    log.info("rotor on %s: %d blocks, %d plans simulated", graph.name, chain.length, len(found))
    return best_sequence(graph, found, budget) if found else None


def _limits(
    graph: Graph,
    budget: int,
    chain: BlockChain,
    options: _Options,
    unit: int,
    transient: bool,
    deadline: float | None = None,
) -> list[np.ndarray]:
    """The plans of the table in ``unit`` bytes at the storage limits its bisection on the simulated peak scores.

    Past ``deadline`` no further limit is scored (the first one, the largest, always is).
    """
    total = int(options.entering_bytes.sum()) + sum(max(s) for s in options.stored)
    size = min(MAX_UNITS, -(-total // unit) + chain.length) + 1  # + rounding, one per block
    table = _Table(options, unit, size, transient)
    feasible = np.flatnonzero(np.isfinite(table.cost[0, chain.length - 1]))
    if not feasible.size:
        return []
    scored: dict[int, tuple[np.ndarray, Score]] = {}

    def score(m: int) -> Score:
        if m not in scored and not (scored and past(deadline)):
            program = _program(chain, options, table, m, unit)
            sequence = kernels.program_sequence(
                graph.order, graph.pred_ptr, graph.pred_idx, graph.position, graph.recomputable, program
            )
            scored[m] = (sequence, sequence_score(graph, sequence))
        return scored[m][1] if m in scored else UNSCORED

    low, high = 0, feasible.size - 1
    if score(int(feasible[high]))[0] <= budget:
        low = high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if score(int(feasible[middle]))[0] <= budget else (low, middle)
    for m in feasible[max(0, low - SCAN) : low + SCAN].tolist():  # the peak is not monotone in the limit
        score(m)
    if score(int(feasible[low]))[0] > budget:  # nothing fits near the boundary: the smallest limits
        for m in feasible[:SCAN].tolist():
            if score(m)[0] <= budget:
                break
    return [sequence for sequence, _ in scored.values()]


def rotor(graph: Graph, budget: int, *, time_limit: float | None = None) -> Schedule:
    """The ``rotor`` heuristic: :func:`rotor_search`'s plan, or the input order where the graph has no chain.

    ``time_limit``: seconds after which the search stops with the plans it has scored.
    """
    sequence = rotor_search(graph, budget, None if time_limit is None else time.perf_counter() + time_limit)
    return sequence_schedule(graph, graph.order if sequence is None else sequence)
