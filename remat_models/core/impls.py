"""Operator implementations (MONeT, ICLR 2021): per-node alternatives with their own cost, workspace and reads.

A node may carry several :class:`Impl` records; impl 0 is the default ("PyTorch") one and is what
``Node.cost``/``Node.workspace`` describe. An implementation may

- read only a subset of the node's predecessors (``reads``; output- vs input-activated backward),
- run in place over one of its inputs (``inplace_of``): the input's buffer becomes the node's
  output, so the step allocates nothing and the input is gone afterwards,
- produce *aux* values in the same step (``aux``; e.g. a ReLU's 1-bit sign mask). An aux value is a
  node of its own (no implementations, cost 0, kind forward) owned by exactly one producer; the
  graph has the edge producer -> aux, and readers of the aux value have an edge from it,
- cost differently when the node was computed before (``recompute_cost``; BatchNorm statistics reuse).

The graph's edges into a node are exactly the union of its implementations' reads (plus producer ->
aux for an aux node). This module owns the data model, its validation and the derived tables the
simulator and the formulations use; ``Graph`` only stores the result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from remat_models.errors import GraphError

if TYPE_CHECKING:
    from remat_models.core.graph import Graph

NodeRef = int | str


@dataclass(frozen=True)
class Impl:
    """One implementation of a node; node references are indices (names are accepted when building a graph)."""

    name: str
    cost: float
    workspace: int = 0  # true scratch bytes (>= 0); in-place is not a negative workspace
    reads: tuple[NodeRef, ...] | None = None  # subset of preds(v); None = all preds
    inplace_of: NodeRef | None = None  # a node in reads whose buffer becomes v's (same mem required)
    aux: tuple[NodeRef, ...] = ()  # aux nodes produced in the same step
    recompute_cost: float | None = None  # cost when v was computed before; None = cost
    tag: str = "default"  # "inplace" | "output_act" | "intermediate" | "conv_algo" | ... (ablations)

    def step_cost(self, recompute: bool) -> float:
        """The cost of a step running this implementation (a recomputation when ``recompute``)."""
        return self.cost if not recompute or self.recompute_cost is None else self.recompute_cost


ImplsArg = Mapping[NodeRef, Sequence[Impl]] | Sequence[Sequence[Impl] | None] | None


@dataclass(frozen=True)
class ImplTable:
    """Validated implementations of a graph and the flat per-(node, impl) lists the simulator reads."""

    impls: tuple[tuple[Impl, ...], ...]  # () for aux nodes
    aux_of: np.ndarray  # producer of each aux node, -1 elsewhere
    reads: tuple[tuple[tuple[int, ...], ...], ...]  # [v][l]: nodes read (all preds when the impl says None)
    inplace: tuple[tuple[int, ...], ...]  # [v][l]: in-place target or -1

    @property
    def n_aux(self) -> int:
        """Number of aux nodes."""
        return int((self.aux_of >= 0).sum())

    def digest(self) -> bytes:
        """Bytes that identify the implementations (for the graph's content hash)."""
        h = hashlib.sha256()
        for v, impls in enumerate(self.impls):
            for impl in impls:
                h.update(repr((v, impl.name, impl.cost, impl.workspace, self.reads[v], impl.inplace_of)).encode())
                h.update(repr((impl.aux, impl.recompute_cost, impl.tag)).encode())
        return h.digest()


def build_impl_table(graph: Graph, impls: ImplsArg) -> ImplTable | None:
    """Resolve names to indices and validate ``impls`` against ``graph`` (None when there are none)."""
    if impls is None:
        return None
    n, names = graph.n, graph.names
    given: list[Sequence[Impl] | None] = [None] * n
    items = impls.items() if isinstance(impls, Mapping) else enumerate(impls)
    for key, value in items:
        v = _ref(graph, key, "implementations")
        given[v] = value
    resolved: list[tuple[Impl, ...] | None] = [
        None if value is None else tuple(_resolve(graph, v, impl) for impl in value) for v, value in enumerate(given)
    ]
    aux_of = np.full(n, -1, dtype=np.int64)
    for v, value in enumerate(resolved):
        for impl in value or ():
            for a in impl.aux:
                if aux_of[a] >= 0 and aux_of[a] != v:
                    raise GraphError(
                        f"aux node {names[a]!r} is listed by {names[int(aux_of[a])]!r} and {names[v]!r}: "
                        "an aux value has exactly one producer"
                    )
                aux_of[a] = v
    table: list[tuple[Impl, ...]] = []
    for v, value in enumerate(resolved):
        if aux_of[v] >= 0:
            if value:
                raise GraphError(f"aux node {names[v]!r} has implementations; aux nodes have none")
            table.append(())
        elif value is None:
            table.append((Impl("default", float(graph.cost[v]), int(graph.workspace[v])),))
        else:
            table.append(value)
    result = ImplTable(
        impls=tuple(table),
        aux_of=aux_of,
        reads=tuple(tuple(_reads(graph, v, impl) for impl in table[v]) for v in range(n)),
        inplace=tuple(
            tuple(-1 if impl.inplace_of is None else int(impl.inplace_of) for impl in table[v]) for v in range(n)
        ),
    )
    _validate(graph, result)
    return result


def _ref(graph: Graph, ref: Any, what: str) -> int:
    if isinstance(ref, str):
        if ref not in graph.index:
            raise GraphError(f"{what} refer to unknown node {ref!r}")
        return graph.index[ref]
    if isinstance(ref, (int, np.integer)) and 0 <= ref < graph.n:
        return int(ref)
    raise GraphError(f"{what} refer to unknown node {ref!r}")


def _resolve(graph: Graph, v: int, impl: Impl) -> Impl:
    if not isinstance(impl, Impl):
        raise GraphError(f"node {graph.names[v]!r}: implementations must be Impl records, got {impl!r}")
    where = f"implementation {impl.name!r} of node {graph.names[v]!r}"
    return replace(
        impl,
        reads=None if impl.reads is None else tuple(_ref(graph, u, f"{where}: reads") for u in impl.reads),
        inplace_of=None if impl.inplace_of is None else _ref(graph, impl.inplace_of, f"{where}: inplace_of"),
        aux=tuple(_ref(graph, a, f"{where}: aux") for a in impl.aux),
    )


def _reads(graph: Graph, v: int, impl: Impl) -> tuple[int, ...]:
    if impl.reads is None:
        return tuple(int(u) for u in graph.preds(v))
    return tuple(sorted(set(int(u) for u in impl.reads)))


def _validate(graph: Graph, table: ImplTable) -> None:
    names, mem = graph.names, graph.mem
    outputs = set(graph.outputs.tolist())
    for v, impls in enumerate(table.impls):
        node = f"node {names[v]!r}"
        preds = set(graph.preds(v).tolist())
        producer = int(table.aux_of[v])
        if producer >= 0:
            if preds != {producer}:
                raise GraphError(f"aux {node} must have exactly one edge, from its producer {names[producer]!r}")
            if v in outputs:
                raise GraphError(f"aux {node} is a graph output; aux values never are")
            if graph.kind[v].value != "forward" or graph.cost[v] != 0 or graph.workspace[v] != 0:
                raise GraphError(f"aux {node} must have kind 'forward', cost 0 and workspace 0")
            continue
        if not impls:
            raise GraphError(f"{node} has no implementation; every node needs at least one")
        seen: set[str] = set()
        read_union: set[int] = set()
        for li, impl in enumerate(impls):
            where = f"implementation {impl.name!r} of {node}"
            if impl.name in seen or not impl.name:
                raise GraphError(f"{node} has a repeated or empty implementation name {impl.name!r}")
            seen.add(impl.name)
            if not (np.isfinite(impl.cost) and impl.cost >= 0):
                raise GraphError(f"{where} has invalid cost {impl.cost!r} (must be finite and >= 0)")
            rc = impl.recompute_cost
            if rc is not None and not (np.isfinite(rc) and rc >= 0):
                raise GraphError(f"{where} has invalid recompute_cost {rc!r}")
            if not isinstance(impl.workspace, (int, np.integer)) or impl.workspace < 0:
                raise GraphError(f"{where} has invalid workspace {impl.workspace!r} (whole bytes >= 0)")
            reads = set(table.reads[v][li])
            if not reads <= preds:
                extra = names[min(reads - preds)]
                raise GraphError(f"{where} reads {extra!r}, which is not an input of the node (no edge)")
            read_union |= reads
            for a in impl.aux:
                if a in reads:
                    raise GraphError(f"{where} both reads and produces aux {names[a]!r}")
            u = impl.inplace_of
            if u is not None:
                if u not in reads:
                    raise GraphError(f"{where} is in place over {names[u]!r}, which it does not read")
                if mem[u] != mem[v]:
                    raise GraphError(
                        f"{where} is in place over {names[u]!r} of {mem[u]} bytes, but the node has {mem[v]}"
                    )
                if u in outputs or table.aux_of[u] >= 0:
                    raise GraphError(f"{where} is in place over {names[u]!r}, a graph output or aux value")
            if li == 0 and (u is not None or impl.aux):
                raise GraphError(
                    f"{where}: implementation 0 is the default one and can be neither in place nor produce aux values"
                )
        if read_union != preds:
            stray = names[min(preds - read_union)]
            raise GraphError(f"{node} has an edge from {stray!r} that none of its implementations reads")
        if impls[0].cost != graph.cost[v] or impls[0].workspace != graph.workspace[v]:
            raise GraphError(f"{node}: its cost/workspace must equal those of its implementation 0 {impls[0].name!r}")


def with_impls(graph: Graph, impls: Mapping[NodeRef, Sequence[Impl]], aux: Sequence[str] = ()) -> Graph:
    """A copy of ``graph`` with ``impls`` attached: edges added for every read and producer -> aux edge.

    Node costs/workspaces become those of impl 0; ``aux`` names nodes to mark as aux values
    (cost and workspace set to 0, kind forward) besides those the implementations list.
    """
    cost = graph.cost.copy()
    workspace = graph.workspace.copy()
    kind = list(graph.kind)
    edges = set(map(tuple, graph.edges.tolist()))
    resolved: dict[int, tuple[Impl, ...]] = {}
    for key, value in impls.items():
        v = _ref(graph, key, "implementations")
        resolved[v] = tuple(_resolve(graph, v, impl) for impl in value)
        cost[v], workspace[v] = resolved[v][0].cost, resolved[v][0].workspace
        for impl in resolved[v]:
            edges.update((int(u), v) for u in impl.reads or ())
            for a in impl.aux:
                edges.add((v, int(a)))
                cost[a], workspace[a], kind[a] = 0.0, 0, "forward"
    for name in aux:
        a = _ref(graph, name, "aux")
        cost[a], workspace[a], kind[a] = 0.0, 0, "forward"
    return graph.replaced(cost=cost, edges=sorted(edges), workspace=workspace, kind=kind, impls=resolved)


def default_nodes(graph: Graph) -> np.ndarray:
    """The nodes the default view keeps (every node but the aux values), in index order."""
    table = graph.impl_table
    return np.arange(graph.n) if table is None else np.flatnonzero(table.aux_of < 0)


def default_view(graph: Graph) -> Graph:
    """A plain graph: impl 0 everywhere, aux nodes dropped, edges equal to impl-0 reads (``graph`` if it has no impls).

    View node i is ``default_nodes(graph)[i]``; :func:`lift_schedule` maps a view schedule back.
    """
    table = graph.impl_table
    if table is None:
        return graph
    keep, new_index = default_renumbering(graph)
    edges = [(int(new_index[u]), int(new_index[v])) for v in keep.tolist() for u in table.reads[v][0]]
    return kept_graph(graph, keep, new_index, np.array(edges, dtype=np.int64).reshape(-1, 2))


def default_renumbering(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(the default view's nodes, each node's index among them or -1)."""
    keep = default_nodes(graph)
    new_index = np.full(graph.n, -1, dtype=np.int64)
    new_index[keep] = np.arange(keep.size)
    return keep, new_index


def kept_graph(graph: Graph, keep: np.ndarray, new_index: np.ndarray, edges: np.ndarray) -> Graph:
    """``graph`` on the nodes ``keep`` (renumbered by ``new_index``) with ``edges`` in the new numbering."""
    order = new_index[graph.order]
    return type(graph).from_arrays(
        [graph.names[v] for v in keep.tolist()],
        graph.cost[keep],
        graph.mem[keep],
        edges,
        workspace=graph.workspace[keep],
        kind=[graph.kind[v] for v in keep.tolist()],
        recomputable=graph.recomputable[keep],
        outputs=new_index[graph.outputs],
        fixed_mem=graph.fixed_mem,
        order=order[order >= 0],
        name=graph.name,
    )


def impl_lower_bound(graph: Graph) -> int:
    """No schedule fits below this: the node whose cheapest step is largest, or all graph outputs at the end."""
    table = graph.impl_table
    mem = graph.mem.tolist()
    best = 0
    for v, impls in enumerate(table.impls if table is not None else ()):
        if not impls:
            continue
        step = min(
            sum(mem[u] for u in table.reads[v][li])
            + (0 if table.inplace[v][li] >= 0 else mem[v])
            + sum(mem[a] for a in impl.aux)
            + impl.workspace
            for li, impl in enumerate(impls)
        )
        best = max(best, step)
    outputs = int(graph.mem[graph.outputs].sum())  # every graph output is resident at the end
    return int(graph.fixed_mem + max(best, outputs))


@dataclass(frozen=True)
class StepImpl:
    """What one ``Compute(v, impl)`` step reads, consumes in place and produces besides v."""

    reads: tuple[int, ...]
    inplace: int  # the in-place target, or -1
    aux: tuple[int, ...]
    impl: Impl | None  # None for a graph without implementations


def step_impl(graph: Graph, v: int, impl: int, step: int) -> StepImpl:
    """The reads, in-place target and aux values of computing v with implementation ``impl``.

    Raises InvalidScheduleError (at ``step``) for an aux node, an unknown implementation, or an
    implementation other than 0 on a graph without implementations.
    """
    from remat_models.errors import InvalidScheduleError

    table = graph.impl_table
    names = graph.names
    if table is None:
        if impl != 0:
            raise InvalidScheduleError(
                f"computes {names[v]!r} with implementation {impl!r}, but the graph has no implementations", step=step
            )
        return StepImpl(tuple(graph.preds(v).tolist()), -1, (), None)
    producer = int(table.aux_of[v])
    if producer >= 0:
        raise InvalidScheduleError(
            f"computes aux value {names[v]!r} directly; it is produced with {names[producer]!r}", step=step
        )
    impls = table.impls[v]
    if not (isinstance(impl, (int, np.integer)) and 0 <= impl < len(impls)):
        raise InvalidScheduleError(
            f"computes {names[v]!r} with implementation {impl!r}; it has {len(impls)} (0..{len(impls) - 1})", step=step
        )
    chosen = impls[impl]
    return StepImpl(table.reads[v][impl], table.inplace[v][impl], tuple(int(a) for a in chosen.aux), chosen)


def simulate_compute(
    graph: Graph, v: int, impl: int, k: int, resident: list[bool], computed: list[int], in_use: int
) -> tuple[tuple[int, ...], int, int, float]:
    """One ``Compute(v, impl)`` of the simulator on a graph with implementations.

    Checks the step, updates ``resident``/``computed`` in place and returns (reads, memory during
    the step, memory in use after it, cost). An in-place step allocates no output: the target's
    buffer becomes v's. Aux values are allocated with v.
    """
    from remat_models.errors import InvalidScheduleError

    names = graph.names
    s = step_impl(graph, v, impl, k)
    if resident[v]:
        raise InvalidScheduleError(f"computes {names[v]!r} while its output is already resident", step=k)
    if computed[v] and not graph.recomputable[v]:
        raise InvalidScheduleError(f"recomputes non-recomputable node {names[v]!r}", step=k)
    for u in s.reads:
        if not resident[u]:
            raise InvalidScheduleError(f"computes {names[v]!r} but its input {names[u]!r} is not resident", step=k)
    for a in s.aux:
        if resident[a]:
            raise InvalidScheduleError(f"computes {names[v]!r} while its aux value {names[a]!r} is resident", step=k)
    mem = graph.mem
    allocated = (0 if s.inplace >= 0 else int(mem[v])) + sum(int(mem[a]) for a in s.aux)
    workspace = int(graph.workspace[v]) if s.impl is None else int(s.impl.workspace)
    cost = float(graph.cost[v]) if s.impl is None else s.impl.step_cost(computed[v] > 0)
    if s.inplace >= 0:
        resident[s.inplace] = False
    resident[v] = True
    for a in s.aux:
        resident[a] = True
    computed[v] += 1
    return s.reads, in_use + allocated + workspace, in_use + allocated, cost
