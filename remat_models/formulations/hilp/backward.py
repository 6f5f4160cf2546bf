"""Backward parts W of the clusters of a partition, chosen so that every level's layer graph is acyclic.

``pair_layers`` gives each backward node the forward node it belongs to, but on traced graphs a
cluster's backward nodes need not be convex: gradient-only nodes (reading no forward node) sit
between them, and a node can read a forward value of a cluster that runs *earlier* than the
clusters whose gradients it reads (attention's ``bmm`` of the probabilities and the values).
Contracting such sets into B_j makes the level's coarse graph cyclic.

At each level (the top, then inside every cluster over its W) the pairing's groups are kept when
the level's coarse graph is a DAG with them (Checkmate-derived and generated graphs). Otherwise the
items are ranked in a topological order of their forward quotient, and a non-forward node's rank is
the minimum of its owner item's rank and its non-forward predecessors' ranks, so ranks never
increase along an edge (the owner's rank is ignored when a cluster ranks between it and the
predecessors: a node reading an early shared value such as rotary ``cos`` would otherwise pull the
backward that follows into that early cluster). Every non-loss node of rank k joins the item of
rank k if that is a cluster, and is plain otherwise (gradient-only nodes join the item whose
gradients they read; a node reading a gradient of an earlier item joins that one). A group then
holds exactly the nodes of one rank, so a cycle of groups would have to stay inside one group (or
among plain nodes of one rank): the coarse graph is acyclic, given that forward nodes read no
backward value (``local_graph`` checks it) and loss nodes read none either (true of training graphs).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

import networkx as nx
import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.formulations.hilp.layers import forward_mask
from remat_models.formulations.hilp.partition import Cluster, Partition


def backward_sets(graph: Graph, partition: Partition, owner: np.ndarray) -> dict[Cluster, np.ndarray]:
    """W (global ids, by position) of every cluster of ``partition``; ``owner`` from ``pair_layers``."""
    forward = forward_mask(graph)
    if not forward.any():
        forward = np.ones(graph.n, dtype=bool)
    pool = sorted(np.flatnonzero(~forward).tolist(), key=lambda v: graph.position[v])
    result: dict[Cluster, np.ndarray] = {}
    _level(graph, list(partition.top), pool, owner.copy(), result)
    return result


def _item_ranks(graph: Graph, items: list[int | Cluster]) -> tuple[dict[int, int], list[int]]:
    """Item index of every forward node of the level, and each item's rank in a topological order."""
    item_of: dict[int, int] = {}
    for i, item in enumerate(items):
        for v in item.nodes if isinstance(item, Cluster) else (int(item),):
            item_of[v] = i
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(items)))
    for u, v in _edges_within(graph, item_of):
        a, b = item_of[u], item_of[v]
        if a != b:
            dag.add_edge(a, b)
    first = [min(int(graph.position[v]) for v in _nodes(item)) for item in items]
    order = list(nx.lexicographical_topological_sort(dag, key=lambda i: first[i]))
    rank = [0] * len(items)
    for r, i in enumerate(order):
        rank[i] = r
    return item_of, rank


def _edges_within(graph: Graph, nodes: Iterable[int]) -> list[list[int]]:
    """The edges of ``graph`` between two of ``nodes`` (a level's own: not one pass over every edge per level)."""
    inside = np.zeros(graph.n, dtype=bool)
    inside[np.fromiter(nodes, dtype=np.int64)] = True
    edges = graph.edges
    return edges[inside[edges[:, 0]] & inside[edges[:, 1]]].tolist()


def _nodes(item: int | Cluster) -> tuple[int, ...]:
    return item.nodes if isinstance(item, Cluster) else (int(item),)


def _level(
    graph: Graph,
    items: list[int | Cluster],
    pool: list[int],
    owner: np.ndarray,
    result: dict[Cluster, np.ndarray],
) -> None:
    """Assign the level's non-forward nodes ``pool`` (by position) to its clusters, then recurse."""
    if not any(isinstance(item, Cluster) for item in items):
        return
    item_of, rank = _item_ranks(graph, items)
    members = _by_owner(graph, items, item_of, pool, owner)
    if not _acyclic(graph, items, item_of, members, pool):
        members = _by_rank(graph, items, item_of, rank, pool, owner)
    for i, item in enumerate(items):
        if isinstance(item, Cluster):
            w = members.get(i, [])
            result[item] = np.array(w, dtype=np.int64)
            _level(graph, list(item.members), w, owner, result)


