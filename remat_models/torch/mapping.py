"""Map a traced step to a Graph: one node per storage-creating op; views and aliases are inlined.

A node's workspace is its outputs nothing reads and its kernel's scratch on the CPU
(:func:`~remat_models.torch.workspace.measured_workspace`).
"""

from __future__ import annotations

import itertools
import logging
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import torch
from torch import fx
from torch.multiprocessing.reductions import StorageWeakRef

from remat_models.core.graph import Graph, NodeKind
from remat_models.errors import GraphError
from remat_models.torch.guards import storage_key
from remat_models.torch.ops import is_random, is_write_back, tensors_of
from remat_models.torch.split import is_kept_copy
from remat_models.torch.trace import TracedStep
from remat_models.torch.workspace import measured_workspace

log = logging.getLogger(__name__)

CUDA_BLOCK = 512  # the CUDA caching allocator rounds every block up to a multiple of 512 bytes


class Role(StrEnum):
    """How the executor treats an FX node."""

    FIXED = "fixed"  # placeholder or constant: fixed memory, always resident
    COMPUTE = "compute"  # creates at least one new storage: a Graph node
    WRITE_BACK = "write_back"  # copy_ into a placeholder: a Graph node holding a private copy until the end
    INLINE = "inline"  # view, alias or getitem: re-derived from its inputs whenever a consumer runs


@dataclass(frozen=True)
class TorchGraph:
    """A Graph with the FX graph it came from and how each Graph node maps back to it."""

    graph: Graph
    traced: TracedStep
    fx_nodes: tuple[fx.Node, ...]  # Graph node index -> FX node
    roles: dict[fx.Node, Role]
    kept_outputs: dict[fx.Node, tuple[bool, ...]]  # per COMPUTE node: which (top-level) outputs stay resident
    loss_node: fx.Node
    grad_nodes: tuple[fx.Node | None, ...]  # per parameter
    scratch: tuple[int, ...]  # per Graph node: its kernel's scratch bytes, in its workspace (0 where not measured)

    @property
    def fixed_mem(self) -> int:
        """Bytes of params, buffers, inputs, targets and constants."""
        return self.graph.fixed_mem


