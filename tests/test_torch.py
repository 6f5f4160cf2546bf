"""PyTorch front end on CPU: exact gradients, exact live-bytes peaks, training, errors, CLI."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import typer  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import remat_models.torch as rt  # noqa: E402
from remat_models.cli.torch_commands import from_torch, validate  # noqa: E402
from remat_models.core.budget import parse_budget  # noqa: E402
from remat_models.core.graph import NodeKind  # noqa: E402
from remat_models.core.schedule import Compute, Schedule, input_order_schedule, simulate  # noqa: E402
from remat_models.errors import BudgetInfeasibleError, GraphError, InvalidScheduleError  # noqa: E402
from remat_models.io import read_graph, read_schedule, write_schedule  # noqa: E402
from remat_models.planning.bounds import peak_lower_bound  # noqa: E402
from remat_models.planning.plan import PlanStatus, plan  # noqa: E402
from remat_models.torch.mapping import Role  # noqa: E402
from remat_models.torch.split import is_kept_copy  # noqa: E402

torch.set_num_threads(1)  # tiny models: extra intra-op threads only contend with other processes on a 2-core box
ROOT = Path(__file__).resolve().parents[1]
MODELS_FILE = ROOT / "examples" / "models.py"
_spec = importlib.util.spec_from_file_location("remat_example_models", MODELS_FILE)
models = importlib.util.module_from_spec(_spec)
sys.modules["remat_example_models"] = models
_spec.loader.exec_module(models)

MODELS = list(models.EXAMPLES)
METHODS = ["checkpoint-all", "chen-sqrtn", "chen-greedy"]
BUDGETS = ["100%", "70%", "50%"]


@pytest.fixture(scope="module")
def extracted() -> dict[str, rt.TorchGraph]:
    graphs = {}
    for name in MODELS:
        model, inputs, targets, loss_fn = models.EXAMPLES[name]()
        graphs[name] = rt.extract(model, inputs, loss_fn, targets, name=name)
    return graphs


def eager(name: str, seed: int = 1) -> tuple[torch.Tensor, list[torch.Tensor | None], dict[str, torch.Tensor]]:
    """Loss, gradients and buffers after one plain autograd step on a fresh model."""
    model, inputs, targets, loss_fn = models.EXAMPLES[name]()
    torch.manual_seed(seed)
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()], dict(model.named_buffers())


def remat(name: str, torch_graph: rt.TorchGraph, result, seed: int = 1):
    """The same step run by the executor from a schedule, on a fresh model, live bytes tracked."""
    model, inputs, targets, _ = models.EXAMPLES[name]()
    step = rt.RematStep(model, torch_graph, result)
    torch.manual_seed(seed)
    loss = step(inputs, targets, track=True)
    return loss, [p.grad for p in model.parameters()], dict(model.named_buffers()), step


def assert_same(got: list[torch.Tensor | None], want: list[torch.Tensor | None]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            assert torch.equal(g, w), float((g - w).abs().max())


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", MODELS)
def test_schedule_matches_autograd_and_simulator(extracted, name: str, method: str, budget: str) -> None:
    torch_graph = extracted[name]
    graph = torch_graph.graph
    limit = parse_budget(budget, graph)
    floor = peak_lower_bound(graph, time_limit=5.0).value  # the whole search: plan()'s own, timed, is never above it
    if limit < floor:  # the example ResNet at 50 %: below its lineage bound
        with pytest.raises(BudgetInfeasibleError, match="lower bound"):
            plan(graph, limit, method)
        limit = floor
    result = plan(graph, limit, method, allow_over_budget=True)  # over budget too: prediction vs measurement
    check_against_autograd(extracted, name, result, limit)


@pytest.mark.parametrize(("name", "budget"), [("mlp", "70%"), ("unet", "90%")])
def test_exact_formulation_schedule_matches_autograd_and_simulator(extracted, name: str, budget: str) -> None:
    """Checkmate (LP relaxation + two-phase rounding, deterministic) gives a schedule with recomputations.

    unet at 90 %: the first rounding fits (7 recomputations, 2 LPs); at 70 % none did and the allowance search
    solved 11 LPs (~20 s) for an over-budget schedule.
    """
    graph = extracted[name].graph
    limit = max(parse_budget(budget, graph), graph.lower_bound)
    result = plan(graph, limit, formulation="checkmate", backend="highs", approx="lp-rounding", allow_over_budget=True)
    assert result.simulation is not None and result.simulation.recomputations > 0
    check_against_autograd(extracted, name, result, limit)


def check_against_autograd(extracted, name: str, result, limit: int) -> None:
    """Loss, gradients and buffers bit-identical to eager; live bytes equal the simulator's timeline."""
    torch_graph = extracted[name]
    graph = torch_graph.graph
    simulation = simulate(graph, result.schedule)
    assert simulation.peak == result.simulation.peak
    if result.status is PlanStatus.WITHIN_BUDGET:
        assert simulation.peak <= limit
    want_loss, want_grads, want_buffers = eager(name)
    loss, grads, buffers, step = remat(name, torch_graph, result)
    # deterministic CPU kernels, same ops in the same order: bit-identical, not just allclose
    assert torch.equal(loss, want_loss)
    assert_same(grads, want_grads)
    assert_same(list(buffers.values()), list(want_buffers.values()))
    # the step runs the plan with kept copies first (copies_first): same cost, never a higher peak
    ran = simulate(graph, step.schedule)
    assert ran.peak <= simulation.peak and ran.total_cost == simulation.total_cost
    # live storage bytes equal the simulator's timeline at every step, exactly (no tolerance)
    np.testing.assert_array_equal(step.last.timeline, ran.timeline - graph.fixed_mem)
    assert step.last.peak == step.predicted_peak == ran.peak - graph.fixed_mem


