"""The generated step (a Schedule as straight-line FX code), ops run once, and activation budgets in [0, 1]."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import Free, Schedule, input_order_schedule, simulate  # noqa: E402
from remat_models.planning.plan import PlanStatus  # noqa: E402
from remat_models.torch.api import cached_plan  # noqa: E402
from remat_models.torch.compiled_step import keep_until_free  # noqa: E402
from remat_models.torch.costs import flop_counter  # noqa: E402
from remat_models.torch.plan_cache import PlanCache  # noqa: E402
from remat_models.torch.validate import MIB, profiled_peak  # noqa: E402

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


zoo = _load("remat_example_zoo", "zoo.py")
models = _load("remat_example_models", "models.py")
ZOO = [("gpt2", "eager"), ("gpt2", "sdpa"), ("bert", "sdpa"), ("llama", "eager"), ("vit", "sdpa"), ("resnet", "eager")]


def build(name: str, attention: str):
    example = zoo.ZOO[name](size="tiny")
    if attention != "eager":
        example.model.set_attn_implementation(attention)
    return example


def eager_grads(name: str, attention: str) -> tuple[list[torch.Tensor | None], int]:
    """Gradients of one ``loss.backward()`` on a fresh model, and the FLOPs it ran."""
    model, inputs, targets, loss_fn = build(name, attention)
    with flop_counter() as counter:
        loss_fn(model(inputs), targets).backward()
    return [p.grad for p in model.parameters()], counter.get_total_flops()


def assert_same_grads(model: torch.nn.Module, want: list[torch.Tensor | None]) -> None:
    for got, expected in zip(model.parameters(), want, strict=True):
        assert (got.grad is None) == (expected is None)
        if expected is not None:
            assert torch.equal(got.grad, expected)


def assert_within_tolerance(measured: int, predicted: int) -> None:
    assert abs(measured - predicted) <= max(0.01 * predicted, MIB), (measured, predicted)


@pytest.mark.parametrize(("name", "attention"), ZOO)
def test_generated_step_runs_eager_flops_and_gradients(name: str, attention: str) -> None:
    """Nothing recomputed: the same FLOPs as eager (SDPA's backward once), bit-identical gradients, exact memory."""
    want, eager_flops = eager_grads(name, attention)
    model, inputs, targets, loss_fn = build(name, attention)
    torch_graph = rt.extract(model, inputs, loss_fn, targets, name=name)
    step = rt.RematStep(model, torch_graph, input_order_schedule(torch_graph.graph))
    assert step.generated is not None and step.simulation.recomputations == 0
    with flop_counter() as counter:
        step(inputs, targets)
    assert counter.get_total_flops() == eager_flops > 0
    assert_same_grads(model, want)
    model.zero_grad(set_to_none=True)
    assert_within_tolerance(profiled_peak(lambda: step(inputs, targets)), step.predicted_peak)


def test_multi_output_ops_run_once() -> None:
    """Every traced op call appears once in the generated code of the input order (no op split into copies)."""
    model, inputs, targets, loss_fn = build("gpt2", "sdpa")
    torch_graph = rt.extract(model, inputs, loss_fn, targets)
    step = rt.RematStep(model, torch_graph, input_order_schedule(torch_graph.graph))
    sdpa_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    calls = [n for n in step.generated.module.graph.nodes if n.target is sdpa_backward]
    assert len(calls) == zoo.SIZES["tiny"]["gpt2"]["n_layer"]  # one attention backward per layer


@pytest.mark.parametrize("name", ["gpt2", "resnet"])
def test_recomputing_plan_matches_eager_and_interpreter(name: str) -> None:
    """A plan with recomputations: each Compute is one op call, gradients bit-identical, peaks as predicted."""
    want, _ = eager_grads(name, "eager")
    model, inputs, targets, loss_fn = build(name, "eager")
    torch_graph = rt.extract(model, inputs, loss_fn, targets, name=name)
    graph = torch_graph.graph
    result = cached_plan(graph, None, 0.0, "chen-greedy", time_limit=None, cache=PlanCache(None))  # the floor
    assert result.status is PlanStatus.WITHIN_BUDGET and result.simulation.recomputations > 0
    assert result.simulation.peak <= rt.least_peak(graph) == result.budget
    step = rt.RematStep(model, torch_graph, result)
    step(inputs, targets)
    assert_same_grads(model, want)
    model.zero_grad(set_to_none=True)
    assert_within_tolerance(profiled_peak(lambda: step(inputs, targets)), step.predicted_peak)
    step.model.zero_grad(set_to_none=True)
    step(inputs, targets, track=True)  # the interpreter: live bytes equal the simulation at every step
    assert step.last.peak == step.predicted_peak == simulate(graph, result.schedule).peak - graph.fixed_mem


def test_values_live_until_their_free() -> None:
    """A Free later than the last use keeps the value: measured peak grows by exactly what the simulator adds."""
    model, inputs, targets, loss_fn = models.mlp()
    torch_graph = rt.extract(model, inputs, loss_fn, targets)
    graph = torch_graph.graph
    eager_frees = input_order_schedule(graph)
    first = int(graph.order[0])  # the first layer's output, freed early in the backward
    late = Schedule.of([s for s in eager_frees.steps if s != Free(first)] + [Free(first)])
    peaks = []
    for schedule in (eager_frees, late):
        step = rt.RematStep(model, torch_graph, schedule)
        assert any(n.target is keep_until_free for n in step.generated.module.graph.nodes) == (schedule is late)
        model.zero_grad(set_to_none=True)
        peaks.append((profiled_peak(lambda step=step: step(inputs, targets)), step.predicted_peak))
    (measured_early, predicted_early), (measured_late, predicted_late) = peaks
    assert predicted_late > predicted_early
    assert measured_late - measured_early == predicted_late - predicted_early


def test_interpreter_on_request() -> None:
    model, inputs, targets, loss_fn = models.mlp()
    torch_graph = rt.extract(model, inputs, loss_fn, targets)
    step = rt.RematStep(model, torch_graph, input_order_schedule(torch_graph.graph), compiled=False)
    assert step.generated is None
    step(inputs, targets)
    assert step.last is not None and step.last.loss.dim() == 0


def test_every_activation_budget_yields_a_plan_with_monotone_peaks() -> None:
    """0 is the least peak a plan reaches quickly (not the weak lower bound); every budget in [0, 1] gets a plan
    within it (auto's, or the floor search's where auto finds none in its second)."""
    model, inputs, targets, loss_fn = build("gpt2", "eager")
    graph = rt.extract(model, inputs, loss_fn, targets).graph
    assert graph.lower_bound < rt.least_peak(graph) == rt.activation_bytes(graph, 0)
    peaks = []
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        budget = rt.activation_bytes(graph, fraction)
        result = cached_plan(graph, None, fraction, "auto", time_limit=1, cache=PlanCache(None))
        assert result.status is PlanStatus.WITHIN_BUDGET and result.budget == budget
        peak = simulate(graph, result.schedule).peak
        assert peak <= budget
        peaks.append(peak)
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]


class ConstantsAndNorm(torch.nn.Module):
    """BatchNorm (its saved statistics are copied into own nodes) and tensor constants made in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.conv(x))) * torch.tensor([2.0]) + torch.tensor(1.0)


def test_constants_made_in_forward_and_copied_statistics() -> None:
    torch.manual_seed(0)
    model, reference = ConstantsAndNorm(), ConstantsAndNorm()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 8, 8)
    torch_graph = rt.extract(model, x, lambda out: out.square().mean())
    clones = [n for n in torch_graph.fx_nodes if n.target is torch.ops.aten.clone.default]
    assert len(clones) >= 2  # the saved mean and rstd
    step = rt.RematStep(model, torch_graph, input_order_schedule(torch_graph.graph))
    step(x)
    reference(x).square().mean().backward()
    assert_same_grads(model, [p.grad for p in reference.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(model.buffers(), reference.buffers(), strict=True))
