"""Numba kernels of FastSA: segment trees, the SA state and its mutations, the annealing loop.

One module on purpose: numba's on-disk cache (``cache=True``) is keyed on the defining file only, so
a kernel inlined from another module would stay stale in the cache when that module changes.

Segment trees. Both are bottom-up trees with a per-node pending add: ``tree[i]`` is the aggregate of node i's
subtree including every add applied at or below i, ``lazy[i]`` the adds applied at i; leaves are
``tree[T:2T]``. Only the root (the whole range) is ever queried, so nothing is pushed down. Arrays
are allocated one entry longer (``tree`` 2T+2, ``lazy`` T+1: see :func:`allocate`) so the
branch-free descent may touch, without changing, the entry just past the range.

State. Semantics (those of :func:`remat_models.core.schedule.simulate` with eager frees): a production of value
v at slot p is live on [p, e] where e is its last use before v's next production (p itself if
none), or the last slot if v is a graph output and p is its last production. The memory at a slot
is the sum of the sizes of the live values plus the workspace of the unit there; the peak is the
max over slots (a nop slot never exceeds the next compute slot, so this is the max over steps).

Each value has one producing unit. Its row of the value table ``V`` holds its size, flags, and its
offsets of its two slabs in ``buf``: its sorted production times and its sorted use times. The slabs
are sized by the units' copy limits (``U[:, UK]``: a value's productions by the limits of the units
producing it, its uses by those of the units reading it), so memory grows with the copies units may
actually hold, not with the most-copied unit times the node count. The four interval
cases of 2.2.1 are resolved by a short search and applied as one or two range adds.

The kernels take plain arrays (numba passes tuples of arrays slowly):
``U`` int64[units, 6] (out value, workspace, recomputable, count, fetch flag, copy limit), ``ucost``
float64[units], ``in_ptr``/``in_idx`` (CSR of input values), ``V`` int64[values, 6] (size, output flag,
productions, production slab, use slab, uses), ``buf`` (the slabs),
``S`` int64[T, 2] (unit or NONE, position in ``occ``), ``occ`` (the occupied slots, unordered, each packed
with its unit as ``slot | unit << SHIFT``: a best-state snapshot is then a sequential copy, not a gather over T),
``tree``/``lazy`` (range-max), ``ltree``/``llazy`` (range-logaddexp, length 2/1 when off),
``ints`` (N_OCC, LAE_ON), ``floats`` (COST, LAE_SCALE, LAE_BIG).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# --- segment trees


@njit(cache=True, inline="always")
def _lae(a: float, b: float) -> float:
    """Return log(exp(a) + exp(b)) without overflow."""
    if a < b:
        a, b = b, a
    return a + np.log1p(np.exp(b - a))


@njit(cache=True, inline="always")
def max_range_add(tree: np.ndarray, lazy: np.ndarray, lo: int, hi: int, x: int) -> None:
    """Add x to every slot in [lo, hi] (inclusive) of a range-add / range-max tree (branch-free descent)."""
    size = lazy.shape[0] - 1
    left = lo + size
    right = hi + size + 1
    l0 = left >> 1
    r0 = (right - 1) >> 1
    bit = left & 1  # leaves carry no lazy part
    tree[left] += x * bit
    left = (left + bit) >> 1
    bit = right & 1
    right -= bit
    tree[right] += x * bit
    right >>= 1
    while left < right:
        bit = left & 1
        tree[left] += x * bit
        lazy[left] += x * bit
        left = (left + bit) >> 1
        bit = right & 1
        right -= bit
        tree[right] += x * bit
        lazy[right] += x * bit
        right >>= 1
    while l0 != r0:
        a = tree[2 * l0]
        b = tree[2 * l0 + 1]
        tree[l0] = (a if a > b else b) + lazy[l0]
        a = tree[2 * r0]
        b = tree[2 * r0 + 1]
        tree[r0] = (a if a > b else b) + lazy[r0]
        l0 >>= 1
        r0 >>= 1
    while l0 >= 1:
        a = tree[2 * l0]
        b = tree[2 * l0 + 1]
        tree[l0] = (a if a > b else b) + lazy[l0]
        l0 >>= 1


@njit(cache=True, inline="always")
def lae_range_add(tree: np.ndarray, lazy: np.ndarray, lo: int, hi: int, x: float) -> None:
    """Add x to every slot in [lo, hi] (inclusive) of a range-add / range-logaddexp tree."""
    size = lazy.shape[0] - 1
    left = lo + size
    right = hi + size + 1
    l0 = left
    r0 = right - 1
    while left < right:
        if left & 1:
            tree[left] += x
            if left < size:
                lazy[left] += x
            left += 1
        if right & 1:
            right -= 1
            tree[right] += x
            if right < size:
                lazy[right] += x
        left >>= 1
        right >>= 1
    l0 >>= 1
    r0 >>= 1
    while l0 != r0:
        tree[l0] = _lae(tree[2 * l0], tree[2 * l0 + 1]) + lazy[l0]
        tree[r0] = _lae(tree[2 * r0], tree[2 * r0 + 1]) + lazy[r0]
        l0 >>= 1
        r0 >>= 1
    while l0 >= 1:
        tree[l0] = _lae(tree[2 * l0], tree[2 * l0 + 1]) + lazy[l0]
        l0 >>= 1


@njit(cache=True)
def max_build(tree: np.ndarray, lazy: np.ndarray) -> None:
    """Reset a range-max tree to hold its leaves ``tree[T:2T]`` (written by the caller) with no pending adds."""
    size = lazy.shape[0] - 1
    lazy[:] = 0
    for i in range(size - 1, 0, -1):
        tree[i] = max(tree[2 * i], tree[2 * i + 1])


@njit(cache=True)
def lae_build(tree: np.ndarray, lazy: np.ndarray, values: np.ndarray) -> None:
    """Reset a range-logaddexp tree to hold ``values`` (length T) with no pending adds."""
    size = lazy.shape[0] - 1
    tree[size : 2 * size] = values
    lazy[:] = 0.0
    for i in range(size - 1, 0, -1):
        tree[i] = _lae(tree[2 * i], tree[2 * i + 1])


@njit(cache=True)
def leaf_values(tree: np.ndarray, lazy: np.ndarray) -> np.ndarray:
    """Return the T slot values (each leaf plus the pending adds of its ancestors)."""
    size = lazy.shape[0] - 1
    acc = np.zeros(2 * size, dtype=tree.dtype)
    for i in range(1, size):
        acc[2 * i] = acc[i] + lazy[i]
        acc[2 * i + 1] = acc[i] + lazy[i]
    return tree[size : 2 * size] + acc[size:]


def allocate(size_t: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Zeroed (tree, lazy) arrays for T = ``size_t`` slots."""
    return np.zeros(2 * size_t + 2, dtype=dtype), np.zeros(size_t + 1, dtype=dtype)


