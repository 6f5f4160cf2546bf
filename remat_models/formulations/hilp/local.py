"""The local training graph of a cluster (V forward nodes, W their backward nodes), with interfaces.

Local node order: in-data sources, V, the virtual loss ``l_C``, out-grad sources, W (each part in
the global graph's input order). Sources are zero-cost, non-recomputable copies of the values the
cluster reads from outside; ``l_C`` (cost 0, 0 bytes) reads the out-data and precedes the
out-grads. Local outputs are the in-grads (W values read outside the cluster, or graph outputs);
a cluster without W keeps ``l_C`` as its output.

``gid[i]`` is the global node of local node i (-1 for ``l_C``); ``is_source[i]`` marks sources.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.impls import Impl
from remat_models.errors import GraphError

Identical = Literal["exact", "shape"]


@dataclass(frozen=True)
class LocalGraph:
    """A cluster's local training graph and how its nodes map to the global graph."""

    graph: Graph
    gid: np.ndarray
    is_source: np.ndarray
    loss: int  # local index of l_C
    n_in: int  # in-data sources are local 0..n_in-1
    forward: np.ndarray  # local indices of V
    backward: np.ndarray  # local indices of W
    out_data: np.ndarray  # local indices (in V) read by l_C
    interface_inplace: frozenset[tuple[int, int]] = frozenset()  # (node, impl) in place over an interface value

    @cached_property
    def local_of(self) -> dict[int, int]:
        """Global id -> local index, for the cluster's own (non-source) nodes."""
        return {int(g): i for i, g in enumerate(self.gid.tolist()) if g >= 0 and not self.is_source[i]}

    def key(self, identical: Identical = "exact") -> str:
        """Canonical hash of the local graph: equal keys mean options translate by local index."""
        g = self.graph
        digest = hashlib.sha256()
        parts = [g.mem, g.workspace, g.recomputable.astype(np.int64), g.edges, g.outputs, self.is_source]
        if identical == "exact":
            parts.append(g.cost)
        for part in parts:
            digest.update(np.ascontiguousarray(part).tobytes())
            digest.update(b"|")
        table = g.impl_table
        for v, impls in enumerate(table.impls if table is not None else ()):
            shape = [(table.reads[v][i], table.inplace[v][i], impl.workspace) for i, impl in enumerate(impls)]
            digest.update(repr((shape, [impl.cost for impl in impls] if identical == "exact" else ())).encode())
        digest.update(",".join(kind.value for kind in g.kind).encode())
        return digest.hexdigest()


def local_graph(graph: Graph, forward: np.ndarray, backward: np.ndarray) -> LocalGraph:
    """Build the local training graph of the cluster V = ``forward``, W = ``backward`` (global ids)."""
    pos = graph.position
    V = sorted((int(v) for v in forward), key=lambda v: pos[v])
    W = sorted((int(v) for v in backward), key=lambda v: pos[v])
    inside = np.zeros(graph.n, dtype=bool)
    inside[V] = inside[W] = True
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    into = inside[v] & ~inside[u]
    late = graph.of_kind(NodeKind.BACKWARD, NodeKind.LOSS)
    is_v = np.zeros(graph.n, dtype=bool)
    is_v[V] = True
    bad = into & late[u] & is_v[v]
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise GraphError(
            f"forward node {graph.names[v[e]]!r} reads backward value {graph.names[u[e]]!r}: the cluster has no "
            "forward/backward split"
        )
    sources = sorted(set(u[into].tolist()), key=lambda s: pos[s])
    in_data = [s for s in sources if not late[s]]
    out_grads = [s for s in sources if late[s]]
    read_outside = inside[u] & ~inside[v]
    output_set = set(graph.outputs.tolist())
    leaving = set(u[read_outside].tolist()) | (output_set & set(V + W))
    out_data = [x for x in V if x in leaving]
    in_grads = [x for x in W if x in leaving]
    gid = np.array([*in_data, *V, -1, *out_grads, *W], dtype=np.int64)
    n_local = gid.size
    loss = len(in_data) + len(V)
    local = np.full(graph.n, -1, dtype=np.int64)  # global id -> local index (own nodes and sources)
    local[gid[gid >= 0]] = np.flatnonzero(gid >= 0)
    reads = inside[v]  # every edge into the cluster, from an own node or a source
    edges = [
        np.stack([local[u[reads]], local[v[reads]]], axis=1),
        np.array([(local[x], loss) for x in out_data] + [(loss, local[s]) for s in out_grads], dtype=np.int64),
    ]
    is_source = np.zeros(n_local, dtype=bool)
    is_source[: len(in_data)] = True
    is_source[loss + 1 : loss + 1 + len(out_grads)] = True
    real = np.maximum(gid, 0)
    cost = np.where(is_source | (gid < 0), 0.0, graph.cost[real])
    mem = np.where(gid < 0, 0, graph.mem[real])
    workspace = np.where(is_source | (gid < 0), 0, graph.workspace[real])
    ids = gid.tolist()
    kind = [NodeKind.LOSS if g < 0 else NodeKind.OTHER if is_source[i] else graph.kind[g] for i, g in enumerate(ids)]
    recomputable = np.where(is_source | (gid < 0), False, graph.recomputable[real])
    outputs = [int(local[x]) for x in in_grads] or [loss]
    names = [("src:" if is_source[i] else "") + (graph.names[g] if g >= 0 else "l_C") for i, g in enumerate(ids)]
    lg = Graph.from_arrays(
        names,
        cost,
        mem,
        np.concatenate([part.reshape(-1, 2) for part in edges]),
        workspace=workspace,
        kind=kind,
        recomputable=recomputable,
        outputs=outputs,
        order=np.arange(n_local),
        name=f"{graph.name}:cluster@{graph.names[V[0]]}",
        impls=_local_impls(graph, gid, is_source, local, set(outputs)),
    )
    interface = set(np.flatnonzero(is_source).tolist()) | set(local[out_data].tolist()) | set(outputs)
    table = graph.impl_table
    return LocalGraph(
        graph=lg,
        gid=gid,
        is_source=is_source,
        loss=loss,
        n_in=len(in_data),
        forward=np.arange(len(in_data), loss, dtype=np.int64),
        backward=np.arange(n_local - len(W), n_local, dtype=np.int64),
        out_data=local[np.array(out_data, dtype=np.int64)],
        interface_inplace=frozenset(
            (i, li)
            for i, g in enumerate(ids if table is not None else ())
            if g >= 0 and not is_source[i]
            for li, target in enumerate(table.inplace[g])
            if target >= 0 and int(local[target]) in interface
        ),
    )


def _local_impls(
    graph: Graph, gid: np.ndarray, is_source: np.ndarray, local: np.ndarray, outputs: set[int]
) -> dict[int, tuple[Impl, ...]] | None:
    """The implementations of the cluster's own nodes in local ids (same indices as the global ones), or None.

    An implementation in place over a local output (an in-grad) runs out of place here (a local graph's outputs
    cannot be consumed); :func:`~remat_models.formulations.hilp.alternatives.inplace_ok` rejects options using it.
    """
    table = graph.impl_table
    if table is None:
        return None

    def target(g: int, li: int) -> int | None:
        t = table.inplace[g][li]
        return None if t < 0 or int(local[t]) in outputs else int(local[t])

    own = [(i, int(g)) for i, g in enumerate(gid.tolist()) if g >= 0 and not is_source[i]]
    return {
        i: tuple(
            replace(impl, reads=tuple(int(local[u]) for u in table.reads[g][li]), inplace_of=target(g, li))
            for li, impl in enumerate(table.impls[g])
        )
        for i, g in own
    }
