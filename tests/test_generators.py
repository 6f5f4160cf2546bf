"""Graph generators: exact structure of the chain, properties of the random and realistic graphs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import eager_frees, simulate
from remat_models.errors import ConfigurationError
from remat_models.io import (
    GENERATORS,
    describe_generators,
    linear_chain,
    random_layered,
    transformer,
    unet,
)


def to_networkx(graph: Graph) -> nx.DiGraph:
    digraph = nx.DiGraph()
    digraph.add_nodes_from(range(graph.n))
    digraph.add_edges_from(graph.edges.tolist())
    return digraph


def simulates(graph: Graph) -> int:
    """Peak of the input order with eager frees (raises if the schedule is invalid)."""
    result = simulate(graph, eager_frees(graph, graph.order))
    assert result.recomputations == 0
    assert result.peak >= graph.lower_bound
    return result.peak


# --- chain -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 50])
def test_linear_chain_is_checkmates_chain(n: int) -> None:
    graph = linear_chain(n)
    assert graph.n == 2 * n + 1
    assert graph.m == 3 * n
    assert graph.names == (*[f"f{i}" for i in range(n)], "loss", *[f"b{i}" for i in reversed(range(n))])
    assert all(graph.names[2 * n - i] == f"b{i}" for i in range(n))
    expected = {(i, i + 1) for i in range(2 * n)} | {(i, 2 * n - i) for i in range(n)}
    assert {tuple(edge) for edge in graph.edges.tolist()} == expected
    assert graph.kind == (NodeKind.FORWARD,) * n + (NodeKind.LOSS,) + (NodeKind.BACKWARD,) * n
    assert graph.cost.tolist() == [1.0] * (2 * n + 1)
    assert graph.mem.tolist() == [1] * (2 * n + 1)
    assert graph.order.tolist() == list(range(2 * n + 1))
    assert [graph.names[v] for v in graph.outputs] == ["b0"]
    assert graph.name == f"linear_chain_n{n}"
    assert simulates(graph) == n + 2  # all forward values, the gradient read and the one computed


@pytest.mark.parametrize("n", [0, -1])
def test_generators_reject_bad_sizes(n: int) -> None:
    with pytest.raises(ConfigurationError, match="n must be an integer >= 1"):
        linear_chain(n)
    with pytest.raises(ConfigurationError, match="depth must be an integer >= 1"):
        unet(depth=n)
    with pytest.raises(ConfigurationError, match="layers must be an integer >= 1"):
        transformer(layers=n)
    with pytest.raises(ConfigurationError, match="n must be an integer >= 2"):
        random_layered(n + 1)
    with pytest.raises(ConfigurationError, match="resolution 100 is not divisible by 2\\*\\*depth = 8"):
        unet(depth=3, resolution=100)


# --- registry ----------------------------------------------------------------------------------------


def test_registry_builds_every_generator_uniformly() -> None:
    assert set(GENERATORS) == {"chain", "random-layered", "unet", "transformer"}
    assert GENERATORS["chain"](size=3, seed=9) == linear_chain(3)
    assert GENERATORS["random-layered"](size=40, seed=2) == random_layered(40, seed=2)
    assert GENERATORS["unet"](size=2, seed=1) == unet(depth=2, seed=1)
    assert GENERATORS["transformer"](size=2, seed=1) == transformer(layers=2, seed=1)


def test_registry_takes_each_generators_own_keywords() -> None:
    assert GENERATORS["unet"](depth=3, seed=1) == unet(3, seed=1)
    assert GENERATORS["unet"].build(3, 1, width=1) == unet(3, width=1, seed=1)
    assert GENERATORS["transformer"](layers=1, seed=4, heads=4) == transformer(1, seed=4, heads=4)
    assert GENERATORS["chain"](n=2) == linear_chain(2)
    with pytest.raises(TypeError, match="give either size or depth"):
        GENERATORS["unet"](size=2, depth=3)


def test_registry_defaults_and_descriptions() -> None:
    assert GENERATORS["unet"]() == unet()
    text = describe_generators()
    assert len(text.splitlines()) == len(GENERATORS)
    for name, spec in GENERATORS.items():
        assert f"{name}: size = {spec.size_param} (default {spec.default_size})" in text
    assert "chain: size = n (default 8) (ignores the seed)" in text


@pytest.mark.parametrize("name", ["random-layered", "unet", "transformer"])
def test_seeded_generators_are_deterministic_and_seed_sensitive(name: str) -> None:
    spec = GENERATORS[name]
    size = 50 if name == "random-layered" else 2
    first, again, other = spec(size=size, seed=7), spec(size=size, seed=7), spec(size=size, seed=8)
    assert first == again
    assert first.content_hash != other.content_hash


@pytest.mark.parametrize(
    ("name", "size"),
    [("chain", 1), ("chain", 20), ("random-layered", 2), ("random-layered", 3), ("random-layered", 500)]
    + [("unet", d) for d in (1, 2, 5)]
    + [("transformer", layers) for layers in (1, 3, 12)],
)
def test_every_generated_graph_simulates(name: str, size: int) -> None:
    simulates(GENERATORS[name](size=size, seed=3))


# --- random layered ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 400), st.integers(0, 2**32 - 1))
def test_random_layered_is_a_connected_single_source_single_sink_dag(n: int, seed: int) -> None:
    graph = random_layered(n, seed=seed)
    assert graph.n == n
    indegree = np.diff(graph.pred_ptr)
    outdegree = np.diff(graph.succ_ptr)
    assert np.flatnonzero(indegree == 0).tolist() == [0]
    assert np.flatnonzero(outdegree == 0).tolist() == [n - 1]
    assert nx.is_weakly_connected(to_networkx(graph))
    assert set(graph.kind) == {NodeKind.FORWARD}
    assert graph.cost[0] == graph.cost[-1] == 0
    assert ((graph.cost >= 0) & (graph.cost <= 1000)).all()
    assert ((graph.mem >= 10) & (graph.mem <= 8000)).all()
    simulates(graph)


def test_random_layered_resembles_the_benchmark_graphs() -> None:
    graph = random_layered(1000, seed=0)
    depth = nx.dag_longest_path_length(to_networkx(graph))
    assert 30 <= depth <= 80  # rl_g4_n1000 has 51 layers
    assert 4 <= graph.m / graph.n <= 8  # rl_g4 has 5,875 edges
    assert 800 <= np.median(graph.mem) <= 2000  # rl_g4's median out_cost is 1,480
    assert 400 <= np.median(graph.cost) <= 600  # rl_g4's median duration is 485
    # skip connections jump at least two layers: edges whose endpoints are not on adjacent longest-path levels
    level = dict.fromkeys(range(graph.n), 0)
    for v in graph.order.tolist():
        for u in graph.preds(v).tolist():
            level[v] = max(level[v], level[u] + 1)
    spans = np.array([level[v] - level[u] for u, v in graph.edges.tolist()])
    assert 0.05 <= (spans > 1).mean() <= 0.3


def test_random_layered_options_change_the_graph() -> None:
    dense = random_layered(200, seed=1, edge_density=0.6)
    sparse = random_layered(200, seed=1, edge_density=0.05, skip_density=0.0)
    assert dense.m > 2 * sparse.m
    assert random_layered(200, seed=1, max_cost=10).cost.max() <= 10


# --- training graphs ---------------------------------------------------------------------------------


TRAINING = [
    ("chain", lambda: linear_chain(5)),
    ("unet-1", lambda: unet(depth=1, width=1)),
    ("unet-4", lambda: unet(depth=4, width=2, seed=2)),
    ("unet-3x3", lambda: unet(depth=3, width=3, seed=5)),
    ("transformer-1", lambda: transformer(layers=1)),
    ("transformer-4", lambda: transformer(layers=4, seed=3)),
]


@pytest.fixture(params=[build for _, build in TRAINING], ids=[name for name, _ in TRAINING])
def training(request: pytest.FixtureRequest) -> Graph:
    return request.param()


def test_training_graph_orders_forward_then_loss_then_backward(training: Graph) -> None:
    kinds = [training.kind[v] for v in training.order.tolist()]
    assert kinds.count(NodeKind.LOSS) == 1
    loss_at = kinds.index(NodeKind.LOSS)
    assert set(kinds[:loss_at]) == {NodeKind.FORWARD}
    assert set(kinds[loss_at + 1 :]) == {NodeKind.BACKWARD}
    assert loss_at * 2 + 1 == training.n  # one backward node per forward node


def test_every_forward_node_feeding_the_loss_has_a_gradient_path(training: Graph) -> None:
    digraph = to_networkx(training)
    loss = training.kind.index(NodeKind.LOSS)
    feeding = nx.ancestors(digraph, loss)
    after_loss = nx.descendants(digraph, loss)
    assert feeding == {v for v in range(training.n) if training.kind[v] is NodeKind.FORWARD}
    assert after_loss == {v for v in range(training.n) if training.kind[v] is NodeKind.BACKWARD}
    backward_of = {v: 2 * loss - v for v in feeding}  # mirrored layout
    for v, b in backward_of.items():
        assert training.kind[b] is NodeKind.BACKWARD
        assert b in after_loss
        readers = set(training.succs(v).tolist())
        consumers = [w for w in training.succs(v).tolist() if training.kind[w] is not NodeKind.BACKWARD]
        # the gradient of v joins the gradients of all of v's consumers
        assert {backward_of.get(w, w) for w in consumers} <= set(training.preds(b).tolist())
        assert readers <= feeding | after_loss | {loss}
    sinks = [v for v in range(training.n) if not training.succs(v).size]
    assert len(sinks) == 1 and training.kind[sinks[0]] is NodeKind.BACKWARD
    simulates(training)


def test_unet_activations_halve_per_level_and_skips_join_gradients() -> None:
    graph = unet(depth=4, width=2, seed=0)
    mem = {name: int(graph.mem[graph.index[name]]) for name in graph.names}
    for level in range(1, 4):
        assert mem[f"enc{level}.conv0"] * 2 == mem[f"enc{level - 1}.conv0"]
        assert mem[f"dec{level}.concat"] == 2 * mem[f"enc{level}.conv1"]
    assert mem["enc0.conv0"] == 8 * 32 * 256 * 256 * 4  # 64 MiB of fp32
    skip = graph.index["enc1.conv1"]
    assert {graph.names[w] for w in graph.succs(skip)} >= {"enc1.pool", "dec1.concat"}
    grad_preds = {graph.names[u] for u in graph.preds(graph.index["grad_enc1.conv1"])}
    assert {"grad_enc1.pool", "grad_dec1.concat"} <= grad_preds
    assert graph.name == "unet_d4_w2_s0"


def test_transformer_sizes_and_residual_gradients() -> None:
    graph = transformer(layers=2, seed=0)
    mem = {name: int(graph.mem[graph.index[name]]) for name in graph.names}
    assert mem["l0.scores"] == mem["l0.softmax"] == 8 * 16 * 1024 * 1024 * 4
    assert mem["l0.scores"] > mem["l0.up"] > mem["l0.qkv"] > mem["l0.proj"]
    assert mem["l0.qkv"] == 3 * mem["l0.ln1"]
    assert mem["logits"] == 8 * 1024 * 32768 * 4
    # the residual stream forks into the norm and the add: both gradients join at its backward node
    assert {graph.names[u] for u in graph.preds(graph.index["grad_l0.add1"])} >= {"grad_l0.ln2", "grad_l0.add2"}
    assert {graph.names[u] for u in graph.preds(graph.index["grad_embed"])} == {"grad_l0.ln1", "grad_l0.add1"}
    # softmax's backward reads its output, not its input; the matmuls read their inputs
    assert {graph.names[u] for u in graph.preds(graph.index["grad_l0.softmax"])} == {
        "grad_l0.attn",
        "l0.softmax",
    }
    assert graph.cost[graph.index["grad_l0.qkv"]] == 2 * graph.cost[graph.index["l0.qkv"]]
