"""Numba kernels of the baselines: compute sequences by minimal-closure recomputation, and their score.

One module on purpose: numba's on-disk cache (``cache=True``) is keyed on the defining file, so kernels
calling one another live together. Every kernel takes plain arrays (CSR predecessors ``pred_ptr``/``pred_idx``,
input ``position``, ``recomputable``) and works in O(length of the sequence + edges read).

Engine state: ``available`` (the values the plan keeps), ``computed``, the sequence buffer ``seq`` with
its ``length`` (a scalar the caller threads through: state in arrays read and written on every node
made the loops several times slower), a DFS ``stack``, a ``mark`` scratch mask (left all false) and a
``closure`` buffer. Before :func:`ensure_all`, :func:`room` makes space for n more entries (an ensure
appends each node at most once).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _grow(seq: np.ndarray, length: int, need: int) -> np.ndarray:
    grown = np.empty(max(2 * seq.size, length + need), np.int64)
    grown[:length] = seq[:length]
    return grown


@njit(cache=True, inline="always")
def new_state(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(available, computed, seq, (stack, mark, closure)) for an n-node graph."""
    work = (np.empty(n, np.int64), np.zeros(n, np.bool_), np.empty(n, np.int64))
    return np.zeros(n, np.bool_), np.zeros(n, np.bool_), np.empty(2 * n + 16, np.int64), work


@njit(cache=True, inline="always")
def room(seq: np.ndarray, length: int, need: int) -> np.ndarray:
    """The sequence buffer with space for ``need`` more entries after ``length``."""
    return seq if length + need <= seq.size else _grow(seq, length, need)


@njit(cache=True, inline="always")
def _sift(a: np.ndarray, root: int, end: int, key: np.ndarray) -> None:
    while 2 * root + 1 < end:
        child = 2 * root + 1
        if child + 1 < end and key[a[child]] < key[a[child + 1]]:
            child += 1
        if key[a[root]] >= key[a[child]]:
            return
        a[root], a[child] = a[child], a[root]
        root = child


