"""A window of a schedule as a graph of its own: what an exact re-solve of some of its steps sees.

Take a compute sequence and some ordered, disjoint ranges of its positions (a layer's forward steps and its
backward steps, say, or those of two layers); the steps between them, the *middles*, stay fixed, as does
everything before the first range and after the last. The window's steps may be replaced by any sequence that
starts from what is resident before the first range, lets the middles run in order, and leaves resident what
the steps after the last range read. That is a rematerialization problem on a small graph, so every
formulation solves it with its own model, unchanged:

- the window's nodes, in the order of their first computation, with the global node's cost, bytes, workspace,
  kind and recomputability. A node computed again from other sources (an input once, its recomputation in the
  window later) gets one node per set of sources (a *version*), so the current steps are always a schedule of
  the window graph (its warm start);
- one *input* per value resident before the first range that the window reads: cost 0, not recomputable, the
  value's bytes. A zero-byte *gate* node reads every input and is read by every window node, so every schedule
  of the window graph holds all inputs at its start, as the real schedule does;
- each middle as a chain of zero-cost, not recomputable *chunks*, cut after the last read of a value made outside
  that middle and after each value the middle makes that outlives it. That value is the chunk's output (what
  reads it later reads the chunk; kept to the end if the steps after the window read it); a chunk reads what its
  steps read from outside the middle, and its workspace is the peak of the middle's short-lived values over its
  steps (plus its own output's workspace);
- fixed memory: the graph's, plus every value resident before the first range that nothing in the window reads;
- outputs: what the steps after the window read (or graph outputs kept to the end).

With one range the window graph's memory at each of its steps is the whole schedule's memory at that step; with
middles it is never below it (a chunk holds what it reads for all of its steps), so a window schedule within the
budget splices into a whole schedule within it. The simulator still checks every splice.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Schedule, eager_frees
from remat_models.errors import InvalidScheduleError

Key = int | tuple  # a window node: a global node, ("ver", node, k), or a chunk (negative)
MAX_EXTENSIONS = 3  # times a window widens back to where a value read from two sources was made
EXTEND_FACTOR = 3  # ... while it stays within this many times its asked size
GATE = -1  # gid of the gate node
END = -2  # key and gid of the end node: it reads the outputs, so every step of a window comes before its own
MIDDLE = -3  # chunk j of the middles has key and gid MIDDLE - 1 - j


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
    """Ranges of a sequence as a graph: ``gid[i]``: local node i's global node (negative: gate, middles).

    Local ids below ``n_fixed`` are the inputs and the gate; ``chunks`` maps each chunk's local id to the
    positions of the sequence it stands for.
    """

    ranges: tuple[tuple[int, int], ...]
    graph: Graph
    gid: np.ndarray
    n_fixed: int
    init: Schedule  # the window's current steps on the window graph
    chunks: dict[int, list[int]]

    def splice(self, sequence: tuple[int, ...], local: Schedule) -> list[int]:
        """The whole compute sequence with the window's steps replaced by ``local``'s (the middles in place)."""
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
    """What a walk over the window's positions collects."""

    inputs: dict[int, int] = field(default_factory=dict)  # global node -> position of its resident instance
    order: list[Key] = field(default_factory=list)  # window and middle nodes in first-computation order
    reads: dict[Key, list[tuple[str, Key]]] = field(default_factory=dict)  # node -> reads ("in" | "win", key)
    chunks: list[list[int]] = field(default_factory=list)  # each chunk's positions, in order
    chunk_middle: list[int] = field(default_factory=list)  # the middle of each chunk
    lasting: dict[int, int] = field(default_factory=dict)  # chunk index -> the position whose value outlives its middle
    passive: dict[int, list[int]] = field(default_factory=dict)  # chunk index -> its values only read after the window
    key_at: dict[int, Key] = field(default_factory=dict)  # position in the ranges -> the node it computes
    mixed: bool = False  # a node computed twice read different sources (it has versions)
    extend: set[int] = field(default_factory=set)  # where the values such reads came from were made


def _chunk(j: int) -> int:
    """The key (and gid) of chunk ``j``."""
    return MIDDLE - 1 - j