# --- state and mutations

NONE = -1
# columns of U (UF: a fetch unit, App. B.3: it produces its value from the host copy, with no inputs;
# UK: the most occurrences the unit may have)
UO, UW, UR, UC, UF, UK = 0, 1, 2, 3, 4, 5
# columns of V (VQ / VU: where its production / use times start in ``buf``; VN / VK: how many)
VS, VO, VN, VQ, VU, VK = 0, 1, 2, 3, 4, 5
# indices into ints / floats
N_OCC, LAE_ON = 0, 1
# an entry of ``occ``: slot | unit << SHIFT (T <= 2**32 slots)
SHIFT = 32
MASK = (1 << SHIFT) - 1
COST, LAE_SCALE, LAE_BIG = 0, 1, 2


@njit(cache=True, inline="always")
def _use_lower(buf: np.ndarray, lo: int, n: int, t: int) -> int:
    """Index of the first of buf[lo:lo+n] (sorted production or use times) that is >= t."""
    if n <= 16:  # short lists: a backward scan (queries mostly look at the last entries)
        k = n
        while k > 0 and buf[lo + k - 1] >= t:
            k -= 1
        return k
    a = 0
    b = n
    while a < b:
        m = (a + b) >> 1
        if buf[lo + m] < t:
            a = m + 1
        else:
            b = m
    return a


@njit(cache=True, inline="always")
def _prod_lower(V: np.ndarray, buf: np.ndarray, v: int, t: int) -> int:
    """Number of productions of v before t."""
    return _use_lower(buf, V[v, VQ], V[v, VN], t)