def size_model(device: torch.device) -> Callable[[int], int]:
    """Bytes a storage of ``nbytes`` occupies: exact on CPU, 512-byte blocks on CUDA."""
    if device.type == "cuda":
        return lambda nbytes: 0 if nbytes == 0 else -(-nbytes // CUDA_BLOCK) * CUDA_BLOCK
    return lambda nbytes: nbytes


def input_nodes(node: fx.Node) -> list[fx.Node]:
    """The FX nodes ``node`` reads, in argument order, without repeats."""
    return list(dict.fromkeys(node.all_input_nodes))


def classify(traced: TracedStep) -> tuple[dict[fx.Node, Role], dict[StorageWeakRef, fx.Node | None]]:
    """Give every FX node a Role; map each storage to the node that created it (None: fixed memory)."""
    roles: dict[fx.Node, Role] = {}
    owner: dict[StorageWeakRef, fx.Node | None] = {}
    for node in traced.module.graph.nodes:
        if node.op == "output":
            continue
        value = node.meta.get("val")
        if node.op in ("placeholder", "get_attr"):
            if node.op == "get_attr":  # the constant itself, and its fake value that consumers' reads see
                value = (getattr(traced.module, node.target), value)
            roles[node] = Role.FIXED
            for tensor in tensors_of(value):
                owner.setdefault(storage_key(tensor), None)
        elif node.op != "call_function":
            raise GraphError(f"unsupported FX node {node.format_node()}")
        elif is_write_back(node):
            roles[node] = Role.WRITE_BACK
        elif node.target is operator.getitem:
            roles[node] = Role.INLINE
        else:
            tensors = tensors_of(value)
            fresh = [storage_key(t) for t in tensors if storage_key(t) not in owner]
            roles[node] = Role.INLINE if tensors and not fresh else Role.COMPUTE
            for key in fresh:
                owner[key] = node
    return roles, owner


def to_graph(
    traced: TracedStep, cost: dict[fx.Node, float] | Callable[[fx.Node], float], *, scratch: bool = True
) -> TorchGraph:
    """Build the Graph of ``traced`` with per-node ``cost`` (a mapping or a function of the FX node).

    ``scratch``: measure the kernels' scratch bytes on the CPU into the workspace (``TorchGraph.scratch``; the
    executor counts them at each Compute). Off, a CNN's measured peak is above the Graph's by up to a
    convolution's im2col buffer.
    """
    roles, owner = classify(traced)
    nodes = [node for node in traced.module.graph.nodes if roles.get(node) in (Role.COMPUTE, Role.WRITE_BACK)]
    index = {node: i for i, node in enumerate(nodes)}
    deps = _Reads(traced.module.graph.nodes, roles)
    output_node = next(node for node in traced.module.graph.nodes if node.op == "output")
    outputs = tuple(output_node.args[0])
    loss_node = outputs[0]
    grad_nodes = tuple(outputs[1 + traced.n_model_outputs :])
    if not isinstance(loss_node, fx.Node):
        raise GraphError("the traced loss is not a tensor computed by the graph")
    results = set().union(*(deps.provides(node) for node in (loss_node, *grad_nodes) if node is not None))
    used = set(results)
    for node in nodes:
        used |= deps.reads(node)
    device = _device(traced)
    nbytes = size_model(device)

    kernel = measured_workspace(nodes) if scratch else [0] * len(nodes)
    mem, workspace, kept, edges = [], list(kernel), {}, set()
    for v, node in enumerate(nodes):
        if roles[node] is Role.WRITE_BACK:
            source = node.meta["val"]
            mem.append(nbytes(source.numel() * source.element_size()))
        else:
            stay, drop = 0, 0
            seen: set[StorageWeakRef] = set()
            for tensor in tensors_of(node.meta.get("val")):
                key = storage_key(tensor)
                mine = owner.get(key) is node and key not in seen
                seen.add(key)
                size = nbytes(tensor.untyped_storage().nbytes()) if mine else 0
                stay, drop = (stay + size, drop) if key in used else (stay, drop + size)
            value = node.meta.get("val")
            items = value if isinstance(value, (tuple, list)) else (value,)
            flags = [isinstance(item, torch.Tensor) and storage_key(item) in used for item in items]
            kept[node] = tuple(flags)
            mem.append(stay)
            workspace[v] += drop  # outputs nothing reads: freed as the op ends
        for key in deps.reads(node):
            source = owner[key]
            if source is not None and source is not node:
                edges.add((index[source], v))
    random_nodes = [index[node] for node in nodes if is_random(node)]
    edges |= set(itertools.pairwise(random_nodes))  # keep the RNG stream in program order
    graph_outputs = {index[owner[key]] for key in results if owner[key] is not None}
    graph_outputs |= {index[node] for node in nodes if roles[node] is Role.WRITE_BACK}
    fixed = {storage_key(t): t for node in roles if roles[node] is Role.FIXED for t in _fixed_tensors(traced, node)}
    cost_of = cost.__getitem__ if isinstance(cost, dict) else cost
    graph = Graph.from_arrays(
        names=[node.name for node in nodes],
        cost=[float(cost_of(node)) for node in nodes],
        mem=mem,
        edges=sorted(edges),
        workspace=workspace,
        kind=_kinds(traced, nodes, outputs, roles),
        recomputable=[not (is_random(node) or roles[node] is Role.WRITE_BACK or is_kept_copy(node)) for node in nodes],
        outputs=sorted(graph_outputs),
        fixed_mem=sum(nbytes(t.untyped_storage().nbytes()) for t in fixed.values()),
        name=traced.name,
    )
    log.info("graph %s: %d nodes, %d edges, fixed %d B", graph.name, graph.n, graph.m, graph.fixed_mem)
    return TorchGraph(graph, traced, tuple(nodes), roles, kept, loss_node, grad_nodes, tuple(kernel))


class _Reads:
    """Which storages an FX node provides and needs resident, looking through inlined nodes."""

    def __init__(self, all_nodes: Iterable[fx.Node], roles: dict[fx.Node, Role]) -> None:
        self.roles = roles
        self.memo: dict[fx.Node, frozenset[StorageWeakRef]] = {}
        for node in all_nodes:  # fill the memo in program order so recursion stays shallow
            if node in roles:
                self.provides(node)

    def provides(self, node: fx.Node) -> frozenset[StorageWeakRef]:
        """Storages that must be resident to have ``node``'s value: its own, plus its sources' if inlined."""
        if node not in self.memo:
            found = {storage_key(t) for t in tensors_of(node.meta.get("val"))}
            if self.roles[node] is Role.INLINE:
                sources = input_nodes(node)
                if node.target is operator.getitem:  # one element of a tuple: only that element's storage
                    sources = [s for s in sources if self.roles[s] is Role.INLINE]
                for source in sources:
                    found |= self.provides(source)
            self.memo[node] = frozenset(found)
        return self.memo[node]

    def reads(self, node: fx.Node) -> frozenset[StorageWeakRef]:
        """Storages that must be resident to run ``node``."""
        return frozenset().union(*(self.provides(source) for source in input_nodes(node)))


def _fixed_tensors(traced: TracedStep, node: fx.Node) -> list[torch.Tensor]:
    """Tensors of a placeholder (its fake value) or a constant (the real attribute)."""
    if node.op == "get_attr":
        return tensors_of(getattr(traced.module, node.target))
    return tensors_of(node.meta.get("val"))


def _device(traced: TracedStep) -> torch.device:
    """Device of the traced step (that of its first placeholder)."""
    for node in traced.module.graph.nodes:
        tensors = tensors_of(node.meta.get("val"))
        if tensors:
            return tensors[0].device
    return torch.device("cpu")


def _kinds(
    traced: TracedStep, nodes: list[fx.Node], outputs: tuple[Any, ...], roles: dict[fx.Node, Role]
) -> list[NodeKind]:
    """FORWARD up to the last model output in program order, LOSS up to the loss, BACKWARD after."""
    position = {node: k for k, node in enumerate(traced.module.graph.nodes)}
    model_outputs = [node for node in outputs[1 : 1 + traced.n_model_outputs] if isinstance(node, fx.Node)]
    forward_end = max((position[node] for node in model_outputs), default=-1)
    loss_end = position[outputs[0]]
    kinds = []
    for node in nodes:
        if roles[node] is Role.WRITE_BACK:
            kinds.append(NodeKind.OTHER)
        elif position[node] <= forward_end:
            kinds.append(NodeKind.FORWARD)
        elif position[node] <= loss_end:
            kinds.append(NodeKind.LOSS)
        else:
            kinds.append(NodeKind.BACKWARD)
    return kinds
