import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remat_models import Graph, GraphError, Node, NodeKind


def diamond(**kwargs) -> Graph:
    nodes = [Node("a", 1, 10), Node("b", 2, 20), Node("c", 3, 30), Node("d", 4, 40)]
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]
    return Graph(nodes, edges, **kwargs)


@st.composite
def random_dags(draw, max_nodes: int = 12):
    """Random DAG: edges only from lower to higher index, nodes possibly listed shuffled."""
    n = draw(st.integers(1, max_nodes))
    pairs = [(u, v) for v in range(n) for u in range(v)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=3 * n)) if pairs else []
    perm = draw(st.permutations(range(n)))
    names = [f"n{perm[i]}" for i in range(n)]
    nodes = [Node(name, cost=float(i % 3), mem=1 + i % 4) for i, name in enumerate(names)]
    edges = [(names[u], names[v]) for u, v in chosen]
    return nodes, edges


def test_arrays_and_csr() -> None:
    graph = diamond()
    assert graph.n == 4 and graph.m == 4
    assert graph.cost.tolist() == [1, 2, 3, 4]
    assert graph.mem.dtype == np.int64
    assert sorted(graph.preds(3).tolist()) == [1, 2]
    assert sorted(graph.succs(0).tolist()) == [1, 2]
    assert graph.outputs.tolist() == [3]  # default: the sinks
    assert graph.order.tolist() == [0, 1, 2, 3]
    assert graph.kind == (NodeKind.FORWARD,) * 4
    assert graph.lower_bound == 20 + 30 + 40
    assert graph.total_cost == 10


def test_immutable() -> None:
    graph = diamond()
    with pytest.raises(ValueError):
        graph.cost[0] = 5
    with pytest.raises(ValueError):
        graph.pred_idx[0] = 1


def test_non_topological_listing_gets_deterministic_sort() -> None:
    nodes = [Node("d"), Node("c"), Node("b"), Node("a")]
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]
    graph = Graph(nodes, edges)
    assert [graph.names[v] for v in graph.order] == ["a", "c", "b", "d"]  # smallest index first when ready


def test_explicit_order_and_outputs() -> None:
    graph = diamond(order=["a", "c", "b", "d"], outputs=["b", "d"], fixed_mem=7)
    assert graph.order.tolist() == [0, 2, 1, 3]
    assert graph.position.tolist() == [0, 2, 1, 3]
    assert graph.outputs.tolist() == [1, 3]
    assert graph.lower_bound == 7 + 90


@pytest.mark.parametrize(
    ("kwargs", "edges", "message"),
    [
        ({}, [("a", "b"), ("b", "c"), ("c", "a")], "cycle: "),
        ({}, [("a", "zz")], "unknown node 'zz'"),
        ({}, [("b", "b")], "self loop on node 'b'"),
        ({}, [("a", "b"), ("a", "b")], "duplicate edge ('a', 'b')"),
        ({"order": ["b", "a", "c"]}, [("a", "b")], "edge ('a', 'b') goes backwards"),
        ({"order": ["a", "b"]}, [("a", "b")], "not a permutation"),
        ({"order": ["a", "b", "b"]}, [("a", "b")], "repeated ['b']"),
        ({"outputs": ["q"]}, [], "unknown node 'q'"),
        ({"fixed_mem": -1}, [], "fixed memory"),
    ],
)
def test_invalid_graphs(kwargs, edges, message) -> None:
    nodes = [Node("a"), Node("b"), Node("c")]
    with pytest.raises(GraphError) as caught:
        Graph(nodes, edges, **kwargs)
    assert message in str(caught.value)


def test_cycle_message_lists_one_cycle() -> None:
    nodes = [Node(x) for x in "abcde"]
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "b"), ("d", "e")]
    with pytest.raises(GraphError) as caught:
        Graph(nodes, edges)
    cycle = str(caught.value).split("cycle: ")[1].split(" -> ")
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"b", "c", "d"}
    for u, v in itertools.pairwise(cycle):
        assert (u, v) in edges


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (Node("x", cost=-1.0), "node 'x' has invalid cost"),
        (Node("x", cost=math.nan), "node 'x' has invalid cost"),
        (Node("x", cost=math.inf), "node 'x' has invalid cost"),
        (Node("x", mem=-3), "node 'x' has invalid mem"),
        (Node("x", mem=2.5), "node 'x' has invalid mem"),  # type: ignore[arg-type]
        (Node("x", workspace=-1), "node 'x' has invalid workspace"),
        (Node(""), "no valid name"),
    ],
)
def test_invalid_numbers(node, message) -> None:
    with pytest.raises(GraphError) as caught:
        Graph([Node("ok"), node], [])
    assert message in str(caught.value)


