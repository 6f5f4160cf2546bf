"""A window of a schedule as a graph of its own: what an exact re-solve of some of its steps sees.

Take a compute sequence and one range of positions ``[a, b)``, or two ranges with a fixed middle between
them (a layer's forward steps and its backward steps, say). Everything else stays as it is; the window's
steps may be replaced by any sequence that starts from what is resident before ``a``, lets the middle run,
and leaves resident what the steps from ``b`` on read. That is a rematerialization problem on a small
graph, so every formulation solves it with its own model, unchanged:

- the window's nodes (each once, in the order of their first computation, with the global node's cost,
  bytes, workspace, kind and recomputability);
- one *input* per value resident before ``a`` that the window reads: cost 0, not recomputable, the value's
  bytes. A zero-byte *gate* node reads every input and is read by every window node, so every schedule of
  the window graph holds all inputs at its start, as the real schedule does;
- the fixed middle as one *middle* node (cost 0, not recomputable): it reads every value the middle reads
  that was made before it, its output is the bytes of the middle's own values still resident when the
  second range starts (read by the window nodes and later steps that read any of them), and its workspace
  raises its step to the middle's own peak;
- fixed memory: the graph's, plus every value resident before ``a`` that nothing in the window reads;
- outputs: the values the steps after the window read (or graph outputs kept to the end).

With one range the window graph's memory at each of its steps is the whole schedule's memory at that step;
with a middle it is never below it (the middle's reads and values count for all of it), so a window schedule
within the budget splices into a whole schedule within it. The simulator still checks every splice.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Schedule, eager_frees
from remat_models.errors import InvalidScheduleError

GATE = -1  # gid of the gate node
REST = -2  # gid of the node of the middle's values that outlive the window unread by it (and of each value it reads)


@dataclass(frozen=True)
class Lifetimes:
    """For each position of a compute sequence: its value's last read (its own position if none) and whether kept."""

    sequence: tuple[int, ...]
    last_use: np.ndarray
    kept: np.ndarray

    @classmethod
    def of(cls, graph: Graph, sequence: list[int] | tuple[int, ...]) -> Lifetimes:
        """The lifetimes of ``sequence``'s values under eager frees (a value lives to its last read)."""
        pred_ptr, pred_idx = graph.pred_ptr.tolist(), graph.pred_idx.tolist()
        latest = [-1] * graph.n
        last_use = list(range(len(sequence)))
        for position, v in enumerate(sequence):
            for u in pred_idx[pred_ptr[v] : pred_ptr[v + 1]]:
                source = latest[u]
                if source < 0:
                    raise InvalidScheduleError(f"computes {graph.names[v]!r} before its input", step=position)
                last_use[source] = position
            latest[v] = position
        kept = np.zeros(len(sequence), dtype=bool)
        for v in graph.outputs.tolist():
            if latest[v] >= 0:
                kept[latest[v]] = True
        return cls(tuple(sequence), np.asarray(last_use, dtype=np.int64), kept)

    def alive_after(self, position: int, boundary: int) -> bool:
        """Whether the value computed at ``position`` is still resident before step ``boundary``."""
        return bool(self.kept[position]) or int(self.last_use[position]) >= boundary


@dataclass(frozen=True)
class Window:
    """Ranges of a sequence as a graph: ``gid[i]``: local node i's global node (negative: gate, middle).

    Local ids below ``n_fixed`` are the inputs and the gate.
    """

    ranges: tuple[tuple[int, int], ...]
    graph: Graph
    gid: np.ndarray
    n_fixed: int
    init: Schedule | None  # the window's current steps on the window graph (None if they do not fit it)
    chunks: dict[int, list[int]]  # local id of each middle chunk -> the positions of the sequence it stands for

    @property
    def steps(self) -> int:
        """How many positions of the sequence the window re-solves."""
        return sum(stop - start for start, stop in self.ranges)

    def splice(self, sequence: tuple[int, ...], local: Schedule) -> list[int]:
        """The whole compute sequence with the window's steps replaced by ``local``'s (the middle in its place)."""
        first, last = self.ranges[0][0], self.ranges[-1][1]
        steps: list[int] = []
        for step in local.steps:
            if isinstance(step, Compute) and step.node >= self.n_fixed:
                g = int(self.gid[step.node])
                if g >= 0:
                    steps.append(g)
                elif step.node in self.chunks:
                    steps += [sequence[p] for p in self.chunks[step.node]]
        return [*sequence[:first], *steps, *sequence[last:]]


