"""H-Partition (HiREmate section 3.1, Alg. 1/2): bottom-up greedy grouping of the forward graph into a hierarchy.

Each round freezes the current nodes ("items"), proposes candidate groups (sequences and flows),
and greedily merges the candidate of smallest score ``(in_bytes + out_bytes) * leaves**alpha``
whose estimate is at most ``max_leaf`` (M^l), updating every candidate that meets it to the
union, until the graph's estimate is at most ``max_top`` (M^t). ``estimate`` counts 1 per leaf or
frozen item (2 for a frozen cluster: it is a group), and for a group formed this round the estimate
of its members plus 1 (rkgb counts its member count; counting frozen clusters as 2 inside it too
keeps every cluster's final estimate, with its members flattened, at most ``max_leaf``).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.errors import ConfigurationError
from remat_models.formulations.hilp.layers import forward_mask, pair_layers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionOptions:
    """H-Partition parameters (defaults of rkgb's ``PartitionerBottomToTop``; ``can_use_rotor`` is off)."""

    max_leaf: int = 20  # M^l
    max_top: int = 30  # M^t
    alpha: float = 0.5
    max_len_seq: int = 99

    def validated(self) -> PartitionOptions:
        """Self after range checks."""
        if self.max_leaf < 2 or self.max_top < 1:
            raise ConfigurationError(f"partition needs max_leaf >= 2 and max_top >= 1, got {self}")
        return self


@dataclass(frozen=True)
class Cluster:
    """A group of the hierarchy: its members (forward node ids or sub-clusters) and all its forward leaves."""

    members: tuple[int | Cluster, ...]
    nodes: tuple[int, ...] = field(compare=False)  # every forward leaf, sorted by id

    def clusters(self) -> Iterator[Cluster]:
        """Sub-clusters in post-order, then self."""
        for member in self.members:
            if isinstance(member, Cluster):
                yield from member.clusters()
        yield self

    @property
    def depth(self) -> int:
        """1 for a cluster of leaves, 1 + the deepest sub-cluster otherwise."""
        return 1 + max((m.depth for m in self.members if isinstance(m, Cluster)), default=0)


@dataclass(frozen=True)
class Partition:
    """The top level: forward leaves and clusters; ``rounds`` of partitioning were run."""

    top: tuple[int | Cluster, ...]
    rounds: int

    def clusters(self) -> list[Cluster]:
        """Every cluster, children before parents."""
        return [c for m in self.top if isinstance(m, Cluster) for c in m.clusters()]

    @property
    def depth(self) -> int:
        """Levels including the top (Checkmate = 1)."""
        return 1 + max((m.depth for m in self.top if isinstance(m, Cluster)), default=0)


def _leaves(item: int | Cluster) -> tuple[int, ...]:
    return item.nodes if isinstance(item, Cluster) else (int(item),)


WINDOW_MIN_SHRINK = 0.9  # a round of consecutive-item merges counts only if it leaves at most this share


def _bits(mask: int) -> list[int]:
    """The positions of the set bits of ``mask`` (in time linear in their number, not in its width)."""
    positions = []
    while mask:
        low = mask & -mask
        positions.append(low.bit_length() - 1)
        mask ^= low
    return positions


def _make_cluster(members: list[int | Cluster]) -> Cluster:
    return Cluster(tuple(members), tuple(sorted(v for m in members for v in _leaves(m))))


class PartitionTimeUp(Exception):
    """The deadline passed during H-Partition (a partial partition is of no use)."""


CHECK_EVERY = 256  # candidates proposed or merged between two looks at the clock in a round


def h_partition(graph: Graph, options: PartitionOptions | None = None, deadline: float | None = None) -> Partition:
    """Partition the forward graph of ``graph`` (every node if it has no forward node).

    Raises :class:`PartitionTimeUp` when ``deadline`` (``time.perf_counter``) passes (checked between rounds and
    while a round proposes and merges its candidates).
    """
    opts = (options or PartitionOptions()).validated()
    forward = forward_mask(graph)
    if not forward.any():
        forward = np.ones(graph.n, dtype=bool)
    owner = pair_layers(graph)
    has_backward = np.zeros(graph.n, dtype=bool)
    paired = (owner >= 0) & (owner != np.arange(graph.n))
    has_backward[owner[paired]] = True
    check_grad = bool(paired.any())
    fwd_nodes = sorted(np.flatnonzero(forward).tolist(), key=lambda v: graph.position[v])
    model_output = np.zeros(graph.n, dtype=bool)
    for v in fwd_nodes:
        succ = graph.succs(v)
        if succ.size == 0 or any(graph.kind[s] == NodeKind.LOSS for s in succ):
            model_output[v] = True
    linked = np.zeros(graph.n, dtype=bool)
    inner = forward[graph.edges[:, 0]] & forward[graph.edges[:, 1]]
    linked[graph.edges[inner].ravel()] = True
    # forward nodes without a forward edge (traced buffer updates such as batch norms' num_batches_tracked + 1) can
    # join no candidate; counted against M^t they forced a traced ResNet's whole network into one cluster
    isolated: list[int | Cluster] = [v for v in fwd_nodes if not linked[v]]
    items: list[int | Cluster] = [v for v in fwd_nodes if linked[v]]
    rounds = 0
    grads = has_backward if check_grad else None
    while _estimate_items(items) > opts.max_top:
        if deadline is not None and time.perf_counter() > deadline:
            raise PartitionTimeUp(f"H-Partition: the time limit passed after {rounds} rounds ({len(items)} items)")
        new_items = _Round(graph, items, forward, grads, model_output, opts, deadline).run()
        rounds += 1
        if len(new_items) >= len(items):  # e.g. a mask read by every layer: no flow fits, no chain links
            new_items = _Round(graph, items, forward, grads, model_output, opts, deadline).run(windows=True)
            log.info("H-Partition: round %d merged consecutive items (%d -> %d)", rounds, len(items), len(new_items))
            if len(new_items) > WINDOW_MIN_SHRINK * len(items):  # absorbing a few stray nodes nests a level each
                new_items = items
        if len(new_items) >= len(items):
            log.warning("H-Partition: round %d did not shrink the graph (%d items); stopping", rounds, len(items))
            break
        items = new_items
    return Partition(tuple(items + isolated), rounds)


def _estimate_items(items: list[int | Cluster]) -> int:
    return sum(1 + isinstance(item, Cluster) for item in items)


class _Round:
    """One round: candidates over the frozen items, greedy merging."""

    def __init__(
        self,
        graph: Graph,
        items: list[int | Cluster],
        forward: np.ndarray,
        has_backward: np.ndarray | None,
        model_output: np.ndarray,
        opts: PartitionOptions,
        deadline: float | None = None,
    ) -> None:
        self.graph, self.items, self.opts = graph, items, opts
        self.deadline = deadline
        self.ticks = 0
        self.item_of = np.full(graph.n, -1, dtype=np.int64)
        for i, item in enumerate(items):
            self.item_of[list(_leaves(item))] = i
        u, v = graph.edges[:, 0], graph.edges[:, 1]
        keep = forward[u] & forward[v]
        self.fu, self.fv = u[keep], v[keep]
        self.leaf_preds: dict[int, list[int]] = {}
        self.leaf_succs: dict[int, list[int]] = {}
        for a, b in zip(self.fu.tolist(), self.fv.tolist(), strict=True):
            self.leaf_succs.setdefault(a, []).append(b)
            self.leaf_preds.setdefault(b, []).append(a)
        iu, iv = self.item_of[self.fu], self.item_of[self.fv]
        cross = iu != iv
        self.succ: list[set[int]] = [set() for _ in items]
        self.pred: list[set[int]] = [set() for _ in items]
        for a, b in zip(iu[cross].tolist(), iv[cross].tolist(), strict=True):
            self.succ[a].add(b)
            self.pred[b].add(a)
        self.weight = [1 + isinstance(item, Cluster) for item in items]
        self.grad = [True] * len(items)
        if has_backward is not None:
            self.grad = [bool(has_backward[list(_leaves(item))].any()) for item in items]
        self.group_of = [-1] * len(items)
        self.groups: dict[int, frozenset[int]] = {}
        self.next_group = 0
        self._boundaries(model_output)

    def _boundaries(self, model_output: np.ndarray) -> None:
        """What ``_score`` needs of each item: leaf count, first leaf, outside producers, boundary leaves.

        The producers outside the item that its leaves read, and its leaves that are model outputs or read outside
        it (with the items reading them).
        """
        mem = self.graph.mem
        self.n_leaves, self.first, self.ext_in, self.ext_out = [], [], [], []
        for i, item in enumerate(self.items):
            leaves = _leaves(item)
            self.n_leaves.append(len(leaves))
            self.first.append(min(leaves))
            producers = {p for q in leaves for p in self.leaf_preds.get(q, ()) if self.item_of[p] != i}
            self.ext_in.append([(p, int(self.item_of[p]), int(mem[p])) for p in sorted(producers)])
            outs = []
            for q in leaves:
                readers = {int(self.item_of[r]) for r in self.leaf_succs.get(q, ())} - {i}
                if model_output[q] or readers:
                    outs.append((bool(model_output[q]), tuple(sorted(readers)), int(mem[q])))
            self.ext_out.append(outs)

    def _tick(self) -> None:
        """Raise :class:`PartitionTimeUp` once the deadline has passed (the clock read every ``CHECK_EVERY`` calls)."""
        self.ticks += 1
        if self.deadline is not None and self.ticks % CHECK_EVERY == 0 and time.perf_counter() > self.deadline:
            raise PartitionTimeUp(f"H-Partition: the time limit passed in a round of {len(self.items)} items")

    # ---------------------------------------------------------------- candidates
    def _sequences(self) -> list[frozenset[int]]:
        link = {a: next(iter(self.succ[a])) for a in range(len(self.items)) if len(self.succ[a]) == 1}
        link = {a: b for a, b in link.items() if len(self.pred[b]) == 1}
        heads = set(link) - set(link.values())
        result = []
        for head in sorted(heads):
            chain = [head]
            while chain[-1] in link:
                chain.append(link[chain[-1]])
            for start in range(0, len(chain), self.opts.max_len_seq):
                piece = chain[start : start + self.opts.max_len_seq]
                if len(piece) > 1:
                    result.append(frozenset(piece))
        return result

    def _flows(self) -> list[frozenset[int]]:
        n = len(self.items)
        dag = nx.DiGraph()
        root = n
        dag.add_nodes_from(range(n + 1))
        dag.add_edges_from((a, b) for a in range(n) for b in self.succ[a])
        dag.add_edges_from((root, a) for a in range(n) if not self.pred[a])
        idom = nx.immediate_dominators(dag, root)
        order = list(nx.topological_sort(dag))
        anc = [0] * (n + 1)
        for x in order:
            for b in dag.successors(x):
                anc[b] |= anc[x] | (1 << x)
        desc = [0] * (n + 1)
        for x in reversed(order):
            for b in dag.successors(x):
                desc[x] |= desc[b] | (1 << b)
        result = []
        for x in range(n):
            self._tick()
            a = idom[x]
            flow = (anc[x] & ~(1 << root)) | (1 << x) if a == root else (desc[a] & anc[x]) | (1 << a) | (1 << x)
            size = flow.bit_count()
            cands = [flow]
            if size > 2:
                cands.append(flow & ~(1 << x))
                if a != root:
                    cands.append(flow & ~(1 << a))
            if size > 3 and a != root:
                cands.append(flow & ~(1 << a) & ~(1 << x))
            for c in cands:
                if not 1 < c.bit_count() <= self.opts.max_leaf:  # every item weighs at least 1
                    continue
                members = frozenset(_bits(c))
                if self._atoms_estimate(members) <= self.opts.max_leaf:
                    result.append(members)
        return result

    def _windows(self) -> list[frozenset[int]]:
        """Pairs of consecutive items in a topological order of the items.

        A contiguous segment of a topological order is convex, and unions of overlapping ones stay contiguous.
        """
        dag = nx.DiGraph()
        dag.add_nodes_from(range(len(self.items)))
        dag.add_edges_from((a, b) for a in range(len(self.items)) for b in self.succ[a])
        first = [min(_leaves(item)) for item in self.items]
        order = list(nx.lexicographical_topological_sort(dag, key=lambda i: first[i]))
        return [frozenset(pair) for pair in itertools.pairwise(order)]

    def _filtered(self, candidates: list[frozenset[int]]) -> list[frozenset[int]]:
        kept = []
        for c in dict.fromkeys(candidates):
            if not any(self.grad[i] for i in c):
                continue
            if not any(p not in c for i in c for p in self.pred[i]):
                continue
            kept.append(c)
        return kept

    # ------------------------------------------------------------------ measures
    def _atoms_estimate(self, atoms: frozenset[int]) -> int:
        total, seen = 0, set()
        for i in atoms:
            g = self.group_of[i]
            if g < 0:
                total += self.weight[i]
            elif g not in seen:
                seen.add(g)
                total += sum(self.weight[k] for k in self.groups[g]) + 1
        return total

    def _top_members(self, atoms: frozenset[int]) -> int:
        return len({("g", self.group_of[i]) if self.group_of[i] >= 0 else ("a", i) for i in atoms})

    def _score(self, atoms: frozenset[int]) -> float:
        """(in-data bytes + out-data bytes) * leaves**alpha of the union of ``atoms``, from the items' boundaries."""
        producers = {(p, size) for i in atoms for p, owner, size in self.ext_in[i] if owner not in atoms}
        outs = sum(
            size
            for i in atoms
            for is_output, readers, size in self.ext_out[i]
            if is_output or any(r not in atoms for r in readers)
        )
        leaves = sum(self.n_leaves[i] for i in atoms)
        return float(sum(size for _, size in producers) + outs) * leaves**self.opts.alpha

    # -------------------------------------------------------------------- greedy
    def run(self, windows: bool = False) -> list[int | Cluster]:
        """Merge candidates greedily: sequences and flows, or (``windows``) pairs of consecutive items."""
        cands = self._filtered(self._windows() if windows else self._sequences() + self._flows())
        estimate = sum(self.weight)
        heap: list[tuple[float, int, int]] = []
        live: dict[int, frozenset[int]] = {}
        holders: dict[int, set[int]] = {}  # item -> the candidates holding it (some no longer live)
        counter = 0

        def push(c: frozenset[int]) -> None:
            nonlocal counter
            if self._top_members(c) < 2 or self._atoms_estimate(c) > self.opts.max_leaf:
                return
            self._tick()
            live[counter] = c
            for i in c:
                holders.setdefault(i, set()).add(counter)
            first = min(self.first[i] for i in c)
            heapq.heappush(heap, (self._score(c), first, counter))
            counter += 1

        for c in cands:
            push(c)
        while estimate > self.opts.max_top and heap:
            self._tick()
            _, _, cid = heapq.heappop(heap)
            c = live.pop(cid, None)
            if c is None or self._top_members(c) < 2 or self._atoms_estimate(c) > self.opts.max_leaf:
                continue
            before = self._atoms_estimate(c)
            gid = self.next_group
            self.next_group += 1
            merged = frozenset(c)
            for i in merged:
                old = self.group_of[i]
                if old >= 0:
                    self.groups.pop(old, None)
            for i in merged:
                self.group_of[i] = gid
            self.groups[gid] = merged
            estimate += sum(self.weight[k] for k in merged) + 1 - before
            touched = sorted({k for i in merged for k in holders.get(i, ()) if k in live})
            for k in touched:
                union = live.pop(k) | merged
                if union != merged:
                    push(union)
        result: list[int | Cluster] = []
        done: set[int] = set()
        for i, item in enumerate(self.items):
            g = self.group_of[i]
            if g < 0:
                result.append(item)
            elif g not in done:
                done.add(g)
                members = sorted(self.groups[g], key=lambda k: self.graph.position[_leaves(self.items[k])[0]])
                flat = [self.items[k] for k in members]
                result.append(_make_cluster(flat))
        return result


__all__ = ["Cluster", "Partition", "PartitionOptions", "h_partition"]
