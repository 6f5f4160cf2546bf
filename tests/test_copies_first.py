"""torch/copies_first.py: a plan that computes kept copies late is run with them right after their op."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_steps import example_models  # noqa: E402

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import Compute, eager_frees, input_order_schedule, simulate  # noqa: E402
from remat_models.torch.copies_first import copies_first  # noqa: E402
from remat_models.torch.split import is_kept_copy  # noqa: E402
from remat_models.torch.validate import profiled_peak  # noqa: E402

torch.set_num_threads(1)
models = example_models("remat_example_models_copies")


def test_late_kept_copies_are_moved_back_to_their_op() -> None:
    """Batch norm's statistics copied only before their first reader pin the norm's output in the Graph: the
    step runs them right after the norm (same cost, lower peak), and measures what it then predicts."""
    model, images, labels, loss_fn = models.resnet()
    reference = rt.extract(model, images, loss_fn, labels)
    graph = reference.graph
    kept = {v for v, node in enumerate(reference.fx_nodes) if is_kept_copy(node) and graph.succs(v).size}
    assert kept
    order = [step.node for step in input_order_schedule(graph).steps if isinstance(step, Compute)]
    readers = {v: min(order.index(int(w)) for w in graph.succs(v)) for v in kept}
    late = [v for v in order if v not in kept]
    for v in sorted(kept, key=readers.get, reverse=True):  # each copy just before its first reader
        late.insert(late.index(order[readers[v]]), v)
    delayed = eager_frees(graph, late)
    moved = copies_first(reference, delayed)
    before, after = simulate(graph, delayed), simulate(graph, moved)
    assert after.peak < before.peak and after.total_cost == before.total_cost
    eager_loss = loss_fn(model(images), labels)
    eager_loss.backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    step = rt.RematStep(model, reference, delayed)
    assert step.schedule == moved and step.predicted_peak == after.peak - graph.fixed_mem
    loss = step(images, labels, track=True)
    assert torch.equal(loss, eager_loss.detach())
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), want, strict=True))
    assert step.last.peak == step.predicted_peak
    model.zero_grad(set_to_none=True)
    measured = profiled_peak(lambda: step(images, labels))
    assert abs(measured - step.predicted_peak) <= 0.01 * step.predicted_peak