@pytest.mark.parametrize("name", MODELS)
def test_sgd_training_matches_plain_autograd(extracted, name: str) -> None:
    torch_graph = extracted[name]
    graph = torch_graph.graph
    result = plan(graph, max(parse_budget("70%", graph), graph.lower_bound), "chen-sqrtn", allow_over_budget=True)
    assert result.simulation.recomputations > 0
    runs = []
    for planned in (False, True):
        model, inputs, targets, loss_fn = models.EXAMPLES[name]()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        step = rt.RematStep(model, torch_graph, result) if planned else None
        torch.manual_seed(3)
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            if step is None:
                loss = loss_fn(model(inputs), targets)
                loss.backward()
            else:
                loss = step(inputs, targets)
            optimizer.step()
            losses.append(loss.detach())
        runs.append((losses, [p.detach().clone() for p in model.parameters()], list(model.buffers())))
    (plain_losses, plain_params, plain_buffers), (remat_losses, remat_params, remat_buffers) = runs
    # the loss value may differ in the last bit: functionalization turns the in-place ops of eager composite
    # losses (BCE-with-logits) into out-of-place ones; gradients and hence parameters stay bit-identical
    torch.testing.assert_close(remat_losses, plain_losses, rtol=1e-6, atol=0)
    assert_same(remat_params, plain_params)
    assert_same(remat_buffers, plain_buffers)


def test_one_call_plan_api() -> None:
    model, inputs, targets, loss_fn = models.gpt2()
    step = rt.plan(model, inputs, loss_fn, targets, budget="80%", method="chen-greedy", allow_over_budget=True)
    assert step.plan_result is not None and step.plan_result.method == "chen-greedy"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(2):
        optimizer.zero_grad()
        loss = step(inputs, targets)
        optimizer.step()
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


def test_graph_mapping(extracted) -> None:
    graph = extracted["gpt2"].graph
    roles = extracted["gpt2"].roles
    assert {NodeKind.FORWARD, NodeKind.LOSS, NodeKind.BACKWARD} <= set(graph.kind)
    # views are inlined: no Graph node is a view op, and some view ops exist
    assert any(role is Role.INLINE for role in roles.values())
    view_ops = {"view", "t", "transpose", "_unsafe_view", "expand", "detach", "split", "permute"}
    assert not any(name.rstrip("_0123456789") in view_ops for name in graph.names)
    # dropout draws are not recomputable and stay in program order (the other such nodes: small copies kept)
    fx_nodes = extracted["gpt2"].fx_nodes
    random = [v for v in range(graph.n) if not graph.recomputable[v] and not is_kept_copy(fx_nodes[v])]
    assert len(random) == 5
    assert all(graph.position[a] < graph.position[b] for a, b in itertools.pairwise(random))
    # BatchNorm running stats come back as write-backs: graph outputs, never recomputed
    resnet = extracted["resnet"]
    write_backs = [v for v, node in enumerate(resnet.fx_nodes) if resnet.roles[node] is Role.WRITE_BACK]
    assert write_backs and set(write_backs) <= set(resnet.graph.outputs.tolist())
    assert not resnet.graph.recomputable[write_backs].any()
    # fixed memory covers parameters, buffers, inputs and targets
    model, inputs, targets, _ = models.resnet()
    tensors = [*model.parameters(), *model.buffers(), inputs, targets]
    assert resnet.graph.fixed_mem == sum(t.untyped_storage().nbytes() for t in tensors)


