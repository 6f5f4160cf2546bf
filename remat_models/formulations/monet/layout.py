"""MONeT's stage structure over a project graph (spec section A.3): forward positions, stage nodes, constants.

- Forward positions: the nodes of kind forward or loss in input order, each followed by the aux
  values it may produce (MONeT's IntNode order).
- Stage nodes ``b_1 .. b_{T-1}``: every other node in input order; stage 0 is the forward pass.
- No edge may go from a stage node to a forward node (``ConfigurationError`` naming the edge).

Implementations are filtered here: by tag (MONeT's ablations; impl 0 is always kept), by MONeT's
in-place candidate rule (an in-place impl of v over u is kept only if v is u's last forward reader;
a stage node may be in place only over a stage value whose last reader it is), and impls reading an
aux value nobody produces any more are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Set
from dataclasses import dataclass

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.errors import ConfigurationError

log = logging.getLogger(__name__)

FORWARD_KINDS = frozenset({NodeKind.FORWARD, NodeKind.LOSS})


@dataclass(frozen=True)
class OpImpl:
    """One kept implementation of a forward or stage node, in positions of the layout."""

    index: int  # the implementation's index in the graph
    reads: np.ndarray  # forward positions read
    inplace: int  # forward position (forward nodes) or stage node id (stage nodes) consumed in place, or -1
    aux: np.ndarray  # forward positions of the aux values produced
    cost: float
    recompute_cost: float
    workspace: int
    aux_bytes: int


@dataclass(frozen=True)
class MonetLayout:
    """Forward positions, stage nodes, kept implementations and the constants of the MONeT program."""

    graph: Graph
    forward: np.ndarray  # node id at each forward position
    stage_nodes: np.ndarray  # b_1 .. b_{T-1} (node ids)
    producer: np.ndarray  # per position: the producer's position for an aux value, -1 otherwise
    f_impls: tuple[tuple[OpImpl, ...], ...]  # per position (() for aux positions)
    b_impls: tuple[tuple[OpImpl, ...], ...]  # per stage node
    last_forward_reader: np.ndarray  # per position: the last forward position reading it (-1: none)
    stage_resident: np.ndarray  # G_t in bytes, t = 0 .. T-1
    forward_outputs: np.ndarray  # positions of forward graph outputs

    @property
    def n_positions(self) -> int:
        """Number of forward positions (aux values included)."""
        return int(self.forward.size)

    @property
    def n_stages(self) -> int:
        """T = number of stage nodes + 1."""
        return int(self.stage_nodes.size) + 1

    @property
    def mem(self) -> np.ndarray:
        """Output bytes at each forward position."""
        return self.graph.mem[self.forward]

    @property
    def is_aux(self) -> np.ndarray:
        """Whether each forward position holds an aux value."""
        return self.producer >= 0


def monet_layout(graph: Graph, tags: Set[str] | None = None) -> MonetLayout:
    """Split ``graph`` into MONeT's forward positions and stage nodes and keep the allowed implementations."""
    aux_of = graph.aux_of
    kind = graph.kind
    order = graph.order.tolist()
    fwd_nodes = [v for v in order if kind[v] in FORWARD_KINDS and aux_of[v] < 0]
    stage_nodes = [v for v in order if kind[v] not in FORWARD_KINDS and aux_of[v] < 0]
    produced: dict[int, list[int]] = {}
    for a in np.flatnonzero(aux_of >= 0).tolist():
        p = int(aux_of[a])
        if kind[p] not in FORWARD_KINDS:
            raise ConfigurationError(
                f"monet: aux value {graph.names[a]!r} is produced by stage node {graph.names[p]!r}"
            )
        produced.setdefault(p, []).append(a)
    forward: list[int] = []
    for v in fwd_nodes:
        forward.append(v)
        forward.extend(sorted(produced.get(v, [])))
    n = graph.n
    position = np.full(n, -1, dtype=np.int64)
    position[forward] = np.arange(len(forward))
    stage_of = np.full(n, -1, dtype=np.int64)
    stage_of[stage_nodes] = np.arange(1, len(stage_nodes) + 1)
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    bad = np.flatnonzero((stage_of[u] >= 1) & (position[v] >= 0))
    if bad.size:
        e = int(bad[0])
        raise ConfigurationError(
            f"monet: edge ({graph.names[u[e]]!r}, {graph.names[v[e]]!r}) goes from a stage node to a forward node"
        )
    producer = np.where(aux_of[forward] >= 0, position[np.maximum(aux_of[forward], 0)], -1)
    f_impls, b_impls = _kept_impls(graph, forward, stage_nodes, position, stage_of, tags)
    last_reader = np.full(len(forward), -1, dtype=np.int64)
    for j, impls in enumerate(f_impls):
        for impl in impls:
            last_reader[impl.reads] = np.maximum(last_reader[impl.reads], j)
    return MonetLayout(
        graph=graph,
        forward=np.asarray(forward, dtype=np.int64),
        stage_nodes=np.asarray(stage_nodes, dtype=np.int64),
        producer=producer.astype(np.int64),
        f_impls=f_impls,
        b_impls=b_impls,
        last_forward_reader=last_reader,
        stage_resident=_stage_resident(graph, stage_nodes, stage_of, b_impls),
        forward_outputs=np.asarray([int(position[o]) for o in graph.outputs.tolist() if position[o] >= 0]),
    )


