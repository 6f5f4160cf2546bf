"""Bad input to the PyTorch front end is refused when planning, with one typed error naming it (not at step())."""

from __future__ import annotations

import copy
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import typer  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import remat_models.torch as rt  # noqa: E402
from remat_models.cli.torch_commands import from_torch, validate  # noqa: E402
from remat_models.core.schedule import simulate  # noqa: E402
from remat_models.errors import ConfigurationError, GraphError, InputTypeError, OutputError  # noqa: E402

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
MODELS_FILE = ROOT / "examples" / "models.py"
_spec = importlib.util.spec_from_file_location("remat_example_models_bad_input", MODELS_FILE)
models = importlib.util.module_from_spec(_spec)
sys.modules["remat_example_models_bad_input"] = models
_spec.loader.exec_module(models)


class WritesInput(nn.Module):
    """A linear layer whose forward first writes into its input (``how``) in place."""

    def __init__(self, how: Callable[[torch.Tensor], object]) -> None:
        super().__init__()
        self.how = how
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.how(x)
        return self.lin(x)


@pytest.mark.parametrize(
    ("how", "op"),
    [(lambda x: x.mul_(2), r"aten\.mul_\.Tensor"), (lambda x: x[:, 0].zero_(), r"aten\.zero_\.default")],
    ids=["whole", "view"],
)
def test_an_in_place_write_into_an_input_is_refused_by_plan(how: Callable[[torch.Tensor], object], op: str) -> None:
    x, t = torch.randn(3, 4), torch.randn(3, 4)
    with pytest.raises(GraphError, match=rf"{op} writes input 0 \(torch\.float32 \[3, 4\]\) in place"):
        rt.plan(WritesInput(how), x, F.mse_loss, t, method="checkpoint-all")


def test_an_in_place_write_into_a_target_is_refused_by_plan() -> None:
    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(out, target.clamp_(min=0))

    x, t = torch.randn(3, 4), torch.randn(3, 4)
    with pytest.raises(GraphError, match=r"aten\.clamp_\.default writes target 0 \(torch\.float32 \[3, 4\]\)"):
        rt.plan(nn.Linear(4, 4), x, loss_fn, t, method="checkpoint-all")


def test_integer_inputs_to_a_linear_layer_are_refused_by_plan() -> None:
    x, t = torch.randint(0, 5, (3, 4)), torch.randn(3, 2)
    with pytest.raises(GraphError, match=r"aten\.addmm\.default mixes dtypes \(.*mat1 torch\.int64 \[3, 4\], "):
        rt.plan(nn.Linear(4, 2), x, F.mse_loss, t, method="checkpoint-all")


def test_mixed_dtypes_in_a_batched_matmul_name_the_op() -> None:
    class Batched(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(2, 4, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w

    x = torch.randn(2, 3, 4, dtype=torch.float64)
    with pytest.raises(GraphError, match=r"aten\.bmm\.default mixes dtypes \(self torch\.float64.*torch\.float32"):
        rt.plan(Batched(), x, lambda out: out.sum(), method="checkpoint-all")


def _eager(model: nn.Module, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    loss = F.cross_entropy(model(x), t)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


@pytest.mark.parametrize("method", ["checkpoint-all", "chen-sqrtn"])
def test_batchnorm_in_eval_mode_plans_and_runs_like_autograd(method: str) -> None:
    model, x, t, _ = models.resnet()
    model.eval()
    reference = copy.deepcopy(model)
    loss_want, grads_want = _eager(reference, x, t)
    step = rt.plan(model, x, F.cross_entropy, t, budget="100%", method=method)
    assert not any(n.startswith("copy_") for n in step.torch_graph.graph.names)  # eval updates no running stats
    loss = step(x, t, track=True)
    assert torch.equal(loss, loss_want)
    for got, want in zip((p.grad for p in model.parameters()), grads_want, strict=True):
        assert torch.equal(got, want)
    for got, want in zip(model.buffers(), reference.buffers(), strict=True):
        assert torch.equal(got, want)
    simulated = simulate(step.torch_graph.graph, step.schedule)
    assert step.last is not None
    assert np.array_equal(step.last.timeline, simulated.timeline - step.torch_graph.fixed_mem)


def test_norms_without_running_stats_trace() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True), nn.Flatten(), nn.Linear(64, 2))
    x, t = torch.randn(2, 3, 6, 6), torch.randint(0, 2, (2,))
    reference = copy.deepcopy(model)
    _, grads_want = _eager(reference, x, t)
    step = rt.plan(model, x, F.cross_entropy, t, method="checkpoint-all")
    step(x, t)
    for got, want in zip((p.grad for p in model.parameters()), grads_want, strict=True):
        assert torch.equal(got, want)


def test_plan_of_something_that_is_not_a_module() -> None:
    with pytest.raises(InputTypeError, match=r"expected an nn\.Module as the model, got function '.*<lambda>'"):
        rt.plan(lambda t: t, torch.randn(3), lambda out: out.sum())  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match=r"loss_fn must be callable, got str 'mse'"):
        rt.extract(nn.Linear(3, 1), torch.randn(2, 3), "mse")  # type: ignore[arg-type]


