"""The input of one H-ILP level (``HGraph``, spec section 1.1): compute nodes with options, data nodes, layers.

A level is a graph ``G`` (the real graph, or a cluster's local graph) with some forward groups
turned into *layers*: layer j has a forward compute node F_j (its options' forward parts plus the
"fast forward" ``ff``) and, when it has backward nodes, a backward compute node B_j (one part per
option). Every other node of G is a *plain* compute node. Data nodes are the values of G read by a
compute node other than their producer, or graph outputs; each has exactly one producer.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from remat_models.core.graph import Graph
from remat_models.errors import GraphError


@dataclass(frozen=True)
class Part:
    """One option of one compute node: what it runs and what the level model needs to know of it."""

    seq: tuple[int, ...]  # nodes of G, in order
    cost: float
    overhead: int  # bytes used while it runs on top of the level's accounting (m)
    phantom: int  # bytes kept from F_j to B_j: +p on F_j's options, -p on B_j's, 0 elsewhere
    reads: tuple[int, ...] = ()  # option-specific data reads (nodes of G), besides the node's static reads
    profile: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...] = ()  # (m_i, freed inputs, pending outputs)
    impls: tuple[int, ...] = ()  # implementation of each step of ``seq`` (empty: the default everywhere)


@dataclass(frozen=True)
class LayerSpec:
    """A layer of a level: V and W (nodes of G), per option (fwd part, bwd part, phantom bytes), and ff."""

    forward: tuple[int, ...]
    backward: tuple[int, ...]
    fwd: tuple[Part, ...]  # phantom field = p (>= 0)
    bwd: tuple[Part, ...]  # aligned with fwd; phantom field = p; reads = depB
    ff: Part
    recomputable: bool = True  # F_j may run again (V has no non-recomputable node but tails, which reruns skip)
    backward_recomputable: bool = True  # B_j may run again (W is recomputable)


@dataclass
class HGraph:
    """One H-ILP level. Compute nodes are in phase order; option parts are listed per compute node."""

    graph: Graph
    names: list[str]
    parts: list[list[Part]]
    static_reads: list[np.ndarray]  # per compute node: data ids read by every option
    recomputable: np.ndarray
    once: np.ndarray
    layers: list[tuple[int, int]]  # (F_j, B_j) compute indices, B_j = -1 for an F-only layer
    data_node: np.ndarray  # node of G per data id
    producer: np.ndarray  # compute index per data id
    final: np.ndarray
    loss: int = -1  # compute index of the level's loss (-1: none)
    part_reads: list[list[np.ndarray]] = field(default_factory=list)  # data ids per (k, option)

    @property
    def T(self) -> int:
        """Number of compute nodes (= stages)."""
        return len(self.names)

    @property
    def size(self) -> np.ndarray:
        """Bytes of every data node."""
        return self.graph.mem[self.data_node]


def build_hgraph(
    graph: Graph,
    layers: Sequence[LayerSpec] = (),
    loss: int | None = None,
    once: bool = True,
    order: np.ndarray | None = None,
) -> HGraph:
    """The level of ``graph`` whose groups are ``layers`` (every other node plain); ``loss``: node computed once.

    Ties of the phase order go by position in ``order`` (a topological order; default: the input order).
    """
    n = graph.n
    position = graph.position
    if order is not None:
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
    owner = np.full(n, -1, dtype=np.int64)
    nodes: list[dict] = []  # unsorted compute nodes
    for spec in layers:
        f = len(nodes)
        nodes.append(
            {
                "name": f"F[{graph.names[spec.forward[0]]}..]",
                "parts": [*spec.fwd, spec.ff],
                "key": min(int(position[v]) for v in spec.forward),
                "members": list(spec.forward),
                "recomputable": spec.recomputable,
                "pair": None,
            }
        )
        owner[list(spec.forward)] = f
        if spec.backward:
            b = len(nodes)
            nodes.append(
                {
                    "name": f"B[{graph.names[spec.forward[0]]}..]",
                    "parts": list(spec.bwd),
                    "key": max(int(position[v]) for v in spec.backward),
                    "members": list(spec.backward),
                    "recomputable": spec.backward_recomputable,
                    "pair": f,
                }
            )
            owner[list(spec.backward)] = b
            nodes[f]["pair"] = -b - 1  # marks F with its B
    data_flag = np.zeros(n, dtype=bool)
    data_flag[graph.outputs] = True
    for v in range(n):
        if owner[v] < 0:
            owner[v] = len(nodes)
            nodes.append({"name": graph.names[v], "key": int(position[v]), "members": [v], "pair": None})
    reads: list[set[int]] = []
    for k, node in enumerate(nodes):
        members = set(node["members"])
        static = {int(u) for v in members for u in graph.preds(v) if int(u) not in members}
        if "parts" in node and node["pair"] is not None and node["pair"] >= 0:  # a B node: reads are per option
            static = set()
        reads.append(static)
        for part in node.get("parts", []):
            for d in part.reads:
                if owner[d] == k:
                    raise GraphError(f"option of {node['name']} reads its own value {graph.names[d]!r}")
        data_flag[list(static)] = True
        for part in node.get("parts", []):
            data_flag[list(part.reads)] = True
    phase = _phase_order(graph, nodes, owner, reads)
    rank = np.empty(len(nodes), dtype=np.int64)
    rank[phase] = np.arange(len(nodes))
    data_node = np.flatnonzero(data_flag)
    data_id = np.full(n, -1, dtype=np.int64)
    data_id[data_node] = np.arange(data_node.size)
    names, parts, static_reads, recomputable, part_reads = [], [], [], [], []
    once_flag = np.zeros(len(nodes), dtype=bool)
    for k in phase:
        node = nodes[k]
        names.append(node["name"])
        if "parts" in node:
            node_parts = node["parts"]
            recomputable.append(node["recomputable"])
        else:
            v = node["members"][0]
            extra = 0 if data_flag[v] else int(graph.mem[v])
            node_parts = [Part((v,), float(graph.cost[v]), int(graph.workspace[v]) + extra, 0)]
            recomputable.append(bool(graph.recomputable[v]))
            once_flag[rank[k]] = once and loss is not None and v == loss
        parts.append(node_parts)
        static_reads.append(np.array(sorted(data_id[list(reads[k])]), dtype=np.int64))
        part_reads.append([np.array(sorted(data_id[list(p.reads)]), dtype=np.int64) for p in node_parts])
    layer_pairs = []
    for k, node in enumerate(nodes):
        if "parts" in node and (node["pair"] is None or node["pair"] < 0):
            b = -node["pair"] - 1 if node["pair"] is not None else -1
            layer_pairs.append((int(rank[k]), int(rank[b]) if b >= 0 else -1))
    return HGraph(
        graph=graph,
        names=names,
        parts=parts,
        static_reads=static_reads,
        recomputable=np.array(recomputable, dtype=bool),
        once=once_flag,
        layers=layer_pairs,
        data_node=data_node,
        producer=rank[owner[data_node]],
        final=np.isin(data_node, graph.outputs),
        loss=int(rank[owner[loss]]) if loss is not None else -1,
        part_reads=part_reads,
    )


def _phase_order(graph: Graph, nodes: list[dict], owner: np.ndarray, reads: list[set[int]]) -> list[int]:
    """Topological order of the coarse graph, ties broken by key (F: min position, B: max position)."""
    succ: list[set[int]] = [set() for _ in nodes]
    for k, node in enumerate(nodes):
        sources = set(reads[k])
        for part in node.get("parts", []):
            sources.update(part.reads)
        for d in sources:
            if owner[d] != k:
                succ[int(owner[d])].add(k)
        if node["pair"] is not None and node["pair"] >= 0:
            succ[node["pair"]].add(k)
    indegree = [0] * len(nodes)
    for k in range(len(nodes)):
        for s in succ[k]:
            indegree[s] += 1
    heap = [(nodes[k]["key"], k) for k in range(len(nodes)) if indegree[k] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, k = heapq.heappop(heap)
        order.append(k)
        for s in succ[k]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(heap, (nodes[s]["key"], s))
    if len(order) < len(nodes):
        stuck = [nodes[k]["name"] for k in range(len(nodes)) if indegree[k] > 0]
        raise GraphError(f"the layers of {graph.name!r} form a cycle through {stuck[:3]}")
    return order
