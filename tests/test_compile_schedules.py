"""torch.compile running any planner's schedule: the emitted order is the plan's; gradients are eager's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_steps import seeded_grads  # noqa: E402

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import Compute, eager_frees, simulate  # noqa: E402
from remat_models.errors import ConfigurationError  # noqa: E402
from remat_models.torch.schedule_partition import SchedulePlan  # noqa: E402

torch.set_num_threads(1)
nn = torch.nn


@pytest.fixture(scope="module")
def mlp():
    """An MLP with dropout (a random op the schedules must never redraw) and its eager loss and gradients."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 8)
    )
    inputs, targets = torch.randn(16, 16), torch.randn(16, 8)
    loss_fn = torch.nn.functional.mse_loss
    return model, inputs, targets, loss_fn, seeded_grads(model, lambda: loss_fn(model(inputs), targets))


@pytest.mark.parametrize(("method", "share"), [("checkmate/highs", 0.0), ("auto", 0.3), ("chen-greedy", 0.5)])
def test_a_schedule_runs_compiled_as_planned(mlp, method: str, share: float) -> None:
    model, inputs, targets, loss_fn, (eager_loss, eager_grads) = mlp
    step = rt.compile(
        model, inputs, loss_fn, targets, activation_budget=share, backend="aot_eager", method=method, cache_dir=None
    )
    loss, grads = seeded_grads(model, lambda: step(inputs, targets))
    torch.testing.assert_close(loss, eager_loss)  # the dropout mask drawn once, as eager draws it
    for got, want in zip(grads, eager_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    plan = step.plan
    assert isinstance(plan, SchedulePlan) and plan.fits
    graph, schedule = plan.joint.graph, plan.result.schedule
    planned = simulate(graph, schedule)
    computes = [s.node for s in schedule if isinstance(s, Compute)]
    assert planned.peak == plan.planned_peak <= plan.budget
    assert simulate(graph, eager_frees(graph, computes)).peak == plan.emitted_peak == plan.planned_peak
    assert plan.recomputations == len(computes) - len(set(computes))  # counted on the emitted graphs
    assert plan.recomputations > 0  # these budgets need recomputation: the backward graph runs ops again


def test_an_unknown_method_is_a_configuration_error(mlp) -> None:
    model, inputs, targets, loss_fn, _ = mlp
    with pytest.raises(ConfigurationError, match="no-such-method"):
        rt.compile(model, inputs, loss_fn, targets, budget="80%", backend="aot_eager", method="no-such-method")
