"""PyTorch operator implementations: the executor runs Compute(v, impl) with exact gradients and exact bytes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import eager_frees, simulate  # noqa: E402
from remat_models.torch.impl_ops import attach_impls  # noqa: E402

torch.set_num_threads(1)
MODELS_FILE = Path(__file__).resolve().parents[1] / "examples" / "models.py"
_spec = importlib.util.spec_from_file_location("remat_example_models_impls", MODELS_FILE)
models = importlib.util.module_from_spec(_spec)
sys.modules["remat_example_models_impls"] = models
_spec.loader.exec_module(models)


def extract(name: str) -> rt.TorchGraph:
    model, inputs, targets, loss_fn = models.EXAMPLES[name]()
    return attach_impls(rt.extract(model, inputs, loss_fn, targets, name=name))


def check(name: str, torch_graph: rt.TorchGraph, schedule) -> None:
    """Gradients bit-identical to eager autograd; live bytes equal the simulator's timeline at every step."""
    model, inputs, targets, loss_fn = models.EXAMPLES[name]()
    torch.manual_seed(1)
    loss_fn(model(inputs), targets).backward()
    want = [p.grad for p in model.parameters()]
    model, inputs, targets, _ = models.EXAMPLES[name]()
    step = rt.RematStep(model, torch_graph, schedule)
    torch.manual_seed(1)
    step(inputs, targets, track=True)
    for got, expected in zip([p.grad for p in model.parameters()], want, strict=True):
        assert (got is None and expected is None) or torch.equal(got, expected)
    graph = torch_graph.graph
    np.testing.assert_array_equal(step.last.timeline, simulate(graph, schedule).timeline - graph.fixed_mem)


@pytest.mark.parametrize("name", ["unet"])
def test_input_activated_relu_backward_everywhere(name: str) -> None:
    torch_graph = extract(name)
    graph = torch_graph.graph
    alternatives = [v for v in range(graph.n) if len(graph.impls[v]) > 1]
    assert alternatives and all(graph.impls[v][1].name == "input_act" for v in alternatives)
    schedule = eager_frees(graph, [(int(v), 1 if v in alternatives else 0) for v in graph.order])
    check(name, torch_graph, schedule)


def test_monet_plan_runs_exactly() -> None:
    model, inputs, targets, loss_fn = models.EXAMPLES["mlp"]()
    step = rt.plan(model, inputs, loss_fn, targets, budget="70%", formulation="monet", implementations=True)
    # (a plan over the budget would have raised BudgetExceededError)
    assert any(getattr(s, "impl", 0) for s in step.schedule.steps)  # it chose input-activated steps
    check("mlp", step.torch_graph, step.schedule)
