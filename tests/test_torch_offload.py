"""The executor runs paging plans: exact gradients, live device bytes == the simulator's timeline; CUDA copy streams."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import Offload, Prefetch, input_order_schedule, simulate  # noqa: E402
from remat_models.core.transfer import TransferModel  # noqa: E402
from remat_models.heuristics.idle_offload import page_idle_values  # noqa: E402
from remat_models.torch.api import fixed_tensors  # noqa: E402
from remat_models.torch.copy_engine import StreamCopies, SyncCopies, copy_engine_for  # noqa: E402

torch.set_num_threads(1)
MODELS_FILE = Path(__file__).resolve().parents[1] / "examples" / "models.py"
_spec = importlib.util.spec_from_file_location("remat_example_models_offload", MODELS_FILE)
models = importlib.util.module_from_spec(_spec)
sys.modules["remat_example_models_offload"] = models
_spec.loader.exec_module(models)
TRANSFER = TransferModel(out_bw=1e6, in_bw=1e6, host_capacity=1 << 30)


@pytest.mark.parametrize("name", ["mlp", "unet"])
def test_paging_plan_runs_with_exact_gradients_and_device_bytes(name: str) -> None:
    model, inputs, targets, loss_fn = models.EXAMPLES[name]()
    torch_graph = rt.extract(model, inputs, loss_fn, targets, name=name)
    graph = torch_graph.graph
    schedule = page_idle_values(graph, graph.order, min_gap=2)
    simulation = simulate(graph, schedule, TRANSFER)
    assert simulation.offloads > 0 and simulation.prefetches > 0
    assert simulation.peak < simulate(graph, input_order_schedule(graph)).peak  # paging saves device memory

    fixed = fixed_tensors(model, torch_graph.traced, inputs, targets)
    executor = rt.Executor(torch_graph)
    paged = executor.run(schedule, fixed, transfer=TRANSFER)
    plain = executor.run(input_order_schedule(graph), fixed)
    assert torch.equal(paged.loss, plain.loss)
    for got, want in zip(paged.grads, plain.grads, strict=True):
        assert (got is None) == (want is None)
        assert want is None or torch.equal(got, want)
    # live device bytes equal the simulator's device timeline at every step, transfer steps included
    np.testing.assert_array_equal(paged.timeline, simulation.timeline - graph.fixed_mem)
    assert paged.host_peak == simulation.host_peak
    kinds = {type(step) for step in schedule.steps}
    assert Offload in kinds and Prefetch in kinds


@pytest.mark.skipif(not torch.cuda.is_available(), reason="copy streams need CUDA")
@pytest.mark.parametrize("name", ["mlp", "unet"])
def test_copy_streams_on_cuda_match_sync_copies_autograd_and_the_predicted_peak(name: str) -> None:
    device = torch.device("cuda")
    overlap = TransferModel(out_bw=1e6, in_bw=1e6, host_capacity=1 << 30, mode="overlap")
    model, inputs, targets, loss_fn = models.EXAMPLES[name]()
    model, inputs, targets = model.to(device), inputs.to(device), targets.to(device)
    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True):
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        torch_graph = rt.extract(model, inputs, loss_fn, targets, name=name)
        graph = torch_graph.graph
        schedule = page_idle_values(graph, graph.order, min_gap=2)
        simulation = simulate(graph, schedule, overlap)
        fixed = fixed_tensors(model, torch_graph.traced, inputs, targets)
        executor = rt.Executor(torch_graph)
        sync = executor.run(schedule, fixed, transfer=overlap, copies=SyncCopies(device))
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        streamed = executor.run(schedule, fixed, transfer=overlap)  # overlap mode on CUDA: StreamCopies
        torch.cuda.synchronize(device)
        measured = torch.cuda.max_memory_allocated(device) - base
    assert isinstance(copy_engine_for(device, overlap), StreamCopies)
    autograd = [p.grad for p in model.parameters()]
    assert torch.equal(streamed.loss, sync.loss) and torch.equal(streamed.loss, loss.detach())
    for got, same, want in zip(streamed.grads, sync.grads, autograd, strict=True):
        assert (got is None) == (same is None) == (want is None)
        assert want is None or (torch.equal(got, same) and torch.equal(got, want))
    np.testing.assert_array_equal(streamed.timeline, simulation.timeline - graph.fixed_mem)
    predicted = simulation.peak - graph.fixed_mem
    assert abs(measured - predicted) <= max(0.01 * predicted, 1 << 20), (measured, predicted)
