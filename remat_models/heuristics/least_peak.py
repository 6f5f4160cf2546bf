"""Least-peak search: a schedule at (or near) the lowest peak reachable, found in seconds.

Starts are the lowest-peak compute sequences of the fast baselines (Chen's greedy and sqrt(n), the
saved-set knapsack, the save-set search, the input order). Each is improved by a greedy descent on
(peak, number of compute steps at the peak): at the first peak step, every value resident there and
not read by that step is a candidate to drop and recompute just before its next read after the peak
(with eager frees the earlier instance then ends at its last read before the peak); a candidate is tried
alone (its inputs' lifetimes stretched to the recomputation) and with the closure of its inputs that are
no longer resident there recomputed too. The best candidate by (peak, steps at the peak, added cost) is
taken while it improves; computations nobody reads are then removed. Each trial is scored from tables of
the unchanged sequence built once per step (a recomputation changes the memory only before its insertion
point: a few range maxima), exactly as :func:`~remat_models.core.schedule.simulate` scores the sequence with
eager frees. The lowest start so far descends first; the others follow as it stalls.

With a budget the search stops at the first sequence within it, lets the other starts descend for as long
again (``more_fits``), keeps the cheapest fitting one, removes the recomputations it can while staying
within the budget (dearest first), and returns the cheapest fitting schedule it has seen, the baselines' own
fitting schedules at that budget included. Every returned schedule is simulated.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Free, Schedule, lift_schedule, simulate
from remat_models.heuristics import _sequence_kernels as kernels
from remat_models.heuristics.baselines import greedy_baseline, knapsack_baseline, sqrtn_baseline
from remat_models.heuristics.recompute import sequence_schedule
from remat_models.heuristics.saveset import saveset

log = logging.getLogger(__name__)

TIME_LIMIT = 10.0  # seconds, when the caller gives none
CANDIDATES = 64  # largest resident values tried per step of the descent
CHEAPEN_SHARE = 0.15  # of the time limit, for removing recomputations at the end (kept free by the searches)
STARTS_SHARE = 0.5  # of that time, for the descents from the baselines (what they leave goes on)
FASTSA_SHARE = 0.4  # of what is left then (less the cheapening's share): FastSA, then a descent from its result
FASTSA_SHARE_NO_BACKWARD = 0.7  # the same on graphs without a backward pass (measured: FastSA's start wins there)
FASTSA_MIN_SECONDS = 1.0
FASTSA_SECONDS_PER_NODE = 0.02  # FastSA's run is capped by the graph's size (a 5-node graph stalls in milliseconds)
SAVESET_NODES = 2000  # the save-set search lowers its peak slowly: 0.2 s on the zoo, 15 s at budget 0 on 4.8k nodes
MORE_FITS = 1.0  # once a start fits: the other starts descend this many times as long again, the cheapest fit wins
SLICE_SECONDS = 0.25  # a descent's slice: then the lowest start so far goes on

Score = tuple[int, int, float]  # (peak, compute steps at the peak, total cost)


# --- kernels ------------------------------------------------------------------------------------


@njit(cache=True)
def _profile(
    seq: np.ndarray, free_at: np.ndarray, mem: np.ndarray, workspace: np.ndarray, fixed: int
) -> tuple[int, int, int]:
    """(peak, steps at the peak, first peak position) of ``seq`` with the frees ``free_at``."""
    size = seq.size
    freed = np.zeros(size, np.int64)
    for q in range(size):
        if free_at[q] >= 0:
            freed[free_at[q]] += mem[seq[q]]
    in_use, peak, count, first = fixed, -1, 0, -1
    for p in range(size):
        v = seq[p]
        during = in_use + mem[v] + workspace[v]
        if during > peak:
            peak, count, first = during, 1, p
        elif during == peak:
            count += 1
        in_use += mem[v] - freed[p]
    return peak, count, first


@njit(cache=True)
def _step_tables(
    seq: np.ndarray,
    free_at: np.ndarray,
    first: int,
    pred_ptr: np.ndarray,
    pred_idx: np.ndarray,
    sizes: tuple[np.ndarray, np.ndarray, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What every trial of one descent step reads, built once per step in time linear in the sequence.

    (memory in use before each position (``size + 1`` entries), a segment tree over the memory during each
    step (max, count of the max; ``size`` rounded up to a power of two leaves), each node's computations (CSR
    ``occ_ptr``/``occ_pos``, positions ascending), each computation's last read up to ``first`` (-1: none),
    each node's first read after ``first`` (``size``: none)).
    """
    mem, workspace, fixed = sizes
    size, n = seq.size, pred_ptr.size - 1
    freed = np.zeros(size, np.int64)
    for q in range(size):
        if free_at[q] >= 0:
            freed[free_at[q]] += mem[seq[q]]
    before = np.empty(size + 1, np.int64)
    leaves = 1
    while leaves < size:
        leaves *= 2
    tree_max = np.full(2 * leaves, -1, np.int64)
    tree_count = np.zeros(2 * leaves, np.int64)
    in_use = fixed
    for p in range(size):
        v = seq[p]
        before[p] = in_use
        tree_max[leaves + p] = in_use + mem[v] + workspace[v]
        tree_count[leaves + p] = 1
        in_use += mem[v] - freed[p]
    before[size] = in_use
    for i in range(leaves - 1, 0, -1):
        left, right = tree_max[2 * i], tree_max[2 * i + 1]
        top = max(left, right)
        tree_max[i] = top
        tree_count[i] = (tree_count[2 * i] if left == top else 0) + (tree_count[2 * i + 1] if right == top else 0)
    occ_ptr = np.zeros(n + 1, np.int64)
    for p in range(size):
        occ_ptr[seq[p] + 1] += 1
    for u in range(n):
        occ_ptr[u + 1] += occ_ptr[u]
    fill = occ_ptr[:n].copy()
    occ_pos = np.empty(size, np.int64)
    for p in range(size):
        occ_pos[fill[seq[p]]] = p
        fill[seq[p]] += 1
    latest = np.full(n, -1, np.int64)
    last_read = np.full(size, -1, np.int64)
    for p in range(min(first + 1, size)):
        v = seq[p]
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            w = latest[pred_idx[e]]
            if w >= 0:
                last_read[w] = p
        latest[v] = p
    next_read = np.full(n, size, np.int64)
    for r in range(size - 1, first, -1):
        v = seq[r]
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            next_read[pred_idx[e]] = r
    return before, tree_max, tree_count, occ_ptr, occ_pos, last_read, next_read


