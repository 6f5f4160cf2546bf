"""Batch scaling (Checkmate section 6.4): memory affine in the batch size, costs independent of it.

Per node ``mem(B) = mem_slope * B + mem_const`` and ``workspace(B) = ws_slope * B + ws_const``;
fixed memory ``fixed(B) = fixed_slope * B + fixed_const``. All are whole bytes >= 0, so
``at_batch(B)`` is an ordinary :class:`~remat_models.core.graph.Graph` and memory never decreases in B
(which is what makes bisection over B valid). Costs do not depend on B, as Checkmate assumes (with
FLOP costs proportional to B, a cost cap relative to one pass is invariant anyway).

Sources: a graph file exported at batch ``b0`` (:meth:`BatchScaling.proportional`: every size is
divided by ``b0``, extra constant bytes such as parameters added to the fixed memory), or two
extractions of the same model at two batch sizes (:meth:`BatchScaling.from_pair`, checked against a
third with :meth:`BatchScaling.verify`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Schedule, simulate
from remat_models.errors import ConfigurationError, GraphError

__all__ = [
    "DEFAULT_CAP_KINDS",
    "BatchScaling",
    "cost_cap",
    "lower_bound_limit",
    "schedule_limit",
    "within_cap",
]

DEFAULT_CAP_KINDS: tuple[NodeKind, ...] = (NodeKind.FORWARD,)
CAP_TOLERANCE = 1e-9  # relative: sums of float costs in another order may differ in the last bits


@dataclass(frozen=True, eq=False)
class BatchScaling:
    """Per-node affine memory and workspace in the batch size, and affine fixed memory (whole bytes)."""

    mem_slope: np.ndarray
    mem_const: np.ndarray
    ws_slope: np.ndarray
    ws_const: np.ndarray
    fixed_slope: int = 0
    fixed_const: int = 0

    def __post_init__(self) -> None:
        arrays = [self.mem_slope, self.mem_const, self.ws_slope, self.ws_const]
        sizes = {np.asarray(a).size for a in arrays}
        if len(sizes) != 1:
            raise GraphError(f"batch scaling arrays differ in length: {sorted(sizes)}")
        for name in ("mem_slope", "mem_const", "ws_slope", "ws_const"):
            values = np.asarray(getattr(self, name))
            if (values < 0).any() or (values != np.round(values)).any():
                bad = int(np.flatnonzero((values < 0) | (values != np.round(values)))[0])
                raise GraphError(f"batch scaling {name}[{bad}] = {values[bad]!r} is not a whole number of bytes >= 0")
            array = values.astype(np.int64)
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        for name in ("fixed_slope", "fixed_const"):
            value = getattr(self, name)
            if int(value) != value or value < 0:
                raise GraphError(f"batch scaling {name} = {value!r} is not a whole number of bytes >= 0")
            object.__setattr__(self, name, int(value))

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def proportional(cls, graph: Graph, file_batch: int, fixed: int = 0) -> BatchScaling:
        """Sizes of ``graph`` (exported at batch ``file_batch``) proportional to the batch.

        The graph's own fixed memory and ``fixed`` extra bytes (e.g. parameters, which
        Checkmate-derived files do not carry) are constant in the batch.
        """
        if getattr(graph, "impls", None) is not None:
            raise ConfigurationError(f"graph {graph.name!r} has per-node implementations: use graph.default_view()")
        if int(file_batch) != file_batch or file_batch < 1:
            raise ConfigurationError(f"file batch must be a whole number >= 1, got {file_batch!r}")
        if int(fixed) != fixed or fixed < 0:
            raise ConfigurationError(f"fixed memory must be whole bytes >= 0, got {fixed!r}")
        b0 = int(file_batch)
        for field, values in (("mem", graph.mem), ("workspace", graph.workspace)):
            bad = np.flatnonzero(values % b0)
            if bad.size:
                v = int(bad[0])
                raise GraphError(
                    f"{field} of node {graph.names[v]!r} ({int(values[v])} B) is not divisible by the file batch {b0}"
                    f" ({bad.size} nodes in all): give the batch the graph was exported at"
                )
        zeros = np.zeros(graph.n, dtype=np.int64)
        return cls(graph.mem // b0, zeros, graph.workspace // b0, zeros, 0, graph.fixed_mem + int(fixed))

    @classmethod
    def from_pair(cls, first: Graph, batch_a: int, second: Graph, batch_b: int) -> BatchScaling:
        """Affine scaling through two extractions of one model at batches ``batch_a`` != ``batch_b``."""
        if batch_a == batch_b:
            raise ConfigurationError(f"two different batch sizes are needed, got {batch_a} twice")
        _check_same_structure(first, second)
        delta = batch_b - batch_a
        parts: list[np.ndarray | int] = []
        pairs = [
            ("mem", first.mem, second.mem),
            ("workspace", first.workspace, second.workspace),
            ("fixed memory", np.array([first.fixed_mem]), np.array([second.fixed_mem])),
        ]
        for field, at_a, at_b in pairs:
            diff = at_b.astype(np.int64) - at_a.astype(np.int64)
            slope, rest = np.divmod(diff, delta)
            const = at_a - slope * batch_a
            bad = np.flatnonzero((rest != 0) | (slope < 0) | (const < 0))
            if bad.size:
                v = int(bad[0])
                where = "" if field == "fixed memory" else f" of node {first.names[v]!r}"
                raise GraphError(
                    f"{field}{where} is not affine in the batch with whole bytes >= 0: {int(at_a[v])} B at batch"
                    f" {batch_a}, {int(at_b[v])} B at batch {batch_b}"
                )
            parts.extend([slope, const])
        mem_slope, mem_const, ws_slope, ws_const, fixed_slope, fixed_const = parts
        return cls(mem_slope, mem_const, ws_slope, ws_const, int(fixed_slope[0]), int(fixed_const[0]))  # type: ignore[index]

    def verify(self, graph: Graph, batch: int) -> None:
        """Raise GraphError unless ``graph`` (the same model extracted at ``batch``) matches the scaling."""
        _check_same_structure(self._shape_graph(graph), graph)
        checks = [
            ("mem", graph.mem, self.mem_slope * batch + self.mem_const),
            ("workspace", graph.workspace, self.ws_slope * batch + self.ws_const),
        ]
        for field, actual, predicted in checks:
            bad = np.flatnonzero(actual != predicted)
            if bad.size:
                v = int(bad[0])
                raise GraphError(
                    f"{field} of node {graph.names[v]!r} is not affine in the batch: {int(actual[v])} B measured at"
                    f" batch {batch}, {int(predicted[v])} B predicted ({bad.size} nodes differ)"
                )
        fixed = self.fixed_slope * batch + self.fixed_const
        if graph.fixed_mem != fixed:
            raise GraphError(
                f"fixed memory is not affine in the batch: {graph.fixed_mem} B measured at batch {batch},"
                f" {fixed} B predicted"
            )

    def _shape_graph(self, graph: Graph) -> Graph:
        if getattr(graph, "impls", None) is not None:
            raise ConfigurationError(
                f"graph {graph.name!r} has per-node implementations: batch scaling covers plain graphs"
                " (use graph.default_view())"
            )
        if graph.n != self.mem_slope.size:
            raise GraphError(f"graph {graph.name!r} has {graph.n} nodes, the batch scaling {self.mem_slope.size}")
        return graph

    # --- use ----------------------------------------------------------------------------------

    @property
    def proportional_memory(self) -> bool:
        """Whether every node's memory and workspace is proportional to the batch (fixed memory may be affine)."""
        return not (self.mem_const.any() or self.ws_const.any())

    def fixed(self, batch: int) -> int:
        """Fixed memory in bytes at ``batch``."""
        return self.fixed_slope * int(batch) + self.fixed_const

    def attach(self, graph: Graph) -> Graph:
        """A copy of ``graph`` that carries this scaling, so that ``graph.at_batch(B)`` works."""
        self._shape_graph(graph)
        scaled = graph.replaced()
        scaled.batch_scaling = self
        return scaled

    def apply(self, graph: Graph, batch: int, name: str | None = None) -> Graph:
        """``graph``'s structure and costs with its memory at ``batch`` samples (an ordinary Graph)."""
        self._shape_graph(graph)
        if int(batch) != batch or batch < 0:
            raise ConfigurationError(f"batch must be a whole number >= 0, got {batch!r}")
        b = int(batch)
        return Graph.from_arrays(
            graph.names,
            graph.cost,
            self.mem_slope * b + self.mem_const,
            graph.edges,
            workspace=self.ws_slope * b + self.ws_const,
            kind=graph.kind,
            recomputable=graph.recomputable,
            outputs=graph.outputs,
            fixed_mem=self.fixed(b),
            order=graph.order,
            name=f"{graph.name}@{b}" if name is None else name,
        )

    def per_sample(self, graph: Graph) -> Graph:
        """Proportional part only: memory ``mem_slope``, workspace ``ws_slope``, fixed ``fixed_slope``."""
        return BatchScaling(
            self.mem_slope, np.zeros_like(self.mem_slope), self.ws_slope, np.zeros_like(self.ws_slope), self.fixed_slope
        ).apply(graph, 1, name=f"{graph.name}@per-sample")