@njit(cache=True)
def _sort_by_position(closure: np.ndarray, count: int, position: np.ndarray) -> None:
    """Heap sort of ``closure[:count]`` by position, in place (no allocation in the engine's loops)."""
    for start in range(count // 2 - 1, -1, -1):
        _sift(closure, start, count, position)
    for end in range(count - 1, 0, -1):
        closure[0], closure[end] = closure[end], closure[0]
        _sift(closure, 0, end, position)


@njit(cache=True, inline="always")
def ensure(
    v: int,
    length: int,
    available: np.ndarray,
    computed: np.ndarray,
    seq: np.ndarray,
    work: tuple[np.ndarray, np.ndarray, np.ndarray],
    csr: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> int:
    """Make v available; returns the new sequence length (``seq`` must have room for n more entries).

    Appends, in input order, v and its unavailable ancestors reachable through unavailable nodes
    (nothing if v is available). ``work`` is (stack, mark, closure), ``csr`` (pred_ptr, pred_idx, position).
    """
    stack, mark, closure = work
    pred_ptr, pred_idx, position = csr
    if available[v]:
        return length
    mark[v] = True
    stack[0] = v
    top, count = 1, 0
    while top:
        top -= 1
        u = stack[top]
        closure[count] = u
        count += 1
        for e in range(pred_ptr[u], pred_ptr[u + 1]):
            p = pred_idx[e]
            if not mark[p] and not available[p]:
                mark[p] = True
                stack[top] = p
                top += 1
    if count > 16:
        _sort_by_position(closure, count, position)
    else:  # insertion sort: most closures are one node or a few
        for k in range(1, count):
            u = closure[k]
            i = k - 1
            while i >= 0 and position[closure[i]] > position[u]:
                closure[i + 1] = closure[i]
                i -= 1
            closure[i + 1] = u
    for k in range(count):
        u = closure[k]
        seq[length + k] = u
        available[u] = True
        computed[u] = True
        mark[u] = False
    return length + count


@njit(cache=True)
def checkpoint_sequence(
    order: np.ndarray,
    forward: np.ndarray,
    segment: np.ndarray,
    droppable: np.ndarray,
    pred_ptr: np.ndarray,
    pred_idx: np.ndarray,
    position: np.ndarray,
) -> np.ndarray:
    """Compute sequence of :func:`remat_models.heuristics.recompute.checkpoint_schedule`.

    Nodes are ensured in input order; after a forward node of segment s > 0, every ``droppable``
    value of a segment below s is dropped. The droppable available values are kept in two lists,
    ``old`` (segment below the current one: dropped at the next forward node) and ``cur``, so each
    drop costs what it drops.
    """
    n = order.size
    available, computed, seq, work = new_state(n)
    csr = (pred_ptr, pred_idx, position)
    old = np.empty(n, np.int64)
    cur = np.empty(n, np.int64)
    length, n_old, n_cur, cur_segment = 0, 0, 0, 0
    for i in range(n):
        v = order[i]
        if forward[v] and segment[v] > cur_segment:
            old[n_old : n_old + n_cur] = cur[:n_cur]
            n_old += n_cur
            n_cur = 0
            cur_segment = segment[v]
        seq = room(seq, length, n)
        start = length
        length = ensure(v, length, available, computed, seq, work, csr)
        for k in range(start, length):
            u = seq[k]
            if droppable[u]:
                if segment[u] < cur_segment:
                    old[n_old] = u
                    n_old += 1
                else:
                    cur[n_cur] = u
                    n_cur += 1
        if forward[v] and segment[v] > 0:
            for k in range(n_old):
                available[old[k]] = False
            n_old = 0
    return seq[:length].copy()


@njit(cache=True)
def saved_set_sequence(
    order: np.ndarray,
    droppable: np.ndarray,
    last_forward_use: np.ndarray,
    pred_ptr: np.ndarray,
    pred_idx: np.ndarray,
    position: np.ndarray,
) -> np.ndarray:
    """Compute sequence of :func:`remat_models.heuristics.recompute.saved_set_sequence`.

    Nodes are ensured in input order; a ``droppable`` value is dropped right after the node
    ``last_forward_use`` (its last reader in the forward pass; -1: none, dropped once computed), so the
    backward pass recomputes it, once, from what is available when it first needs it.
    """
    n = order.size
    available, computed, seq, work = new_state(n)
    csr = (pred_ptr, pred_idx, position)
    length = 0
    for i in range(n):
        v = order[i]
        seq = room(seq, length, n)
        length = ensure(v, length, available, computed, seq, work, csr)
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[e]
            if droppable[u] and last_forward_use[u] == v:
                available[u] = False
        if droppable[v] and last_forward_use[v] == -1:
            available[v] = False
    return seq[:length].copy()


@njit(cache=True)
def greedy_checkpoints(fwd: np.ndarray, is_candidate: np.ndarray, mem: np.ndarray, segment_bytes: int) -> np.ndarray:
    """Chen's greedy: checkpoint a candidate once the forward bytes since the last checkpoint exceed the segment."""
    chosen = np.empty(fwd.size, np.int64)
    count, accumulated = 0, 0
    for v in fwd:
        accumulated += mem[v]
        if is_candidate[v] and accumulated > segment_bytes:
            chosen[count] = v
            count += 1
            accumulated = 0
    return chosen[:count].copy()


@njit(cache=True)
def eager_free_positions(
    seq: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray, is_output: np.ndarray
) -> np.ndarray:
    """Where eager frees free each computation of ``seq`` (-1: kept to the end), as :func:`eager_frees` does.

    A value is freed after its last read before its next computation (right after it if unread); the
    last computation of a graph output is kept. A sequence reading a value never computed before gets
    ``[-2 - p]`` back, p the first such position.
    """
    size, n = seq.size, pred_ptr.size - 1
    latest = np.full(n, -1, np.int64)
    free_after = np.arange(size)
    for p in range(size):
        v = seq[p]
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[e]
            if latest[u] < 0:
                return np.full(1, -2 - p, np.int64)
            free_after[latest[u]] = p
        latest[v] = p
    for v in range(n):
        if is_output[v] and latest[v] >= 0:
            free_after[latest[v]] = -1
    return free_after


@njit(cache=True)
def eager_peak_cost(
    seq: np.ndarray,
    free_at: np.ndarray,
    mem: np.ndarray,
    workspace: np.ndarray,
    cost: np.ndarray,
    fixed: int,
) -> tuple[int, float]:
    """(peak, total cost) of ``seq`` with the frees ``free_at`` (see :func:`eager_free_positions`).

    As ``simulate(eager_frees(seq))`` on a graph without impls: cost is summed in sequence order.
    """
    size = seq.size
    freed = np.zeros(size, np.int64)
    for q in range(size):
        if free_at[q] >= 0:
            freed[free_at[q]] += mem[seq[q]]
    in_use, peak, total = fixed, -1, 0.0
    for p in range(size):
        v = seq[p]
        during = in_use + mem[v] + workspace[v]
        if during > peak:
            peak = during
        in_use += mem[v] - freed[p]
        total += cost[v]
    return peak, total


# --- revolve (Griewank & Walther) --------------------------------------------------------------


@njit(cache=True)
def revolve_cost(steps: int, slots: int) -> int:
    """Fewest forward computations C(l, s) to reverse l uniform steps with s snapshot slots besides the start.

    C(l, s) = r*l - binom(s+1+r, r-1), r minimal with binom(s+1+r, r) >= l (C(l, 0) = l(l-1)/2, C(1, s) = 0).
    """
    if steps <= 1:
        return 0
    if slots == 0:
        return steps * (steps - 1) // 2
    r, b = 0, 1  # b = binom(s+1+r, r)
    while b < steps:
        b = b * (slots + 2 + r) // (r + 1)
        r += 1
    return r * steps - b * r // (slots + 2)


@njit(cache=True)
def revolve_split(steps: int, slots: int) -> int:
    """Smallest optimal first split j of C(l, s) = min_j [j + C(l-j, s-1) + C(j, s)] (l >= 2, s >= 1).

    The objective is convex in j (C is convex in l), so this is the smallest j in 1..l-1 whose forward
    difference is >= 0, found by bisection: the argmin a table of C would give.
    """
    if slots >= steps - 2:  # C(l, s) = l - 1: no recomputation, j + (l-j-1) + (j-1) is least at j = 1
        return 1
    lo, hi = 1, steps - 1  # answer in [lo, hi]
    while lo < hi:
        j = (lo + hi) // 2
        here = j + revolve_cost(steps - j, slots - 1) + revolve_cost(j, slots)
        there = j + 1 + revolve_cost(steps - j - 1, slots - 1) + revolve_cost(j + 1, slots)
        if there >= here:
            hi = j
        else:
            lo = j + 1
    return lo


@njit(cache=True, inline="always")
def _drop(nodes: np.ndarray, lo: int, hi: int, available: np.ndarray, recomputable: np.ndarray) -> None:
    for k in range(lo, hi):
        if recomputable[nodes[k]]:
            available[nodes[k]] = False


@njit(cache=True)
def revolve_sequence(
    order: np.ndarray,
    pred_ptr: np.ndarray,
    pred_idx: np.ndarray,
    position: np.ndarray,
    recomputable: np.ndarray,
    fwd: np.ndarray,
    step_ptr: np.ndarray,
    step_idx: np.ndarray,
    slots: int,
) -> np.ndarray:
    """Compute sequence of :func:`remat_models.heuristics.griewank.griewank` (``slots`` already capped).

    Reversal step k is ``step_idx[step_ptr[k]:step_ptr[k+1]]``; see griewank's docstring for the recursion.
    """
    n = order.size
    steps = step_ptr.size - 1
    available, computed, seq, work = new_state(n)
    csr = (pred_ptr, pred_idx, position)
    length = 0
    tasks = np.empty((3 * steps + 8, 3), np.int64)  # (a, b, s), or (m, -1, -1): drop f_m
    top = 0
    if steps:
        length = ensure(fwd[0], length, available, computed, seq, work, csr)
        tasks[0, 0], tasks[0, 1], tasks[0, 2] = 0, steps, slots
        top = 1
    while top:
        top -= 1
        a, b, s = tasks[top, 0], tasks[top, 1], tasks[top, 2]
        if b < 0:
            _drop(fwd, a, a + 1, available, recomputable)
        elif b - a == 1:
            seq = room(seq, length, n)
            for e in range(step_ptr[a], step_ptr[a + 1]):
                length = ensure(step_idx[e], length, available, computed, seq, work, csr)
        elif s == 0:
            for i in range(b - 1, a - 1, -1):
                if step_ptr[i + 1] > step_ptr[i]:
                    seq = room(seq, length, n)
                    length = ensure(fwd[i], length, available, computed, seq, work, csr)
                    for e in range(step_ptr[i], step_ptr[i + 1]):
                        length = ensure(step_idx[e], length, available, computed, seq, work, csr)
                    _drop(fwd, a + 1, i + 1, available, recomputable)
        else:
            m = a + revolve_split(b - a, s)
            seq = room(seq, length, n)
            length = ensure(fwd[m], length, available, computed, seq, work, csr)
            _drop(fwd, a + 1, m, available, recomputable)
            tasks[top, 0], tasks[top, 1], tasks[top, 2] = a, m, s
            tasks[top + 1, 0], tasks[top + 1, 1], tasks[top + 1, 2] = m, -1, -1
            tasks[top + 2, 0], tasks[top + 2, 1], tasks[top + 2, 2] = m, b, s - 1
            top += 3
    seq = room(seq, length, n)
    for i in range(n):  # every node never computed, in input order
        if not computed[order[i]]:
            length = ensure(order[i], length, available, computed, seq, work, csr)
    return seq[:length].copy()


@njit(cache=True)
def program_sequence(
    order: np.ndarray,
    pred_ptr: np.ndarray,
    pred_idx: np.ndarray,
    position: np.ndarray,
    recomputable: np.ndarray,
    program: np.ndarray,
) -> np.ndarray:
    """Compute sequence of a program of (op, node) rows: op 0 makes node available (:func:`ensure`), op 1 drops it.

    A drop of a non-recomputable node is ignored; every node the program never computes follows in input order.
    """
    n = order.size
    available, computed, seq, work = new_state(n)
    csr = (pred_ptr, pred_idx, position)
    length = 0
    for k in range(program.shape[0]):
        v = program[k, 1]
        if program[k, 0] == 0:
            seq = room(seq, length, n)
            length = ensure(v, length, available, computed, seq, work, csr)
        elif recomputable[v]:
            available[v] = False
    seq = room(seq, length, n)
    for i in range(n):
        if not computed[order[i]]:
            length = ensure(order[i], length, available, computed, seq, work, csr)
    return seq[:length].copy()
