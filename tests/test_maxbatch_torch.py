"""Maximum batch of a PyTorch model: affine scaling from two extractions checked on a third (spec B.2)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from remat_models.core.batch import schedule_limit  # noqa: E402
from remat_models.core.schedule import input_order_schedule, simulate  # noqa: E402
from remat_models.errors import GraphError  # noqa: E402
from remat_models.planning.maxbatch import max_batch as max_batch_of_graph  # noqa: E402
from remat_models.torch import extract, max_batch  # noqa: E402

torch.set_num_threads(1)
MEMORY = 60_000


def small_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 24), nn.ReLU(), nn.Linear(24, 24), nn.ReLU(), nn.Linear(24, 4))


def make_inputs(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(batch)
    return torch.randn(batch, 16, generator=generator), torch.randint(0, 4, (batch,), generator=generator)


def test_checkpoint_all_batch_matches_an_extraction_at_that_batch() -> None:
    model = small_mlp()
    found = max_batch(model, make_inputs, F.cross_entropy, memory=MEMORY, heuristic="checkpoint-all")
    batch = found.result.batch
    assert found.result.status == "feasible" and batch > 8
    assert not found.scaling.proportional_memory  # parameters and their gradients are constant in the batch
    inputs, targets = make_inputs(batch)
    at_batch = extract(model, inputs, F.cross_entropy, targets).graph
    found.scaling.verify(at_batch, batch)  # the affine prediction holds at the batch found
    assert simulate(at_batch, input_order_schedule(at_batch)).peak <= MEMORY
    inputs, targets = make_inputs(batch + 1)
    bigger = extract(model, inputs, F.cross_entropy, targets).graph
    assert simulate(bigger, input_order_schedule(bigger)).peak > MEMORY
    assert schedule_limit(found.graph, input_order_schedule(found.graph), MEMORY) == batch


def test_recomputation_raises_the_batch_and_the_step_runs_it() -> None:
    model = small_mlp()
    found = max_batch(model, make_inputs, F.cross_entropy, memory=MEMORY, heuristic="chen-greedy", build_step=True)
    baseline = max_batch_of_graph(found.graph, MEMORY, heuristic="checkpoint-all")
    result = found.result
    assert result.batch >= baseline.batch
    assert result.peak is not None and result.peak <= MEMORY and result.total_cost <= result.cap
    assert found.step is not None
    inputs, targets = make_inputs(result.batch)
    loss = found.step(inputs, targets, track=True)
    assert found.step.last is not None and found.step.last.peak == found.step.predicted_peak
    assert torch.allclose(loss, F.cross_entropy(model(inputs), targets))


class Pairwise(nn.Module):
    """Its memory grows with the square of the batch (a batch x batch similarity matrix)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        return h @ h.T


def test_memory_not_affine_in_the_batch_is_a_graph_error() -> None:
    def make(batch: int) -> tuple[torch.Tensor, None]:
        return torch.randn(batch, 8), None

    with pytest.raises(GraphError, match="not affine in the batch"):
        max_batch(Pairwise(), make, lambda out: out.sum(), memory=10**6, heuristic="checkpoint-all")