def window_of(graph: Graph, lifetimes: Lifetimes, ranges: list[tuple[int, int]]) -> Window:
    """The window graph of the ordered, disjoint, non-empty ``ranges`` of ``lifetimes.sequence``."""
    ranges = [(int(a), int(b)) for a, b in ranges]
    if not ranges or any(a >= b for a, b in ranges) or any(b1 >= a2 for (_, b1), (a2, _) in itertools.pairwise(ranges)):
        raise ValueError(f"a window is ordered, disjoint, non-empty ranges with steps between them, got {ranges}")
    if ranges[0][0] < 0 or ranges[-1][1] > len(lifetimes.sequence):
        raise ValueError(f"ranges {ranges} fall outside a sequence of {len(lifetimes.sequence)} steps")
    steps = sum(b - a for a, b in ranges)
    for attempt in range(MAX_EXTENSIONS + 1):
        start = ranges[0][0]
        resident = {lifetimes.sequence[p]: p for p in range(start) if lifetimes.alive_after(p, start)}
        parts = _walk(graph, lifetimes, resident, ranges)
        wider = _extended(ranges, parts.extend) if parts.mixed and attempt < MAX_EXTENSIONS else ranges
        if wider == ranges or sum(b - a for a, b in wider) > EXTEND_FACTOR * steps:
            break
        ranges = wider
    return _assemble(graph, lifetimes, ranges, resident, parts)


def _extended(ranges: list[tuple[int, int]], made: set[int]) -> list[tuple[int, int]]:
    """The ranges widened back to where values read from two sources were made (fewer versions), merged."""
    wider: list[tuple[int, int]] = []
    previous_stop = 0
    for a, b in ranges:
        a = min([a, *(m for m in made if previous_stop <= m < a)])
        if wider and a <= wider[-1][1]:
            wider[-1] = (wider[-1][0], b)
        else:
            wider.append((a, b))
        previous_stop = b
    return wider


def _middles(ranges: list[tuple[int, int]]) -> dict[int, int]:
    """Position -> index of the middle it lies in, for the steps between the ranges."""
    return {p: m for m, ((_, b), (a, _)) in enumerate(itertools.pairwise(ranges)) for p in range(b, a)}


def _read_across(
    graph: Graph, sequence: tuple[int, ...], ranges: list[tuple[int, int]], middle_of: dict[int, int]
) -> set[int]:
    """The middle positions whose values a step of the window outside their middle reads (a range or another middle)."""
    pred_ptr, pred_idx = graph.pred_ptr.tolist(), graph.pred_idx.tolist()
    latest: dict[int, int] = {}
    linked: set[int] = set()
    for position in range(ranges[0][0], ranges[-1][1]):
        v = sequence[position]
        here = middle_of.get(position)
        for u in pred_idx[pred_ptr[v] : pred_ptr[v + 1]]:
            made = latest.get(u)
            if made is not None and made in middle_of and middle_of[made] != here:
                linked.add(made)
        latest[v] = position
    return linked


def _walk(graph: Graph, lifetimes: Lifetimes, resident: dict[int, int], ranges: list[tuple[int, int]]) -> _Parts:
    """Walk the window's positions: who reads what (each chunk of a middle reads as one node)."""
    sequence = lifetimes.sequence
    pred_ptr, pred_idx = graph.pred_ptr.tolist(), graph.pred_idx.tolist()
    middle_of = _middles(ranges)
    ends = {a - 1 for _, (a, _) in itertools.pairwise(ranges)}  # each middle's last position
    parts = _Parts()
    source: dict[int, int] = {}  # global node -> position of its live instance made in the window
    holder: dict[int, Key] = {}  # global node -> the window node of its live instance made in a range
    versions: dict[int, list[Key]] = {}  # global node -> its window nodes, one per distinct set of reads
    outside: dict[Key, list[int]] = {}  # window node -> where the values its first computation read were made
    chunk_of: dict[int, Key] = {}  # middle position whose value outlives its middle -> the chunk it is the output of
    linked = _read_across(graph, sequence, ranges, middle_of)
    chunk: list[int] = []
    for position in range(ranges[0][0], ranges[-1][1]):
        v = sequence[position]
        here = middle_of.get(position)
        reads: list[tuple[str, Key]] = []
        made_at: list[int] = []  # where the values this step reads from outside the ranges were made
        closes = False  # a value made outside this middle is read here for the last time: the chunk ends
        for u in pred_idx[pred_ptr[v] : pred_ptr[v + 1]]:
            made = source.get(u)
            if made is None:
                if u not in resident:
                    raise InvalidScheduleError(f"window reads {graph.names[u]!r}, which is not resident", step=position)
                parts.inputs.setdefault(u, resident[u])
                made = resident[u]
                reads.append(("in", u))
                made_at.append(made)
            elif made in middle_of:
                if middle_of[made] == here:
                    continue  # the middle's own value: a chunk's output or counted in its chunks' workspace
                reads.append(("win", chunk_of[made]))
                made_at.append(made)
            else:
                reads.append(("win", holder[u]))
            closes |= here is not None and int(lifetimes.last_use[made]) == position
        source[v] = position
        if here is not None:
            lasting = lifetimes.alive_after(position, ranges[here + 1][0])
            if lasting and position not in linked:  # read after the window only: part of its chunk's output
                _add_middle_step(parts, chunk, position, here, reads)
                parts.passive.setdefault(len(parts.chunks), []).append(position)
                lasting = False
                if closes or position in ends:
                    _close(parts, chunk, here)
                    chunk = []
                continue
            if lasting and chunk:  # a chunk of its own: its bytes count from its step, not from the chunk's first
                _close(parts, chunk, here)
                chunk = []
            _add_middle_step(parts, chunk, position, here, reads)
            if lasting:
                parts.lasting[len(parts.chunks)] = position
                chunk_of[position] = _chunk(len(parts.chunks))
            if closes or lasting or position in ends:
                _close(parts, chunk, here)
                chunk = []
                if lasting and position in ends:  # the next middle waits on a marker, not on this value
                    _add_middle_step(parts, chunk, None, here, [])
                    _close(parts, chunk, here)
                    chunk = []
            continue
        known = versions.setdefault(v, [])
        reader = next((key for key in known if parts.reads[key] == reads), None)
        if reader is None:
            if known:
                parts.mixed = True
                parts.extend.update(made_at, outside[known[0]])
            reader = ("ver", v, len(known)) if known else v
            known.append(reader)
            parts.order.append(reader)
            parts.reads[reader] = reads
            outside[reader] = made_at
        parts.key_at[position] = reader
        holder[v] = reader
    return parts


