"""Batch scaling (remat_models/core/batch.py): affine memory in the batch, limits, the cost cap (spec B.2, D B5)."""

from __future__ import annotations

import numpy as np
import pytest

from remat_models.core.batch import BatchScaling, cost_cap, lower_bound_limit, schedule_limit, within_cap
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import input_order_schedule, simulate
from remat_models.errors import ConfigurationError, GraphError
from remat_models.io import read_graph
from remat_models.io.generators import linear_chain

M16 = 16 * 10**9


def chain(n: int) -> Graph:
    """Checkmate's unit chain with memory 1 byte per sample."""
    graph = linear_chain(n)
    return BatchScaling.proportional(graph, 1).attach(graph)


def test_at_batch_scales_memory_and_keeps_structure() -> None:
    graph = chain(3)
    at5 = graph.at_batch(5)
    assert at5.mem.tolist() == [5] * graph.n
    assert at5.cost.tolist() == graph.cost.tolist()
    assert at5.edge_names() == graph.edge_names()
    assert simulate(at5, input_order_schedule(at5)).peak == 5 * simulate(graph, input_order_schedule(graph)).peak


def test_at_batch_needs_a_scaling() -> None:
    with pytest.raises(GraphError, match="no batch scaling"):
        linear_chain(3).at_batch(2)
    with pytest.raises(ConfigurationError, match="no batch scaling"):
        lower_bound_limit(linear_chain(3), 100)


def test_proportional_needs_divisible_sizes_and_adds_fixed_bytes() -> None:
    graph = linear_chain(3)
    doubled = Graph.from_arrays(graph.names, graph.cost, graph.mem * 2, graph.edges, kind=graph.kind, order=graph.order)
    with pytest.raises(GraphError, match="not divisible by the file batch 2"):
        BatchScaling.proportional(graph, 2)
    scaling = BatchScaling.proportional(doubled, 2, fixed=7)
    scaled = scaling.attach(doubled).at_batch(3)
    assert scaled.mem.tolist() == [3] * graph.n and scaled.fixed_mem == 7
    assert scaling.proportional_memory


def test_pair_gives_affine_scaling_and_a_third_batch_checks_it() -> None:
    base = linear_chain(3)
    const = np.arange(base.n)

    def extracted(batch: int, extra: int = 0) -> Graph:
        mem = 4 * batch + const
        mem[0] += extra
        return Graph.from_arrays(
            base.names, base.cost, mem, base.edges, kind=base.kind, order=base.order, fixed_mem=10 * batch + 3
        )

    scaling = BatchScaling.from_pair(extracted(2), 2, extracted(4), 4)
    assert scaling.mem_slope.tolist() == [4] * base.n and scaling.mem_const.tolist() == const.tolist()
    assert (scaling.fixed_slope, scaling.fixed_const) == (10, 3)
    assert not scaling.proportional_memory
    scaling.verify(extracted(8), 8)
    with pytest.raises(GraphError, match="mem of node 'f0' is not affine"):
        scaling.verify(extracted(8, extra=1), 8)
    with pytest.raises(GraphError, match="not affine in the batch"):
        BatchScaling.from_pair(extracted(2), 2, extracted(4, extra=1), 4)  # odd difference over 2 samples


def test_pair_rejects_different_op_sequences() -> None:
    a, b = linear_chain(3), linear_chain(4)
    with pytest.raises(GraphError, match="not the same op sequence"):
        BatchScaling.from_pair(a, 2, b, 4)


def test_cost_cap_counts_forward_nodes_once_more() -> None:
    assert cost_cap(linear_chain(3)) == 10  # spec D B1: 7 + 3
    assert cost_cap(linear_chain(4)) == 13
    assert cost_cap(linear_chain(8)) == 25  # loss not counted (D B3)
    assert cost_cap(linear_chain(8), kinds=(NodeKind.FORWARD, NodeKind.LOSS)) == 26
    assert cost_cap(linear_chain(8), factor=1.0) == 17
    assert within_cap(25.0 + 1e-12, 25.0) and not within_cap(25.5, 25.0)
    with pytest.raises(ConfigurationError):
        cost_cap(linear_chain(3), factor=0.5)


def test_schedule_limit_is_exact_for_affine_memory() -> None:
    graph = linear_chain(3)
    mem = np.ones(graph.n, dtype=np.int64)
    mem[graph.index["loss"]] = 0
    scaling = BatchScaling(mem, np.where(mem == 0, 6, 0), np.zeros(graph.n), np.zeros(graph.n), 0, 0)
    affine = scaling.attach(graph)
    schedule = input_order_schedule(affine)
    for memory in (10, 20, 21, 24, 30):
        batch = schedule_limit(affine, schedule, memory)
        assert simulate(affine.at_batch(batch), schedule).peak <= memory
        assert simulate(affine.at_batch(batch + 1), schedule).peak > memory
    assert schedule_limit(affine, schedule, 3) == -1  # the loss alone needs 6 bytes


@pytest.mark.parametrize(
    ("file", "file_batch", "per_sample", "checkpoint_all", "lower_limit"),
    [
        ("cm1_fcn8_vgg_train", 32, 421_399_860, 37, 61),
        ("cm2_resnet50_train", 256, None, 107, 1107),
        ("vgg16_train", 256, None, 258, 311),
    ],
)
def test_shared_graph_limits(shared_graphs_dir, file, file_batch, per_sample, checkpoint_all, lower_limit) -> None:
    """Spec D B5: the batch checkpoint-all reaches and the lower-bound limit at 16e9 bytes."""
    raw = read_graph(shared_graphs_dir / f"{file}.json")
    graph = BatchScaling.proportional(raw, file_batch).attach(raw)
    assert graph.at_batch(file_batch).content_hash == raw.content_hash
    schedule = input_order_schedule(graph)
    if per_sample is not None:
        assert simulate(graph.at_batch(1), schedule).peak == per_sample
    assert schedule_limit(graph, schedule, M16) == checkpoint_all
    assert simulate(graph.at_batch(checkpoint_all), schedule).peak <= M16
    assert simulate(graph.at_batch(checkpoint_all + 1), schedule).peak > M16
    assert lower_bound_limit(graph, M16) == lower_limit
    assert graph.at_batch(lower_limit).lower_bound <= M16 < graph.at_batch(lower_limit + 1).lower_bound
