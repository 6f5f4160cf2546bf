"""Graph and schedule files: round trips, the benchmark graphs, rejection of bad input, atomic writes."""

from __future__ import annotations

import copy
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Free, Schedule, eager_frees, input_order_peak, simulate
from remat_models.errors import ConfigurationError, GraphError, InvalidScheduleError, OutputError
from remat_models.io import (
    NodeLinkFlavour,
    detect_flavour,
    from_node_link,
    graph_from_dict,
    graph_to_dict,
    linear_chain,
    random_layered,
    read_graph,
    read_schedule,
    schedule_from_dict,
    schedule_to_dict,
    to_node_link,
    transformer,
    unet,
    write_graph,
    write_json_atomic,
    write_schedule,
)
from remat_models.io.files import dumps_json

# --- strategies --------------------------------------------------------------------------------------


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    """Any valid graph: random DAG over a random topological order, every field drawn."""
    n = draw(st.integers(1, 10))
    names = draw(st.lists(st.text(min_size=1, max_size=6), min_size=n, max_size=n, unique=True))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=20)) if pairs else []
    perm = draw(st.permutations(range(n)))  # perm[position] = node index
    column = {"min_size": n, "max_size": n}
    return Graph.from_arrays(
        names,
        draw(st.lists(st.floats(0, 1e15, allow_nan=False, allow_infinity=False), **column)),
        draw(st.lists(st.integers(0, 10**11), **column)),
        [(perm[i], perm[j]) for i, j in chosen],
        workspace=draw(st.lists(st.integers(0, 10**11), **column)),
        kind=draw(st.lists(st.sampled_from(list(NodeKind)), **column)),
        recomputable=draw(st.lists(st.booleans(), **column)),
        outputs=draw(st.none() | st.lists(st.integers(0, n - 1), unique=True)),
        fixed_mem=draw(st.integers(0, 10**11)),
        order=list(perm),
        name=draw(st.text(max_size=12)),
    )


def through_json(data: Any) -> Any:
    """What reading back the written text gives."""
    return json.loads(dumps_json(data))


SAMPLE_GRAPHS = {
    "chain": lambda: linear_chain(4),
    "random-layered": lambda: random_layered(60, seed=3),
    "unet": lambda: unet(depth=2, seed=1),
    "transformer": lambda: transformer(layers=2, seed=1),
}


@pytest.fixture(params=sorted(SAMPLE_GRAPHS))
def sample_graph(request: pytest.FixtureRequest) -> Graph:
    return SAMPLE_GRAPHS[request.param]()


# --- own format --------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_own_format_round_trip_preserves_everything(graph: Graph) -> None:
    back = graph_from_dict(through_json(graph_to_dict(graph)))
    assert back == graph
    assert back.content_hash == graph.content_hash
    assert back.mem.tolist() == graph.mem.tolist()
    assert back.cost.tolist() == graph.cost.tolist()


def test_own_format_emits_every_field() -> None:
    data = graph_to_dict(linear_chain(2))
    assert list(data) == ["format", "version", "name", "fixed_mem", "nodes", "edges", "outputs", "order"]
    assert data["nodes"][0] == {
        "name": "f0",
        "cost": 1.0,
        "mem": 1,
        "workspace": 0,
        "kind": "forward",
        "recomputable": True,
    }
    assert data["order"] == ["f0", "f1", "loss", "b1", "b0"]
    assert data["outputs"] == ["b0"]


def test_large_byte_counts_stay_exact(tmp_path: Path) -> None:
    big = 99_999_999_999  # not representable as float32; exact as int64 and in JSON
    graph = Graph.from_arrays(["a", "b"], [0.1, 1e-7], [big, big + 1], [(0, 1)], fixed_mem=big, name="big")
    path = tmp_path / "big.json"
    write_graph(graph, path)
    assert '"mem": 99999999999,' in path.read_text()
    back = read_graph(path)
    assert back == graph
    assert back.mem.tolist() == [big, big + 1]
    assert back.cost.tolist() == [0.1, 1e-7]