@njit(cache=True, inline="always")
def last_use_in(V: np.ndarray, buf: np.ndarray, v: int, a: int, b: int) -> int:
    """Latest use time of value v strictly inside (a, b), or NONE."""
    lo = V[v, VU]
    k = _use_lower(buf, lo, V[v, VK], b) - 1
    if k >= 0 and buf[lo + k] > a:
        return buf[lo + k]
    return NONE


@njit(cache=True, inline="always")
def interval_end(V: np.ndarray, buf: np.ndarray, size_t: int, v: int, p: int, nxt: int) -> int:
    """End of the live interval of v's production at p, given its next production ``nxt`` (or NONE)."""
    if nxt == NONE:
        if V[v, VO]:
            return size_t - 1
        nxt = size_t
    e = last_use_in(V, buf, v, p, nxt)
    return e if e > p else p


@njit(cache=True, inline="always")
def _radd(
    tree: np.ndarray,
    lazy: np.ndarray,
    ltree: np.ndarray,
    llazy: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    lo: int,
    hi: int,
    x: int,
) -> None:
    """Add x bytes on slots [lo, hi] to the tree(s)."""
    if lo > hi or x == 0:
        return
    max_range_add(tree, lazy, lo, hi, x)
    if ints[LAE_ON]:
        lae_range_add(ltree, llazy, lo, hi, x * floats[LAE_SCALE])


@njit(cache=True, inline="always")
def can_add(
    U: np.ndarray,
    in_ptr: np.ndarray,
    in_idx: np.ndarray,
    V: np.ndarray,
    buf: np.ndarray,
    S: np.ndarray,
    x: int,
    t: int,
) -> bool:
    """Whether unit x may be placed at the nop slot t: capacity, and every input produced before t.

    A fetch unit needs a computed copy of its value before t (the first production is always a compute).
    """
    if S[t, 0] != NONE or U[x, UC] >= U[x, UK]:
        return False
    if U[x, UF]:
        v = U[x, UO]
        return V[v, VN] > 0 and buf[V[v, VQ]] < t
    for j in range(in_ptr[x], in_ptr[x + 1]):
        u = in_idx[j]
        if V[u, VN] == 0 or buf[V[u, VQ]] >= t:
            return False
    return True


@njit(cache=True, inline="always")
def can_remove(U: np.ndarray, V: np.ndarray, buf: np.ndarray, S: np.ndarray, t: int) -> bool:
    """Whether the unit at slot t may be dropped: another copy remains and no use loses its producer.

    A fetch unit may always go (its reads fall back on the earlier copy); the first production may not
    leave a fetch first (a fetch needs the host copy of an earlier compute).
    """
    x = S[t, 0]
    if x == NONE:
        return False
    if U[x, UF]:
        return True
    if U[x, UC] < 2:
        return False
    v = U[x, UO]
    if buf[V[v, VQ]] == t:  # first production: nothing may read v before the next one
        if U[S[buf[V[v, VQ] + 1], 0], UF]:
            return False
        return last_use_in(V, buf, v, t, buf[V[v, VQ] + 1]) == NONE
    return True


@njit(cache=True)
def add_unit(
    U: np.ndarray,
    ucost: np.ndarray,
    in_ptr: np.ndarray,
    in_idx: np.ndarray,
    V: np.ndarray,
    buf: np.ndarray,
    S: np.ndarray,
    occ: np.ndarray,
    tree: np.ndarray,
    lazy: np.ndarray,
    ltree: np.ndarray,
    llazy: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    x: int,
    t: int,
) -> None:
    """Place unit x at nop slot t (must satisfy can_add) and update intervals, trees and cost."""
    size_t = S.shape[0]
    at_t = U[x, UW]
    for j in range(in_ptr[x], in_ptr[x + 1]):
        u = in_idx[j]
        n = V[u, VN]
        k = _prod_lower(V, buf, u, t)
        nxt = buf[V[u, VQ] + k] if k < n else NONE
        e = interval_end(V, buf, size_t, u, buf[V[u, VQ] + k - 1], nxt)
        if t > e:  # extend the interval up to this new use
            _radd(tree, lazy, ltree, llazy, ints, floats, e + 1, t, V[u, VS])
        lo = V[u, VU]
        m = V[u, VK]
        i = lo + m
        while i > lo and buf[i - 1] > t:
            buf[i] = buf[i - 1]
            i -= 1
        buf[i] = t
        V[u, VK] = m + 1
    v = U[x, UO]
    n = V[v, VN]
    k = _prod_lower(V, buf, v, t)
    nxt = buf[V[v, VQ] + k] if k < n else NONE
    if k > 0:
        p = buf[V[v, VQ] + k - 1]
        if interval_end(V, buf, size_t, v, p, nxt) >= t:  # split: p's interval now stops at its last use < t
            e1 = max(p, last_use_in(V, buf, v, p, t))
            _radd(tree, lazy, ltree, llazy, ints, floats, e1 + 1, t - 1, -V[v, VS])
        else:
            at_t += V[v, VS]
    else:
        at_t += V[v, VS]
    _radd(tree, lazy, ltree, llazy, ints, floats, t, t, at_t)
    q = V[v, VQ]
    for i in range(q + n, q + k, -1):
        buf[i] = buf[i - 1]
    buf[q + k] = t
    V[v, VN] = n + 1
    S[t, 0] = x
    U[x, UC] += 1
    S[t, 1] = ints[N_OCC]
    occ[ints[N_OCC]] = t | (x << SHIFT)
    ints[N_OCC] += 1
    floats[COST] += ucost[x]
    if ints[LAE_ON]:
        lae_range_add(ltree, llazy, t, t, floats[LAE_BIG])


