"""Python handle on one annealing state: layout of the T slots (D.4), tree construction, mutations, decoding."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Offload, Prefetch, Schedule, Step, eager_frees
from remat_models.errors import ConfigurationError
from remat_models.heuristics.fastsa import _kernels as kernels
from remat_models.heuristics.fastsa._kernels import (
    LAE_BIG,
    LAE_ON,
    LAE_SCALE,
    N_OCC,
    NONE,
    UC,
    UF,
    UK,
    UR,
    VK,
    VN,
    VO,
    VQ,
    VS,
    VU,
    allocate,
    lae_build,
    leaf_values,
    max_build,
)
from remat_models.heuristics.fastsa.grouping import Units

LAE_NOP_OFFSET = 1.0e6  # C.2: nop slots sit this far below, in log units, so they do not blur the peak
LAE_MAX_VALUE = 10.0  # C.2: sizes rescaled so the largest value is 10, base 2


class KernelArrays(NamedTuple):
    """The arrays the kernels take, in their argument order (see ``_state``)."""

    U: np.ndarray
    ucost: np.ndarray
    in_ptr: np.ndarray
    in_idx: np.ndarray
    V: np.ndarray
    buf: np.ndarray
    S: np.ndarray
    occ: np.ndarray
    tree: np.ndarray
    lazy: np.ndarray
    ltree: np.ndarray
    llazy: np.ndarray
    ints: np.ndarray
    floats: np.ndarray


def slot_count(length: int, *, slots: int | None = None, spacing: int = 64) -> int:
    """Power of two T >= ``slots`` (default ``spacing`` * (length + 1)) leaving at least one nop between nodes."""
    wanted = max(slots or spacing * (length + 1), 2 * (length + 1), 16)
    return 1 << math.ceil(math.log2(wanted))


def copy_limits(units: Units, sequence: np.ndarray, copies: int) -> np.ndarray:
    """Most occurrences of each unit: ``copies`` (at least 2, so a unit can rotate), or its count in ``sequence``."""
    return np.maximum(np.bincount(sequence, minlength=units.count), max(copies, 2)).astype(np.int64)


def _slabs(units: Units, limits: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(production slab starts, use slab starts, total) of ``buf`` for units holding at most ``limits`` copies.

    A value has room for as many productions as its producing units (its compute unit and its fetch
    unit) may hold copies, and for as many uses as the units reading it may hold copies.
    """
    data = units.data
    reads = np.repeat(limits, np.diff(data.in_ptr))
    produced = np.bincount(data.out, weights=limits, minlength=n_values).astype(np.int64)
    used = np.bincount(data.in_idx, weights=reads, minlength=n_values).astype(np.int64)
    ends = np.cumsum(produced + used)
    starts = ends - produced - used
    return starts, starts + produced, int(ends[-1]) if ends.size else 0