def test_whole_float_bytes_are_accepted() -> None:
    data = graph_to_dict(linear_chain(1))
    data["nodes"][0]["mem"] = 1e11
    assert graph_from_dict(data).mem[0] == 10**11


def _chain_dict() -> dict[str, Any]:
    return graph_to_dict(linear_chain(2))


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(path: tuple[Any, ...]) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


BAD_OWN_FORMAT = [
    (_delete(("format",)), "missing field 'format'"),
    (_set(("format",), "other-graph"), "unknown format 'other-graph'"),
    (_delete(("version",)), "missing field 'version'"),
    (_set(("version",), 2), "unsupported version 2"),
    (_set(("version",), True), "unsupported version True"),
    (_delete(("name",)), "missing field 'name'"),
    (_set(("name",), 3), "graph name: expected a string"),
    (_set(("fixed_mem",), "0"), "fixed_mem: expected a whole number"),
    (_set(("fixed_mem",), -1), "fixed memory must be a non-negative integer"),
    (_set(("nodes",), {}), "nodes: expected a list"),
    (_set(("nodes", 0), "f0"), "node 0: expected a JSON object"),
    (_delete(("nodes", 0, "name")), "node 0: missing field 'name'"),
    (_delete(("nodes", 1, "mem")), "node 1 ('f1'): missing field 'mem'"),
    (_delete(("nodes", 2, "cost")), "node 2 ('loss'): missing field 'cost'"),
    (_delete(("nodes", 3, "workspace")), "node 3 ('b1'): missing field 'workspace'"),
    (_delete(("nodes", 3, "kind")), "node 3 ('b1'): missing field 'kind'"),
    (_delete(("nodes", 4, "recomputable")), "node 4 ('b0'): missing field 'recomputable'"),
    (_set(("nodes", 1, "mem"), "12"), "node 1 ('f1') mem: expected a whole number, got string"),
    (_set(("nodes", 1, "mem"), 1.5), "node 1 ('f1') mem: expected a whole number, got number 1.5"),
    (_set(("nodes", 1, "mem"), True), "node 1 ('f1') mem: expected a whole number, got boolean"),
    (_set(("nodes", 1, "mem"), 1e30), "node 1 ('f1') mem: 1000000000000000019884624838656 is out of the 64-bit"),
    (_set(("nodes", 1, "mem"), -3), "node 'f1' has invalid mem"),
    (_set(("nodes", 1, "cost"), None), "node 1 ('f1') cost: expected a number, got null"),
    (_set(("nodes", 1, "cost"), -1.0), "node 'f1' has invalid cost"),
    (_set(("nodes", 1, "workspace"), [1]), "node 1 ('f1') workspace: expected a whole number, got list"),
    (_set(("nodes", 1, "kind"), "sideways"), "node 1 ('f1') kind: unknown kind 'sideways'"),
    (_set(("nodes", 1, "kind"), 2), "node 1 ('f1') kind: expected a string"),
    (_set(("nodes", 1, "recomputable"), 1), "node 1 ('f1') recomputable: expected true or false, got number"),
    (_set(("nodes", 1, "name"), "f0"), "node 1: duplicate name 'f0' (also node 0)"),
    (_set(("nodes", 1, "name"), ""), "node 1: its name is empty"),
    (_delete(("edges",)), "missing field 'edges'"),
    (_set(("edges", 0), ["f0", "zz"]), "edge 0: unknown node 'zz'"),
    (_set(("edges", 1), ["f1"]), "edge 1: expected [source, target]"),
    (_set(("edges", 1), [["f1"], "loss"]), "edge 1: unknown node ['f1']"),
    (_set(("edges", 0), ["b0", "f0"]), "cycle"),
    (_set(("outputs",), ["nowhere"]), "outputs[0]: unknown node 'nowhere'"),
    (_set(("outputs",), "b0"), "outputs: expected a list"),
    (_set(("order",), ["f0", "f1", "loss", "b0", "b1"]), "order is not topological"),
    (_set(("order",), ["f0"]), "order is not a permutation"),
    (_delete(("order",)), "missing field 'order'"),
]