def _add_middle_step(
    parts: _Parts, chunk: list[int], position: int | None, middle: int, reads: list[tuple[str, Key]]
) -> None:
    """Add a middle step to the open chunk (a new chunk node on its first step; chained after the previous one).

    ``position`` None opens an empty chunk (a marker standing for no step).
    """
    key = _chunk(len(parts.chunks))
    if key not in parts.reads:
        parts.order.append(key)
        previous = [("win", _chunk(len(parts.chunks) - 1))] if parts.chunks else []
        parts.reads[key] = previous
    parts.reads[key] += reads
    if position is not None:
        chunk.append(position)


def _close(parts: _Parts, chunk: list[int], middle: int) -> None:
    """End the open chunk."""
    parts.chunks.append(chunk)
    parts.chunk_middle.append(middle)


def _chunk_output(graph: Graph, lifetimes: Lifetimes, parts: _Parts, j: int) -> int:
    """Chunk ``j``'s output bytes: its lasting value's and those of its values read after the window only."""
    positions = parts.passive.get(j, []) + ([parts.lasting[j]] if j in parts.lasting else [])
    return int(graph.mem[[lifetimes.sequence[p] for p in positions]].sum()) if positions else 0


def _middle_sizes(graph: Graph, lifetimes: Lifetimes, parts: _Parts) -> list[int]:
    """Each chunk's workspace: the peak of its middle's values over its steps, less the chunk's output.

    A chunk's output (its lasting value and the values only read after the window) is made during its steps and
    alive at its last one, so that peak is at least the output: the chunk node's step (workspace + output) peaks
    exactly as its steps do. Afterwards the output is the chunk node's, no longer the middle's.
    """
    sequence, mem, workspace = lifetimes.sequence, graph.mem, graph.workspace
    frees: dict[int, int] = {}
    own, peaks, current = 0, [], -1
    for j, (chunk, middle) in enumerate(zip(parts.chunks, parts.chunk_middle, strict=True)):
        if middle != current:
            own, frees, current = 0, {}, middle
        peak, output = 0, _chunk_output(graph, lifetimes, parts, j)
        passive = set(parts.passive.get(j, []))
        for position in chunk:
            v = sequence[position]
            peak = max(peak, own + int(mem[v]) + int(workspace[v]))
            if parts.lasting.get(j) == position:
                own -= frees.pop(position, 0)
                continue
            own += int(mem[v]) - frees.pop(position, 0)
            end = int(lifetimes.last_use[position])
            if position in passive:  # alive to the chunk's end; then it leaves the middle with the chunk
                continue
            if end == position:
                own -= int(mem[v])
            else:
                frees[end] = frees.get(end, 0) + int(mem[v])
        own -= output - (int(mem[sequence[parts.lasting[j]]]) if j in parts.lasting else 0)
        peaks.append(peak - output)
    return peaks


