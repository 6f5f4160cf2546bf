"""Models whose forward returns dicts, dataclasses, named tuples or ModelOutputs: the loss sees that structure."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import input_order_peak, simulate  # noqa: E402
from remat_models.errors import BudgetError, GraphError  # noqa: E402
from remat_models.planning.plan import plan  # noqa: E402
from remat_models.torch.trace import output_tensors  # noqa: E402

torch.set_num_threads(1)


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    hidden: tuple[torch.Tensor, ...]
    note: str = "x"


class Pair(NamedTuple):
    logits: torch.Tensor
    aux: torch.Tensor | None


class Tiny(nn.Module):
    """Three layers; ``kind`` picks the output structure."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.kind = kind
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))

    def forward(self, x: torch.Tensor):
        hidden = []
        for layer in self.layers:
            x = torch.tanh(layer(x))
            hidden.append(x)
        if self.kind == "dict":
            return {"logits": x, "hidden": hidden, "scale": 2.0, "none": None}
        if self.kind == "dataclass":
            return Out(x, tuple(hidden))
        return Pair(x, None)


def loss_of(kind: str):
    def loss_fn(out, target):
        logits = out["logits"] if kind == "dict" else out.logits
        assert (kind == "dict") == isinstance(out, dict)
        return ((logits - target) ** 2).mean()

    return loss_fn


@pytest.mark.parametrize("kind", ["dict", "dataclass", "namedtuple"])
def test_structured_outputs_plan_and_match_autograd(kind: str) -> None:
    x, target = torch.randn(4, 8), torch.randn(4, 8)
    reference = Tiny(kind)
    loss_fn = loss_of(kind)
    want = loss_fn(reference(x), target)
    want.backward()
    model = Tiny(kind)
    torch_graph = rt.extract(model, x, loss_fn, target)
    graph = torch_graph.graph
    assert len(graph.outputs) >= 1 + 6  # the logits (and hidden states) and six parameter gradients
    budget = input_order_peak(graph)
    result = plan(graph, budget, "chen-sqrtn")
    checked = simulate(graph, result.schedule)
    assert checked.peak <= budget
    step = rt.RematStep(model, torch_graph, result)
    got = step(x, target)
    assert torch.equal(got, want.detach())
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)


def test_output_tensors_flattens_in_order_and_names_bad_leaves() -> None:
    a, b = torch.zeros(1), torch.ones(1)
    assert output_tensors({"x": a, "y": [b, a], "z": None}) == (a, b)
    assert output_tensors(Out(b, (a,))) == (b, a)
    with pytest.raises(GraphError, match=r"model output\['y'\]\[1\] is a object"):
        output_tensors({"x": a, "y": [b, object()]})


def test_activation_budget_resolves_between_the_floor_and_the_peak() -> None:
    x, target = torch.randn(4, 8), torch.randn(4, 8)
    loss_fn = loss_of("namedtuple")
    graph = rt.extract(Tiny("namedtuple"), x, loss_fn, target).graph
    floor, peak = rt.least_peak(graph), input_order_peak(graph)
    assert graph.lower_bound <= floor <= peak  # equal here: no recomputation lowers this tiny graph's peak
    assert rt.activation_bytes(graph, 0) == floor and rt.activation_bytes(graph, 1) == peak
    assert rt.activation_bytes(graph, 0.5) == floor + (peak - floor) // 2
    with pytest.raises(BudgetError, match="activation_budget"):
        rt.activation_bytes(graph, 1.5)
    step = rt.plan(Tiny("namedtuple"), x, loss_fn, target, activation_budget=1.0, method="chen-greedy")
    assert step.plan_result.budget == peak and step.simulation.peak <= peak