def test_empty_and_duplicate_names() -> None:
    with pytest.raises(GraphError, match="empty"):
        Graph([], [])
    with pytest.raises(GraphError, match="duplicate node name 'a'"):
        Graph([Node("a"), Node("a")], [])


def test_from_arrays_rejects_bad_index() -> None:
    with pytest.raises(GraphError, match=r"edge \(0, 5\)"):
        Graph.from_arrays(["a", "b"], [1, 1], [1, 1], [(0, 5)])


def test_node_records_round_trip() -> None:
    nodes = [Node("a", 1.5, 8, 2, NodeKind.FORWARD, False), Node("l", 0.0, 4, 0, NodeKind.LOSS)]
    graph = Graph(nodes, [("a", "l")])
    assert list(graph.nodes()) == nodes
    assert graph.edge_names() == [("a", "l")]


def test_hash_and_equality() -> None:
    assert diamond() == diamond()
    assert diamond() != diamond(fixed_mem=1)
    assert diamond() != diamond(order=["a", "c", "b", "d"])


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_random_dags_sort_topologically(dag) -> None:
    nodes, edges = dag
    graph = Graph(nodes, edges)
    position = graph.position
    assert all(position[u] < position[v] for u, v in graph.edges.tolist())
    reference = nx.DiGraph(edges)
    reference.add_nodes_from(node.name for node in nodes)
    sinks = sorted(name for name in reference if reference.out_degree(name) == 0)
    assert sorted(graph.names[v] for v in graph.outputs) == sinks
    for v in range(graph.n):
        assert sorted(graph.names[u] for u in graph.preds(v)) == sorted(reference.predecessors(graph.names[v]))


@settings(max_examples=40, deadline=None)
@given(random_dags(), st.data())
def test_adding_a_back_edge_is_a_cycle(dag, data) -> None:
    nodes, edges = dag
    if not edges:
        return
    u, v = data.draw(st.sampled_from(edges))
    with pytest.raises(GraphError, match=r"cycle|duplicate"):
        Graph(nodes, [*edges, (v, u)])


def test_with_recomputable_copies_validates_and_keeps_the_rest() -> None:
    from impl_graphs import a2_mask

    from remat_models.core.batch import BatchScaling

    graph = diamond(fixed_mem=5, name="g")
    fixed = graph.with_recomputable({"b": False, 3: False})
    assert fixed.recomputable.tolist() == [True, False, True, False]
    assert graph.recomputable.all()  # the original is untouched
    assert fixed.content_hash != graph.content_hash and fixed != graph
    assert (fixed.names, fixed.fixed_mem, fixed.name, fixed.edge_names()) == (
        graph.names,
        graph.fixed_mem,
        graph.name,
        graph.edge_names(),
    )
    assert fixed.with_recomputable(np.ones(4, dtype=bool)) == graph  # a full mask restores it
    assert graph.with_recomputable({"a": True}) is graph  # nothing changes: itself
    impl = a2_mask()
    view = impl.with_recomputable({"x": False})
    assert view.impls == impl.impls and view.aux_of.tolist() == impl.aux_of.tolist()
    scaled = BatchScaling(graph.mem, np.zeros(4), np.zeros(4), np.zeros(4)).attach(graph)
    assert scaled.with_recomputable({"c": False}).at_batch(2).recomputable.tolist() == [True, True, False, True]


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ([True, False], "recomputable has 2 entries for 4 nodes"),
        ({"zz": False}, "recomputable flags refer to unknown node 'zz'"),
        ({7: False}, "recomputable flags refer to unknown node 7"),
        ({"a": 0}, r"recomputable\['a'\] must be True or False"),
        ([1, 0, 1, 1], "recomputable must hold True/False"),
    ],
)
def test_with_recomputable_rejects_bad_input(arg, message) -> None:
    with pytest.raises(GraphError, match=message):
        diamond().with_recomputable(arg)