@njit(cache=True)
def _latest_before(occ_ptr: np.ndarray, occ_pos: np.ndarray, u: int, at: int) -> int:
    """The position of u's last computation before ``at`` (-1: none)."""
    low, high = occ_ptr[u], occ_ptr[u + 1]
    while low < high:
        middle = (low + high) // 2
        if occ_pos[middle] < at:
            low = middle + 1
        else:
            high = middle
    return occ_pos[low - 1] if low > occ_ptr[u] else -1


@njit(cache=True)
def _range_peak(tree_max: np.ndarray, tree_count: np.ndarray, low: int, high: int) -> tuple[int, int]:
    """(max, count of the max) of the memory during the steps ``low`` to ``high - 1`` ((-1, 0) if none)."""
    leaves = tree_max.size // 2
    best, count = -1, 0
    low += leaves
    high += leaves
    while low < high:
        if low & 1:
            if tree_max[low] > best:
                best, count = tree_max[low], tree_count[low]
            elif tree_max[low] == best:
                count += tree_count[low]
            low += 1
        if high & 1:
            high -= 1
            if tree_max[high] > best:
                best, count = tree_max[high], tree_count[high]
            elif tree_max[high] == best:
                count += tree_count[high]
        low >>= 1
        high >>= 1
    return best, count