def _check_same_structure(first: Graph, second: Graph) -> None:
    """Raise GraphError unless both graphs have the same nodes (by name, in order), kinds and edges."""
    if first.names != second.names:
        extra = sorted(set(first.names) ^ set(second.names))[:3]
        detail = f"nodes only in one: {extra}" if extra else "the same nodes in another order"
        raise GraphError(f"graphs {first.name!r} and {second.name!r} differ ({detail}): not the same op sequence")
    if first.kind != second.kind:
        v = next(i for i, (a, b) in enumerate(zip(first.kind, second.kind, strict=True)) if a != b)
        kinds = f"{first.kind[v].value} in one graph, {second.kind[v].value} in the other"
        raise GraphError(f"node {first.names[v]!r} is {kinds}")
    a = set(map(tuple, first.edges.tolist()))
    b = set(map(tuple, second.edges.tolist()))
    if a != b:
        u, v = sorted(a ^ b)[0]
        edge = f"({first.names[u]!r}, {first.names[v]!r})"
        raise GraphError(f"edge {edge} is in one graph only: not the same op sequence")


def cost_cap(graph: Graph, factor: float = 2.0, kinds: Iterable[NodeKind | str] = DEFAULT_CAP_KINDS) -> float:
    """Checkmate's eq. (10) generalized: total cost plus ``factor - 1`` times the cost of the ``kinds`` nodes.

    The default (factor 2, forward nodes; the loss is not counted) allows one extra forward pass. A graph
    with no backward or loss node counts every node as forward. An unknown kind is a ConfigurationError.
    """
    if not factor >= 1.0:
        raise ConfigurationError(f"cap factor must be >= 1 (1 = no recomputation), got {factor!r}")
    wanted = _node_kinds(kinds)
    has_backward = any(k in (NodeKind.BACKWARD, NodeKind.LOSS) for k in graph.kind)
    mask = np.array([(k in wanted) if has_backward else True for k in graph.kind])
    return graph.total_cost + (factor - 1.0) * float(graph.cost[mask].sum())


