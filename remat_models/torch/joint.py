"""The joint forward+backward graph AOTAutograd hands its partitioner, as a Graph of save-set plans.

One Graph node per op that creates new storage (views, aliases and ``getitem`` are inlined as in
:mod:`remat_models.torch.mapping`); FORWARD nodes are the ancestors of the forward outputs (what the
partitioner's forward graph must run), every other op is BACKWARD. Costs follow a roofline: an op costs
the larger of its FLOPs (``torch.utils.flop_counter``'s formulas: matmuls, convolutions, attention) and
``flops_per_byte`` times the bytes it reads and writes, so a pointwise op's recompute cost is its memory
traffic. Random ops are not recomputable (a plan never redraws a dropout mask).
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

import numpy as np
from torch import fx
from torch._functorch import config as functorch_config
from torch._functorch.compile_utils import fx_graph_cse
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.flop_counter import flop_registry

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Schedule, eager_frees
from remat_models.errors import GraphError
from remat_models.torch.guards import storage_key
from remat_models.torch.mapping import Role, _Reads
from remat_models.torch.ops import is_random, tensors_of

FLOPS_PER_BYTE = 8.0  # machine balance of the roofline cost (a CPU core: ~50 GFLOP/s over ~6 GB/s)


@dataclass(frozen=True)
class JointGraph:
    """A Graph of a joint module, the FX node of each Graph node and the forward FX nodes."""

    graph: Graph
    fx_nodes: tuple[fx.Node, ...]  # Graph index -> FX node
    index: dict[str, int]  # FX node name -> Graph index
    forward: frozenset[fx.Node]  # call_function nodes the forward outputs need (views and getitems included)
    owners: dict[fx.Node, frozenset[int]]  # per forward FX node: the Graph nodes whose storages it shows

    def emitted_schedule(self, *modules: fx.GraphModule) -> Schedule:
        """The schedule of partitioned modules run one after another (freed after last use), on this Graph."""
        nodes = (n for m in modules for n in m.graph.nodes if n.op == "call_function")
        return eager_frees(self.graph, [self.index[n.name] for n in nodes if n.name in self.index])

    def saved_by(self, forward_module: fx.GraphModule, num_fwd_outputs: int) -> np.ndarray:
        """The save set a partition chose: Graph nodes owning the storages its forward module saves."""
        outputs = next(n for n in forward_module.graph.nodes if n.op == "output").args[0][num_fwd_outputs:]
        names = {o.name for o in outputs if isinstance(o, fx.Node)}
        mine = {v for node, owners in self.owners.items() if node.name in names for v in owners}
        return np.array(sorted(mine | {self.index[name] for name in names if name in self.index}), dtype=np.int64)


def _bytes(value: object) -> int:
    return sum(t.untyped_storage().nbytes() if t.numel() else 0 for t in tensors_of(value))


def roofline_cost(node: fx.Node, flops_per_byte: float = FLOPS_PER_BYTE) -> float:
    """max(FLOPs, ``flops_per_byte`` x bytes read and written) of one op."""
    args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda source: source.meta.get("val"))
    formula = flop_registry.get(getattr(node.target, "overloadpacket", None))
    flops = float(formula(*args, out_val=node.meta.get("val"), **kwargs)) if formula is not None else 0.0
    return max(flops, flops_per_byte * (_bytes((args, kwargs)) + _bytes(node.meta.get("val"))))


def _roles(module: fx.GraphModule) -> tuple[dict[fx.Node, Role], dict[StorageWeakRef, fx.Node | None]]:
    """FIXED placeholders, COMPUTE ops that create storage, INLINE the rest; the owner of each storage."""
    roles: dict[fx.Node, Role] = {}
    owner: dict[StorageWeakRef, fx.Node | None] = {}
    for node in module.graph.nodes:
        tensors = tensors_of(node.meta.get("val"))
        if node.op == "placeholder":
            roles[node] = Role.FIXED
            owner.update((storage_key(t), None) for t in tensors)
        elif node.op == "call_function":
            fresh = [storage_key(t) for t in tensors if storage_key(t) not in owner]
            creates = fresh and node.target is not operator.getitem
            roles[node] = Role.COMPUTE if creates else Role.INLINE
            owner.update((key, node) for key in fresh if creates)
        elif node.op != "output":
            raise GraphError(f"unsupported node in the joint graph: {node.format_node()}")
    return roles, owner


def as_partitioned(module: fx.GraphModule) -> None:
    """Clean a joint module in place as the partitioner does first (dead code out, common subexpressions merged)."""
    module.graph.eliminate_dead_code()
    if functorch_config.cse:
        module.graph = fx_graph_cse(module.graph)
        module.recompile()


def _ancestors(roots: list[fx.Node]) -> set[fx.Node]:
    seen: set[fx.Node] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return seen


def _order_edges(
    module: fx.GraphModule, nodes: list[fx.Node], reads: _Reads, forward_owners: set[int]
) -> set[tuple[int, int]]:
    """Edges that keep a schedule splittable into a forward and a backward, and eager's RNG order.

    Each op reading a tangent comes after every forward output's owner; random ops are chained in program order.
    """
    tangents = {
        storage_key(t)
        for n in module.graph.nodes
        if n.op == "placeholder" and n.name.startswith("tangents")
        for t in tensors_of(n.meta.get("val"))
    }
    edges = {(u, v) for v, n in enumerate(nodes) if reads.reads(n) & tangents for u in forward_owners if u != v}
    random = [v for v, n in enumerate(nodes) if is_random(n)]
    return edges | set(itertools.pairwise(random))


def joint_graph(
    module: fx.GraphModule,
    num_fwd_outputs: int,
    *,
    flops_per_byte: float = FLOPS_PER_BYTE,
    name: str = "joint",
    ordered: bool = False,
) -> JointGraph:
    """Build the Graph of an AOTAutograd joint module (its first ``num_fwd_outputs`` outputs are the forward's).

    ``ordered``: with :func:`_order_edges`, for schedules emitted as the partition (a forward, then a backward);
    the forward's outputs are then not recomputable (the forward returns them: they live to the end).
    """
    roles, owner = _roles(module)
    reads = _Reads(module.graph.nodes, roles)
    outputs = [a for a in next(n for n in module.graph.nodes if n.op == "output").args[0] if isinstance(a, fx.Node)]
    forward = {n for n in _ancestors(outputs[:num_fwd_outputs]) if n.op == "call_function"}
    nodes = [n for n in module.graph.nodes if roles.get(n) is Role.COMPUTE]
    index = {n: i for i, n in enumerate(nodes)}
    readers = (n for n in roles if n.target is not operator.getitem)  # a getitem reads only what its users read
    used = set().union(*(reads.provides(n) for n in outputs), *(reads.reads(n) for n in readers))
    mem, workspace, edges = [], [], set()
    for v, node in enumerate(nodes):
        mine = {storage_key(t): t for t in tensors_of(node.meta.get("val")) if owner.get(storage_key(t)) is node}
        mem.append(sum(t.untyped_storage().nbytes() for key, t in mine.items() if key in used))
        workspace.append(sum(t.untyped_storage().nbytes() for key, t in mine.items() if key not in used))
        edges |= {(index[owner[key]], v) for key in reads.reads(node) if owner[key] not in (None, node)}
    forward_owners: set[int] = set()  # the forward returns their values: computed once, resident to the end
    if ordered:
        provided = {k for o in outputs[:num_fwd_outputs] for k in reads.provides(o)}
        forward_owners = {index[owner[k]] for k in provided if owner[k] is not None}
        edges |= _order_edges(module, nodes, reads, forward_owners)
    graph = Graph.from_arrays(
        names=[n.name for n in nodes],
        cost=[roofline_cost(n, flops_per_byte) for n in nodes],
        mem=mem,
        edges=sorted(edges),
        workspace=workspace,
        kind=[NodeKind.FORWARD if n in forward else NodeKind.BACKWARD for n in nodes],
        recomputable=[not is_random(n) and v not in forward_owners for v, n in enumerate(nodes)],
        outputs=sorted({index[owner[k]] for o in outputs for k in reads.provides(o) if owner[k] is not None}),
        name=name,
    )
    owners = {n: frozenset(index[owner[k]] for k in reads.provides(n) if owner[k] is not None) for n in forward}
    return JointGraph(graph, tuple(nodes), {n.name: i for n, i in index.items()}, frozenset(forward), owners)