def _assemble(
    graph: Graph, lifetimes: Lifetimes, ranges: list[tuple[int, int]], resident: dict[int, int], parts: _Parts
) -> Window:
    """The window graph (order: inputs, the gate, window and middle nodes in first-computation order)."""
    stop = ranges[-1][1]
    parts.order = [*_topological(parts), END]
    parts.reads[END] = []
    inputs = list(parts.inputs)
    n_fixed = len(inputs) + int(bool(inputs))
    local = {key: n_fixed + i for i, key in enumerate(parts.order)}
    in_index = {u: i for i, u in enumerate(inputs)}
    gid = np.array([*inputs, *([GATE] if inputs else []), *(_gid(key) for key in parts.order)], dtype=np.int64)
    is_own = gid >= 0
    is_own[:n_fixed] = False
    own = gid[is_own]
    mem, workspace = np.zeros(gid.size, dtype=np.int64), np.zeros(gid.size, dtype=np.int64)
    cost, recomputable = np.zeros(gid.size), np.zeros(gid.size, dtype=bool)
    mem[: len(inputs)] = graph.mem[np.array(inputs, dtype=np.int64)]
    mem[is_own], workspace[is_own], cost[is_own] = graph.mem[own], graph.workspace[own], graph.cost[own]
    recomputable[is_own] = graph.recomputable[own]
    outputs = {in_index[u] for u, p in parts.inputs.items() if lifetimes.alive_after(p, stop)}
    outputs |= {local[key] for p, key in parts.key_at.items() if lifetimes.alive_after(p, stop)}
    for j, peak in enumerate(_middle_sizes(graph, lifetimes, parts)):
        workspace[local[_chunk(j)]] = peak
    for j in parts.lasting.keys() | parts.passive.keys():
        mem[local[_chunk(j)]] = _chunk_output(graph, lifetimes, parts, j)
        if j in parts.passive or lifetimes.alive_after(parts.lasting[j], stop):
            outputs.add(local[_chunk(j)])
    pairs = {
        (in_index[u] if kind == "in" else local[u], local[v]) for v, reads in parts.reads.items() for kind, u in reads
    }
    pairs |= {(o, local[END]) for o in outputs}
    outputs.add(local[END])
    if inputs:
        gate = len(inputs)
        pairs |= {(i, gate) for i in range(gate)} | {(gate, j) for j in local.values()}
    held = sum(int(graph.mem[u]) for u in resident if u not in parts.inputs)
    names = [f"{graph.names[u]}@in" for u in inputs] + ["@gate"] * int(bool(inputs))
    names += [_name(graph, key) for key in parts.order]
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
        name=f"{graph.name}{ranges}",
    )
    return Window(
        tuple(ranges),
        window_graph,
        gid,
        n_fixed,
        _init(window_graph, parts, local, ranges, n_fixed),
        {local[_chunk(j)]: chunk for j, chunk in enumerate(parts.chunks)},
    )


def _init(
    window_graph: Graph, parts: _Parts, local: dict[Key, int], ranges: list[tuple[int, int]], n_fixed: int
) -> Schedule:
    """The window's current steps on its graph: inputs, gate, then each position's node (a chunk at its first step)."""
    middle_of = _middles(ranges)
    chunk_start: dict[int, list[int]] = {}  # position -> the chunks computed there (a marker after its chunk)
    for j, chunk in enumerate(parts.chunks):
        at = chunk[0] if chunk else parts.chunks[j - 1][-1]
        chunk_start.setdefault(at, []).append(local[_chunk(j)])
    steps = list(range(n_fixed))
    for p in range(ranges[0][0], ranges[-1][1]):
        if p in middle_of:
            steps += chunk_start.get(p, [])
        else:
            steps.append(local[parts.key_at[p]])
    return eager_frees(window_graph, [*steps, local[END]])


def _topological(parts: _Parts) -> list[Key]:
    """``parts.order`` sorted so every node follows what it reads (a chunk may read a later-made middle value)."""
    rank = {key: i for i, key in enumerate(parts.order)}
    waiting = {key: {u for kind, u in parts.reads[key] if kind == "win"} for key in parts.order}
    readers: dict[Key, list[Key]] = {}
    for key, needs in waiting.items():
        for u in needs:
            readers.setdefault(u, []).append(key)
    ready = [(rank[key], key) for key, needs in waiting.items() if not needs]
    heapq.heapify(ready)
    ordered: list[Key] = []
    while ready:
        _, key = heapq.heappop(ready)
        ordered.append(key)
        for reader in readers.get(key, []):
            waiting[reader].discard(key)
            if not waiting[reader]:
                heapq.heappush(ready, (rank[reader], reader))
    return ordered


def _gid(key: Key) -> int:
    """The global node of a window node (its node for a version; the key for a node or a chunk)."""
    return key[1] if isinstance(key, tuple) else key


def _name(graph: Graph, key: Key) -> str:
    """A window node's name: the global node's (``#k`` for version k), or one for a middle's nodes."""
    if isinstance(key, tuple):
        return f"{graph.names[key[1]]}#{key[2]}"
    if key == END:
        return "@end"
    return graph.names[key] if key >= 0 else f"@chunk{MIDDLE - 1 - key}"
