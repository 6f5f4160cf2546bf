"""Per-block selective activation checkpointing from a save-set plan, on real PyTorch (eager autograd)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch_steps import seeded_grads  # noqa: E402

import remat_models.torch as rt  # noqa: E402
from remat_models.core.graph import Graph, Node, NodeKind  # noqa: E402
from remat_models.core.schedule import Compute, simulate  # noqa: E402
from remat_models.errors import ConfigurationError  # noqa: E402
from remat_models.heuristics.saveset import (  # noqa: E402
    NO_REGION,
    Regions,
    replay_sequence,
    saveset_range,
    saveset_schedule,
)
from remat_models.torch.sac import candidate_levels  # noqa: E402
from remat_models.torch.validate import profiled_peak  # noqa: E402

torch.set_num_threads(1)

MODELS_FILE = Path(__file__).resolve().parents[1] / "examples" / "models.py"
_spec = importlib.util.spec_from_file_location("remat_example_models_sac", MODELS_FILE)
models = importlib.util.module_from_spec(_spec)
sys.modules["remat_example_models_sac"] = models
_spec.loader.exec_module(models)

SHARES = (1.0, 0.5, 0.0)


@pytest.fixture(scope="module")
def gpt2():
    """The example GPT-2 (dropout 0.1, training mode), batch 4, its eager step, and per-block plans."""
    model, tokens, targets, loss_fn = models.gpt2(batch=4)
    model.train()
    eager = seeded_grads(model, lambda: loss_fn(model(tokens), targets))
    plans = {
        b: rt.sac_plan(model, tokens, loss_fn, targets, activation_budget=b, blocks=list(model.blocks)) for b in SHARES
    }
    return model, tokens, targets, loss_fn, eager, plans


def _measured(model, tokens, targets, loss_fn, run) -> int:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    return profiled_peak(lambda: loss_fn(run(tokens), targets).backward())


@pytest.mark.parametrize("share", SHARES)
def test_per_block_gradients_bit_identical_with_dropout(gpt2, share: float) -> None:
    model, tokens, targets, loss_fn, (eager_loss, eager_grads), plans = gpt2
    plan = plans[share]
    run = rt.checkpointed(model, plan)
    loss, grads = seeded_grads(model, lambda: loss_fn(run(tokens), targets))
    assert torch.equal(loss, eager_loss)  # the same dropout masks: random ops are saved, never redrawn
    assert all(torch.equal(got, want) for got, want in zip(grads, eager_grads, strict=True))
    assert plan.unmatched == 0  # every op of every block found at its place in the trace
    assert plan.predicted_peak <= plan.budget
    assert all("forward" not in block.__dict__ for block in plan.blocks)  # the blocks are restored


def test_per_block_peak_falls_below_saving_everything(gpt2) -> None:
    model, tokens, targets, loss_fn, _, plans = gpt2
    measured = {b: _measured(model, tokens, targets, loss_fn, rt.checkpointed(model, plans[b])) for b in SHARES}
    eager = _measured(model, tokens, targets, loss_fn, model)
    assert measured[0.0] < measured[0.5] < measured[1.0]
    assert measured[0.0] < 0.85 * eager  # below eager's own peak, which saves everything its ops need
    predicted = [plans[b].predicted_peak for b in SHARES]
    assert predicted == sorted(predicted, reverse=True) and predicted[-1] < predicted[0]


def test_regions_reach_below_the_whole_model_replay(gpt2) -> None:
    """One region replayed at the backward's start cannot go below saving everything; per-block regions can."""
    _, _, _, _, _, plans = gpt2
    plan = plans[0.0]
    graph = plan.torch_graph.graph
    whole_least, _ = saveset_range(graph, replay=True)
    least, most = saveset_range(graph, regions=plan.regions)
    assert least < whole_least and least < most
    saved = np.array(sorted(plan.saved), dtype=np.int64)
    steps = list(saveset_schedule(graph, saved, regions=plan.regions))
    assert simulate(graph, steps).peak == plan.predicted_peak
    # the first block (region 0) is replayed after the backward has passed through the second block
    computes = [s.node for s in steps if isinstance(s, Compute)]
    backward_start = next(k for k, v in enumerate(computes) if graph.kind[v] is NodeKind.BACKWARD)
    replayed = [k for k, v in enumerate(computes[backward_start:], backward_start) if graph.kind[v] is NodeKind.FORWARD]
    first_region = [k for k in replayed if plan.regions.label[computes[k]] == 0]
    second_region = [k for k in replayed if plan.regions.label[computes[k]] == 1]
    assert first_region and second_region and max(second_region) < min(first_region)