def test_flop_and_time_costs() -> None:
    model, inputs, targets, loss_fn = models.mlp(batch=16, width=64, depth=2)
    torch_graph = rt.extract(model, inputs, loss_fn, targets)
    graph = torch_graph.graph
    first = graph.order[0]
    assert torch_graph.fx_nodes[first].target is torch.ops.aten.addmm.default
    assert graph.cost[first] == 2 * 16 * 32 * 64  # (16 x 32) @ (32 x 64)
    timed = rt.extract(model, inputs, loss_fn, targets, cost="time", repeats=1)
    assert timed.graph.n == graph.n and (timed.graph.cost > 0).all()


def test_schedule_for_another_graph_is_rejected(extracted, tmp_path: Path) -> None:
    mlp, gpt = extracted["mlp"], extracted["gpt2"]
    result = plan(mlp.graph, parse_budget("100%", mlp.graph), "checkpoint-all")
    write_schedule(tmp_path / "mlp.json", result.schedule, mlp.graph)
    with pytest.raises(InvalidScheduleError, match="not for graph"):
        read_schedule(tmp_path / "mlp.json", gpt.graph)
    model, *_ = models.gpt2()
    with pytest.raises(InvalidScheduleError, match="plan is for graph"):
        rt.RematStep(model, gpt, result)
    with pytest.raises(InvalidScheduleError):
        rt.RematStep(model, gpt, result.schedule)  # indices of another graph do not simulate


def test_invalid_schedule_is_rejected(extracted) -> None:
    torch_graph = extracted["mlp"]
    steps = list(input_order_schedule(torch_graph.graph).steps)
    model, *_ = models.mlp()
    with pytest.raises(InvalidScheduleError, match="not resident"):
        rt.RematStep(
            model, torch_graph, Schedule.of([s for s in steps if s != Compute(int(torch_graph.graph.order[0]))])
        )


def test_budget_below_lower_bound() -> None:
    model, inputs, targets, loss_fn = models.mlp()
    with pytest.raises(BudgetInfeasibleError) as info:
        rt.plan(model, inputs, loss_fn, budget=1000, example_targets=targets)
    assert info.value.lower_bound > 1000


class DataDependent(torch.nn.Module):
    """Branches on a tensor value: cannot be traced with fake tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y * 2 if y.sum() > 0 else y


def test_data_dependent_control_flow_is_a_graph_error() -> None:
    with pytest.raises(GraphError, match="cannot trace"):
        rt.extract(DataDependent(), torch.randn(2, 4), lambda out: out.sum())


def test_inputs_must_match_the_trace(extracted) -> None:
    model, inputs, targets, _ = models.mlp()
    step = rt.RematStep(model, extracted["mlp"], input_order_schedule(extracted["mlp"].graph))
    with pytest.raises(GraphError, match="specialised"):
        step(inputs[:3], targets[:3])


def test_cli_from_torch_and_validate(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("from-torch")(from_torch)
    app.command("validate")(validate)
    runner = CliRunner()
    out = tmp_path / "mlp.json"
    result = runner.invoke(app, ["from-torch", f"{MODELS_FILE}:mlp", "--batch", "32", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert read_graph(out).name == "mlp"
    result = runner.invoke(
        app, ["validate", f"{MODELS_FILE}:unet", "--budget", "90%", "--device", "cpu", "--repeats", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "predicted peak" in result.output and "bit-identical" in result.output