@pytest.mark.parametrize(("mutate", "message"), BAD_OWN_FORMAT)
def test_own_format_rejects_bad_input_naming_the_problem(mutate: Any, message: str) -> None:
    data = _chain_dict()
    mutate(data)
    with pytest.raises(GraphError) as info:
        graph_from_dict(data)
    assert message in str(info.value)


@pytest.mark.parametrize("data", [[], "graph", None, 3])
def test_own_format_rejects_non_objects(data: Any) -> None:
    with pytest.raises(GraphError, match="expected a JSON object"):
        graph_from_dict(data)


# --- node-link ---------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_node_link_round_trip_preserves_everything(graph: Graph) -> None:
    data = through_json(to_node_link(graph))
    assert detect_flavour(data) is NodeLinkFlavour.GENERIC
    assert from_node_link(data) == graph


def test_node_link_export_loads_in_networkx(sample_graph: Graph) -> None:
    nx_graph = nx.node_link_graph(through_json(to_node_link(sample_graph)), edges="links")
    assert isinstance(nx_graph, nx.DiGraph)
    assert nx_graph.number_of_nodes() == sample_graph.n
    assert nx_graph.number_of_edges() == sample_graph.m
    assert nx_graph.graph["name"] == sample_graph.name
    assert nx_graph.graph["order"] == [sample_graph.names[v] for v in sample_graph.order]
    for v in (0, sample_graph.n - 1):
        attrs = nx_graph.nodes[sample_graph.names[v]]
        assert attrs["mem"] == int(sample_graph.mem[v])
        assert attrs["cost"] == float(sample_graph.cost[v])
        assert attrs["kind"] == sample_graph.kind[v].value
    # networkx's own writer (edges under "edges", in adjacency order) reads back to the same content
    again = nx.node_link_data(nx_graph, edges="edges")
    assert "edges" in again
    back = from_node_link(through_json(again))
    assert graph_to_dict(back) | {"edges": None} == graph_to_dict(sample_graph) | {"edges": None}
    assert sorted(back.edge_names()) == sorted(sample_graph.edge_names())


def test_generic_node_link_defaults_and_numeric_ids() -> None:
    data = {
        "directed": True,
        "graph": {},
        "nodes": [{"id": 10}, {"id": 11, "mem": 5, "kind": "loss"}],
        "links": [{"source": 10, "target": 11}],
    }
    graph = from_node_link(data)
    assert graph.names == ("10", "11")
    assert graph.cost.tolist() == [1.0, 1.0]
    assert graph.mem.tolist() == [1, 5]
    assert graph.kind == (NodeKind.FORWARD, NodeKind.LOSS)
    assert graph.outputs.tolist() == [1]
    assert graph.name == ""


CHECKMATE_SAMPLE = {
    "directed": True,
    "graph": {"name": "tiny"},
    "nodes": [
        {"name": "conv", "backward": False, "cost_cpu": 5, "cost_ram": 100, "id": 0},
        {"name": "Loss", "backward": True, "cost_cpu": 1, "cost_ram": 4, "id": 1},
        {"name": "conv_grad", "backward": True, "cost_cpu": 10, "cost_ram": 100, "id": 2},
    ],
    "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}, {"source": 0, "target": 2}],
}
RANDOM_LAYERED_SAMPLE = {
    "directed": True,
    "graph": {"name": "rl", "order": "[0, 2, 1]"},
    "nodes": [
        {"out_cost": 10, "param_cost": 0, "duration": 0, "name": 0},
        {"out_cost": 20, "param_cost": 3, "duration": 0, "name": 1},
        {"out_cost": 30, "param_cost": 0, "duration": 7, "name": 2},
    ],
    "links": [{"0": 0, "1": 2}, {"0": 2, "1": 1}],
}