def _kept_impls(
    graph: Graph,
    forward: list[int],
    stage_nodes: list[int],
    position: np.ndarray,
    stage_of: np.ndarray,
    tags: Set[str] | None,
) -> tuple[tuple[tuple[OpImpl, ...], ...], tuple[tuple[OpImpl, ...], ...]]:
    table = graph.impl_table
    names, mem = graph.names, graph.mem
    nodes = [v for v in forward + stage_nodes if graph.aux_of[v] < 0]

    def candidates(v: int) -> list[int]:
        if table is None:
            return [0]
        return [li for li, impl in enumerate(table.impls[v]) if li == 0 or tags is None or impl.tag in tags]

    # forward readers of each forward value (all candidate impls), for the last-reader rule
    last_forward = np.full(graph.n, -1, dtype=np.int64)
    stage_last = np.full(graph.n, -1, dtype=np.int64)
    for v in nodes:
        for li in candidates(v):
            reads = np.asarray(graph.preds(v) if table is None else table.reads[v][li], dtype=np.int64)
            if position[v] >= 0:
                last_forward[reads] = np.maximum(last_forward[reads], position[v])
            else:
                stage_last[reads] = np.maximum(stage_last[reads], stage_of[v])
    kept: dict[int, list[int]] = {}
    for v in nodes:
        if table is None or not table.impls[v]:
            kept[v] = [0] if table is None or table.impls[v] else []
            continue
        keep = []
        for li in candidates(v):
            u = table.inplace[v][li]
            if u >= 0:
                forward_ok = position[v] >= 0 and position[u] >= 0 and last_forward[u] == position[v]
                stage_ok = stage_of[v] >= 1 and stage_of[u] >= 1 and stage_last[u] == stage_of[v]
                if not (forward_ok or stage_ok):
                    log.debug("monet: in-place impl %s of %s dropped (not the last reader)", li, names[v])
                    continue
            if position[v] < 0 and table.impls[v][li].aux:
                log.debug("monet: impl %s of stage node %s dropped (stage nodes produce no aux values)", li, names[v])
                continue
            keep.append(li)
        kept[v] = keep
    # drop impls reading an aux value that no kept impl produces (to a fixpoint)
    changed = True
    while changed and table is not None:
        produced = {int(a) for v in nodes for li in kept[v] for a in table.impls[v][li].aux}
        changed = False
        for v in nodes:
            keep = [li for li in kept[v] if all(table.aux_of[u] < 0 or u in produced for u in table.reads[v][li])]
            if len(keep) != len(kept[v]):
                kept[v], changed = keep, True
    for v in nodes:
        if not kept[v]:
            raise ConfigurationError(f"monet: node {names[v]!r} has no usable implementation left")

    def op(v: int, li: int) -> OpImpl:
        if table is None:
            reads = graph.preds(v)
            cost = float(graph.cost[v])
            return OpImpl(
                0, _positions(reads, position), -1, np.empty(0, np.int64), cost, cost, int(graph.workspace[v]), 0
            )
        impl = table.impls[v][li]
        u = table.inplace[v][li]
        aux = np.asarray(impl.aux, dtype=np.int64)
        return OpImpl(
            index=li,
            reads=_positions(table.reads[v][li], position),
            inplace=int(position[u]) if u >= 0 and position[v] >= 0 else u,
            aux=position[aux].astype(np.int64),
            cost=impl.step_cost(False),
            recompute_cost=impl.step_cost(True),
            workspace=int(impl.workspace),
            aux_bytes=int(mem[aux].sum()),
        )

    f_impls = tuple(tuple(op(v, li) for li in kept[v]) if graph.aux_of[v] < 0 else () for v in forward)
    b_impls = tuple(tuple(op(v, li) for li in kept[v]) for v in stage_nodes)
    return f_impls, b_impls


def _positions(reads: object, position: np.ndarray) -> np.ndarray:
    """Forward positions among ``reads`` (stage values are not positions)."""
    p = position[np.asarray(reads, dtype=np.int64)]
    return np.sort(p[p >= 0])


def _stage_resident(graph: Graph, stage_nodes: list[int], stage_of: np.ndarray, b_impls: tuple) -> np.ndarray:
    """G_t: bytes of stage values resident before b_t under eager frees (read by some b_u, u >= t, or outputs)."""
    T = len(stage_nodes) + 1
    last = np.zeros(graph.n, dtype=np.int64)  # last stage reading each stage value
    table = graph.impl_table
    for s, v in enumerate(stage_nodes, start=1):
        reads = [
            set(graph.preds(v).tolist() if table is None else table.reads[v][impl.index]) for impl in b_impls[s - 1]
        ]
        stage_reads = [{u for u in r if stage_of[u] >= 1} for r in reads]
        if any(r != stage_reads[0] for r in stage_reads):
            raise ConfigurationError(
                f"monet: the implementations of stage node {graph.names[v]!r} read different stage values"
            )
        for u in stage_reads[0]:
            last[u] = max(last[u], s)
    outputs = np.zeros(graph.n, dtype=bool)
    outputs[graph.outputs] = True
    resident = np.zeros(T, dtype=np.int64)
    for s, v in enumerate(stage_nodes, start=1):
        until = T - 1 if outputs[v] else last[v]  # resident before b_t for s < t <= until
        if until > s:
            resident[s + 1 : until + 1] += int(graph.mem[v])
    return resident