@njit(cache=True)
def remove_unit(
    U: np.ndarray,
    ucost: np.ndarray,
    in_ptr: np.ndarray,
    in_idx: np.ndarray,
    V: np.ndarray,
    buf: np.ndarray,
    S: np.ndarray,
    occ: np.ndarray,
    tree: np.ndarray,
    lazy: np.ndarray,
    ltree: np.ndarray,
    llazy: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    t: int,
) -> None:
    """Turn slot t into a nop (must satisfy can_remove) and update intervals, trees and cost."""
    size_t = S.shape[0]
    x = S[t, 0]
    at_t = -U[x, UW]
    v = U[x, UO]
    n = V[v, VN]
    k = _prod_lower(V, buf, v, t)
    nxt = buf[V[v, VQ] + k + 1] if k + 1 < n else NONE
    kept = nxt == NONE and V[v, VO] > 0  # t's interval reaches the end (possibly t == T - 1)
    if k > 0 and (kept or interval_end(V, buf, size_t, v, t, nxt) > t):  # merge into the previous interval
        p = buf[V[v, VQ] + k - 1]
        e1 = max(p, last_use_in(V, buf, v, p, t))
        _radd(tree, lazy, ltree, llazy, ints, floats, e1 + 1, t - 1, V[v, VS])
    else:
        at_t -= V[v, VS]
    q = V[v, VQ]
    for i in range(q + k, q + n - 1):
        buf[i] = buf[i + 1]
    V[v, VN] = n - 1
    for j in range(in_ptr[x], in_ptr[x + 1]):
        u = in_idx[j]
        lo = V[u, VU]
        m = V[u, VK] - 1
        i = lo + _use_lower(buf, lo, m + 1, t)
        while i < lo + m:
            buf[i] = buf[i + 1]
            i += 1
        V[u, VK] = m
        n = V[u, VN]
        k = _prod_lower(V, buf, u, t)
        nxt = buf[V[u, VQ] + k] if k < n else NONE
        e = interval_end(V, buf, size_t, u, buf[V[u, VQ] + k - 1], nxt)
        if e < t:  # t was the last use: shrink
            _radd(tree, lazy, ltree, llazy, ints, floats, e + 1, t, -V[u, VS])
    _radd(tree, lazy, ltree, llazy, ints, floats, t, t, at_t)
    S[t, 0] = NONE
    U[x, UC] -= 1
    last = occ[ints[N_OCC] - 1]
    occ[S[t, 1]] = last
    S[last & MASK, 1] = S[t, 1]
    ints[N_OCC] -= 1
    floats[COST] -= ucost[x]
    if ints[LAE_ON]:
        lae_range_add(ltree, llazy, t, t, -floats[LAE_BIG])