def test_checkmate_flavour_mapping() -> None:
    assert detect_flavour(CHECKMATE_SAMPLE) is NodeLinkFlavour.CHECKMATE
    graph = from_node_link(CHECKMATE_SAMPLE)
    assert graph.name == "tiny"
    assert graph.names == ("conv", "Loss", "conv_grad")
    assert graph.kind == (NodeKind.FORWARD, NodeKind.LOSS, NodeKind.BACKWARD)
    assert graph.cost.tolist() == [5.0, 1.0, 10.0]
    assert graph.mem.tolist() == [100, 4, 100]
    assert graph.order.tolist() == [0, 1, 2]


def test_checkmate_ids_must_be_topological() -> None:
    data = copy.deepcopy(CHECKMATE_SAMPLE)
    data["nodes"][1]["id"], data["nodes"][2]["id"] = 2, 1  # Loss now sorts after its consumer
    data["links"] = [{"source": 0, "target": 2}, {"source": 2, "target": 1}, {"source": 0, "target": 1}]
    with pytest.raises(GraphError, match="order is not topological: edge \\('Loss', 'conv_grad'\\)"):
        from_node_link(data)


def test_checkmate_order_follows_ids_not_list_position() -> None:
    data = copy.deepcopy(CHECKMATE_SAMPLE)
    data["nodes"].reverse()
    graph = from_node_link(data)
    assert [graph.names[v] for v in graph.order] == ["conv", "Loss", "conv_grad"]


def test_random_layered_flavour_mapping() -> None:
    assert detect_flavour(RANDOM_LAYERED_SAMPLE) is NodeLinkFlavour.RANDOM_LAYERED
    graph = from_node_link(RANDOM_LAYERED_SAMPLE)
    assert graph.names == ("0", "1", "2")
    assert graph.cost.tolist() == [0.0, 0.0, 7.0]
    assert graph.mem.tolist() == [10, 20, 30]
    assert [graph.names[v] for v in graph.order] == ["0", "2", "1"]
    assert graph.fixed_mem == 3
    assert set(graph.kind) == {NodeKind.FORWARD}
    data = copy.deepcopy(RANDOM_LAYERED_SAMPLE)
    data["graph"]["order"] = [0, 2, 1]  # a real list is fine too
    assert from_node_link(data) == graph


def _edited(base: dict[str, Any], mutate: Any) -> dict[str, Any]:
    data = copy.deepcopy(base)
    mutate(data)
    return data


BAD_NODE_LINK = [
    ({"nodes": "x"}, "not node-link data: expected networkx node-link data whose nodes have"),
    ({"nodes": []}, "node-link data has no nodes"),
    ({"nodes": [{"label": "a"}], "links": []}, "node-link data not recognised: expected"),
    ({"nodes": ["a"], "links": []}, "not recognised"),
    (_edited(CHECKMATE_SAMPLE, _delete(("nodes", 2, "cost_ram"))), "node 2 ('conv_grad'): missing field 'cost_ram'"),
    (_edited(CHECKMATE_SAMPLE, _set(("nodes", 1, "backward"), "yes")), "node 1 ('Loss') backward: expected true"),
    (_edited(CHECKMATE_SAMPLE, _set(("nodes", 2, "id"), 0)), "node 2: duplicate id 0 (also node 0)"),
    (_edited(CHECKMATE_SAMPLE, _set(("links", 1, "target"), 9)), "link 1: unknown node 9"),
    (_edited(CHECKMATE_SAMPLE, _delete(("links", 0, "source"))), "link 0: missing field 'source'"),
    (_edited(CHECKMATE_SAMPLE, _delete(("links",))), "missing field 'links'"),
    (_edited(RANDOM_LAYERED_SAMPLE, _delete(("nodes", 1, "duration"))), "node 1 (1): missing field 'duration'"),
    (_edited(RANDOM_LAYERED_SAMPLE, _set(("nodes", 2, "out_cost"), 2.5)), "node 2 (2) out_cost: expected a whole"),
    (_edited(RANDOM_LAYERED_SAMPLE, _set(("links", 0, "1"), 7)), "link 0: unknown node 7"),
    (_edited(RANDOM_LAYERED_SAMPLE, _set(("graph", "order"), "[0, 2,")), "graph order: not a JSON list"),
    (_edited(RANDOM_LAYERED_SAMPLE, _set(("graph", "order"), "[0, 5, 1]")), "graph order[1]: unknown node 5"),
    (_edited(RANDOM_LAYERED_SAMPLE, _set(("graph",), [])), "'graph' attributes: expected a JSON object"),
    ({"nodes": [{"id": "a", "mem": "big"}], "links": []}, "node 0 ('a') mem: expected a whole number"),
    ({"nodes": [{"id": ["a"]}], "links": []}, "node 0: its id must be a string or a number"),
    ({"nodes": [{"id": "a"}], "links": [], "graph": {"outputs": ["b"]}}, "graph outputs[0]: unknown node 'b'"),
]


