"""Maximum batch size of a PyTorch model: extract at two batch sizes, check a third, search (spec B.2).

The training step is traced (fake tensors) at ``batches[0]`` and ``batches[1]``; nodes are matched by name
and must form the same op sequence. Memory, workspace and fixed memory (parameters, buffers, inputs,
targets) must be affine in the batch with whole bytes, and the third extraction must match the
prediction, else ``GraphError``. Costs are those of the first extraction: FLOP costs grow with the batch,
and a cap relative to one pass (``cap_factor``) is invariant under that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from remat_models.core.batch import BatchScaling
from remat_models.core.graph import Graph
from remat_models.core.units import parse_size
from remat_models.errors import ConfigurationError
from remat_models.planning.maxbatch import MaxBatchResult
from remat_models.planning.maxbatch import max_batch as max_batch_of_graph
from remat_models.torch.api import RematStep, Tensors, extract
from remat_models.torch.costs import CostModel
from remat_models.torch.mapping import TorchGraph
from remat_models.torch.trace import LossFn

MakeInputs = Callable[[int], tuple[Tensors, Tensors | None]]  # batch -> (inputs, targets or None)
EXTRACTION_BATCHES = (2, 4, 8)  # batch 1 is avoided: some ops special-case it


@dataclass(frozen=True)
class TorchMaxBatch:
    """The search's result, the extracted graph (carrying its batch scaling) and, on request, the step at the batch."""

    result: MaxBatchResult
    graph: Graph
    scaling: BatchScaling
    step: RematStep | None = None


def batch_scaling(
    model: nn.Module,
    make_inputs: MakeInputs,
    loss_fn: LossFn,
    *,
    batches: Sequence[int] = EXTRACTION_BATCHES,
    cost: CostModel = "flops",
) -> Graph:
    """The graph extracted at ``batches[0]``, carrying the scaling fitted on two batches and checked on the third."""
    if len(batches) != 3 or len(set(batches)) != 3 or min(batches) < 1:
        raise ConfigurationError(f"three different batch sizes >= 1 are needed, got {tuple(batches)}")
    graphs = [_extract(model, make_inputs, loss_fn, batch, cost) for batch in batches]
    scaling = BatchScaling.from_pair(graphs[0], batches[0], graphs[1], batches[1])
    scaling.verify(graphs[2], batches[2])
    return scaling.attach(graphs[0])


def max_batch(
    model: nn.Module,
    make_inputs: MakeInputs,
    loss_fn: LossFn,
    *,
    memory: int | str,
    batches: Sequence[int] = EXTRACTION_BATCHES,
    cost: CostModel = "flops",
    build_step: bool = False,
    **options: Any,
) -> TorchMaxBatch:
    """Largest batch at which ``model``'s training step fits ``memory`` (bytes or '16GB') under the cost cap.

    ``make_inputs(batch)`` returns ``(inputs, targets)`` (targets None for a loss of the outputs alone).
    ``options`` go to :func:`remat_models.planning.maxbatch.max_batch` (``heuristic=``, ``formulation=``, ``backend=``,
    ``method=``, ``cap_factor=``, ``time_limit=``, ...). With ``build_step`` the step is traced at the
    found batch (checked against the scaling) and returned ready to run: ``loss = step(inputs, targets)``.
    """
    graph = batch_scaling(model, make_inputs, loss_fn, batches=batches, cost=cost)
    scaling = graph.batch_scaling
    assert scaling is not None
    result = max_batch_of_graph(graph, parse_size(memory), **options)
    step = None
    if build_step and result.schedule is not None:
        torch_graph = _extract_graph(model, make_inputs, loss_fn, result.batch, cost)
        scaling.verify(torch_graph.graph, result.batch)
        step = RematStep(model, torch_graph, result.schedule)
    return TorchMaxBatch(result, graph, scaling, step)


def _extract(model: nn.Module, make_inputs: MakeInputs, loss_fn: LossFn, batch: int, cost: CostModel) -> Graph:
    return _extract_graph(model, make_inputs, loss_fn, batch, cost).graph


def _extract_graph(
    model: nn.Module, make_inputs: MakeInputs, loss_fn: LossFn, batch: int, cost: CostModel
) -> TorchGraph:
    made = make_inputs(batch)
    if not (isinstance(made, tuple) and len(made) == 2):
        raise ConfigurationError(f"make_inputs({batch}) must return (inputs, targets), got {type(made).__name__}")
    inputs, targets = made
    return extract(model, inputs, loss_fn, targets, cost=cost, name=f"{type(model).__name__}")
