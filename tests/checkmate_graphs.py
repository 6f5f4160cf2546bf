"""Small graphs shared by the Checkmate tests."""

from __future__ import annotations

import numpy as np

from remat_models.core.graph import Graph, Node
from remat_models.io import linear_chain, random_layered


def diamond() -> Graph:
    """a -> (b, c) -> d -> e and a -> e, with b's output large."""
    nodes = [Node("a", 2, 2), Node("b", 3, 4), Node("c", 1, 1), Node("d", 2, 2), Node("e", 1, 1)]
    return Graph(nodes, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e"), ("a", "e")], name="diamond")


def tiny_unet() -> Graph:
    """A 10-node U-Net-like training graph: encoder, bottleneck, decoder with a skip, backward."""
    names = ["x", "e1", "e2", "m", "d2", "d1", "loss", "gd1", "gd2", "ge1"]
    mem = [2, 4, 2, 1, 2, 4, 1, 4, 2, 4]
    cost = [1, 3, 2, 2, 2, 3, 1, 3, 2, 3]
    edges = [
        ("x", "e1"),
        ("e1", "e2"),
        ("e2", "m"),
        ("m", "d2"),
        ("d2", "d1"),
        ("e1", "d1"),
        ("d1", "loss"),
        ("loss", "gd1"),
        ("d1", "gd1"),
        ("gd1", "gd2"),
        ("d2", "gd2"),
        ("gd2", "ge1"),
        ("e1", "ge1"),
        ("gd1", "ge1"),
    ]
    nodes = [Node(n, c, m) for n, c, m in zip(names, cost, mem, strict=True)]
    return Graph(nodes, edges, name="tiny_unet")


def random_dag(n: int, seed: int, *, workspace: bool = False, fixed: bool = False) -> Graph:
    """A random DAG over 0..n-1 (edges go forward), random costs and sizes, optional workspace/fixed memory."""
    rng = np.random.default_rng(seed)
    edges = [(i, j) for j in range(1, n) for i in rng.choice(j, size=min(j, int(rng.integers(1, 3))), replace=False)]
    return Graph.from_arrays(
        [f"v{i}" for i in range(n)],
        rng.integers(0, 6, n).astype(float),
        rng.integers(1, 5, n) * 2,
        np.array(edges, dtype=np.int64),
        workspace=rng.integers(0, 3, n) * 2 if workspace else None,
        fixed_mem=int(rng.integers(0, 3)) * 2 if fixed else 0,
        name=f"random_dag_n{n}_s{seed}",
    )


def tiny_graphs() -> list[Graph]:
    """Graphs of at most 7 nodes for the exhaustive comparisons."""
    return [linear_chain(2), linear_chain(3), diamond(), random_layered(7, seed=1), random_dag(6, 3, workspace=True)]


def budgets(graph: Graph, count: int = 4) -> list[int]:
    """``count`` budgets spread from the lower bound to the input-order peak."""
    from remat_models.core.schedule import input_order_peak

    low, high = graph.lower_bound, input_order_peak(graph)
    return sorted({int(b) for b in np.linspace(low, high, count)})
