"""HiREmate layers (pairing), local cluster graphs and H-Partition invariants (spec T5)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from remat_models.core.graph import Graph, Node, NodeKind
from remat_models.errors import ConfigurationError, GraphError
from remat_models.formulations.hilp.layers import forward_mask, layer_members, pair_layers
from remat_models.formulations.hilp.local import local_graph
from remat_models.formulations.hilp.partition import Cluster, PartitionOptions, h_partition
from remat_models.io import linear_chain, random_layered, read_graph, transformer, unet


def _shared(shared_graphs_dir, name: str) -> Graph:
    return read_graph(shared_graphs_dir / f"{name}.json")


def test_chain_pairs_fk_with_bk_and_loss_is_plain() -> None:
    g = linear_chain(4)
    owner = pair_layers(g)
    for i in range(4):
        assert owner[g.index[f"b{i}"]] == g.index[f"f{i}"]
    assert owner[g.index["loss"]] == -1


def test_generated_graphs_pair_grad_names() -> None:
    g = transformer(1)
    owner = pair_layers(g, "names")
    assert owner[g.index["grad_l0.qkv"]] == g.index["l0.qkv"]


def test_checkmate_files_pair_every_forward_node(shared_graphs_dir) -> None:
    for name in ("cm1_fcn8_vgg_train", "vgg16_train"):
        g = _shared(shared_graphs_dir, name)
        owner = pair_layers(g, "names")
        fwd = np.flatnonzero(forward_mask(g))
        assert all(layer_members(owner, [v]).size >= 1 for v in fwd)


def test_names_pairing_raises_for_an_unmatched_backward_node() -> None:
    nodes = [Node("x", 1, 1), Node("loss", 1, 1, kind=NodeKind.LOSS), Node("mystery", 1, 1, kind=NodeKind.BACKWARD)]
    g = Graph(nodes, [("x", "loss"), ("loss", "mystery"), ("x", "mystery")])
    with pytest.raises(GraphError, match="mystery"):
        pair_layers(g, "names")
    assert pair_layers(g, "auto")[2] == 0  # structural fallback: the forward node it reads
    with pytest.raises(ConfigurationError):
        pair_layers(g, "bogus")  # type: ignore[arg-type]


def test_local_graph_interfaces_of_a_chain_block() -> None:
    g = linear_chain(6)
    V = [g.index["f2"], g.index["f3"]]
    lg = local_graph(g, np.array(V), layer_members(pair_layers(g), V))
    names = lg.graph.names
    # in-data f1, V, l_C, out-grad b4, W
    assert names == ("src:f1", "f2", "f3", "l_C", "src:b4", "b3", "b2")
    assert [names[i] for i in lg.out_data] == ["f3"]
    assert [names[i] for i in lg.graph.outputs] == ["b2"]
    assert lg.key("exact") == local_graph(g, np.array(V) + 1, layer_members(pair_layers(g), np.array(V) + 1)).key()


def _coarse_is_acyclic(graph: Graph, groups: list[tuple[int, ...]]) -> bool:
    owner = pair_layers(graph)
    label = {}
    for i, group in enumerate(groups):
        for v in group:
            label[v] = ("F", i)
        for w in layer_members(owner, list(group)).tolist():
            label[w] = ("B", i)
    dag = nx.DiGraph()
    for u, v in graph.edges.tolist():
        a, b = label.get(u, u), label.get(v, v)
        if a != b:
            dag.add_edge(a, b)
    return nx.is_directed_acyclic_graph(dag)


def _check_partition(graph: Graph, opts: PartitionOptions) -> None:
    part = h_partition(graph, opts)
    fwd = forward_mask(graph) if forward_mask(graph).any() else np.ones(graph.n, dtype=bool)
    leaves = sorted(v for m in part.top for v in (m.nodes if isinstance(m, Cluster) else (m,)))
    assert leaves == np.flatnonzero(fwd).tolist()  # the top partitions the forward nodes
    nxg = nx.DiGraph(graph.edges.tolist())
    nxg.add_nodes_from(range(graph.n))
    for cluster in part.clusters():
        inside = set(cluster.nodes)
        # convex: no path leaves the group and comes back
        outside_reach = set()
        for v in inside:
            for s in nxg.successors(v):
                if s not in inside:
                    outside_reach |= {s} | nx.descendants(nxg, s)
        assert not (outside_reach & inside), "group is not convex"
        estimate = sum(1 + isinstance(m, Cluster) for m in cluster.members)
        assert estimate <= opts.max_leaf
    assert _coarse_is_acyclic(graph, [m.nodes for m in part.top if isinstance(m, Cluster)])
    assert h_partition(graph, opts) == part  # deterministic


@pytest.mark.parametrize(
    "graph",
    [random_layered(60, seed=1), unet(4), transformer(4)],
    ids=["random_layered60", "unet4", "transformer4"],
)
def test_partition_invariants(graph: Graph) -> None:
    _check_partition(graph, PartitionOptions(max_leaf=8, max_top=10))


def test_partition_invariants_on_benchmark_graphs(shared_graphs_dir) -> None:
    for name in ("cm1_fcn8_vgg_train", "cm2_resnet50_train"):
        _check_partition(_shared(shared_graphs_dir, name), PartitionOptions())


def test_no_partition_when_the_top_fits() -> None:
    g = transformer(2)
    n_forward = int(forward_mask(g).sum())
    part = h_partition(g, PartitionOptions(max_top=n_forward))
    assert part.rounds == 0 and part.depth == 1 and len(part.top) == n_forward


def test_chain12_interior_pairs_share_one_key() -> None:
    g = linear_chain(12)
    part = h_partition(g, PartitionOptions(max_leaf=4, max_top=8))
    owner = pair_layers(g)
    pairs = [c for c in part.clusters() if len(c.nodes) == 2 and 0 not in c.nodes and g.n // 2 - 1 not in c.nodes]
    assert len(pairs) >= 3
    keys = {local_graph(g, np.array(c.nodes), layer_members(owner, list(c.nodes))).key() for c in pairs}
    assert len(keys) == 1


def test_shape_key_ignores_cost_jitter() -> None:
    g = transformer(4)
    owner = pair_layers(g)
    blocks = [[v for v in range(g.n) if g.names[v].startswith(f"l{i}.")] for i in range(4)]
    locals_ = [local_graph(g, np.array(b), layer_members(owner, b)) for b in blocks]
    # interior blocks (l1, l2) have the same structure; their costs are jittered
    assert len({lg.key("shape") for lg in locals_[1:3]}) == 1
    assert len({lg.key("exact") for lg in locals_[1:3]}) == 2
    assert locals_[3].key("shape") != locals_[1].key("shape")  # the last block feeds the final norm
