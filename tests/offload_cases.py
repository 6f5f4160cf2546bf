"""The spec's C cases (specs/monet_maxbatch_offload.md, section D): small graphs with hand-checked optima."""

from __future__ import annotations

from remat_models.core.graph import Graph, Node
from remat_models.core.transfer import TransferModel


def c1_graph() -> Graph:
    """C1: a(4, cost 10) -> b(4) -> c(4); d(1) reads {c, a}; d is the output."""
    nodes = [Node("a", 10, 4), Node("b", 1, 4), Node("c", 1, 4), Node("d", 1, 1)]
    return Graph(nodes, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")], name="c1")


def c1_transfer(**kwargs: object) -> TransferModel:
    """C1's transfer model: t_in = t_out = mem / 2 (bandwidth 2 bytes per cost unit)."""
    return TransferModel(out_bw=2, in_bw=2, **kwargs)


C2_TRANSFER = TransferModel(out_bw=0.5, in_bw=0.5)  # t = 8 for a 4-byte value
C3_TRANSFER = TransferModel(out_bw=2, in_bw=2, host_capacity=3)

# (transfer model, budget, optimum with paging); the recompute-only optimum at B=9 is 23, at B=12 it is 13
C_CASES = [
    ("C1-B9", c1_transfer(), 9, 17.0),
    ("C1-B12", c1_transfer(), 12, 13.0),
    ("C2-B9", C2_TRANSFER, 9, 23.0),
    ("C3-B9", C3_TRANSFER, 9, 23.0),
]