def test_a_loss_that_is_not_a_scalar_names_its_shape() -> None:
    x, t = torch.randn(5, 4), torch.randint(0, 3, (5,))
    with pytest.raises(GraphError, match=r"loss_fn must return a scalar tensor, got shape \[5\]") as caught:
        rt.plan(nn.Linear(4, 3), x, lambda out, target: F.cross_entropy(out, target, reduction="none"), t)
    assert "FakeTensor" not in str(caught.value)


def test_time_costs_need_at_least_one_repeat() -> None:
    with pytest.raises(ConfigurationError, match="repeats must be >= 1, got 0"):
        rt.extract(nn.Linear(3, 1), torch.randn(2, 3), lambda out: out.sum(), cost="time", repeats=0)


FACTORIES = """
import torch
from torch import nn
from torch.nn import functional as F


def broken(batch=2):
    raise ValueError("no weights here\\nsecond line")


def fixed_batch():
    return nn.Linear(3, 2), torch.randn(4, 3), torch.randn(4, 2), F.mse_loss


def linear(batch=2):
    return nn.Linear(3, 2), torch.randn(batch, 3), torch.randn(batch, 2), F.mse_loss
"""


@pytest.fixture
def factories(tmp_path: Path) -> Path:
    path = tmp_path / "factories.py"
    path.write_text(FACTORIES)
    return path


def _invoke(*args: str) -> BaseException | None:
    """Run the torch commands on their own app; return what they raised."""
    app = typer.Typer()
    app.command("from-torch")(from_torch)
    app.command("validate")(validate)
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code != 0, result.output
    return result.exception


@pytest.mark.parametrize("command", ["from-torch", "validate"])
def test_cli_factory_that_raises_or_takes_no_batch(factories: Path, tmp_path: Path, command: str) -> None:
    out = ["-o", str(tmp_path / "g.json")] if command == "from-torch" else []
    error = _invoke(command, f"{factories}:broken", *out)
    assert isinstance(error, ConfigurationError)
    assert str(error) == f"{factories}:broken raised ValueError: no weights here"
    error = _invoke(command, f"{factories}:fixed_batch", "--batch", "4", *out)
    assert isinstance(error, ConfigurationError)
    assert f"{factories}:fixed_batch takes no 'batch' argument" in str(error) and "\n" not in str(error)


@pytest.mark.parametrize("command", ["from-torch", "validate"])
def test_cli_refuses_a_batch_below_one(factories: Path, tmp_path: Path, command: str) -> None:
    graph = tmp_path / "g.json"
    out = ["-o", str(graph)] if command == "from-torch" else []
    error = _invoke(command, f"{factories}:linear", "--batch", "0", *out)
    assert isinstance(error, ConfigurationError) and str(error) == "batch must be >= 1, got 0"
    assert not graph.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--repeats", "0"], r"^repeats must be >= 1, got 0$"),
        (["--device", "tpu"], r"^unknown device 'tpu'; available here: cpu"),
        (["--device", "meta"], r"^device 'meta' is not available here; available: cpu"),
        (["--device", "cuda:7"], r"^device 'cuda:7' is not available here"),
    ],
)
def test_cli_validate_refuses_repeats_and_devices(factories: Path, flags: list[str], message: str) -> None:
    if flags[-1] == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    error = _invoke("validate", f"{factories}:linear", *flags)
    assert isinstance(error, ConfigurationError)
    assert re.search(message, str(error)), str(error)


def test_cli_from_torch_refuses_an_unknown_device(factories: Path, tmp_path: Path) -> None:
    error = _invoke("from-torch", f"{factories}:linear", "-o", str(tmp_path / "g.json"), "--device", "tpu")
    assert isinstance(error, ConfigurationError) and "unknown device 'tpu'" in str(error)


def test_cli_from_torch_refuses_to_write_over_its_example_file(factories: Path) -> None:
    before = factories.read_text()
    error = _invoke("from-torch", f"{factories}:linear", "-o", str(factories))
    assert isinstance(error, OutputError) and "is the input" in str(error)
    assert factories.read_text() == before
