"""Operator implementations: graph validation, JSON, default view, simulator, eager frees, exhaustive oracle."""

from __future__ import annotations

import json

import pytest
from impl_graphs import A1_OPTIMA, A2_OPTIMA, A3_OPTIMA, A4_OPTIMA, a1_inplace, a2_mask, a3_inplace_output, a4_conv

from remat_models.core.graph import Graph, Node
from remat_models.core.impls import Impl, with_impls
from remat_models.core.schedule import Compute, Free, eager_frees, input_order_schedule, lift_schedule, simulate
from remat_models.errors import GraphError, InvalidScheduleError
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.io.graph_json import graph_from_dict, graph_to_dict
from remat_models.io.node_link import from_node_link, to_node_link
from remat_models.io.schedule_json import schedule_from_dict, schedule_to_dict


def test_graph_fields_hash_and_default_view() -> None:
    graph = a2_mask()
    assert graph.aux_of.tolist() == [-1, -1, 1, -1, -1, -1] and graph.n_aux == 1
    assert [impl.name for impl in graph.impls[5]] == ["input", "output", "mask"]
    assert graph.impl_table.reads[5][2] == (2, 4)
    view = graph.default_view()
    assert view.n == 5 and "m" not in view.names
    assert sorted(view.edge_names()) == [("L", "g_r"), ("g_r", "g_x"), ("r", "L"), ("x", "g_x"), ("x", "r")]
    plain = graph.default_view()
    assert plain.impls is None and plain.default_view() is plain
    other = with_impls(a2_mask(), {"r": [Impl("plain", 1.0), Impl("mask", 1.25, aux=("m",))]})
    assert other.content_hash != graph.content_hash
    # a schedule of the view, lifted back, simulates the same on the full graph
    lifted = lift_schedule(graph, input_order_schedule(view))
    assert simulate(graph, lifted).peak == simulate(view, input_order_schedule(view)).peak


def test_json_round_trip_keeps_impls_and_hash() -> None:
    for graph in (a1_inplace(), a2_mask(), a3_inplace_output(), a4_conv()):
        data = json.loads(json.dumps(graph_to_dict(graph)))
        again = graph_from_dict(data)
        assert again == graph and again.impls == graph.impls
    data = graph_to_dict(a2_mask())
    assert data["nodes"][2]["aux_of"] == "r" and "impls" not in data["nodes"][2]
    data["nodes"][2]["aux_of"] = None
    with pytest.raises(GraphError, match=r"'m'.*aux_of"):
        graph_from_dict(data)
    with pytest.raises(GraphError, match="node-link data cannot hold"):
        to_node_link(a2_mask())
    assert from_node_link(to_node_link(a2_mask().default_view())) == a2_mask().default_view()


@pytest.mark.parametrize(
    ("impls", "message"),
    [
        ({"r": [Impl("p", 1.0), Impl("q", 1.0, reads=("L",))]}, "reads 'L', which is not an input"),
        (
            {"r": [Impl("p", 1.0), Impl("q", 1.0, reads=(), inplace_of="x")]},
            "in place over 'x', which it does not read",
        ),
        ({"L": [Impl("p", 1.0), Impl("q", 1.0, inplace_of="r")]}, "'r' of 4 bytes, but the node has 1"),
        ({"r": [Impl("p", 1.0, aux=("m",))]}, "implementation 0 is the default"),
        ({"r": [Impl("p", 1.0), Impl("p", 2.0)]}, "repeated or empty implementation name"),
        ({"r": [Impl("p", -1.0)]}, "invalid cost"),
        ({"r": []}, "node 'r' has no implementation"),
        (
            {"r": [Impl("p", 1.0), Impl("q", 1.0, aux=("m",))], "L": [Impl("p", 1.0), Impl("q", 1.0, aux=("m",))]},
            "exactly one producer",
        ),
        ({"r": [Impl("p", 2.0)]}, "must equal those of its implementation 0"),
    ],
)
def test_invalid_impls_name_the_node(impls: dict, message: str) -> None:
    nodes = [Node("x", 1, 4), Node("r", 1, 4), Node("m", 0, 1), Node("L", 1, 1)]
    edges = [("x", "r"), ("r", "L"), ("r", "m")]
    with pytest.raises(GraphError, match=message):
        Graph(nodes, edges, outputs=["L"], impls=impls)