@dataclass
class _Parts:
    """What a walk over the window's positions collects (global node ids; negative ids for middle nodes)."""

    inputs: dict[int, int]  # global node -> position of its instance resident before the window
    order: list[int]  # window nodes and middle nodes in the order of their first computation
    reads: dict[int, list[tuple[str, int]]]  # node -> its first computation's reads ("in" | "win", id)
    chunks: list[list[int]]  # the middle's positions, cut after each last read of a value made before it
    outs: dict[int, int] = field(default_factory=dict)  # middle values the second range reads -> their positions
    mixed: bool = False  # a node computed twice read different sources: its current steps are not a warm start


def _chunk(j: int) -> int:
    """The id of middle chunk ``j``."""
    return REST - 1 - j


def window_of(graph: Graph, lifetimes: Lifetimes, ranges: list[tuple[int, int]]) -> Window:
    """The window graph of one range ``[(a, b)]`` or two ``[(a1, b1), (a2, b2)]`` of ``lifetimes.sequence``."""
    bad = any(a >= b for a, b in ranges) or (len(ranges) == 2 and ranges[0][1] >= ranges[1][0])
    if not 1 <= len(ranges) <= 2 or bad:
        raise ValueError(f"a window is one or two ordered, disjoint, non-empty ranges, got {ranges}")
    sequence, start, stop = lifetimes.sequence, ranges[0][0], ranges[-1][1]
    resident = {sequence[p]: p for p in range(start) if lifetimes.alive_after(p, start)}
    middle = range(ranges[0][1], ranges[1][0]) if len(ranges) == 2 else range(0)
    parts = _walk(graph, lifetimes, resident, start, stop, middle)
    return _assemble(graph, lifetimes, ranges, resident, parts, middle)


def _walk(graph: Graph, lifetimes: Lifetimes, resident: dict[int, int], start: int, stop: int, middle: range) -> _Parts:
    """Walk positions ``[start, stop)``: who reads what (each chunk of the middle reads as one node)."""
    sequence = lifetimes.sequence
    pred_ptr, pred_idx = graph.pred_ptr.tolist(), graph.pred_idx.tolist()
    parts = _Parts({}, [], {}, [])
    source: dict[int, int] = {}  # global node -> position of its live instance made in the window (or middle)
    chunk: list[int] = []
    for position in range(start, stop):
        v = sequence[position]
        in_middle = position in middle
        reader = _chunk(len(parts.chunks)) if in_middle else v
        reads: list[tuple[str, int]] = []
        closes = False  # a value made before the middle is read here for the last time: the chunk ends
        for u in pred_idx[pred_ptr[v] : pred_ptr[v + 1]]:
            made = source.get(u)
            if made is None:
                if u not in resident:
                    raise InvalidScheduleError(f"window reads {graph.names[u]!r}, which is not resident", step=position)
                parts.inputs.setdefault(u, resident[u])
                reads.append(("in", u))
                made = resident[u]
            elif made in middle:
                if not in_middle:
                    key = ("out", u)
                    if key not in parts.reads:
                        parts.order.append(key)
                        parts.reads[key] = [("win", _chunk(len(parts.chunks) - 1))]
                        parts.outs[u] = made
                    reads.append(("win", key))
                continue
            else:
                reads.append(("win", u))
            closes |= in_middle and int(lifetimes.last_use[made]) == position
        source[v] = position
        if reader not in parts.reads:
            parts.order.append(reader)
            parts.reads[reader] = reads
        elif in_middle:
            parts.reads[reader] += reads
        elif reads != parts.reads[reader]:
            parts.mixed = True
        if in_middle:
            chunk.append(position)
            if closes or position == middle[-1]:
                parts.chunks.append(chunk)
                chunk = []
                if position == middle[-1]:
                    parts.order.append(REST)
                    parts.reads[REST] = [("win", _chunk(len(parts.chunks) - 1))]
    return parts


def _middle_sizes(graph: Graph, lifetimes: Lifetimes, parts: _Parts, middle: range) -> tuple[list[int], int]:
    """Each chunk's peak of the middle's own values (its workspace), and their bytes when the middle ends."""
    sequence, mem, workspace = lifetimes.sequence, graph.mem, graph.workspace
    frees: dict[int, int] = {}
    own, peaks = 0, []
    for chunk in parts.chunks:
        peak = 0
        for position in chunk:
            v = sequence[position]
            peak = max(peak, own + int(mem[v]) + int(workspace[v]))
            own += int(mem[v]) - frees.pop(position, 0)
            if not lifetimes.alive_after(position, middle.stop):
                end = int(lifetimes.last_use[position])
                if end == position:
                    own -= int(mem[v])
                else:
                    frees[end] = frees.get(end, 0) + int(mem[v])
        peaks.append(peak)
    return peaks, own