@pytest.mark.parametrize(("data", "message"), BAD_NODE_LINK)
def test_node_link_rejects_bad_input_naming_the_problem(data: Any, message: str) -> None:
    with pytest.raises(GraphError) as info:
        from_node_link(data)
    assert message in str(info.value)


@pytest.mark.bench
def test_node_link_reading_is_not_quadratic() -> None:
    graph = linear_chain(30_000)  # 60,001 nodes, 90,000 edges
    start = time.perf_counter()
    assert from_node_link(to_node_link(graph)) == graph
    assert graph_from_dict(graph_to_dict(graph)) == graph
    assert time.perf_counter() - start < 20


# --- benchmark graphs --------------------------------------------------------------------------------

SHARED = [
    ("rl_g1_n100.json", 100, 236, 46_319, NodeLinkFlavour.RANDOM_LAYERED),
    ("rl_g2_n250.json", 250, 944, 146_840, NodeLinkFlavour.RANDOM_LAYERED),
    ("rl_g3_n500.json", 500, 2461, 284_439, NodeLinkFlavour.RANDOM_LAYERED),
    ("rl_g4_n1000.json", 1000, 5875, 608_619, NodeLinkFlavour.RANDOM_LAYERED),
    ("cm1_fcn8_vgg_train.json", 73, 149, 13_484_795_520, NodeLinkFlavour.CHECKMATE),
    ("cm2_resnet50_train.json", 353, 751, 38_059_356_160, NodeLinkFlavour.CHECKMATE),
    ("vgg16_train.json", 45, 87, 15_825_108_992, NodeLinkFlavour.CHECKMATE),
]


@pytest.mark.parametrize(("file", "n", "m", "peak", "flavour"), SHARED)
def test_benchmark_graph_reads_with_published_sizes_and_peak(
    shared_graphs_dir: Path, file: str, n: int, m: int, peak: int, flavour: NodeLinkFlavour
) -> None:
    path = shared_graphs_dir / file
    raw = json.loads(path.read_text())
    assert detect_flavour(raw) is flavour
    graph = read_graph(path)
    assert (graph.n, graph.m) == (n, m)
    assert input_order_peak(graph) == peak
    assert graph.name == raw["graph"]["name"]
    if flavour is NodeLinkFlavour.CHECKMATE:
        assert graph.kind.count(NodeKind.LOSS) == 1
        assert {NodeKind.FORWARD, NodeKind.BACKWARD} <= set(graph.kind)


@pytest.mark.parametrize("file", [row[0] for row in SHARED])
@pytest.mark.parametrize("fmt", ["remat", "node-link"])
def test_benchmark_graph_survives_write_and_read(shared_graphs_dir: Path, tmp_path: Path, file: str, fmt: str) -> None:
    graph = read_graph(shared_graphs_dir / file)
    out = tmp_path / "copy.json"
    write_graph(graph, out, fmt=fmt)  # type: ignore[arg-type]
    assert read_graph(out) == graph