def test_blocks_by_name_predicate_match_the_module_list(gpt2) -> None:
    model, tokens, targets, loss_fn, _, plans = gpt2
    plan = rt.sac_plan(
        model, tokens, loss_fn, targets, activation_budget=0.0, blocks=lambda name: name in ("blocks.0", "blocks.1")
    )
    assert plan.blocks == plans[0.0].blocks
    assert plan.saved == plans[0.0].saved


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        (lambda model: [torch.nn.Linear(2, 2)], "submodules of the model"),
        (lambda model: lambda name: False, "names no submodule"),
        (lambda model: [model.blocks[0], model.blocks[0].attn], "lies inside block"),
        (lambda model: [model.blocks[0], model.blocks[0]], "twice"),
    ],
)
def test_bad_blocks_are_configuration_errors(gpt2, blocks, message: str) -> None:
    model, tokens, targets, loss_fn, _, _ = gpt2
    with pytest.raises(ConfigurationError, match=message):
        rt.sac_plan(model, tokens, loss_fn, targets, activation_budget=0.5, blocks=blocks(model))


def test_each_region_replays_just_before_the_backward_first_reads_it() -> None:
    """Two regions (a0 a1 | b0 b1): a region's output leaves it (kept); its inner values replay on demand."""
    forward = [Node("x", recomputable=False), *(Node(v, mem=10) for v in ("a0", "a1", "b0", "b1"))]
    backward = [Node(v, kind=NodeKind.BACKWARD) for v in ("gb1", "gb0", "ga1", "ga0")]
    edges = [("x", "a0"), ("a0", "a1"), ("a1", "b0"), ("b0", "b1"), ("b1", "loss"), ("loss", "gb1"), ("b0", "gb1")]
    edges += [("gb1", "gb0"), ("a1", "gb0"), ("gb0", "ga1"), ("a0", "ga1"), ("ga1", "ga0"), ("x", "ga0")]
    graph = Graph([*forward, Node("loss", kind=NodeKind.LOSS), *backward], edges)
    regions = Regions.of(graph, np.array([NO_REGION, 0, 0, 1, 1, NO_REGION, *[NO_REGION] * 4]))
    assert [graph.names[v] for v in np.flatnonzero(regions.internal)] == ["a0", "b0"]
    assert regions.first_read.tolist() == [2, 0]  # region 0 at ga1, region 1 at gb1 (backward positions)
    saved = np.array([graph.index[v] for v in ("x", "a1", "b1")])
    sequence = [graph.names[v] for v in replay_sequence(graph, saved, regions=regions)]
    assert sequence == ["x", "a0", "a1", "b0", "b1", "loss", "b0", "gb1", "gb0", "a0", "ga1", "ga0"]
    everything = np.arange(5)  # nothing dropped: no replay
    assert len(replay_sequence(graph, everything, regions=regions)) == graph.n


def test_batch_norm_regions_replay_without_touching_the_running_statistics() -> None:
    """Batch norm matches eager's ``native_batch_norm``, so its regions can drop values; a replay leaves the
    buffers as eager's step leaves them, gradients are bit-identical and the measured peak is the predicted one."""
    model, images, labels, loss_fn = models.resnet()
    model.train()
    start = {name: buffer.clone() for name, buffer in model.named_buffers()}
    eager_loss, eager_grads = seeded_grads(model, lambda: loss_fn(model(images), labels))
    eager_buffers = {name: buffer.clone() for name, buffer in model.named_buffers()}
    eager_peak = _measured(model, images, labels, loss_fn, model)
    plan = rt.sac_plan(model, images, loss_fn, labels, activation_budget=0.0)
    assert plan.blocks, "no region was worth checkpointing"
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(start[name])
    run = rt.checkpointed(model, plan)
    loss, grads = seeded_grads(model, lambda: loss_fn(run(images), labels))
    assert torch.equal(loss, eager_loss) and plan.unmatched == 0
    assert all(torch.equal(got, want) for got, want in zip(grads, eager_grads, strict=True))
    for name, buffer in model.named_buffers():
        assert torch.equal(buffer, eager_buffers[name]), f"{name} differs from eager's after one step"
    predicted = plan.predicted_peak - plan.torch_graph.fixed_mem
    measured = _measured(model, images, labels, loss_fn, run)
    assert measured <= predicted * 1.01 and measured < eager_peak


def test_default_regions_go_one_level_finer_where_blocks_repeat_inside() -> None:
    """A Hugging Face ResNet's stages hold a Sequential of conv layers: the finer level is a candidate."""
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("remat_example_zoo_sac", MODELS_FILE.parent / "zoo.py")
    zoo = importlib.util.module_from_spec(spec)
    sys.modules["remat_example_zoo_sac"] = zoo
    spec.loader.exec_module(zoo)
    model = zoo.resnet(size="tiny")[0]
    coarse, fine = candidate_levels(model)
    assert coarse == list(model.resnet.encoder.stages)
    assert len(fine) > len(coarse) and all(type(block).__name__ == "ResNetConvLayer" for block in fine)
    gpt2 = models.gpt2(batch=1)[0]
    assert candidate_levels(gpt2) == [list(gpt2.blocks)]  # a transformer block holds no repeated children
