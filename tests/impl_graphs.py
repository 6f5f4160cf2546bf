"""The spec's exact small cases with operator implementations (specs/monet_maxbatch_offload.md, section D, A rows)."""

from __future__ import annotations

from remat_models.graph import Graph, Node, NodeKind
from remat_models.impls import Impl, with_impls

F, L, B = NodeKind.FORWARD, NodeKind.LOSS, NodeKind.BACKWARD


def a1_inplace() -> Graph:
    """x(4) -> r(4); r plain or in place over x. B=3 infeasible, 4..8: cost 2."""
    graph = Graph([Node("x", 1, 4), Node("r", 1, 4)], [("x", "r")], outputs=["r"], name="a1")
    return with_impls(graph, {"r": [Impl("plain", 1.0), Impl("inplace", 1.0, inplace_of="x", tag="inplace")]})


A1_OPTIMA = {3: None, 4: 2.0, 5: 2.0, 6: 2.0, 7: 2.0, 8: 2.0}


def a2_mask() -> Graph:
    """ReLU with a 1-bit sign mask: 8 infeasible, 9..11: 5.5 (mask), 12: 5.0."""
    nodes = [
        Node("x", 1, 4, kind=F),
        Node("r", 1, 4, kind=F),
        Node("m", 0, 1, kind=F),
        Node("L", 1, 1, kind=L),
        Node("g_r", 1, 4, kind=B),
        Node("g_x", 1, 4, kind=B),
    ]
    edges = [("x", "r"), ("r", "L"), ("L", "g_r")]
    graph = Graph(nodes, edges, outputs=["g_x"], name="a2")
    return with_impls(
        graph,
        {
            "r": [Impl("plain", 1.0), Impl("mask", 1.5, aux=("m",), tag="intermediate")],
            "g_x": [
                Impl("input", 1.0, reads=("g_r", "x")),
                Impl("output", 1.0, reads=("g_r", "r"), tag="output_act"),
                Impl("mask", 1.0, reads=("g_r", "m"), tag="intermediate"),
            ],
        },
    )


A2_OPTIMA = {8: None, 9: 5.5, 10: 5.5, 11: 5.5, 12: 5.0}


def a3_inplace_output() -> Graph:
    """In-place ReLU plus output-activated backward: 5 infeasible, 6, 7: 4.2, 8: 4.0."""
    nodes = [Node("x", 1, 4, kind=F), Node("r", 1, 4, kind=F), Node("L", 1, 1, kind=L), Node("g", 1, 1, kind=B)]
    graph = Graph(nodes, [("x", "r"), ("r", "L")], outputs=["g"], name="a3")
    return with_impls(
        graph,
        {
            "r": [Impl("plain", 1.0), Impl("inplace", 1.2, inplace_of="x", tag="inplace")],
            "g": [Impl("input", 1.0, reads=("L", "x")), Impl("output", 1.0, reads=("L", "r"), tag="output_act")],
        },
    )


A3_OPTIMA = {5: None, 6: 4.2, 7: 4.2, 8: 4.0}


def a4_conv() -> Graph:
    """Three conv algorithms (cost, workspace) = (3, 0), (1, 4), (2, 2): 3 infeasible, 4, 5: 4, 6, 7: 3, 8: 2."""
    graph = Graph([Node("x", 1, 2), Node("c", 3, 2)], [("x", "c")], outputs=["c"], name="a4")
    impls = [
        Impl("a0", 3.0),
        Impl("a1", 1.0, workspace=4, tag="conv_algo"),
        Impl("a2", 2.0, workspace=2, tag="conv_algo"),
    ]
    return with_impls(graph, {"c": impls})


A4_OPTIMA = {3: None, 4: 4.0, 5: 4.0, 6: 3.0, 7: 3.0, 8: 2.0}