def test_simulator_in_place_aux_workspace_and_recompute_cost() -> None:
    a1 = a1_inplace()
    result = simulate(a1, [Compute(0), Compute(1, 1)])
    assert result.timeline.tolist() == [4, 4] and result.total_cost == 2
    with pytest.raises(InvalidScheduleError, match="step 2: frees 'x', which is not resident"):
        simulate(a1, [Compute(0), Compute(1, 1), Free(0)])
    a2 = a2_mask()
    result = simulate(a2, eager_frees(a2, [0, (1, 1), 3, 4, (5, 2)]))
    assert result.peak == 9 and result.total_cost == 5.5 and result.recomputations == 0
    a4 = a4_conv()
    assert simulate(a4, [Compute(0), Compute(1, 1)]).peak == 8
    graph = with_impls(a1_inplace(), {"r": [Impl("plain", 1.0, recompute_cost=0.25)]})
    steps = [Compute(0), Compute(1), Free(1), Compute(1)]
    assert simulate(graph, steps).total_cost == 2.25
    assert simulate(a4, [Compute(0), Compute(1, 1)]).tdi == pytest.approx(-50.0)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([Compute(0), Compute(2)], "step 1: computes aux value 'm' directly"),
        ([Compute(0), Compute(1, 3)], "step 1: computes 'r' with implementation 3; it has 2"),
        ([Compute(0), Compute(1, 1), Compute(3), Free(1), Compute(1, 1)], "aux value 'm' is resident"),
    ],
)
def test_simulator_impl_errors(steps: list, message: str) -> None:
    with pytest.raises(InvalidScheduleError, match=message):
        simulate(a2_mask(), steps)


def test_eager_frees_in_place_and_aux() -> None:
    a1 = a1_inplace()
    assert eager_frees(a1, [0, (1, 1)]).steps == (Compute(0), Compute(1, 1))
    a3 = a3_inplace_output()
    with pytest.raises(InvalidScheduleError, match="after an in-place step consumed its input 'x'"):
        eager_frees(a3, [0, (1, 1), 2, (3, 0)])
    a2 = a2_mask()
    steps = eager_frees(a2, [0, (1, 1), 3, 4, (5, 0)]).steps
    assert Free(2) in steps[:4]  # the unread mask goes right after its producer
    with pytest.raises(InvalidScheduleError, match="implementation 1, but the graph has no implementations"):
        eager_frees(a1.default_view(), [(0, 0), (1, 1)])


def test_schedule_json_names_impls() -> None:
    graph = a2_mask()
    schedule = eager_frees(graph, [0, (1, 1), 3, 4, (5, 2)])
    data = schedule_to_dict(schedule, graph)
    assert ["compute", "r", "mask"] in data["steps"] and ["compute", "x"] in data["steps"]
    assert schedule_from_dict(json.loads(json.dumps(data)), graph) == schedule
    data["steps"][1] = ["compute", "r", "nope"]
    with pytest.raises(InvalidScheduleError, match="no implementation 'nope'"):
        schedule_from_dict(data, graph)


@pytest.mark.parametrize(
    ("make", "optima", "structure"),
    [
        (a1_inplace, A1_OPTIMA, "free"),
        (a4_conv, A4_OPTIMA, "free"),
        (a2_mask, A2_OPTIMA, "forward-once"),
        (a3_inplace_output, A3_OPTIMA, "forward-once"),
    ],
)
def test_exhaustive_gives_the_spec_optima(make, optima: dict, structure: str) -> None:
    graph = make()
    for budget, expected in optima.items():
        found = exhaustive_optimum(graph, budget, structure)
        if expected is None:
            assert found is None
            continue
        assert found is not None and found.cost == pytest.approx(expected)
        sim = simulate(graph, found.schedule)
        assert sim.peak <= budget and sim.total_cost == pytest.approx(expected)


def test_lower_bound_uses_the_cheapest_impl() -> None:
    assert a1_inplace().lower_bound == 4 and a1_inplace().default_view().lower_bound == 8
    assert a4_conv().lower_bound == 4
