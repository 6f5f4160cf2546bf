"""Units the annealer places: plain nodes, or grouped nodes from Algorithm 1 of the FastSA paper (2.2.2, C.1).

A grouped node runs its members in order; it produces the value of its last member (the others are
internal: every consumer of a fused node received its own copy) and reads the values of its members
that are not produced inside it. Its cost is the sum of its members' costs; its intermediate memory
(B.1) is the peak of a local eager-free simulation of the internal values, minus its output's size,
so that while it runs the annealer never counts less than the expanded schedule uses.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from remat_models.core.graph import Graph

logger = logging.getLogger(__name__)


class UnitData(NamedTuple):
    """Static arrays of one stage: units (grouped or plain nodes) and the values they produce/read."""

    out: np.ndarray  # int64[U]: the value each unit produces
    ws: np.ndarray  # int64[U]: workspace (intermediate) bytes while it runs
    cost: np.ndarray  # float64[U]
    recomputable: np.ndarray  # int64[U]: 1 if it may be added or removed
    in_ptr: np.ndarray  # int64[U+1]: CSR of input values
    in_idx: np.ndarray  # int64[E]
    size: np.ndarray  # int64[V]: bytes of each value
    is_output: np.ndarray  # int64[V]: 1 for graph outputs (kept to the end)


@dataclass(frozen=True)
class Units:
    """The units of one annealing stage: their member nodes and the static arrays for the kernels.

    Units from ``first_fetch`` on are fetch units (App. B.3): one per pageable value v, with the member
    ``-1 - v`` (a prefetch of v in an expanded sequence).
    """

    members: tuple[np.ndarray, ...]
    data: UnitData
    first_fetch: int | None = None

    @property
    def count(self) -> int:
        """Number of units."""
        return len(self.members)

    def fetches(self) -> np.ndarray:
        """Indices of the fetch units."""
        return np.arange(self.count if self.first_fetch is None else self.first_fetch, self.count)

    def of_nodes(self, sequence: np.ndarray) -> np.ndarray:
        """Unit sequence of an expanded sequence of plain units and fetch units (``-1 - v``: the fetch of v)."""
        sequence = np.asarray(sequence, dtype=np.int64)
        if self.first_fetch is None:
            return sequence
        fetch_unit = np.full(self.data.size.size, -1, dtype=np.int64)
        fetch_unit[self.data.out[self.fetches()]] = self.fetches()
        return np.where(sequence >= 0, sequence, fetch_unit[np.maximum(-1 - sequence, 0)])

    def expand(self, unit_sequence: np.ndarray) -> np.ndarray:
        """Return the node compute sequence of a unit sequence."""
        if unit_sequence.size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([self.members[x] for x in unit_sequence.tolist()]).astype(np.int64)


def _unit_data(
    graph: Graph,
    outputs: list[int],
    inputs: list[list[int]],
    cost: list[float],
    ws: list[int],
    recomputable: list[bool],
) -> UnitData:
    in_ptr = np.zeros(len(inputs) + 1, dtype=np.int64)
    np.cumsum([len(values) for values in inputs], out=in_ptr[1:])
    in_idx = np.array([u for values in inputs for u in values], dtype=np.int64)
    is_output = np.zeros(graph.n, dtype=np.int64)
    is_output[graph.outputs] = 1
    return UnitData(
        out=np.array(outputs, dtype=np.int64),
        ws=np.array(ws, dtype=np.int64),
        cost=np.array(cost, dtype=np.float64),
        recomputable=np.array(recomputable, dtype=np.int64),
        in_ptr=in_ptr,
        in_idx=in_idx,
        size=graph.mem.astype(np.int64),
        is_output=is_output,
    )


def plain_units(graph: Graph) -> Units:
    """One unit per node (unit index == node index)."""
    return Units(
        members=tuple(np.array([v], dtype=np.int64) for v in range(graph.n)),
        data=_unit_data(
            graph,
            list(range(graph.n)),
            [graph.preds(v).tolist() for v in range(graph.n)],
            graph.cost.tolist(),
            graph.workspace.tolist(),
            graph.recomputable.tolist(),
        ),
    )


def with_fetches(graph: Graph, units: Units, out_time: np.ndarray, in_time: np.ndarray, min_bytes: int = 0) -> Units:
    """``units`` plus a fetch unit per value they produce that may be paged (not a graph output, >= ``min_bytes``).

    A fetch unit produces its value with no inputs; its cost is one offload plus one prefetch (the
    annealer charges the offload per fetch; the decoded schedule offloads once, after the first compute).
    """
    pageable = graph.mem >= max(min_bytes, 1)
    pageable[graph.outputs] = False
    values = np.unique(units.data.out[pageable[units.data.out]])
    data = units.data
    return Units(
        members=(*units.members, *(np.array([-1 - v], dtype=np.int64) for v in values.tolist())),
        data=data._replace(
            out=np.concatenate([data.out, values]),
            ws=np.concatenate([data.ws, np.zeros(values.size, dtype=np.int64)]),
            cost=np.concatenate([data.cost, out_time[values] + in_time[values]]),
            recomputable=np.concatenate([data.recomputable, np.ones(values.size, dtype=np.int64)]),
            in_ptr=np.concatenate([data.in_ptr, np.full(values.size, data.in_ptr[-1], dtype=np.int64)]),
        ),
        first_fetch=units.count,
    )


def intermediate_memory(graph: Graph, members: list[int]) -> int:
    """Peak bytes of a member sequence's internal values and steps, minus the final output's size (B.1)."""
    mem, workspace = graph.mem, graph.workspace
    latest: dict[int, int] = {}
    last_use = list(range(len(members)))
    for k, v in enumerate(members):
        for u in graph.preds(v).tolist():
            if u in latest:
                last_use[latest[u]] = k
        latest[v] = k
    frees: list[list[int]] = [[] for _ in members]
    for k in range(len(members) - 1):
        frees[last_use[k]].append(k)
    resident = peak = 0
    for k, v in enumerate(members):
        peak = max(peak, resident + int(mem[v]) + int(workspace[v]))
        resident += int(mem[v])
        resident -= sum(int(mem[members[j]]) for j in frees[k])
    return peak - int(mem[members[-1]])


def group_nodes(graph: Graph, sequence: np.ndarray, *, max_expansion: float = 32.0) -> tuple[Units, np.ndarray]:
    """Algorithm 1 with the do_fuse rule of C.1; return the grouped units and their sequence.

    A (possibly grouped) node is fused into every later consumer of its value when its inputs take no
    more bytes than its output. Never fused: graph outputs, nodes without consumers, groups holding a
    non-recomputable node, and fusions that would push the expanded length past ``max_expansion``
    times the node count (the paper has no cap; copies can multiply along diamonds).
    """
    size = graph.mem
    is_output = np.zeros(graph.n, dtype=bool)
    is_output[graph.outputs] = True
    members: dict[int, list[int]] = {v: [v] for v in range(graph.n)}
    inputs: dict[int, set[int]] = {v: set(graph.preds(v).tolist()) for v in range(graph.n)}
    consumers: dict[int, set[int]] = {v: set(graph.succs(v).tolist()) for v in range(graph.n)}
    recomputable = {v: bool(graph.recomputable[v]) for v in range(graph.n)}
    alive = np.ones(graph.n, dtype=bool)
    total, cap = graph.n, max_expansion * graph.n
    for v in sequence.tolist():
        users = consumers[v]
        if is_output[v] or not users or not recomputable[v]:
            continue
        if sum(int(size[u]) for u in inputs[v]) > int(size[v]):
            continue
        grown = total + len(members[v]) * (len(users) - 1)
        if grown > cap:
            continue
        total = grown
        for w in users:
            members[w] = members[v] + members[w]
            inputs[w] = inputs[v] | (inputs[w] - {v})
            recomputable[w] = recomputable[w] and recomputable[v]
        for u in inputs[v]:
            consumers[u].discard(v)
            consumers[u] |= users
        alive[v] = False
        del members[v], inputs[v]
    kept = [v for v in sequence.tolist() if alive[v]]
    unit_of = {v: i for i, v in enumerate(kept)}
    logger.debug("grouping: %d of %d nodes remain as units, expanded length %d", len(kept), graph.n, total)
    units = Units(
        members=tuple(np.array(members[v], dtype=np.int64) for v in kept),
        data=_unit_data(
            graph,
            kept,
            [sorted(inputs[v]) for v in kept],
            [float(graph.cost[members[v]].sum()) for v in kept],
            [intermediate_memory(graph, members[v]) for v in kept],
            [recomputable[v] for v in kept],
        ),
    )
    return units, np.array([unit_of[v] for v in kept], dtype=np.int64)