@njit(cache=True)
def _closure(
    free_at: np.ndarray,
    at: int,
    v: int,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray],
    occurrences: tuple[np.ndarray, np.ndarray],
    recomputable: np.ndarray,
    mark: np.ndarray,
) -> np.ndarray:
    """Node ``v`` and its recomputable ancestors not resident before position ``at`` (reached through such).

    ``mark`` is an all-false scratch mask over the nodes, left all false.
    """
    pred_ptr, pred_idx, position = csr
    occ_ptr, occ_pos = occurrences
    n = pred_ptr.size - 1
    stack = np.empty(n, np.int64)
    out = np.empty(n, np.int64)
    mark[v] = True
    stack[0] = v
    top, count = 1, 0
    while top:
        top -= 1
        u = stack[top]
        out[count] = u
        count += 1
        for e in range(pred_ptr[u], pred_ptr[u + 1]):
            w = pred_idx[e]
            if mark[w] or not recomputable[w]:
                continue
            q = _latest_before(occ_ptr, occ_pos, w, at)
            if q >= 0 and (free_at[q] < 0 or free_at[q] >= at):
                continue  # resident at ``at``
            mark[w] = True
            stack[top] = w
            top += 1
    block = out[:count].copy()
    mark[block] = False
    return block[np.argsort(position[block], kind="mergesort")]


@njit(cache=True)
def _trial_profile(
    seq: np.ndarray,
    free_at: np.ndarray,
    q: int,
    block: np.ndarray,
    tables: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    pred_ptr: np.ndarray,
    pred_idx: np.ndarray,
    sizes: tuple[np.ndarray, np.ndarray, int],
    slot: np.ndarray,
) -> tuple[int, int]:
    """(peak, steps at the peak) with ``block`` inserted: exactly :func:`_profile` of that sequence, eager frees.

    ``block`` ends in ``seq[q]`` and goes just before that value's first read after the step of ``tables``;
    ``q`` is a computation resident after that step. The insertion changes the memory only before the
    insertion point: the earlier copy of ``seq[q]`` ends at its last read up to the step, and the block's
    inputs freed before the point live on until their last read in the block; from the point on every value
    lives as before (the new copy takes over the earlier one's later reads). So the peak is the tables' range
    maxima with those few deltas added, and the block's own steps. ``slot`` is an all -1 scratch array over
    the nodes, left so. Time O(the block's reads x log(sequence length)).
    """
    before, tree_max, tree_count, occ_ptr, occ_pos, last_read, next_read = tables
    mem, workspace, _ = sizes
    v, b, size = seq[q], block.size, seq.size
    at = next_read[v]
    ends = np.empty(b, np.int64)  # each new copy's last read in the block
    for j in range(b):
        slot[block[j]] = j
        ends[j] = j
    reads = pred_ptr[block + 1].sum() - pred_ptr[block].sum()
    nodes = np.empty(reads, np.int64)  # the inputs freed before the point, read again in the block
    starts = np.empty(reads + 2, np.int64)  # ... where their lives are extended from (then two more deltas)
    lasts = np.empty(reads, np.int64)  # ... and their last read in the block
    stretched = 0
    for j in range(b):
        u = block[j]
        for e in range(pred_ptr[u], pred_ptr[u + 1]):
            w = pred_idx[e]
            s = slot[w]
            if s >= 0:
                ends[s] = j
            elif s <= -2:
                lasts[-2 - s] = j
            else:
                r = _latest_before(occ_ptr, occ_pos, w, at)
                if r >= 0 and 0 <= free_at[r] < at:
                    nodes[stretched], starts[stretched], lasts[stretched] = w, free_at[r] + 1, j
                    slot[w] = -2 - stretched
                    stretched += 1
    slot[block] = -1
    slot[nodes[:stretched]] = -1
    diff = np.zeros(b + 1, np.int64)
    for k in range(stretched):
        diff[0] += mem[nodes[k]]
        diff[lasts[k] + 1] -= mem[nodes[k]]
    for i in range(b - 1):  # the last is seq[q]: its copy lives on past the block
        diff[i + 1] += mem[block[i]]
        diff[ends[i] + 1] -= mem[block[i]]
    peak, count = -1, 0
    in_use = before[at] - mem[v]
    for j in range(b):
        in_use += diff[j]
        during = in_use + mem[block[j]] + workspace[block[j]]
        if during > peak:
            peak, count = during, 1
        elif during == peak:
            count += 1
    starts[stretched] = (last_read[q] if last_read[q] >= 0 else q) + 1
    starts[stretched + 1] = at  # from the block on, every value lives as before: the deltas end there
    amounts = np.empty(stretched + 2, np.int64)
    amounts[:stretched] = mem[nodes[:stretched]]
    amounts[stretched] = -mem[v]
    amounts[stretched + 1] = -amounts[: stretched + 1].sum()
    delta, low = 0, 0
    for k in np.argsort(starts[: stretched + 2]):
        if starts[k] > low:
            most, times = _range_peak(tree_max, tree_count, low, starts[k])
            if most + delta > peak:
                peak, count = most + delta, times
            elif most + delta == peak:
                count += times
            low = starts[k]
        delta += amounts[k]
    most, times = _range_peak(tree_max, tree_count, low, size)
    if most > peak:
        peak, count = most, times
    elif most == peak:
        count += times
    return peak, count


