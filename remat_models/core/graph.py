"""The computation graph: immutable, validated, backed by numpy arrays and CSR adjacency."""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from remat_models.core.impls import (
    Impl,
    ImplsArg,
    ImplTable,
    _ref,
    build_impl_table,
    default_view,
    impl_lower_bound,
)
from remat_models.core.limits import MAX_BYTES
from remat_models.errors import GraphError

if TYPE_CHECKING:
    from remat_models.core.batch import BatchScaling


class NodeKind(StrEnum):
    """Role of a node in a training graph."""

    FORWARD = "forward"
    BACKWARD = "backward"
    LOSS = "loss"
    OTHER = "other"


@dataclass(frozen=True)
class Node:
    """One operation: its duration, output bytes, scratch bytes while it runs, role."""

    name: str
    cost: float = 1.0
    mem: int = 1
    workspace: int = 0
    kind: NodeKind = NodeKind.FORWARD
    recomputable: bool = True


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def _csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Group ``values`` by ``keys`` (stable) into (indptr, indices)."""
    perm = np.argsort(keys, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=indptr[1:])
    return _readonly(indptr), _readonly(values[perm].astype(np.int64))


class Graph:
    """A DAG of nodes with data-dependency edges (u, v): v reads u's output.

    Nodes are indexed 0..n-1 in the order given. ``order`` is the input topological order
    (a permutation of the indices); ``position[v]`` is v's place in it.
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        edges: Iterable[tuple[str, str]],
        *,
        outputs: Iterable[str] | None = None,
        fixed_mem: int = 0,
        order: Sequence[str] | None = None,
        name: str = "",
        impls: ImplsArg = None,
    ) -> None:
        names = [node.name for node in nodes]
        index = _name_index(names)

        def lookup(node_name: str, what: str) -> int:
            try:
                return index[node_name]
            except KeyError:
                raise GraphError(f"{what} refers to unknown node {node_name!r}") from None

        edge_list = [(lookup(u, f"edge ({u!r}, {v!r})"), lookup(v, f"edge ({u!r}, {v!r})")) for u, v in edges]
        self._init_arrays(
            names=names,
            cost=np.array([node.cost for node in nodes], dtype=np.float64),
            mem=np.array([node.mem for node in nodes]),
            workspace=np.array([node.workspace for node in nodes]),
            kind=[NodeKind(node.kind) for node in nodes],
            recomputable=np.array([node.recomputable for node in nodes], dtype=bool),
            edges=np.array(edge_list, dtype=np.int64).reshape(-1, 2),
            outputs=None if outputs is None else [lookup(o, "output") for o in outputs],
            fixed_mem=fixed_mem,
            order=None if order is None else [lookup(o, "order") for o in order],
            name=name,
            impls=impls,
        )

    @classmethod
    def from_arrays(
        cls,
        names: Sequence[str],
        cost: Sequence[float] | np.ndarray,
        mem: Sequence[int] | np.ndarray,
        edges: np.ndarray | Sequence[tuple[int, int]],
        *,
        workspace: Sequence[int] | np.ndarray | None = None,
        kind: Sequence[NodeKind | str] | None = None,
        recomputable: Sequence[bool] | np.ndarray | None = None,
        outputs: Sequence[int] | np.ndarray | None = None,
        fixed_mem: int = 0,
        order: Sequence[int] | np.ndarray | None = None,
        name: str = "",
        impls: ImplsArg = None,
    ) -> Graph:
        """Build from index-based arrays (the fast path for generators and readers)."""
        n = len(names)
        graph = cls.__new__(cls)
        edge_array = _index_array(edges, "edge").reshape(-1, 2)
        _check_length(kind, n, "kind")
        _check_length(recomputable, n, "recomputable")
        bad = (edge_array < 0) | (edge_array >= n)
        if bad.any():
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            raise GraphError(f"edge {tuple(edge_array[row].tolist())} refers to an unknown node index")
        graph._init_arrays(
            names=list(names),
            cost=np.asarray(cost, dtype=np.float64),
            mem=np.asarray(mem),
            workspace=np.zeros(n, dtype=np.int64) if workspace is None else np.asarray(workspace),
            kind=[NodeKind.FORWARD] * n if kind is None else [NodeKind(k) for k in kind],
            recomputable=np.ones(n, dtype=bool) if recomputable is None else np.asarray(recomputable, dtype=bool),
            edges=edge_array,
            outputs=None if outputs is None else list(_index_array(outputs, "output")),
            fixed_mem=fixed_mem,
            order=None if order is None else list(_index_array(order, "order")),
            name=name,
            impls=impls,
        )
        return graph

    def _init_arrays(
        self,
        *,
        names: list[str],
        cost: np.ndarray,
        mem: np.ndarray,
        workspace: np.ndarray,
        kind: list[NodeKind],
        recomputable: np.ndarray,
        edges: np.ndarray,
        outputs: list[int] | None,
        fixed_mem: int,
        order: list[int] | None,
        name: str,
        impls: ImplsArg = None,
    ) -> None:
        n = len(names)
        if n == 0:
            raise GraphError("graph is empty: it has no nodes")
        self.name = name
        self.names: tuple[str, ...] = tuple(names)
        self.index: dict[str, int] = _name_index(names)
        self.cost = _readonly(_check_cost(cost, self.names))
        self.mem = _readonly(_check_bytes(mem, self.names, "mem"))
        self.workspace = _readonly(_check_bytes(workspace, self.names, "workspace"))
        self.kind: tuple[NodeKind, ...] = tuple(kind)
        self.recomputable = _readonly(recomputable.astype(bool))
        if not isinstance(fixed_mem, (int, np.integer)) or fixed_mem < 0:
            raise GraphError(f"fixed memory must be a non-negative integer of bytes, got {fixed_mem!r}")
        self.fixed_mem = int(fixed_mem)
        _check_total(self)
        self.edges = _readonly(edges)
        self._check_edges()
        self.pred_ptr, self.pred_idx = _csr(edges[:, 1], edges[:, 0], n)
        self.succ_ptr, self.succ_idx = _csr(edges[:, 0], edges[:, 1], n)
        self.order = _readonly(self._resolve_order(order))
        position = np.empty(n, dtype=np.int64)
        position[self.order] = np.arange(n)
        self.position = _readonly(position)
        self.outputs = _readonly(self._resolve_outputs(outputs))
        self.impl_table: ImplTable | None = build_impl_table(self, impls)  # see remat_models/core/impls.py

    # --- validation -------------------------------------------------------------------------

    def _check_edges(self) -> None:
        u, v = self.edges[:, 0], self.edges[:, 1]
        loops = np.flatnonzero(u == v)
        if loops.size:
            raise GraphError(f"self loop on node {self.names[u[loops[0]]]!r}")
        keys = u * self.n + v
        unique, counts = np.unique(keys, return_counts=True)
        if (counts > 1).any():
            key = int(unique[np.argmax(counts > 1)])
            raise GraphError(f"duplicate edge ({self.names[key // self.n]!r}, {self.names[key % self.n]!r})")

    def _resolve_order(self, order: list[int] | None) -> np.ndarray:
        if order is None:
            given = np.arange(self.n, dtype=np.int64)
            if self._is_topological(given):
                return given
            return self._topological_sort()
        order_array = np.asarray(order, dtype=np.int64)
        outside = order_array[(order_array < 0) | (order_array >= self.n)]
        if outside.size:
            raise GraphError(f"order names node index {outside[0]}, which is not in 0..{self.n - 1}")
        if order_array.size != self.n or np.unique(order_array).size != self.n:
            seen = np.bincount(order_array[(order_array >= 0) & (order_array < self.n)], minlength=self.n)
            missing = [self.names[i] for i in np.flatnonzero(seen == 0)[:3]]
            repeated = [self.names[i] for i in np.flatnonzero(seen > 1)[:3]]
            raise GraphError(
                f"order is not a permutation of the {self.n} nodes "
                f"(length {order_array.size}; missing {missing}; repeated {repeated})"
            )
        if not self._is_topological(order_array):
            self._topological_sort()  # raises with a cycle if there is one
            position = np.empty(self.n, dtype=np.int64)
            position[order_array] = np.arange(self.n)
            bad = np.flatnonzero(position[self.edges[:, 0]] > position[self.edges[:, 1]])[0]
            u, v = self.edges[bad]
            raise GraphError(f"order is not topological: edge ({self.names[u]!r}, {self.names[v]!r}) goes backwards")
        return order_array

    def _is_topological(self, order: np.ndarray) -> bool:
        position = np.empty(self.n, dtype=np.int64)
        position[order] = np.arange(self.n)
        return bool((position[self.edges[:, 0]] < position[self.edges[:, 1]]).all())

    def _topological_sort(self) -> np.ndarray:
        """Kahn's algorithm, smallest index first (deterministic); raises on a cycle."""
        indegree = np.diff(self.pred_ptr).tolist()
        ready = [v for v in range(self.n) if indegree[v] == 0]
        heapq.heapify(ready)
        result: list[int] = []
        succ_ptr, succ_idx = self.succ_ptr.tolist(), self.succ_idx.tolist()
        while ready:
            u = heapq.heappop(ready)
            result.append(u)
            for v in succ_idx[succ_ptr[u] : succ_ptr[u + 1]]:
                indegree[v] -= 1
                if indegree[v] == 0:
                    heapq.heappush(ready, v)
        if len(result) < self.n:
            raise GraphError(f"graph has a cycle: {' -> '.join(self._find_cycle(indegree))}")
        return np.array(result, dtype=np.int64)

    def _find_cycle(self, indegree: list[int]) -> list[str]:
        """Walk predecessors inside the unsorted remainder until a node repeats."""
        node = next(v for v in range(self.n) if indegree[v] > 0)
        walk: dict[int, int] = {}
        while node not in walk:
            walk[node] = len(walk)
            node = next(int(u) for u in self.preds(node) if indegree[u] > 0)
        cycle = list(walk)[walk[node] :]
        cycle.reverse()  # we walked against the edges
        return [self.names[v] for v in [*cycle, cycle[0]]]

    def _resolve_outputs(self, outputs: list[int] | None) -> np.ndarray:
        if outputs is None:
            return np.flatnonzero(np.diff(self.succ_ptr) == 0).astype(np.int64)
        output_array = np.asarray(outputs, dtype=np.int64)
        if ((output_array < 0) | (output_array >= self.n)).any():
            raise GraphError(f"outputs refer to unknown node indices {output_array.tolist()}")
        if np.unique(output_array).size != output_array.size:
            raise GraphError("outputs list a node twice")
        return np.sort(output_array)

    # --- access -----------------------------------------------------------------------------

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.names)

    @property
    def m(self) -> int:
        """Number of edges."""
        return int(self.edges.shape[0])

    def preds(self, v: int) -> np.ndarray:
        """Return the indices of the nodes whose outputs v reads."""
        return self.pred_idx[self.pred_ptr[v] : self.pred_ptr[v + 1]]

    def succs(self, v: int) -> np.ndarray:
        """Return the indices of the nodes that read v's output."""
        return self.succ_idx[self.succ_ptr[v] : self.succ_ptr[v + 1]]

    def node(self, v: int) -> Node:
        """Return the node at index v as a record."""
        return Node(
            name=self.names[v],
            cost=float(self.cost[v]),
            mem=int(self.mem[v]),
            workspace=int(self.workspace[v]),
            kind=self.kind[v],
            recomputable=bool(self.recomputable[v]),
        )

    def nodes(self) -> Iterator[Node]:
        """All nodes in index order."""
        return (self.node(v) for v in range(self.n))

    def edge_names(self) -> list[tuple[str, str]]:
        """Edges as (source name, target name) pairs."""
        return [(self.names[u], self.names[v]) for u, v in self.edges.tolist()]

    @property
    def impls(self) -> tuple[tuple[Impl, ...], ...] | None:
        """Per-node implementations (impl 0 is the default; aux nodes have none), or None."""
        return None if self.impl_table is None else self.impl_table.impls

    @property
    def aux_of(self) -> np.ndarray:
        """The producer of each aux node, -1 for ordinary nodes."""
        return np.full(self.n, -1, dtype=np.int64) if self.impl_table is None else self.impl_table.aux_of

    @property
    def n_aux(self) -> int:
        """Number of aux nodes (values produced alongside another node by some implementation)."""
        return 0 if self.impl_table is None else self.impl_table.n_aux

    def default_view(self) -> Graph:
        """Return the graph with impl 0 everywhere and aux nodes dropped (itself when it has no implementations)."""
        return default_view(self)

    def replaced(self, **changes: Any) -> Graph:
        """A validated copy (same class) with some of :meth:`from_arrays`'s arguments changed; no batch scaling."""
        arguments = {
            "names": self.names,
            "cost": self.cost,
            "mem": self.mem,
            "edges": self.edges,
            "workspace": self.workspace,
            "kind": self.kind,
            "recomputable": self.recomputable,
            "outputs": self.outputs,
            "fixed_mem": self.fixed_mem,
            "order": self.order,
            "name": self.name,
            "impls": self.impls,
        }
        unknown = sorted(set(changes) - set(arguments))
        if unknown:
            raise GraphError(f"unknown graph field(s) {unknown}; known: {sorted(arguments)}")
        return type(self).from_arrays(**{**arguments, **changes})

    def with_recomputable(self, recomputable: Sequence[bool] | np.ndarray | Mapping[str | int, bool]) -> Graph:
        """A validated copy with other recomputable flags (``self`` when none changes).

        ``recomputable`` is a bool mask over every node, or {node name or index: flag} for the nodes to change.
        Everything else (implementations, batch scaling) is kept; the copy has its own content hash and caches.
        """
        mask = self.recomputable.copy()
        if isinstance(recomputable, Mapping):
            for key, flag in recomputable.items():
                mask[_ref(self, key, "recomputable flags")] = _flag(flag, f"recomputable[{key!r}]")
        else:
            _check_length(recomputable, self.n, "recomputable")
            values = np.asarray(recomputable)
            if values.dtype != np.bool_:
                raise GraphError(f"recomputable must hold True/False for each node, got {values.dtype} values")
            mask[:] = values
        if np.array_equal(mask, self.recomputable):
            return self
        copy = self.replaced(recomputable=mask)
        copy.batch_scaling = self.batch_scaling
        return copy

    @property
    def total_cost(self) -> float:
        """Cost of computing every node exactly once."""
        return float(self.cost.sum())

    @cached_property
    def lower_bound(self) -> int:
        """No schedule fits below this: the largest step, or the end state, whichever needs more.

        Largest step: fixed + inputs + output + workspace of one node. End state: every graph output
        is resident after the last computation, so during it (of some node v) fixed + all outputs +
        v's workspace, its output if it is not a graph output and its other non-output inputs are in use.
        """
        if self.impl_table is not None:
            return impl_lower_bound(self)  # the cheapest implementation of each node
        input_bytes = np.zeros(self.n, dtype=np.int64)
        np.add.at(input_bytes, self.edges[:, 1], self.mem[self.edges[:, 0]])
        step = int(self.fixed_mem + (input_bytes + self.mem + self.workspace).max())
        is_output = np.zeros(self.n, dtype=bool)
        is_output[self.outputs] = True
        transient = np.where(is_output, 0, self.mem)  # bytes beyond the outputs, per value
        extra = np.zeros(self.n, dtype=np.int64)
        np.add.at(extra, self.edges[:, 1], transient[self.edges[:, 0]])
        end = int(self.fixed_mem + self.mem[self.outputs].sum() + (extra + transient + self.workspace).min())
        return max(step, end)

    @cached_property
    def kind_code(self) -> np.ndarray:
        """Each node's kind as its index in ``NodeKind`` (for vectorized tests: :meth:`of_kind`)."""
        codes = {kind: code for code, kind in enumerate(NodeKind)}
        return np.array([codes[kind] for kind in self.kind], dtype=np.int8)

    def of_kind(self, *kinds: NodeKind) -> np.ndarray:
        """Mask of the nodes whose kind is one of ``kinds``."""
        codes = list(NodeKind)
        return np.isin(self.kind_code, [codes.index(kind) for kind in kinds])

    @cached_property
    def content_hash(self) -> str:
        """SHA-256 of everything that defines the graph (names, numbers, edges, outputs, order)."""
        digest = hashlib.sha256()
        digest.update("\x1f".join(self.names).encode())
        digest.update("\x1f".join(kind.value for kind in self.kind).encode())
        canonical_edges = np.unique(self.edges[:, 0] * self.n + self.edges[:, 1])  # independent of edge listing order
        for array in (
            self.cost,
            self.mem,
            self.workspace,
            self.recomputable,
            canonical_edges,
            self.outputs,
            self.order,
        ):
            digest.update(np.ascontiguousarray(array).tobytes())
        digest.update(str(self.fixed_mem).encode())
        if self.impl_table is not None:
            digest.update(self.impl_table.digest())
        return digest.hexdigest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return self.content_hash == other.content_hash and self.name == other.name

    def __hash__(self) -> int:
        return hash(self.content_hash)

    def __repr__(self) -> str:
        return f"Graph(name={self.name!r}, n={self.n}, m={self.m})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with the names of its read-only arrays: unpickled arrays are writable, another numba signature."""
        state = dict(self.__dict__)
        state["_readonly_arrays"] = [k for k, v in state.items() if isinstance(v, np.ndarray) and not v.flags.writeable]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (``auto``'s workers receive graphs so): the arrays read-only again, as built."""
        state = dict(state)
        for key in state.pop("_readonly_arrays", ()):
            state[key].setflags(write=False)
        self.__dict__.update(state)

    batch_scaling: BatchScaling | None = None  # set by BatchScaling.attach (remat_models/core/batch.py)

    def at_batch(self, batch: int) -> Graph:
        """Return the graph with its memory at ``batch`` samples (needs ``batch_scaling``: core/batch.py)."""
        if self.batch_scaling is None:
            raise GraphError(f"graph {self.name!r} has no batch scaling (BatchScaling.attach)")
        return self.batch_scaling.apply(self, batch)


def _name_index(names: Sequence[str]) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, node_name in enumerate(names):
        if not isinstance(node_name, str) or not node_name:
            raise GraphError(f"node {i} has no valid name: {node_name!r}")
        if node_name in index:
            raise GraphError(f"duplicate node name {node_name!r}")
        index[node_name] = i
    try:
        "\x1f".join(names).encode()  # what content_hash hashes; one pass, then the culprit only on failure
    except UnicodeEncodeError:
        i = next(i for i, node_name in enumerate(names) if not _encodable(node_name))
        raise GraphError(f"node {i} has name {names[i]!r}, which is not valid Unicode (a lone surrogate)") from None
    return index


def _encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (lone surrogates do not)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _check_cost(cost: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    cost = np.asarray(cost, dtype=np.float64).reshape(-1)
    if cost.size != len(names):
        raise GraphError(f"cost has {cost.size} entries for {len(names)} nodes")
    bad = np.flatnonzero(~np.isfinite(cost) | (cost < 0))
    if bad.size:
        raise GraphError(f"node {names[bad[0]]!r} has invalid cost {cost[bad[0]].item()!r} (must be finite and >= 0)")
    return cost.copy()


def _check_bytes(values: np.ndarray, names: tuple[str, ...], field: str) -> np.ndarray:
    values = np.asarray(values).reshape(-1)
    if values.size != len(names):
        raise GraphError(f"{field} has {values.size} entries for {len(names)} nodes")
    if values.dtype == object or values.dtype.kind not in "biuf":
        raise GraphError(f"{field} must hold numbers of bytes, got {values.dtype} values")
    as_float = values.astype(np.float64)
    too_big = (as_float > MAX_BYTES) if values.dtype.kind == "f" else (values > MAX_BYTES)
    bad = np.flatnonzero(~np.isfinite(as_float) | (as_float < 0) | (as_float != np.round(as_float)) | too_big)
    if bad.size:
        raise GraphError(
            f"node {names[bad[0]]!r} has invalid {field} {values[bad[0]].item()!r} "
            f"(must be a whole number of bytes in [0, {MAX_BYTES}])"
        )
    return values.astype(np.int64)


def _check_total(graph: Graph) -> None:
    """Every peak is at most fixed + all outputs + the largest workspace: keep that below MAX_BYTES (exact sums).

    The total cost (each node once) must be finite too: every cost is, but their sum may overflow.
    """
    total = graph.fixed_mem + sum(graph.mem.tolist()) + max(graph.workspace.tolist())
    if total > MAX_BYTES:
        raise GraphError(
            f"graph {graph.name!r}: fixed memory + all outputs + the largest workspace is {total:,} B, "
            f"above the {MAX_BYTES:,} B (2**62 - 1) this library takes"
        )
    with np.errstate(over="ignore"):
        total_cost = float(graph.cost.sum())
    if not np.isfinite(total_cost):
        raise GraphError(
            f"graph {graph.name!r}: the total cost of its nodes is {total_cost}: the sum of the costs overflows "
            "a 64-bit float (scale the costs down)"
        )


def _index_array(values: object, what: str) -> np.ndarray:
    """Node indices as int64; fractional, non-numeric or out-of-int64 entries raise GraphError naming one."""
    try:
        array = np.asarray(values)
    except ValueError as exc:  # ragged nesting
        raise GraphError(f"{what} indices are not a regular array: {exc}") from None
    if array.size == 0:
        return array.astype(np.int64)
    if array.dtype.kind in "iu":
        if array.dtype.kind == "u" and (array > np.iinfo(np.int64).max).any():
            raise GraphError(f"{what} index {array.max()} is out of range")
        return array.astype(np.int64)
    if array.dtype.kind == "f":
        bad = np.flatnonzero((array != np.round(array)) | ~np.isfinite(array))
        if bad.size:
            raise GraphError(f"{what} index {array.reshape(-1)[bad[0]].item()!r} is not a whole number")
        return array.astype(np.int64)
    raise GraphError(f"{what} indices must be whole numbers, got {array.reshape(-1)[0]!r}")


def _flag(value: object, what: str) -> bool:
    """``value`` as a bool; GraphError naming ``what`` unless it is a bool (or numpy bool)."""
    if not isinstance(value, (bool, np.bool_)):
        raise GraphError(f"{what} must be True or False, got {value!r}")
    return bool(value)


def _check_length(values: object, n: int, what: str) -> None:
    if values is not None and len(values) != n:  # type: ignore[arg-type]
        raise GraphError(f"{what} has {len(values)} entries for {n} nodes")  # type: ignore[arg-type]
