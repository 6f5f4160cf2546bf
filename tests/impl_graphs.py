"""The spec's exact small cases with operator implementations (specs/monet_maxbatch_offload.md, section D, A rows)."""

from __future__ import annotations

from remat_models.core.graph import Graph, Node, NodeKind
from remat_models.core.impls import Impl, with_impls

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


def random_impl_training(seed: int, k: int = 3, masks: bool = True) -> Graph:
    """A small training chain f0..f{k-1}, loss, b{k-1}..b0 with random sizes, costs and implementations.

    Forward nodes may get an in-place impl (over their input) or a sign-mask impl (aux value m_i);
    backward nodes read the gradient plus their forward node's output (impl 0), its input
    (input-activated) or its mask.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    mem = [int(rng.integers(1, 4)) for _ in range(k)]
    inplace = [i >= 1 and rng.random() < 0.5 for i in range(k)]
    for i in range(k):
        if inplace[i]:
            mem[i] = mem[i - 1]
    masked = [masks and rng.random() < 0.5 for _ in range(k)]
    nodes = [Node(f"f{i}", float(rng.integers(1, 4)), mem[i], kind=F) for i in range(k)]
    nodes += [Node(f"m{i}", 0.0, 1, kind=F) for i in range(k) if masked[i]]
    nodes.append(Node("loss", 1.0, 1, kind=L))
    nodes += [Node(f"b{i}", float(rng.integers(1, 3)), int(rng.integers(1, 4)), kind=B) for i in reversed(range(k))]
    edges = [(f"f{i - 1}", f"f{i}") for i in range(1, k)] + [(f"f{k - 1}", "loss"), ("loss", f"b{k - 1}")]
    edges += [(f"b{i + 1}", f"b{i}") for i in range(k - 1)] + [(f"f{i}", f"b{i}") for i in range(k)]
    graph = Graph(nodes, edges, outputs=["b0"], name=f"random_impls_{seed}")
    impls: dict[str, list[Impl]] = {}
    for i in range(k):
        cost = float(graph.cost[graph.index[f"f{i}"]])
        options = [Impl("plain", cost)]
        if inplace[i]:
            options.append(Impl("inplace", cost + 0.5, inplace_of=f"f{i - 1}", tag="inplace"))
        if masked[i]:
            options.append(Impl("mask", cost + 0.25, aux=(f"m{i}",), tag="intermediate"))
        impls[f"f{i}"] = options
        grad = "loss" if i == k - 1 else f"b{i + 1}"
        bcost = float(graph.cost[graph.index[f"b{i}"]])
        backward = [Impl("output", bcost, reads=(grad, f"f{i}"))]
        if i >= 1:
            backward.append(Impl("input", bcost, reads=(grad, f"f{i - 1}"), tag="input_act"))
        if masked[i]:
            backward.append(Impl("mask", bcost, reads=(grad, f"m{i}"), tag="intermediate"))
        impls[f"b{i}"] = backward
    return with_impls(graph, impls)
