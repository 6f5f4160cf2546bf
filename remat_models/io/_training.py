"""Build a training graph from forward ops: forward pass, loss, then the mirrored backward pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from remat_models.core.graph import Graph, NodeKind


@dataclass(frozen=True)
class Op:
    """A forward op: what it reads, its output bytes and cost, and what its backward op needs."""

    name: str
    inputs: tuple[str, ...]
    mem: int
    cost: float
    saves_inputs: bool = True
    saves_output: bool = True


def grad_name(name: str) -> str:
    """Name the backward node of forward node ``name``."""
    return f"grad_{name}"


def training_graph(
    ops: Sequence[Op],
    loss: Op,
    *,
    name: str,
    backward_name: Callable[[str], str] = grad_name,
    backward_cost: float = 2.0,
    grad_mem: Literal["inputs", "output"] = "inputs",
) -> Graph:
    """Build forward ops (in topological order), the loss, then one backward node per op in reverse order.

    The backward node of op v reads the gradient from the backward node of every consumer of v (the
    loss itself for a consumer that is the loss; several consumers: the gradients join there), plus
    v's inputs and/or output as the op saves them. It costs ``backward_cost`` times v's cost; its
    output (the gradient w.r.t. v's inputs) is the total size of v's inputs (``grad_mem="inputs"``,
    v's own size for an op without inputs) or v's size (``grad_mem="output"``).
    """
    forward = [*ops, loss]
    index = {op.name: i for i, op in enumerate(forward)}
    n_forward = len(forward)
    consumers: list[list[int]] = [[] for _ in forward]
    edges: list[tuple[int, int]] = []
    for v, op in enumerate(forward):
        for source in dict.fromkeys(op.inputs):
            consumers[index[source]].append(v)
            edges.append((index[source], v))
    loss_index = n_forward - 1
    backward_index = {v: n_forward + k for k, v in enumerate(reversed(range(len(ops))))}
    names = [op.name for op in forward]
    cost = [op.cost for op in forward]
    mem = [op.mem for op in forward]
    for v in reversed(range(len(ops))):
        op = ops[v]
        b = backward_index[v]
        reads = [loss_index if w == loss_index else backward_index[w] for w in consumers[v]]
        reads += [index[source] for source in op.inputs] if op.saves_inputs else []
        reads += [v] if op.saves_output else []
        edges.extend((u, b) for u in dict.fromkeys(reads))
        names.append(backward_name(op.name))
        cost.append(backward_cost * op.cost)
        input_bytes = sum(forward[index[source]].mem for source in dict.fromkeys(op.inputs))
        mem.append(input_bytes if grad_mem == "inputs" and op.inputs else op.mem)
    kind = [NodeKind.FORWARD] * len(ops) + [NodeKind.LOSS] + [NodeKind.BACKWARD] * len(ops)
    return Graph.from_arrays(names, cost, mem, edges, kind=kind, order=range(len(names)), name=name)