def _node_kinds(kinds: Iterable[NodeKind | str]) -> set[NodeKind]:
    """The node kinds named in ``kinds`` (one name alone counts as one kind)."""
    wanted = set()
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        try:
            wanted.add(NodeKind(kind))
        except ValueError:
            valid = ", ".join(k.value for k in NodeKind)
            raise ConfigurationError(f"unknown node kind {kind!r} in the cost cap; valid kinds: {valid}") from None
    return wanted


def within_cap(total_cost: float, cap: float) -> bool:
    """Whether a simulated total cost meets the cap (up to float summation noise)."""
    return total_cost <= cap + CAP_TOLERANCE * max(abs(cap), 1.0)


def _largest_batch(const: np.ndarray, slope: np.ndarray, memory: int) -> int:
    """Largest B >= 0 with ``const + slope * B <= memory`` for every entry; -1 if even B = 0 fails.

    Raises ConfigurationError when nothing grows with B (the batch would be unbounded).
    """
    const, slope = np.asarray(const, dtype=np.int64), np.asarray(slope, dtype=np.int64)
    if (const > memory).any():
        return -1
    growing = slope > 0
    if not growing.any():
        raise ConfigurationError("no memory grows with the batch: the batch size is unbounded")
    return int(((memory - const[growing]) // slope[growing]).min())


def lower_bound_limit(graph: Graph, memory: int) -> int:
    """Largest B whose ``at_batch(B).lower_bound`` fits ``memory`` (no schedule fits a larger batch); -1 if none."""
    scaling = _scaling_of(graph)
    src, dst = graph.edges[:, 0], graph.edges[:, 1]
    slope = np.zeros(graph.n, dtype=np.int64)
    const = np.zeros(graph.n, dtype=np.int64)
    np.add.at(slope, dst, scaling.mem_slope[src])
    np.add.at(const, dst, scaling.mem_const[src])
    slope += scaling.mem_slope + scaling.ws_slope + scaling.fixed_slope
    const += scaling.mem_const + scaling.ws_const + scaling.fixed_const
    return _largest_batch(const, slope, memory)


def schedule_limit(graph: Graph, schedule: Schedule, memory: int) -> int:
    """Largest B at which ``schedule`` fits ``memory`` (exact: its memory at every step is affine in B); -1 if none."""
    scaling = _scaling_of(graph)
    at0 = simulate(scaling.apply(graph, 0), schedule).timeline
    at1 = simulate(scaling.apply(graph, 1), schedule).timeline
    computes = np.array([isinstance(step, Compute) for step in schedule.steps])
    return _largest_batch(at0[computes], at1[computes] - at0[computes], memory)


def _scaling_of(graph: Graph) -> BatchScaling:
    scaling = graph.batch_scaling
    if scaling is None:
        raise ConfigurationError(
            f"graph {graph.name!r} has no batch scaling: attach one (BatchScaling.proportional(graph, file_batch)"
            ".attach(graph), or --file-batch on the command line)"
        )
    return scaling