def _assemble(
    graph: Graph,
    lifetimes: Lifetimes,
    ranges: list[tuple[int, int]],
    resident: dict[int, int],
    parts: _Parts,
    middle: range,
) -> Window:
    """The window graph (order: inputs, the gate, window and middle nodes in first-computation order)."""
    sequence, start, stop = lifetimes.sequence, ranges[0][0], ranges[-1][1]
    inputs = list(parts.inputs)
    n_fixed = len(inputs) + int(bool(inputs))
    local = {v: n_fixed + i for i, v in enumerate(parts.order)}
    in_index = {u: i for i, u in enumerate(inputs)}
    pairs = {
        (in_index[u] if kind == "in" else local[u], local[v]) for v, reads in parts.reads.items() for kind, u in reads
    }
    chain = [_chunk(j) for j in range(len(parts.chunks))]
    pairs |= {(local[a], local[b]) for a, b in itertools.pairwise(chain)}
    if inputs:
        gate = len(inputs)
        pairs |= {(i, gate) for i in range(gate)} | {(gate, j) for j in local.values()}
    keys = [REST if isinstance(v, tuple) else v for v in parts.order]
    gid = np.array([*inputs, *([GATE] if inputs else []), *keys], dtype=np.int64)
    is_own = gid >= 0
    is_own[:n_fixed] = False
    own = gid[is_own]
    mem, workspace = np.zeros(gid.size, dtype=np.int64), np.zeros(gid.size, dtype=np.int64)
    cost, recomputable = np.zeros(gid.size), np.zeros(gid.size, dtype=bool)
    mem[: len(inputs)] = graph.mem[np.array(inputs, dtype=np.int64)]
    mem[is_own], workspace[is_own], cost[is_own] = graph.mem[own], graph.workspace[own], graph.cost[own]
    recomputable[is_own] = graph.recomputable[own]
    outputs = {in_index[u] for u, p in parts.inputs.items() if lifetimes.alive_after(p, stop)}
    if parts.chunks:
        peaks, left = _middle_sizes(graph, lifetimes, parts, middle)
        for j, peak in enumerate(peaks):
            workspace[local[_chunk(j)]] = peak
        for u, made in parts.outs.items():
            mem[local[("out", u)]] = graph.mem[u]
            if lifetimes.alive_after(made, stop):
                outputs.add(local[("out", u)])
        mem[local[REST]] = left - sum(int(graph.mem[u]) for u in parts.outs)
        if mem[local[REST]] > 0:
            outputs.add(local[REST])
    last = {sequence[p]: p for p in range(start, stop) if p not in middle}
    outputs |= {local[v] for v, p in last.items() if lifetimes.alive_after(p, stop)}
    held = sum(int(graph.mem[u]) for u in resident if u not in parts.inputs)
    names = [f"{graph.names[u]}@in" for u in inputs] + ["@gate"] * int(bool(inputs))
    names += [_name(graph, v) for v in parts.order]
    window_graph = Graph.from_arrays(
        names,
        cost,
        mem,
        np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2),
        workspace=workspace,
        kind=[graph.kind[g] if is_own[i] else NodeKind.FORWARD for i, g in enumerate(gid.tolist())],
        recomputable=recomputable,
        outputs=sorted(outputs),
        fixed_mem=int(graph.fixed_mem) + held,
        order=list(range(len(names))),
        name=f"{graph.name}{list(ranges)}",
    )
    chunk_of = {p: _chunk(j) for j, chunk in enumerate(parts.chunks) for p in chunk}
    middle_steps = {p: ([local[chunk_of[p]]] if p == chunk[0] else []) for chunk in parts.chunks for p in chunk}
    if parts.chunks:
        outs = [local[("out", u)] for u in parts.outs]
        middle_steps[middle[-1]] = [*middle_steps[middle[-1]], local[REST], *outs]
    init = None
    if not parts.mixed:
        steps = list(range(n_fixed))
        for p in range(start, stop):
            steps += middle_steps[p] if p in middle else [local[sequence[p]]]
        init = eager_frees(window_graph, steps)
    chunks = {local[c]: parts.chunks[j] for j, c in enumerate(chain)}
    return Window(tuple(ranges), window_graph, gid, n_fixed, init, chunks)


def _name(graph: Graph, key: int | tuple[str, int]) -> str:
    """A window node's name: the global node's, or one for the middle's nodes."""
    if isinstance(key, tuple):
        return f"{graph.names[key[1]]}@middle"
    return graph.names[key] if key >= 0 else ("@middle-rest" if key == REST else f"@middle{REST - 1 - key}")