@njit(cache=True, inline="always")
def can_move(
    U: np.ndarray,
    in_ptr: np.ndarray,
    in_idx: np.ndarray,
    V: np.ndarray,
    buf: np.ndarray,
    S: np.ndarray,
    t1: int,
    t2: int,
) -> bool:
    """Whether the unit at slot t1 may move to nop slot t2 (checked without touching the state)."""
    x = S[t1, 0]
    if x == NONE or not can_add(U, in_ptr, in_idx, V, buf, S, x, t2):
        return False
    v = U[x, UO]
    if t2 > t1 and buf[V[v, VQ]] == t1:  # t1 stays the first production: nothing may read it before t2
        nxt = buf[V[v, VQ] + 1] if V[v, VN] > 1 and buf[V[v, VQ] + 1] < t2 else t2
        if nxt < t2 and U[S[nxt, 0], UF]:
            return False  # a fetch would come first
        return last_use_in(V, buf, v, t1, nxt) == NONE
    return True


@njit(cache=True)
def memory_profile(U: np.ndarray, V: np.ndarray, buf: np.ndarray, S: np.ndarray, out: np.ndarray) -> None:
    """Write the memory per slot, recomputed from scratch, into ``out`` (length T; no temporaries: T is large)."""
    size_t = S.shape[0]
    out[:] = 0
    for v in range(V.shape[0]):
        n = V[v, VN]
        for k in range(n):
            p = buf[V[v, VQ] + k]
            nxt = buf[V[v, VQ] + k + 1] if k + 1 < n else NONE
            e = interval_end(V, buf, size_t, v, p, nxt)
            out[p] += V[v, VS]
            if e + 1 < size_t:
                out[e + 1] -= V[v, VS]
    running = 0
    for t in range(size_t):
        running += out[t]
        out[t] = running
        if S[t, 0] != NONE:
            out[t] += U[S[t, 0], UW]


@njit(cache=True)
def fill(
    U: np.ndarray,
    ucost: np.ndarray,
    in_ptr: np.ndarray,
    in_idx: np.ndarray,
    V: np.ndarray,
    buf: np.ndarray,
    S: np.ndarray,
    occ: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    sequence: np.ndarray,
    times: np.ndarray,
) -> None:
    """Place ``sequence[i]`` at slot ``times[i]`` (increasing) into an empty state; trees are built separately."""
    for i in range(sequence.shape[0]):
        x = sequence[i]
        t = times[i]
        S[t, 0] = x
        S[t, 1] = i
        occ[i] = t | (x << SHIFT)
        U[x, UC] += 1
        floats[COST] += ucost[x]
        v = U[x, UO]
        buf[V[v, VQ] + V[v, VN]] = t
        V[v, VN] += 1
        for j in range(in_ptr[x], in_ptr[x + 1]):
            u = in_idx[j]
            buf[V[u, VU] + V[u, VK]] = t
            V[u, VK] += 1
    ints[N_OCC] = sequence.shape[0]


# --- annealing

# objective codes
OBJ_PRODUCT, OBJ_ELU, OBJ_MEMORY = 0, 1, 2
# indices into the float parameter vector
P_BUDGET, P_FIXED, P_OBJ, P_H0, P_HF, P_N, P_ADD, P_REMOVE, P_STOP_MET, P_COST_EPS, P_FETCH = range(11)
N_PARAMS = 11
# indices into the counters
C_ITER, C_VALID, C_ACCEPTED, C_SAVED = range(4)  # C_SAVED: best states recorded mid-chunk
# indices into the best-state record
B_F, B_MET, B_DIRTY, B_N, B_PEAK, B_COST = range(6)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_INV53 = 1.0 / 9007199254740992.0


@njit(cache=True, inline="always")
def _next(rng: np.ndarray) -> np.uint64:
    """Splitmix64 step on the one-word state ``rng``."""
    z = rng[0] + _GOLDEN
    rng[0] = z
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _uniform(rng: np.ndarray) -> float:
    return float(_next(rng) >> np.uint64(11)) * _INV53


@njit(cache=True, inline="always")
def _below(rng: np.ndarray, n: int) -> int:
    return np.int64(_next(rng) % np.uint64(n))


@njit(cache=True, inline="always")
def _nop_slot(rng: np.ndarray, S: np.ndarray) -> int:
    size_t = S.shape[0]
    t = _below(rng, size_t)
    while S[t, 0] != NONE:
        t = _below(rng, size_t)
    return t


@njit(cache=True, inline="always")
def _rejects(rng: np.ndarray, h: float, worse: float) -> bool:
    """Metropolis test of a move ``worse`` > 0 higher at temperature h (h <= 0: always rejected)."""
    return h <= 0.0 or _uniform(rng) >= np.exp(-worse / h)