def _by_owner(
    graph: Graph, items: list[int | Cluster], item_of: dict[int, int], pool: list[int], owner: np.ndarray
) -> dict[int, list[int]]:
    """The pairing's groups: the pool nodes owned by each cluster's forward nodes.

    A gradient-only node (no owner) joins the one cluster that both a pool predecessor and an owned successor belong
    to, or the one its pool predecessors all joined: a traced ResNet's gradient ``add`` of a residual (reading the
    next block's gradient and its own branch's) sits between two backward nodes of one cluster, and left plain it
    made that backward part non-convex (a cycle through it), which sent the whole level to :func:`_by_rank` (on
    ``zoo_resnet`` a 181-node forward cluster with no backward part, its 144 activations all out-data).
    """
    members: dict[int, list[int]] = {}
    group: dict[int, int] = {}
    in_pool = set(pool)
    for x in pool:  # by position: a node's pool predecessors come first
        i = item_of.get(int(owner[x]), -1) if owner[x] >= 0 else -1
        if owner[x] < 0 and graph.kind[x] != NodeKind.LOSS:
            joined = {group.get(p, -1) for p in graph.preds(x).tolist() if p in in_pool}
            after = {item_of.get(int(owner[y]), -1) for y in graph.succs(x).tolist() if y in in_pool and owner[y] >= 0}
            between = joined & after - {-1}
            i = between.pop() if len(between) == 1 else joined.pop() if len(joined) == 1 else -1
        if i >= 0 and isinstance(items[i], Cluster):
            members.setdefault(i, []).append(x)
            group[x] = i
    return members


def _acyclic(
    graph: Graph, items: list[int | Cluster], item_of: dict[int, int], members: dict[int, list[int]], pool: list[int]
) -> bool:
    """Whether the level's coarse graph (F_j, B_j, F_j -> B_j, every other node alone) is a DAG."""
    label: dict[int, tuple[str, int]] = {v: ("F", i) for v, i in item_of.items() if isinstance(items[i], Cluster)}
    label.update({v: ("n", v) for v, i in item_of.items() if not isinstance(items[i], Cluster)})
    label.update({x: ("n", x) for x in pool})
    dag = nx.DiGraph()
    for i, group in members.items():
        label.update({x: ("B", i) for x in group})
        dag.add_edge(("F", i), ("B", i))
    for u, v in _edges_within(graph, label):
        a, b = label[u], label[v]
        if a != b:
            dag.add_edge(a, b)
    return nx.is_directed_acyclic_graph(dag)


def _by_rank(
    graph: Graph,
    items: list[int | Cluster],
    item_of: dict[int, int],
    rank: list[int],
    pool: list[int],
    owner: np.ndarray,
) -> dict[int, list[int]]:
    """Groups by rank (module docstring); ``owner`` is updated for the nodes that join another cluster."""
    cluster_of_rank = {rank[i]: i for i, item in enumerate(items) if isinstance(item, Cluster)}
    cluster_ranks = sorted(cluster_of_rank)
    level_rank: dict[int, float] = {}
    members: dict[int, list[int]] = {}
    for x in pool:
        preds = [p for p in graph.preds(x).tolist() if p in level_rank]
        reach = min((level_rank[p] for p in preds), default=math.inf)
        i = item_of.get(int(owner[x]), -1) if owner[x] >= 0 else -1
        own = rank[i] if i >= 0 else math.inf
        after = bisect.bisect_right(cluster_ranks, own)
        if reach < math.inf and after < len(cluster_ranks) and cluster_ranks[after] < reach:
            own = math.inf  # reads an early shared value (rotary cos, a mask): it follows the gradient it reads
        level_rank[x] = min(own, reach)
        if level_rank[x] not in cluster_of_rank or graph.kind[x] == NodeKind.LOSS:
            continue  # plain: of no item, or of a forward leaf
        if level_rank[x] != own:  # the sub-levels see it as read by the cluster it joined
            owner[x] = owner[next(p for p in preds if level_rank[p] == reach)]
        members.setdefault(cluster_of_rank[int(level_rank[x])], []).append(x)
    return members


__all__ = ["backward_sets"]