@njit(cache=True)
def _unread(seq: np.ndarray, free_at: np.ndarray, n: int) -> np.ndarray:
    """Mask of the computations nobody reads that another computation of the same node can replace."""
    size = seq.size
    read = np.zeros(n, np.bool_)  # some computation of the node is read (or kept to the end)
    for q in range(size):
        if free_at[q] != q:
            read[seq[q]] = True
    drop = np.zeros(size, np.bool_)
    kept = np.zeros(n, np.bool_)
    for q in range(size):
        v = seq[q]
        if free_at[q] == q and (read[v] or kept[v]):
            drop[q] = True
        kept[v] = True
    return drop


@njit(cache=True)
def _best_move(
    seq: np.ndarray,
    free_at: np.ndarray,
    first: int,
    candidates: np.ndarray,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray],
    recomputable: np.ndarray,
    sizes: tuple[np.ndarray, np.ndarray, int],
    cost: np.ndarray,
    current: tuple[int, int],
) -> tuple[int, np.ndarray]:
    """The best recomputation of a value resident at step ``first``: (insert position, block), or (-1, empty).

    Each candidate computation ``q`` of ``candidates`` (node v) is recomputed just before v's first read after
    ``first``, alone or with :func:`_closure`; the best is the least (peak, steps at the peak, added cost) below
    ``current`` = (peak, steps at the peak). ``csr`` = (pred_ptr, pred_idx, position), ``sizes`` = (mem,
    workspace, fixed). Each trial is scored by :func:`_trial_profile` from tables built once.
    """
    pred_ptr, pred_idx, _ = csr
    n = pred_ptr.size - 1
    tables = _step_tables(seq, free_at, first, pred_ptr, pred_idx, sizes)
    occurrences, next_read = (tables[3], tables[4]), tables[6]
    slot = np.full(n, -1, np.int64)
    mark = np.zeros(n, np.bool_)
    single = np.empty(1, np.int64)
    best_at, best_block = -1, np.empty(0, np.int64)
    best_peak, best_count, best_cost = current[0], current[1], np.inf
    for i in range(candidates.size):
        q = candidates[i]
        v = seq[q]
        at = next_read[v]
        for option in range(2):
            if option == 0:
                single[0] = v
                block = single
            else:
                block = _closure(free_at, at, v, csr, occurrences, recomputable, mark)
                if block.size == 1:
                    continue
            peak, count = _trial_profile(seq, free_at, q, block, tables, pred_ptr, pred_idx, sizes, slot)
            if peak > best_peak or (peak == current[0] and count >= current[1]):
                continue
            added = 0.0
            for k in range(block.size):
                added += cost[block[k]]
            if peak < best_peak or count < best_count or (count == best_count and added < best_cost):
                best_peak, best_count, best_cost = peak, count, added
                best_at, best_block = at, block.copy()
    return best_at, best_block