@njit(cache=True)
def objective(code: int, peak: float, cost: float, budget: float) -> float:
    """Eq. 1 max(B, M) * C; footnote 2's L(Elu(L^-1(M))) * C^0.6 with L(0) = B, L(-100) = 0; or M."""
    if code == OBJ_PRODUCT:
        return max(budget, peak) * cost
    if code == OBJ_ELU:
        x = 100.0 * (peak / budget - 1.0)
        elu = x if x > 0.0 else np.expm1(x)
        return budget * (1.0 + elu / 100.0) * cost**0.6
    return peak


@njit(cache=True)
def current_objective(
    tree: np.ndarray, ltree: np.ndarray, ints: np.ndarray, floats: np.ndarray, par: np.ndarray
) -> float:
    """Objective of the current state (on the logaddexp tree's smooth peak when enabled)."""
    peak = ltree[1] / floats[LAE_SCALE] if ints[LAE_ON] else float(tree[1])
    cost = floats[COST] + par[P_COST_EPS] * ints[N_OCC]
    return objective(int(par[P_OBJ]), peak + par[P_FIXED], cost, par[P_BUDGET])


@njit(cache=True)
def snapshot(
    S: np.ndarray,
    occ: np.ndarray,
    tree: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    par: np.ndarray,
    best: np.ndarray,
    best_t: np.ndarray,
    best_u: np.ndarray,
) -> None:
    """Record the current occupied slots as the best state."""
    n = ints[N_OCC]
    for i in range(n):
        best_t[i] = occ[i] & MASK
        best_u[i] = occ[i] >> SHIFT
    best[B_N] = n
    best[B_DIRTY] = 0.0
    best[B_PEAK] = float(tree[1]) + par[P_FIXED]
    best[B_COST] = floats[COST]


@njit(cache=True)
def _apply(
    U: np.ndarray,
    ucost: np.ndarray,
    in_ptr: np.ndarray,
    in_idx: np.ndarray,
    V: np.ndarray,
    buf: np.ndarray,
    S: np.ndarray,
    occ: np.ndarray,
    tree: np.ndarray,
    lazy: np.ndarray,
    ltree: np.ndarray,
    llazy: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    kind: int,
    x: int,
    t1: int,
    t2: int,
) -> None:
    """Apply mutation ``kind`` (0 add x at t1, 1 remove at t1, 2 move t1 -> t2), or its inverse for kind + 3."""
    if kind == 0 or kind == 4:
        add_unit(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, x, t1)
    elif kind == 1 or kind == 3:
        remove_unit(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, t1)
    elif kind == 2:
        add_unit(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, x, t2)
        remove_unit(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, t1)
    else:
        add_unit(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, x, t1)
        remove_unit(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, t2)