# --- files -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["remat", "node-link"])
def test_write_and_read_graph_files(sample_graph: Graph, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"graph.{fmt}.json"
    write_graph(sample_graph, path, fmt=fmt)  # type: ignore[arg-type]
    assert read_graph(path) == sample_graph
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left over


def test_written_files_put_one_node_or_edge_per_line(tmp_path: Path) -> None:
    graph = linear_chain(3)
    path = tmp_path / "chain.json"
    write_graph(graph, path)
    lines = path.read_text().splitlines()
    assert sum('"kind":' in line for line in lines) == graph.n
    assert sum(line.strip().startswith('["') and line.strip().rstrip(",").endswith('"]') for line in lines) == graph.m
    assert len(lines) == graph.n + graph.m + 12  # braces, 4 short fields, 2 list openers and closers, 2 lists
    assert '"order": ["f0", "f1", "f2", "loss", "b2", "b1", "b0"]' in path.read_text()


def test_write_graph_rejects_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown graph format 'dot'"):
        write_graph(linear_chain(1), tmp_path / "g.dot", fmt="dot")  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_read_graph_names_the_path_on_every_failure(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(GraphError, match=f"{missing}: cannot read"):
        read_graph(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "remat-graph",')
    with pytest.raises(GraphError, match=f"{broken}: invalid JSON"):
        read_graph(broken)
    unknown = tmp_path / "unknown.json"
    unknown.write_text("[1, 2, 3]")
    with pytest.raises(GraphError, match=f"{unknown}: unrecognised content: expected a 'remat-graph' object"):
        read_graph(unknown)
    bad_node = tmp_path / "bad_node.json"
    data = _chain_dict()
    del data["nodes"][1]["mem"]
    bad_node.write_text(json.dumps(data))
    with pytest.raises(GraphError, match=rf"{bad_node}: node 1 \('f1'\): missing field 'mem'"):
        read_graph(bad_node)


def test_read_graph_refuses_a_schedule_file(tmp_path: Path) -> None:
    graph = linear_chain(2)
    path = tmp_path / "plan.json"
    write_schedule(path, eager_frees(graph, graph.order), graph)
    with pytest.raises(GraphError, match="format 'remat-schedule' is not a graph format"):
        read_graph(path)


def test_atomic_write_into_missing_folder_raises_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "absent" / "graph.json"
    with pytest.raises(OutputError, match="does not exist"):
        write_json_atomic(target, {"a": 1})
    assert not (tmp_path / "absent").exists()
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("data", "error"),
    [({"a": object()}, TypeError), ({"a": [float("nan")]}, ValueError), ({1: "non-string key"}, TypeError)],
)
def test_atomic_write_keeps_the_old_file_when_serialising_fails(
    tmp_path: Path, data: Any, error: type[Exception]
) -> None:
    target = tmp_path / "graph.json"
    write_graph(linear_chain(2), target)
    before = target.read_bytes()
    with pytest.raises(error):
        write_json_atomic(target, data)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["graph.json"]


def test_atomic_write_refuses_a_folder_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "inside").write_text("keep")
    with pytest.raises(OutputError, match="a folder, not a regular file"):
        write_json_atomic(tmp_path / "taken", {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert (tmp_path / "taken" / "inside").read_text() == "keep"


def test_atomic_write_gives_new_files_the_usual_mode(tmp_path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    target = tmp_path / "plain.json"
    write_json_atomic(target, [])
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_atomic_write_replaces_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "data.json"
    target.write_text("old")
    write_json_atomic(target, {"new": [1, 2]})
    assert json.loads(target.read_text()) == {"new": [1, 2]}


# --- schedules ---------------------------------------------------------------------------------------


def _plan(graph: Graph) -> Schedule:
    return eager_frees(graph, graph.order)


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_schedule_round_trip(graph: Graph) -> None:
    schedule = _plan(graph)
    data = through_json(schedule_to_dict(schedule, graph, {"method": "input-order"}))
    assert data["graph_hash"] == graph.content_hash
    assert data["metadata"] == {"method": "input-order"}
    assert schedule_from_dict(data, graph) == schedule


def test_schedule_with_recomputation_round_trips_through_a_file(tmp_path: Path) -> None:
    graph = linear_chain(3)
    f0, f1 = graph.index["f0"], graph.index["f1"]
    steps = [Compute(f0), Compute(f1), Free(f0), Compute(f0), *_plan(graph).steps[2:]]
    path = tmp_path / "plan.json"
    metadata = {"budget": 5, "method": "manual", "nested": {"trajectory": [[0.5, 7.0]]}}
    write_schedule(path, Schedule.of(steps), graph, metadata)
    data = json.loads(path.read_text())
    assert data["steps"][:3] == [["compute", "f0"], ["compute", "f1"], ["free", "f0"]]
    assert data["metadata"] == metadata
    assert read_schedule(path, graph) == Schedule.of(steps)


def test_schedule_for_another_graph_is_rejected_naming_both() -> None:
    small, large = linear_chain(2), linear_chain(3)
    data = schedule_to_dict(_plan(small), small)
    with pytest.raises(InvalidScheduleError) as info:
        schedule_from_dict(data, large)
    message = str(info.value)
    for text in ("linear_chain_n2", "linear_chain_n3", small.content_hash, large.content_hash):
        assert text in message


def _schedule_dict() -> dict[str, Any]:
    graph = linear_chain(2)
    return schedule_to_dict(_plan(graph), graph)


BAD_SCHEDULES = [
    (_set(("steps", 1), ["compute", "zz"]), "step 1: unknown node 'zz'", 1),
    (
        _set(("steps", 0), ["run", "f0"]),
        "step 0: unknown op 'run' (expected one of ['compute', 'free', 'free_host', 'offload', 'prefetch'])",
        0,
    ),
    (_set(("steps", 2), ["free"]), "step 2: expected [op, node name]", 2),
    (_set(("steps", 2), "free f0"), "step 2: expected [op, node name]", 2),
    (_set(("steps", 3), ["free", 0]), "step 3: unknown node 0", 3),
    (_delete(("steps",)), "missing field 'steps'", None),
    (_set(("steps",), {}), "steps: expected a list", None),
    (_delete(("graph_hash",)), "missing field 'graph_hash'", None),
    (_delete(("metadata",)), "missing field 'metadata'", None),
    (_set(("metadata",), []), "metadata: expected a JSON object", None),
    (_set(("format",), "remat-graph"), "unknown format 'remat-graph' (expected 'remat-schedule')", None),
    (_set(("version",), 0), "unsupported version 0", None),
]


@pytest.mark.parametrize(("mutate", "message", "step"), BAD_SCHEDULES)
def test_bad_schedule_data_is_rejected_naming_the_problem(mutate: Any, message: str, step: int | None) -> None:
    data = _schedule_dict()
    mutate(data)
    with pytest.raises(InvalidScheduleError) as info:
        schedule_from_dict(data, linear_chain(2))
    assert message in str(info.value)
    assert info.value.step == step


def test_read_schedule_names_the_path_and_keeps_the_step(tmp_path: Path) -> None:
    graph = linear_chain(2)
    missing = tmp_path / "missing.json"
    with pytest.raises(InvalidScheduleError, match=f"{missing}: cannot read"):
        read_schedule(missing, graph)
    path = tmp_path / "plan.json"
    data = _schedule_dict()
    data["steps"][4] = ["compute", "nope"]
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidScheduleError, match=f"{path}: step 4: unknown node 'nope'") as info:
        read_schedule(path, graph)
    assert info.value.step == 4


def test_schedule_to_dict_rejects_steps_outside_the_graph() -> None:
    graph = linear_chain(1)
    with pytest.raises(InvalidScheduleError, match="step 1"):
        schedule_to_dict(Schedule.of([Compute(0), Compute(99)]), graph)


def test_decoded_schedule_simulates_like_the_original(sample_graph: Graph) -> None:
    schedule = _plan(sample_graph)
    back = schedule_from_dict(through_json(schedule_to_dict(schedule, sample_graph)), sample_graph)
    assert simulate(sample_graph, back).peak == simulate(sample_graph, schedule).peak
    assert np.array_equal(simulate(sample_graph, back).timeline, simulate(sample_graph, schedule).timeline)
