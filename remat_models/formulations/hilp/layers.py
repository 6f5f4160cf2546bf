"""Layers of a training graph: forward nodes paired with their backward nodes (HiREmate spec section 0).

``pair_layers`` gives every node an *owner*: the forward node whose layer it belongs to (a forward
node owns itself), or -1 for a *plain* node (loss, unpaired backward nodes that read no forward
node, other nodes). Pairing by names covers the project's graphs:

- ``X`` <-> ``X_backward`` (Checkmate-derived ``cm*``/``vgg16`` files),
- ``X`` <-> ``grad_X`` (``io._training.grad_name``),
- ``fK`` <-> ``bK`` (``linear_chain``).

A backward node still unpaired joins the layer of the forward node it reads with the largest
position (the structural fallback).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.errors import ConfigurationError, GraphError

Pairing = Literal["auto", "names", "structure"]
PAIRINGS: tuple[str, ...] = ("auto", "names", "structure")


def forward_mask(graph: Graph) -> np.ndarray:
    """Which nodes are FORWARD nodes (H-Partition's forward graph)."""
    return graph.of_kind(NodeKind.FORWARD)


def fixed_tails(graph: Graph) -> np.ndarray:
    """Non-recomputable forward nodes that no recomputable forward node needs (directly or through another one).

    Traced batch norms' running-statistics copies (``clone_default``, ``copy``: read by the backward and the final
    ``copy_``) are such nodes. A recomputation of their cluster's forward part never needs them, so it skips them
    (:func:`~remat_models.formulations.hilp.level.once_steps`) instead of making the whole layer non-recomputable.
    """
    forward = forward_mask(graph)
    tail = np.zeros(graph.n, dtype=bool)
    for v in sorted(np.flatnonzero(forward & ~graph.recomputable).tolist(), key=lambda v: -int(graph.position[v])):
        tail[v] = all(tail[s] or not forward[s] for s in graph.succs(v).tolist())
    return tail


def _name_partner(name: str) -> list[str]:
    """Forward names a backward node called ``name`` may pair with, by the known patterns."""
    partners = []
    if name.endswith("_backward"):
        partners.append(name[: -len("_backward")])
    if name.startswith("grad_"):
        partners.append(name[len("grad_") :])
    if len(name) > 1 and name[0] == "b" and name[1:].isdigit():
        partners.append("f" + name[1:])
    return partners


def _name_pair_ok(graph: Graph, v: int, u: int) -> bool:
    """Whether backward node ``v`` may pair with forward node ``u`` by name.

    ``X_backward`` must read ``X``: Checkmate-derived files always do, while traced graphs reuse aten
    names (``tanh_backward`` is the backward of the *last* ``tanh_11``, not of ``tanh``).
    """
    return not graph.names[v].endswith("_backward") or u in graph.preds(v).tolist()


def pair_layers(graph: Graph, pairing: Pairing = "auto") -> np.ndarray:
    """The owner of every node: itself for forward nodes, its paired forward node, or -1 (plain).

    ``"names"`` raises GraphError when a backward node matches no forward node by name;
    ``"structure"`` ignores names; ``"auto"`` uses names first and the structural fallback after.
    """
    if pairing not in PAIRINGS:
        raise ConfigurationError(f"unknown pairing {pairing!r}; choose one of {', '.join(PAIRINGS)}")
    forward = forward_mask(graph)
    owner = np.where(forward, np.arange(graph.n), -1)
    for v in range(graph.n):
        if graph.kind[v] != NodeKind.BACKWARD:
            continue
        if pairing != "structure":
            for partner in _name_partner(graph.names[v]):
                u = graph.index.get(partner)
                if u is not None and forward[u] and _name_pair_ok(graph, v, u):
                    owner[v] = u
                    break
            if owner[v] >= 0:
                continue
            if pairing == "names":
                raise GraphError(f"backward node {graph.names[v]!r} pairs with no forward node by name")
        read = [int(u) for u in graph.preds(v) if forward[u]]
        if read:
            owner[v] = max(read, key=lambda u: int(graph.position[u]))
    return owner


def layer_members(owner: np.ndarray, forward_nodes: np.ndarray | list[int]) -> np.ndarray:
    """The backward nodes owned by a set of forward nodes (their layer's B part), in index order."""
    fwd = np.zeros(owner.size, dtype=bool)
    fwd[np.asarray(forward_nodes, dtype=np.int64)] = True
    is_backward = (owner >= 0) & (owner != np.arange(owner.size))
    return np.flatnonzero(is_backward & fwd[np.maximum(owner, 0)])
