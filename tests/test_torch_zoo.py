"""A tiny Hugging Face model (from a config, random weights) returning a ModelOutput: planned and run exactly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import input_order_peak, simulate  # noqa: E402
from remat_models.planning.plan import plan  # noqa: E402

torch.set_num_threads(1)
ZOO_FILE = Path(__file__).resolve().parents[1] / "examples" / "zoo.py"
_spec = importlib.util.spec_from_file_location("remat_example_zoo", ZOO_FILE)
zoo = importlib.util.module_from_spec(_spec)
sys.modules["remat_example_zoo"] = zoo
_spec.loader.exec_module(zoo)


def test_tiny_gpt2_model_output_plans_and_matches_autograd() -> None:
    model, tokens, targets, loss_fn = zoo.gpt2(size="tiny")
    reference, *_ = zoo.gpt2(size="tiny")
    output = reference(tokens)
    assert type(output).__name__ == "CausalLMOutputWithCrossAttentions"  # a ModelOutput, not a tensor
    want = loss_fn(output, targets)
    want.backward()
    torch_graph = rt.extract(model, tokens, loss_fn, targets, name="gpt2")
    graph = torch_graph.graph
    budget = input_order_peak(graph)
    result = plan(graph, budget, "chen-sqrtn")
    checked = simulate(graph, result.schedule)
    assert checked.peak <= budget and checked.recomputations > 0
    step = rt.RematStep(model, torch_graph, result)
    assert torch.allclose(step(tokens, targets), want.detach())
    for got, expected in zip(model.parameters(), reference.parameters(), strict=True):
        assert (got.grad is None) == (expected.grad is None)
        if expected.grad is not None:
            assert torch.allclose(got.grad, expected.grad, atol=1e-6)


def test_sac_policy_finds_every_op_of_a_hugging_face_gpt2() -> None:
    """HF GPT-2 calls ``expand``/``clone`` in another order than the trace: keys count per op and output shapes."""
    model, tokens, targets, loss_fn = zoo.gpt2(size="tiny")
    plan = rt.sac_plan(model, tokens, loss_fn, targets, activation_budget=0.0)
    assert plan.blocks  # the default regions: the layers
    loss_fn(rt.checkpointed(model, plan)(tokens), targets).backward()
    assert plan.unmatched == 0