# --- the search -----------------------------------------------------------------------------------


class _Sequences:
    """Scores compute sequences of one graph (no implementations) with eager frees."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.is_output = np.zeros(graph.n, dtype=bool)
        self.is_output[graph.outputs] = True
        self.mem = graph.mem.astype(np.int64)
        self.workspace = graph.workspace.astype(np.int64)
        self.cost = graph.cost.astype(np.float64)
        self.recomputable = graph.recomputable.astype(np.bool_)

    def frees(self, seq: np.ndarray) -> np.ndarray:
        """Where eager frees free each computation (-1: kept to the end)."""
        return kernels.eager_free_positions(seq, self.graph.pred_ptr, self.graph.pred_idx, self.is_output)

    def score(self, seq: np.ndarray, free_at: np.ndarray | None = None) -> tuple[Score, int]:
        """((peak, steps at the peak, cost), first peak position)."""
        free_at = self.frees(seq) if free_at is None else free_at
        peak, count, first = _profile(seq, free_at, self.mem, self.workspace, self.graph.fixed_mem)
        return (int(peak), int(count), float(self.cost[seq].sum())), int(first)

    def prune(self, seq: np.ndarray) -> np.ndarray:
        """Remove computations nobody reads (never raises the peak or the cost), until none is left."""
        while True:
            drop = _unread(seq, self.frees(seq), self.graph.n)
            if not drop.any():
                return seq
            seq = seq[~drop]

    def descend_step(self, seq: np.ndarray, score: Score, first: int) -> tuple[np.ndarray, Score, int] | None:
        """The best improving recomputation at the first peak step, or None."""
        graph = self.graph
        free_at = self.frees(seq)
        before = np.arange(first)
        live = before[(free_at[:first] > first) | (free_at[:first] < 0)]
        live = live[self.recomputable[seq[live]] & (self.mem[seq[live]] > 0)]
        if not live.size:
            return None
        live = live[np.argsort(-self.mem[seq[live]], kind="stable")[:CANDIDATES]]
        at, block = _best_move(
            seq,
            free_at,
            first,
            live,
            (graph.pred_ptr, graph.pred_idx, graph.position),
            self.recomputable,
            (self.mem, self.workspace, graph.fixed_mem),
            self.cost,
            (score[0], score[1]),
        )
        if at < 0:
            return None
        trial = np.concatenate([seq[:at], block, seq[at:]])
        trial_score, trial_first = self.score(trial)
        return trial, trial_score, trial_first

    def descend(
        self, seq: np.ndarray, budget: int | None, deadline: float, stop: threading.Event | None
    ) -> tuple[np.ndarray, Score, bool]:
        """Greedy descent from ``seq`` until the peak stops falling, fits ``budget``, or time is up.

        Returns the sequence, its score and whether the descent is over (stalled or fits; else it may go on).
        """
        seq = self.prune(seq)
        score, first = self.score(seq)
        steps, over = 0, False
        while not over and time.perf_counter() < deadline:
            if stop is not None and stop.is_set():
                break
            found = self.descend_step(seq, score, first)
            if found is None:
                over = True
                break
            seq, score, first = found
            steps += 1
            if steps % 16 == 0:
                seq = self.prune(seq)
                score, first = self.score(seq)
            over = budget is not None and score[0] <= budget
        seq = self.prune(seq)
        score, _ = self.score(seq)
        log.debug("least-peak descent: %d steps, peak %d%s", steps, score[0], " (over)" if over else "")
        return seq, score, over or score[0] <= self.graph.lower_bound

    def cheapen(self, seq: np.ndarray, budget: int, deadline: float) -> tuple[np.ndarray, Score]:
        """Remove recomputations, dearest first, where the sequence stays within ``budget`` (then any left unread)."""
        score, _ = self.score(seq)
        seen = np.zeros(self.graph.n, dtype=bool)
        repeat = np.zeros(seq.size, dtype=bool)
        for q, v in enumerate(seq.tolist()):
            repeat[q] = seen[v]
            seen[v] = True
        positions = np.flatnonzero(repeat)
        positions = positions[np.argsort(-self.cost[seq[positions]], kind="stable")]
        removed = np.zeros(seq.size, dtype=bool)
        for q in positions.tolist():
            if time.perf_counter() >= deadline or self.cost[seq[q]] <= 0:
                break
            removed[q] = True
            trial = seq[~removed]
            trial_score, _ = self.score(trial)
            if trial_score[0] <= budget:
                score = trial_score
            else:
                removed[q] = False
        if not removed.any():
            return seq, score
        kept = self.prune(seq[~removed])  # a removed recomputation may leave its inputs' unread
        return kept, self.score(kept)[0]


@dataclass(frozen=True)
class LeastPeakResult:
    """The schedule found, its simulated peak and cost, where it came from and how long it took."""

    schedule: Schedule
    peak: int
    cost: float
    start: str
    wall_time: float


STARTS: dict[str, Callable[[Graph, int], Schedule]] = {  # cheapest first: after the first, each runs only in time
    "chen-sqrtn": sqrtn_baseline,
    "knapsack": knapsack_baseline,
    "chen-greedy": greedy_baseline,
    "saveset": saveset,
}
START_WEIGHTS = {"chen-sqrtn": 1.0, "knapsack": 10.0, "chen-greedy": 12.0, "saveset": 10.0}  # time, relative
START_RATE = 2e-5  # seconds per node and weight at least (9,607 nodes under load: 0.2, 1.9, 2.2 s for the first 3)


def least_peak_search(
    graph: Graph,
    budget: int | None = None,
    *,
    time_limit: float | None = TIME_LIMIT,
    seed: int = 0,
    stop: threading.Event | None = None,
    starts: Mapping[str, Schedule] | None = None,
    more_fits: float = MORE_FITS,
) -> LeastPeakResult:
    """The least-peak schedule found within ``time_limit`` seconds (see the module docstring).

    ``budget``: stop lowering the peak once within it and return the cheapest fitting schedule found.
    Where the descents from the baselines stall above the graph's lower bound and time is left, a FastSA run
    (peak objective; seeded with ``seed``) gives one more start. Deterministic for a seed unless the time
    limit cuts in. ``stop`` (an interrupt) ends it with its best so far. ``starts``: schedules
    the caller already has at ``budget`` (by name; a baseline of :data:`STARTS` given here is not rerun).
    ``more_fits``: once a start fits, the other starts descend for this many times the time taken so far,
    and the cheapest fit wins (0: the first fit is returned, as fast as the search finds one).
    """
    started = time.perf_counter()
    if graph.impl_table is not None:
        view = graph.default_view()
        found = least_peak_search(view, budget, time_limit=time_limit, seed=seed, stop=stop, more_fits=more_fits)
        schedule = lift_schedule(graph, found.schedule)
        result = simulate(graph, schedule)
        return LeastPeakResult(schedule, result.peak, result.total_cost, found.start, time.perf_counter() - started)
    deadline = started + (TIME_LIMIT if time_limit is None else time_limit)
    target = -1 if budget is None else budget
    sequences = _Sequences(graph)
    given = {name: schedule.compute_sequence() for name, schedule in (starts or {}).items()}
    _baseline_starts(graph, max(target, 0), given, deadline - CHEAPEN_SHARE * (deadline - started))
    found: list[tuple[Score, str, np.ndarray]] = [
        (sequences.score(graph.order)[0], "input-order", graph.order.astype(np.int64))
    ]
    for name, compute in given.items():
        seq = np.asarray(compute, dtype=np.int64)
        found.append((sequences.score(seq)[0], name, seq))
    fitting = [(s[2], s[1], s[0]) for s in found if s[0][0] <= target]
    best_fit = min(fitting, key=lambda item: (item[2][2], item[2][0]), default=None)
    best = min(found, key=lambda item: item[0])
    if best_fit is None:
        left = deadline - time.perf_counter()
        searches_end = deadline - CHEAPEN_SHARE * left
        starts_end = time.perf_counter() + STARTS_SHARE * left
        pool = sorted(found, key=lambda item: item[0], reverse=True)
        best, best_fit = _descents(sequences, pool, budget, best, starts_end, stop)
        training = bool(graph.of_kind(NodeKind.BACKWARD).any())
        fastsa_seconds = (FASTSA_SHARE if training else FASTSA_SHARE_NO_BACKWARD) * (searches_end - time.perf_counter())
        fastsa_seconds = min(fastsa_seconds, FASTSA_SECONDS_PER_NODE * graph.n)
        stopped = stop is not None and stop.is_set()
        if best_fit is None and best[0][0] > graph.lower_bound and fastsa_seconds >= FASTSA_MIN_SECONDS and not stopped:
            annealed = _fastsa_sequence(fastsa_seconds, graph, seed, stop)
            pool.append((sequences.score(annealed)[0], "fastsa", annealed))
        if best_fit is None:
            best, best_fit = _descents(sequences, pool, budget, best, searches_end, stop)
        if best_fit is not None and more_fits > 0:
            until = min(searches_end, time.perf_counter() + more_fits * (time.perf_counter() - started))
            best_fit = _cheaper_fit(sequences, pool, budget, best, best_fit, until, stop)
    score, name, seq = best if best_fit is None else (best_fit[2], best_fit[1], best_fit[0])
    if score[2] > graph.total_cost and not (stop is not None and stop.is_set()):
        until = min(deadline, time.perf_counter() + CHEAPEN_SHARE * (deadline - started))
        seq, score = sequences.cheapen(seq, score[0] if best_fit is None else target, until)
    schedule = sequence_schedule(graph, seq)
    result = simulate(graph, schedule)
    wall = time.perf_counter() - started
    log.info(
        "least-peak on %s: peak %d%s, TDI %.2f%%, from %s, %.2f s",
        graph.name, result.peak, "" if budget is None else f" (budget {budget})", result.tdi, name, wall,
    )  # fmt: skip
    return LeastPeakResult(schedule, result.peak, result.total_cost, name, wall)


def _baseline_starts(graph: Graph, budget: int, given: dict[str, Any], until: float) -> None:
    """Add the compute sequences of :data:`STARTS` at ``budget`` to ``given`` (those not there), cheapest first.

    The baselines take no time limit, so the first runs and each later one only if predicted to end by
    ``until``: its weight times the slowest rate per weight seen after the first (whose time holds the
    kernels' loading), at least ``START_RATE`` per node.
    """
    rate = START_RATE * graph.n  # seconds per weight
    for name, baseline in STARTS.items():
        if name in given:
            continue
        if name == "saveset" and graph.n > SAVESET_NODES:
            log.debug("least-peak: no saveset start on %d nodes", graph.n)
            continue
        first = not given
        if not first and time.perf_counter() + rate * START_WEIGHTS[name] > until:
            log.debug("least-peak: no %s start (%.2f s predicted)", name, rate * START_WEIGHTS[name])
            continue
        started = time.perf_counter()
        given[name] = baseline(graph, budget).compute_sequence()
        if not first:
            rate = max(rate, (time.perf_counter() - started) / START_WEIGHTS[name])


def _descents(
    sequences: _Sequences,
    pool: list[tuple[Score, str, np.ndarray]],
    budget: int | None,
    best: tuple[Score, str, np.ndarray],
    end: float,
    stop: threading.Event | None,
) -> tuple[tuple[Score, str, np.ndarray], tuple[np.ndarray, str, Score] | None]:
    """Descend from the starts of ``pool``, the lowest first, until ``end``, all stall, or one fits.

    Each turn gives the lowest start (by peak, steps at the peak) a slice of ``SLICE_SECONDS``.
    The lowest start goes on while it stays the lowest (a start that stalls leaves the pool, the next lowest
    follows), so the search reaches its least peak, or the budget, after the descents that led there rather
    than after a round over every start. ``pool`` is updated in place (the others keep their progress; a
    fitting start leaves it).
    Returns the least-peak (score, start, sequence) and the fitting (sequence, start, score) if any.
    """
    while pool and time.perf_counter() < end and not (stop is not None and stop.is_set()):
        k = min(range(len(pool)), key=lambda i: pool[i][0])
        _, name, seq = pool[k]
        seq, score, over = sequences.descend(seq, budget, min(end, time.perf_counter() + SLICE_SECONDS), stop)
        pool[k] = (score, name, seq)
        if score < best[0]:
            best = (score, name, seq)
        if budget is not None and score[0] <= budget:
            del pool[k]
            return best, (seq, name, score)
        if score[0] <= sequences.graph.lower_bound:
            pool.clear()
            return best, None
        if over:
            log.debug("least-peak from %s: stalled at peak %d", name, score[0])
            del pool[k]
    return best, None


def _cheaper_fit(
    sequences: _Sequences,
    pool: list[tuple[Score, str, np.ndarray]],
    budget: int | None,
    best: tuple[Score, str, np.ndarray],
    fit: tuple[np.ndarray, str, Score],
    end: float,
    stop: threading.Event | None,
) -> tuple[np.ndarray, str, Score]:
    """The cheapest of ``fit`` and the fitting sequences the other starts' descents reach by ``end``."""
    while pool and time.perf_counter() < end:
        best, found = _descents(sequences, pool, budget, best, end, stop)
        if found is None:
            break
        log.debug("least-peak: %s fits too, cost %g (%s's: %g)", found[1], found[2][2], fit[1], fit[2][2])
        if found[2][2] < fit[2][2]:
            fit = found
    return fit


def _fastsa_sequence(seconds: float, graph: Graph, seed: int, stop: threading.Event | None) -> np.ndarray:
    """FastSA's compute sequence with the peak as its objective (also under a budget: fitting comes first)."""
    from remat_models.heuristics.fastsa import fastsa

    result = fastsa(graph, 0, seed=seed, time_limit=seconds, stop=stop, objective="memory")
    return np.asarray(result.schedule.compute_sequence(), dtype=np.int64)


def cheapened(graph: Graph, schedule: Schedule, budget: int, seconds: float) -> Schedule:
    """``schedule``'s computations with eager frees, less the recomputations that can go within ``budget``.

    Recomputations are removed dearest first while the peak stays within ``budget``, for ``seconds`` at most,
    then computations left unread. ``schedule`` itself where it does not fit, has other steps than Compute and
    Free, its graph has implementations, or nothing goes.
    """
    plain = all(isinstance(step, (Compute, Free)) for step in schedule.steps)
    if graph.impl_table is not None or not plain or seconds <= 0:
        return schedule
    sequences = _Sequences(graph)
    seq = np.asarray(schedule.compute_sequence(), dtype=np.int64)
    if sequences.score(seq)[0][0] > budget:
        return schedule
    kept, score = sequences.cheapen(seq, budget, time.perf_counter() + seconds)
    if kept.size == seq.size:
        return schedule
    log.debug("cheapened: %d of %d computations left, cost %g", kept.size, seq.size, score[2])
    return sequence_schedule(graph, kept)


def least_peak(
    graph: Graph,
    budget: int | None = None,
    *,
    time_limit: float | None = TIME_LIMIT,
    seed: int = 0,
    stop: threading.Event | None = None,
) -> Schedule:
    """The least-peak schedule found fast; with ``budget``, the cheapest found within it once one fits."""
    return least_peak_search(graph, budget, time_limit=time_limit, seed=seed, stop=stop).schedule


def run_least_peak(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    """Registry runner of ``least-peak``: the schedule and JSON-ready details (takes no options)."""
    del options
    found = least_peak_search(graph, budget, time_limit=time_limit, seed=seed, stop=stop)
    return found.schedule, {"start": found.start, "peak": found.peak, "search_time_s": found.wall_time}