@njit(cache=True)
def anneal(
    U: np.ndarray,
    ucost: np.ndarray,
    in_ptr: np.ndarray,
    in_idx: np.ndarray,
    V: np.ndarray,
    buf: np.ndarray,
    S: np.ndarray,
    occ: np.ndarray,
    tree: np.ndarray,
    lazy: np.ndarray,
    ltree: np.ndarray,
    llazy: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    addable: np.ndarray,
    fetch_of: np.ndarray,
    par: np.ndarray,
    counters: np.ndarray,
    rng: np.ndarray,
    best: np.ndarray,
    best_t: np.ndarray,
    best_u: np.ndarray,
    n_iter: int,
) -> bool:
    """Run up to n_iter mutation attempts; True if it stopped because the budget was met (P_STOP_MET).

    With P_FETCH > 0 that share of attempts is B.3's flip fetch turned on: a random input v of the unit
    at a random slot t is fetched at slot t - 1 (the fetch unit ``fetch_of[v]``); a remove mutation
    turns a fetch off.
    """
    budget = par[P_BUDGET]
    h0 = par[P_H0]
    log_ratio = np.log(par[P_HF] / h0) if h0 > 0.0 and par[P_HF] > 0.0 else 0.0
    total = max(par[P_N], 1.0)
    p_add = par[P_ADD]
    p_mut = p_add + par[P_REMOVE]
    stop_met = par[P_STOP_MET] > 0.0
    p_fetch = par[P_FETCH]
    f = current_objective(tree, ltree, ints, floats, par)
    for _ in range(n_iter):
        it = counters[C_ITER]
        counters[C_ITER] = it + 1
        t2 = NONE
        if p_fetch > 0.0 and _uniform(rng) < p_fetch:  # no draw without fetches: recompute-only runs are unchanged
            kind = 0
            t = occ[_below(rng, ints[N_OCC])] & MASK
            y = S[t, 0]
            n_in = in_ptr[y + 1] - in_ptr[y]
            if n_in == 0 or t == 0:
                continue
            x = fetch_of[in_idx[in_ptr[y] + _below(rng, n_in)]]
            t1 = t - 1
            if x == NONE or not can_add(U, in_ptr, in_idx, V, buf, S, x, t1):
                continue
        else:
            r = _uniform(rng)
            if r < p_add:
                if addable.shape[0] == 0:
                    continue
                kind = 0
                x = addable[_below(rng, addable.shape[0])]
                t1 = _nop_slot(rng, S)
                if not can_add(U, in_ptr, in_idx, V, buf, S, x, t1):
                    continue
            elif r < p_mut:
                kind = 1
                t1 = occ[_below(rng, ints[N_OCC])] & MASK
                x = S[t1, 0]
                if not U[x, UR] or not can_remove(U, V, buf, S, t1):
                    continue
            else:
                kind = 2
                t1 = occ[_below(rng, ints[N_OCC])] & MASK
                t2 = _nop_slot(rng, S)
                x = S[t1, 0]
                if not can_move(U, in_ptr, in_idx, V, buf, S, t1, t2):
                    continue
        _apply(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, kind, x, t1, t2)
        counters[C_VALID] += 1
        f_new = current_objective(tree, ltree, ints, floats, par)
        if f_new > f and _rejects(rng, h0 * np.exp(log_ratio * it / total), f_new - f):  # temperature only here
            _apply(
                U,
                ucost,
                in_ptr,
                in_idx,
                V,
                buf,
                S,
                occ,
                tree,
                lazy,
                ltree,
                llazy,
                ints,
                floats,
                kind + 3,
                x,
                t1,
                t2,
            )
            continue
        counters[C_ACCEPTED] += 1
        met = float(tree[1]) + par[P_FIXED] <= budget
        better = (met and best[B_MET] == 0.0) or ((met == (best[B_MET] > 0.0)) and f_new < best[B_F])
        if not better and best[B_DIRTY] > 0.0:  # leaving an unsaved best state: save it first
            _apply(
                U,
                ucost,
                in_ptr,
                in_idx,
                V,
                buf,
                S,
                occ,
                tree,
                lazy,
                ltree,
                llazy,
                ints,
                floats,
                kind + 3,
                x,
                t1,
                t2,
            )
            snapshot(S, occ, tree, ints, floats, par, best, best_t, best_u)
            counters[C_SAVED] += 1
            _apply(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, kind, x, t1, t2)
        f = f_new
        if better:
            best[B_F] = f_new
            best[B_MET] = 1.0 if met else 0.0
            best[B_DIRTY] = 1.0
        if stop_met and met:
            return True
    return False


@njit(cache=True)
def prune(
    U: np.ndarray,
    ucost: np.ndarray,
    in_ptr: np.ndarray,
    in_idx: np.ndarray,
    V: np.ndarray,
    buf: np.ndarray,
    S: np.ndarray,
    occ: np.ndarray,
    tree: np.ndarray,
    lazy: np.ndarray,
    ltree: np.ndarray,
    llazy: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    limit: int,
) -> int:
    """Greedily drop computations, latest first, while valid and the tree's peak stays <= max(limit, peak).

    Passes repeat until one removes nothing; returns the number removed. Deterministic.
    """
    removed = 0
    changed = True
    while changed:
        changed = False
        times = np.sort(occ[: ints[N_OCC]] & MASK)
        for i in range(times.shape[0] - 1, -1, -1):
            t = times[i]
            x = S[t, 0]
            if not U[x, UR] or not can_remove(U, V, buf, S, t):
                continue
            before = tree[1]
            remove_unit(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, t)
            if tree[1] > max(before, limit):
                add_unit(U, ucost, in_ptr, in_idx, V, buf, S, occ, tree, lazy, ltree, llazy, ints, floats, x, t)
            else:
                removed += 1
                changed = True
    return removed