class SAState:
    """A slot sequence over ``units`` with incremental lifetimes and segment tree(s).

    The initial ``sequence`` (unit indices) is spread evenly: item i of k goes to slot i*T/(k+1) (D.4).
    ``capacity`` (per unit, default its copy limit) sizes the time slabs for later :meth:`respread` calls.
    """

    def __init__(
        self,
        graph: Graph,
        units: Units,
        sequence: np.ndarray,
        *,
        slots: int | None = None,
        spacing: int = 64,
        copies: int = 16,
        logaddexp: bool = False,
        capacity: np.ndarray | None = None,
    ) -> None:
        self.graph = graph
        self.units = units
        data = units.data
        sequence = np.asarray(sequence, dtype=np.int64)
        size_t = slot_count(sequence.size, slots=slots, spacing=spacing)
        if size_t > kernels.MASK + 1:
            raise ConfigurationError(f"FastSA state of {size_t} slots; at most 2**{kernels.SHIFT} are supported")
        limits = copy_limits(units, sequence, copies)
        room = limits if capacity is None else np.maximum(limits, capacity).astype(np.int64)
        unit_table = np.zeros((units.count, 6), dtype=np.int64)
        unit_table[:, 0], unit_table[:, 1], unit_table[:, 2] = data.out, data.ws, data.recomputable
        unit_table[units.fetches(), UF] = 1
        unit_table[:, UK] = limits
        values = np.zeros((graph.n, 6), dtype=np.int64)
        values[:, VS], values[:, VO] = data.size, data.is_output
        values[:, VQ], values[:, VU], total = _slabs(units, room, graph.n)
        tree, lazy = allocate(size_t, np.int64)
        ltree, llazy = allocate(size_t if logaddexp else 1, np.float64)
        self.arrays = KernelArrays(
            U=unit_table,
            ucost=data.cost.astype(np.float64),
            in_ptr=data.in_ptr,
            in_idx=data.in_idx,
            V=values,
            buf=np.zeros(total, dtype=np.int64),
            S=np.full((size_t, 2), NONE, dtype=np.int64),
            occ=np.zeros(size_t, dtype=np.int64),
            tree=tree,
            lazy=lazy,
            ltree=ltree,
            llazy=llazy,
            ints=np.array([0, int(logaddexp)], dtype=np.int64),
            floats=np.zeros(4, dtype=np.float64),
        )
        self._allocated = self.arrays  # full-size arrays; ``respread`` may leave views of them in ``arrays``
        self._capacity = room  # copies per unit the slabs hold
        a = self.arrays
        if logaddexp:
            a.floats[LAE_SCALE] = LAE_MAX_VALUE * math.log(2.0) / max(int(data.size.max()), 1)
            a.floats[LAE_BIG] = LAE_NOP_OFFSET
        times = (np.arange(1, sequence.size + 1, dtype=np.int64) * size_t) // (sequence.size + 1)
        kernels.fill(a.U, a.ucost, a.in_ptr, a.in_idx, a.V, a.buf, a.S, a.occ, a.ints, a.floats, sequence, times)
        self.rebuild_trees()

    def reload(self, sequence: np.ndarray, times: np.ndarray) -> None:
        """Replace the state by ``sequence[i]`` at slot ``times[i]`` (increasing), reusing the arrays.

        Each unit may occur at most its copy limit (:meth:`limits`) times. Much faster than a new state on large graphs,
        whose build time is mostly the first touch of freshly allocated memory.
        """
        self._clear()
        a = self.arrays
        sequence, times = np.asarray(sequence, dtype=np.int64), np.asarray(times, dtype=np.int64)
        kernels.fill(a.U, a.ucost, a.in_ptr, a.in_idx, a.V, a.buf, a.S, a.occ, a.ints, a.floats, sequence, times)
        self.rebuild_trees()

    def respread(self, sequence: np.ndarray, *, slots: int | None = None, spacing: int = 64, copies: int = 16) -> bool:
        """Become ``SAState(graph, units, sequence, ...)`` in place if the arrays are large enough; return whether.

        The slots and tree(s) become views of the first T entries; the copy limits are those a new state
        would have (its slabs may be larger, which the search never sees), so it runs exactly as on a new state.
        """
        sequence = np.asarray(sequence, dtype=np.int64)
        size_t = slot_count(sequence.size, slots=slots, spacing=spacing)
        limits = copy_limits(self.units, sequence, copies)
        full = self._allocated
        if size_t > full.S.shape[0] or np.any(limits > self._capacity):
            return False
        self._clear()
        lae = bool(full.ints[LAE_ON])
        self.arrays = full._replace(
            S=full.S[:size_t],
            occ=full.occ[:size_t],
            tree=full.tree[: 2 * size_t + 2],
            lazy=full.lazy[: size_t + 1],
            ltree=full.ltree[: 2 * size_t + 2] if lae else full.ltree,
            llazy=full.llazy[: size_t + 1] if lae else full.llazy,
        )
        a = self.arrays
        a.U[:, UK] = limits
        times = (np.arange(1, sequence.size + 1, dtype=np.int64) * size_t) // (sequence.size + 1)
        kernels.fill(a.U, a.ucost, a.in_ptr, a.in_idx, a.V, a.buf, a.S, a.occ, a.ints, a.floats, sequence, times)
        self.rebuild_trees()
        return True

    def _clear(self) -> None:
        """Empty every slot (the full arrays' too) and reset counts and cost."""
        a = self.arrays
        a.S[a.occ[: a.ints[N_OCC]] & kernels.MASK] = NONE
        a.U[:, UC] = 0
        a.V[:, VN] = 0
        a.V[:, VK] = 0
        a.ints[N_OCC] = 0
        a.floats[kernels.COST] = 0.0

    @property
    def size(self) -> int:
        """Number of slots T."""
        return int(self.arrays.S.shape[0])

    @property
    def copies(self) -> int:
        """Most occurrences any unit may have."""
        return int(self.arrays.U[:, UK].max(initial=0))

    def limits(self) -> np.ndarray:
        """Most occurrences of each unit."""
        return self.arrays.U[:, UK].copy()

    @property
    def slots(self) -> np.ndarray:
        """Unit at each slot (NONE = -1 for a nop); a read-only view."""
        view = self.arrays.S[:, 0]
        view.setflags(write=False)
        return view

    def counts(self) -> np.ndarray:
        """Occurrences of each unit."""
        return self.arrays.U[:, UC].copy()

    def rebuild_trees(self) -> None:
        """Recompute the tree(s) from scratch (initialisation; clears logaddexp rounding drift)."""
        a = self.arrays
        leaves = a.tree[self.size : 2 * self.size]
        kernels.memory_profile(a.U, a.V, a.buf, a.S, leaves)
        if a.ints[LAE_ON]:
            values = leaves * a.floats[LAE_SCALE]
            values[a.S[:, 0] == NONE] -= a.floats[LAE_BIG]
            lae_build(a.ltree, a.llazy, values)
        max_build(a.tree, a.lazy)

    def peak(self) -> int:
        """Peak memory (fixed memory included) maintained incrementally by the tree."""
        return int(self.arrays.tree[1]) + self.graph.fixed_mem

    def soft_peak(self) -> float:
        """The logaddexp tree's smooth peak in bytes (fixed memory included); requires logaddexp=True."""
        return float(self.arrays.ltree[1] / self.arrays.floats[LAE_SCALE]) + self.graph.fixed_mem

    def cost(self) -> float:
        """Total cost of the units in the sequence."""
        return float(self.arrays.floats[kernels.COST])

    def profile(self) -> np.ndarray:
        """Memory per slot as held by the tree (fixed memory excluded)."""
        return leaf_values(self.arrays.tree, self.arrays.lazy)

    def reference_profile(self) -> np.ndarray:
        """Memory per slot recomputed from the production/use times (fixed memory excluded)."""
        a = self.arrays
        profile = np.empty(self.size, dtype=np.int64)
        kernels.memory_profile(a.U, a.V, a.buf, a.S, profile)
        return profile

    def occupied(self) -> np.ndarray:
        """Occupied slots in time order."""
        return np.sort(self.arrays.occ[: self.arrays.ints[N_OCC]] & kernels.MASK)

    def nops(self) -> np.ndarray:
        """Free slots in time order."""
        return np.flatnonzero(self.arrays.S[:, 0] == NONE)

    def productions(self, value: int) -> np.ndarray:
        """Sorted slots where ``value`` is produced."""
        start, count = self.arrays.V[value, VQ], self.arrays.V[value, VN]
        return self.arrays.buf[start : start + count].copy()

    def add(self, unit: int, t: int) -> bool:
        """Place recomputable ``unit`` at nop slot t if valid; return whether it was placed."""
        a = self.arrays
        if not a.U[unit, UR] or not kernels.can_add(a.U, a.in_ptr, a.in_idx, a.V, a.buf, a.S, unit, t):
            return False
        kernels.add_unit(*a, unit, t)
        return True

    def remove(self, t: int) -> bool:
        """Empty slot t if it holds a recomputable unit and that is valid; return whether it was emptied."""
        a = self.arrays
        if a.S[t, 0] == NONE or not a.U[a.S[t, 0], UR] or not kernels.can_remove(a.U, a.V, a.buf, a.S, t):
            return False
        kernels.remove_unit(*a, t)
        return True

    def move(self, t1: int, t2: int) -> bool:
        """Move the unit at slot t1 to nop slot t2 if valid; return whether it moved."""
        a = self.arrays
        if not kernels.can_move(a.U, a.in_ptr, a.in_idx, a.V, a.buf, a.S, t1, t2):
            return False
        x = int(a.S[t1, 0])
        kernels.add_unit(*a, x, t2)
        kernels.remove_unit(*a, t1)
        return True

    def prune(self, budget: int) -> int:
        """Drop every computation whose removal is valid and keeps the peak within max(budget, peak); return count."""
        a = self.arrays
        return int(kernels.prune(*a, budget - self.graph.fixed_mem))

    def unit_sequence(self) -> np.ndarray:
        """Units in slot order."""
        return self.arrays.S[self.occupied(), 0]

    def compute_sequence(self) -> np.ndarray:
        """Node compute sequence (grouped units expanded)."""
        return self.units.expand(self.unit_sequence())


def schedule_of(graph: Graph, sequence: np.ndarray) -> Schedule:
    """Eager-free schedule of an expanded sequence: ``-1 - v`` prefetches v, offloaded after its first compute."""
    fetched = {-1 - int(x) for x in sequence if x < 0}
    if not fetched:
        return eager_frees(graph, sequence)
    events: list[int | Step] = []
    offloaded: set[int] = set()
    for x in sequence.tolist():
        if x < 0:
            events.append(Prefetch(-1 - x))
            continue
        events.append(x)
        if x in fetched and x not in offloaded:
            events.append(Offload(x))
            offloaded.add(x)
    return eager_frees(graph, events)


def decode(units: Units, times: np.ndarray, unit_ids: np.ndarray) -> np.ndarray:
    """Node compute sequence of a recorded state (slot times with their units, any order)."""
    return units.expand(unit_ids[np.argsort(times, kind="stable")])
