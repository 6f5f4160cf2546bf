"""Activation budgets on every torch route: 1 never above eager's peak, 0 the least, monotone in between."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_steps import example_models  # noqa: E402

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import input_order_peak  # noqa: E402
from remat_models.heuristics.saveset import saveset_range  # noqa: E402
from remat_models.torch.sac import repeated_blocks  # noqa: E402
from remat_models.torch.save_budget import eager_peak  # noqa: E402
from remat_models.torch.validate import profiled_peak  # noqa: E402

torch.set_num_threads(1)
nn = torch.nn
SHARES = (1.0, 0.5, 0.0)
SAVE_SET = {"backend": "aot_eager", "method": "saveset", "cache_dir": None}
models = example_models("remat_example_models_budgets")


@pytest.fixture(scope="module")
def mlp():
    """A LayerNorm/GELU MLP (its decomposed LayerNorm keeps temporaries: the joint graph's least peak, 599,588 B,
    is above eager's 599,076 B: the case the cap is for) and eager."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(64, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 8)
    )
    inputs, targets = torch.randn(64, 64), torch.randn(64, 8)
    loss_fn = torch.nn.functional.mse_loss
    eager = eager_peak(rt.extract(model, inputs, loss_fn, targets).graph)
    measured = _measured(model, lambda: loss_fn(model(inputs), targets))
    return model, inputs, targets, loss_fn, eager, measured


def _measured(model, run) -> int:
    """Allocator peak of one step ``run()`` (forward and backward) above the pre-step memory."""
    model.zero_grad(set_to_none=True)
    run()  # warm-up (compiles)
    model.zero_grad(set_to_none=True)
    peak = profiled_peak(lambda: run().backward())
    model.zero_grad(set_to_none=True)
    return peak


def test_eager_peak_is_eager_autograds_measured_peak(mlp) -> None:
    _, _, _, _, eager, measured = mlp
    assert abs(eager - measured) <= 0.01 * measured


def test_compiled_schedule_route_at_one_is_capped_by_eager() -> None:
    """The schedule route's 1: eager's peak, below the decomposed joint graph's own input-order peak."""
    model, tokens, targets, loss_fn = models.gpt2(batch=2)
    model.eval()
    eager = eager_peak(rt.extract(model, tokens, loss_fn, targets).graph)
    measured = _measured(model, lambda: loss_fn(model(tokens), targets))
    step = rt.compile(
        model,
        tokens,
        loss_fn,
        targets,
        activation_budget=1.0,
        backend="aot_eager",
        method="chen-greedy",
        cache_dir=None,
    )
    plan = step.plan
    assert plan.budget == eager < input_order_peak(plan.joint.graph)  # joint graph's fixed memory: 0
    assert plan.fits and _measured(model, lambda: step(tokens, targets)) <= measured


def test_compiled_budget_one_is_the_least_where_eager_is_below_it(mlp) -> None:
    """On this MLP no save set reaches eager's peak on the decomposed graph: 1 and 0 are both the least."""
    model, inputs, targets, loss_fn, eager, _ = mlp
    plans = [
        rt.compile(model, inputs, loss_fn, targets, activation_budget=share, **SAVE_SET).plan for share in (1.0, 0.0)
    ]
    least, _ = saveset_range(plans[0].joint.graph)
    assert eager < least == plans[0].budget == plans[1].budget
    assert all(plan.fits for plan in plans)


def test_executor_budget_one_is_eager(mlp) -> None:
    model, inputs, targets, loss_fn, _, measured = mlp
    peaks = []
    for share in SHARES:
        step = rt.plan(model, inputs, loss_fn, targets, activation_budget=share, method="chen-greedy", cache_dir=None)
        assert step.predicted_peak <= step.plan_result.budget - step.torch_graph.fixed_mem
        peaks.append(_measured(model, lambda step=step: _loss(step(inputs, targets))))
    assert peaks[0] <= measured and peaks == sorted(peaks, reverse=True) and peaks[-1] < peaks[0]


def _loss(value: torch.Tensor) -> torch.Tensor:
    """A loss already back-propagated by the executor, with a no-op ``backward`` for :func:`_measured`."""
    return value.detach().requires_grad_()


def test_repeated_blocks_are_the_largest_module_list() -> None:
    model = models.GPT(layers=2)
    assert repeated_blocks(model) == list(model.blocks)
    assert repeated_blocks(nn.Sequential(nn.Linear(2, 2), nn.GELU(), nn.Linear(2, 2))) == []


def test_sac_default_regions_never_above_eager_and_falling() -> None:
    """Default regions are the repeated blocks; at b = 1 nothing is checkpointed (eager), below it the peak falls."""
    model, tokens, targets, loss_fn = models.gpt2(batch=2)
    model.train()
    measured = _measured(model, lambda: loss_fn(model(tokens), targets))
    plans = {share: rt.sac_plan(model, tokens, loss_fn, targets, activation_budget=share) for share in SHARES}
    graph = plans[1.0].torch_graph.graph
    assert plans[1.0].blocks == [] and plans[1.0].predicted_peak == input_order_peak(graph)
    assert plans[0.0].blocks and all(any(b is m for m in model.blocks) for b in plans[0.0].blocks)
    predicted = [plans[share].predicted_peak for share in SHARES]
    assert predicted == sorted(predicted, reverse=True) and predicted[-1] < predicted[0]
    peaks = []
    for share in SHARES:
        run = rt.checkpointed(model, plans[share])
        peaks.append(_measured(model, lambda run=run: loss_fn(run(tokens), targets)))
    assert peaks[0] == measured and peaks == sorted(peaks, reverse=True) and peaks[-1] < 0.9 * measured
