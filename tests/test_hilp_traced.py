"""Traced training graphs (aten names, gradient-only nodes): the layers of every level form a DAG (zoo regression)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph, Node, NodeKind
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.formulations.hilp.backward import backward_sets
from remat_models.formulations.hilp.layers import layer_members, pair_layers
from remat_models.formulations.hilp.partition import Cluster, Partition, PartitionOptions, h_partition
from remat_models.formulations.hilp.solver import solve_hierarchical
from remat_models.io import transformer

B = NodeKind.BACKWARD


def traced_resnet(blocks: int) -> Graph:
    """Residual blocks h' = h + relu(conv(h)) named as torch traces them, with their aten backward.

    The backward has what made the zoo graphs cyclic: ``relu_backward`` (of the *last* relu) shares
    its name with the first ``relu``; the residual gradient sums (``add_g*``) read no forward node;
    and ``bmm_*`` reads a forward value of the block before while feeding this block's backward
    (as attention's ``bmm`` of the probabilities does).
    """
    sfx = ["" if i == 0 else f"_{i}" for i in range(blocks)]
    nodes = [Node("x", 1, 4)]
    edges = []
    h = "x"
    for i in range(blocks):
        conv, relu, add = f"convolution{sfx[i]}", f"relu{sfx[i]}", f"add{sfx[i]}"
        nodes += [Node(conv, 3, 4), Node(relu, 1, 4), Node(add, 1, 4)]
        edges += [(h, conv), (conv, relu), (h, add), (relu, add)]
        h = add
    nodes += [Node("loss", 1, 1, kind=NodeKind.LOSS), Node("ones_like", 1, 4, kind=B)]
    edges += [(h, "loss"), ("loss", "ones_like")]
    grad = "ones_like"
    for k, i in enumerate(reversed(range(blocks))):
        relu_b, conv_b, acc = f"relu_backward{sfx[k]}", f"convolution_backward{sfx[k]}", f"add_g{k}"
        nodes += [Node(relu_b, 1, 4, kind=B), Node(conv_b, 3, 4, kind=B), Node(acc, 1, 4, kind=B)]
        edges += [(grad, relu_b), (f"relu{sfx[i]}", relu_b), (relu_b, conv_b), (f"convolution{sfx[i]}", conv_b)]
        if i > 0:
            bmm = f"bmm_{k}"
            nodes.append(Node(bmm, 1, 4, kind=B))
            edges += [(grad, bmm), (f"convolution{sfx[i - 1]}", bmm), (bmm, conv_b)]
        edges += [(conv_b, acc), (grad, acc)]
        grad = acc
    return Graph(nodes, edges, name=f"traced_resnet{blocks}")


def _cluster(graph: Graph, names: list[str]) -> Cluster:
    ids = [graph.index[n] for n in names]
    return Cluster(tuple(ids), tuple(sorted(ids)))


def _acyclic(graph: Graph, items: list[int | Cluster], backward: dict[Cluster, np.ndarray], universe: set[int]) -> bool:
    """The level's coarse graph (F_j, B_j of its clusters, every other node alone, F_j -> B_j) is a DAG."""
    label: dict[int, tuple[str, int]] = {}
    dag = nx.DiGraph()
    for i, item in enumerate(items):
        if isinstance(item, Cluster):
            label.update({v: ("F", i) for v in item.nodes})
            label.update({int(w): ("B", i) for w in backward[item]})
            if backward[item].size:
                dag.add_edge(("F", i), ("B", i))
    for u, v in graph.edges.tolist():
        a, b = label.get(u, ("n", u)), label.get(v, ("n", v))
        if u in universe and v in universe and a != b:
            dag.add_edge(a, b)
    return nx.is_directed_acyclic_graph(dag)


def _levels_acyclic(graph: Graph, partition: Partition, backward: dict[Cluster, np.ndarray]) -> bool:
    every = set(range(graph.n))
    inner = [(list(c.members), {*c.nodes, *backward[c].tolist()}) for c in partition.clusters()]
    return all(_acyclic(graph, items, backward, universe) for items, universe in [(list(partition.top), every), *inner])


def test_traced_backward_names_pair_with_the_forward_node_they_read() -> None:
    g = traced_resnet(2)
    owner = pair_layers(g)
    assert owner[g.index["relu_backward"]] == g.index["relu_1"]  # not "relu": it is the last relu's backward
    assert owner[g.index["add_g0"]] == -1  # a gradient sum reads no forward node


@pytest.mark.parametrize("split", [False, True], ids=["one_cluster", "two_clusters"])
def test_backward_sets_make_every_level_acyclic(split: bool) -> None:
    g = traced_resnet(2)
    owner = pair_layers(g)
    first = ["x", "convolution", "relu", "add"]
    second = ["convolution_1", "relu_1", "add_1"]
    top = [_cluster(g, first), _cluster(g, second)] if split else [_cluster(g, first + second)]
    partition = Partition(tuple(top), 1)
    by_owner = {c: layer_members(owner, list(c.nodes)) for c in top}
    assert not _acyclic(g, list(top), by_owner, set(range(g.n)))  # what build_hgraph refused
    backward = backward_sets(g, partition, owner)
    assert _levels_acyclic(g, partition, backward)
    grouped = sorted(int(w) for c in top for w in backward[c])
    assert grouped == sorted(v for v in range(g.n) if g.kind[v] == B and g.names[v] != "ones_like")


def test_hierarchical_solve_of_a_traced_graph_fits() -> None:
    g = traced_resnet(6)
    opts = {"max_leaf": 4, "max_top": 6, "nb_peak": 2, "nb_save": 2}
    partition = h_partition(g, PartitionOptions(max_leaf=4, max_top=6))
    assert partition.depth >= 2
    assert _levels_acyclic(g, partition, backward_sets(g, partition, pair_layers(g)))
    budget = int(0.7 * input_order_peak(g))  # 60 % is below what its cluster options reach
    result = solve_hierarchical(g, budget, "highs", opts)
    assert result.schedule is not None
    sim = simulate(g, result.schedule)
    assert sim.peak <= budget
    assert sim.total_cost == pytest.approx(result.objective)


def test_an_acyclic_pairing_is_kept() -> None:
    g = transformer(4)
    partition = h_partition(g, PartitionOptions(max_leaf=4, max_top=6))
    owner = pair_layers(g)
    backward = backward_sets(g, partition, owner)
    assert partition.clusters()
    for cluster in partition.clusters():
        assert backward[cluster].tolist() == sorted(
            layer_members(owner, list(cluster.nodes)).tolist(), key=g.position.__getitem__
        )


def _convex(dag: nx.DiGraph, nodes: set[int]) -> bool:
    """No path leaves ``nodes`` and comes back."""
    below = set().union(*(nx.descendants(dag, v) for v in nodes)) - nodes
    above = set().union(*(nx.ancestors(dag, v) for v in nodes)) - nodes
    return not below & above


def test_a_mask_read_by_every_layer_does_not_stall_the_partition() -> None:
    """GPT-2 traced: the attention mask feeds all 12 layers, so no flow fits and rounds stopped at 57 items."""
    from pathlib import Path

    from remat_models.io import read_graph

    g = read_graph(Path(__file__).parents[1] / "benchmarks" / "zoo" / "zoo_gpt2.json")
    partition = h_partition(g, PartitionOptions(max_leaf=12, max_top=20))
    assert len(partition.top) <= 20
    forward = nx.DiGraph([(u, v) for u, v in g.edges.tolist() if g.kind[u] == g.kind[v] == NodeKind.FORWARD])
    assert all(_convex(forward, set(c.nodes)) for c in partition.clusters())
    assert _levels_acyclic(g, partition, backward_sets(g, partition, pair_layers(g)))
    budget = int(0.5 * input_order_peak(g))
    result = solve_hierarchical(g, budget, "highs", limits=SolveLimits(time_limit=10))  # none found before
    assert result.schedule is not None
    assert simulate(g, result.schedule).peak <= budget


def test_stray_nodes_are_not_absorbed_one_level_per_round() -> None:
    """ResNet traced: ~50 buffer updates without a backward part sit beside one large cluster; merging
    consecutive items absorbed one of them per round (depth 41) until such rounds had to shrink the graph."""
    from pathlib import Path

    from remat_models.io import read_graph

    g = read_graph(Path(__file__).parents[1] / "benchmarks" / "zoo" / "zoo_resnet.json")
    partition = h_partition(g, PartitionOptions(max_leaf=12, max_top=20))
    assert partition.depth <= 8


@pytest.mark.parametrize("name", ["cnn/resnet.json", "zoo/zoo_resnet.json"])
def test_resnet_buffer_updates_and_residual_gradient_sums_keep_the_clusters_whole(name: str) -> None:
    """Traced ResNets: num_batches_tracked updates (forward nodes without a forward edge) stay plain top items and
    do not count against M^t (they forced zoo_resnet's network into one 330-node cluster); a residual's gradient
    sum joins the backward part it sits in (left plain, it made the pairing's groups cyclic and the rank fallback
    left zoo_resnet a 181-node top cluster without a backward part, all its activations out-data)."""
    from pathlib import Path

    from remat_models.formulations.hilp.layers import forward_mask
    from remat_models.io import read_graph

    g = read_graph(Path(__file__).parents[1] / "benchmarks" / name)
    partition = h_partition(g, PartitionOptions(max_leaf=12, max_top=20))
    forward = forward_mask(g)
    linked = {v for u, w in g.edges.tolist() if forward[u] and forward[w] for v in (u, w)}
    isolated = [v for v in np.flatnonzero(forward).tolist() if v not in linked]
    in_clusters = {v for c in partition.clusters() for v in c.nodes}
    assert isolated and all(v in partition.top and v not in in_clusters for v in isolated)
    backward = backward_sets(g, partition, pair_layers(g))
    top = [m for m in partition.top if isinstance(m, Cluster)]
    assert len(top) >= 3 and all(backward[c].size for c in top)
    assert _levels_acyclic(g, partition, backward)
