"""Alternative CPU implementations of traced ops (MONeT's operator choice), bit-identical to eager.

Attached with ``attach_impls(torch_graph)`` and run by the executor for ``Compute(v, impl)``:

- ``input_act``: ReLU's backward ``threshold_backward(grad, relu(x), 0)`` (PyTorch's default,
  output-activated) computed from the ReLU's input instead: ``threshold_backward(grad, x, 0)``.
  ``relu(x) > 0`` exactly when ``x > 0``, so the gradient is the same bit for bit; the step reads
  x's producer instead of the ReLU's output.

In-place ReLU, bit-packed sign masks and in-place residual adds are not attached yet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import fx

from remat_models.core.impls import Impl, with_impls
from remat_models.errors import InvalidScheduleError
from remat_models.torch.mapping import Role, TorchGraph

log = logging.getLogger(__name__)

_THRESHOLD_BACKWARD = torch.ops.aten.threshold_backward.default
_RELU = torch.ops.aten.relu.default


def attach_impls(torch_graph: TorchGraph) -> TorchGraph:
    """``torch_graph`` with the alternative implementations above attached to its graph."""
    graph = torch_graph.graph
    index = {node: v for v, node in enumerate(torch_graph.fx_nodes)}
    impls: dict[int, list[Impl]] = {}
    for v, node in enumerate(torch_graph.fx_nodes):
        source = _relu_input_owner(torch_graph, node, index)
        if source is None:
            continue
        relu_v, x_v = source
        preds = set(graph.preds(v).tolist())
        if relu_v not in preds:
            continue
        reads = tuple(sorted((preds - {relu_v}) | {x_v}))
        cost, workspace = float(graph.cost[v]), int(graph.workspace[v])
        impls[v] = [
            Impl("output_act", cost, workspace),
            Impl("input_act", cost, workspace, reads=reads, tag="input_act"),
        ]
    log.info("%s: %d ReLU backward steps get an input-activated implementation", graph.name, len(impls))
    return replace(torch_graph, graph=with_impls(graph, impls) if impls else graph)


def _relu_input_owner(tg: TorchGraph, node: fx.Node, index: dict[fx.Node, int]) -> tuple[int, int] | None:
    """(graph node of the ReLU, graph node holding its input) if ``node`` is ReLU's backward, else None."""
    if node.target is not _THRESHOLD_BACKWARD or len(node.args) < 3 or node.args[2] != 0:
        return None
    relu = _through_inline(tg, node.args[1])
    if relu is None or relu.target is not _RELU or relu not in index:
        return None
    owner = _through_inline(tg, relu.args[0])
    if owner is None or owner not in index:
        return None
    return index[relu], index[owner]


def _through_inline(tg: TorchGraph, node: Any) -> fx.Node | None:
    """The first non-inline node reached from ``node`` through inline nodes' first argument."""
    while isinstance(node, fx.Node) and tg.roles.get(node) is Role.INLINE:
        node = node.args[0] if node.args else None
    return node if isinstance(node, fx.Node) else None


def run_impl(tg: TorchGraph, v: int, impl: int, value_of: Callable[[fx.Node], Any]) -> Any:
    """Run implementation ``impl`` of graph node v (0: the traced op itself is run by the executor)."""
    impls = tg.graph.impls
    name = impls[v][impl].name if impls is not None and 0 <= impl < len(impls[v]) else None
    node = tg.fx_nodes[v]
    if name == "input_act":
        relu = _through_inline(tg, node.args[1])
        assert relu is not None
        return _THRESHOLD_BACKWARD(value_of(node.args[0]), value_of(relu.args[0]), *node.args[2:])
    raise InvalidScheduleError(f"{node.name!r}: the executor has no implementation {name or impl!r}")
