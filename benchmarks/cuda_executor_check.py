"""Run planned schedules (recompute-only and paging) on a CUDA device and compare with plain autograd.

For every example model: extract the graph on the device, plan with a heuristic (FastSA at 80 %) and a
paging plan (offload idle values, input order), run both with the executor on CUDA, and check that the loss
and every gradient are bit-identical to the executor's input-order run, that the executor's live device bytes
equal the simulator's timeline at every step, and that torch's allocator peak matches the prediction.

    python benchmarks/cuda_executor_check.py [--deterministic]   # needs torch with CUDA

Every run starts from the same seed (GPT-2 has dropout). The input-order schedule is run twice first: where
CUDA kernels are not deterministic, even two identical runs differ; ``--deterministic`` turns on
``torch.use_deterministic_algorithms`` (set ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` for cuBLAS).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch

import remat_models.torch as rt
from remat_models.core.budget import parse_budget
from remat_models.core.schedule import input_order_schedule, simulate
from remat_models.core.transfer import TransferModel
from remat_models.heuristics.idle_offload import page_idle_values
from remat_models.planning.plan import plan
from remat_models.torch.api import fixed_tensors

MODELS = Path(__file__).resolve().parents[1] / "examples" / "models.py"
TRANSFER = TransferModel(out_bw=1e6, in_bw=1e6, host_capacity=1 << 34)


def _models():
    spec = importlib.util.spec_from_file_location("remat_example_models", MODELS)
    module = importlib.util.module_from_spec(spec)
    sys.modules["remat_example_models"] = module
    spec.loader.exec_module(module)
    return module


def _to(device, value):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return type(value)(_to(device, v) for v in value) if isinstance(value, (tuple, list)) else value


def check(name: str, device: torch.device) -> list[str]:
    model, inputs, targets, loss_fn = _models().EXAMPLES[name]()
    model, inputs, targets = model.to(device), _to(device, inputs), _to(device, targets)
    torch_graph = rt.extract(model, inputs, loss_fn, targets, name=name)
    graph = torch_graph.graph
    fixed = fixed_tensors(model, torch_graph.traced, inputs, targets)
    executor = rt.Executor(torch_graph)

    def run(schedule, transfer=None):  # every run draws the same dropout masks
        torch.manual_seed(0)
        return executor.run(schedule, fixed, transfer=transfer)

    reference = run(input_order_schedule(graph))
    again = run(input_order_schedule(graph))
    deterministic = all(
        (g is None and r is None) or torch.equal(g, r) for g, r in zip(again.grads, reference.grads, strict=True)
    )
    rows = [f"{name:7s} input order twice: gradients {'bit-identical' if deterministic else 'DIFFER'}"]
    plans = {
        "fastsa 80%": (plan(graph, parse_budget("80%", graph), "fastsa", time_limit=10).schedule, None),
        "paging": (page_idle_values(graph, graph.order, min_gap=2), TRANSFER),
    }
    for label, (schedule, transfer) in plans.items():
        simulation = simulate(graph, schedule, transfer)
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        result = run(schedule, transfer)
        torch.cuda.synchronize(device)
        measured = torch.cuda.max_memory_allocated(device) - base
        same = torch.equal(result.loss, reference.loss) and all(
            (g is None and r is None) or torch.equal(g, r) for g, r in zip(result.grads, reference.grads, strict=True)
        )
        timeline = np.array_equal(result.timeline, simulation.timeline - graph.fixed_mem)
        rows.append(
            f"{name:7s} {label:11s} gradients {'bit-identical' if same else 'DIFFER'}; tracker == sim: {timeline};"
            f" predicted peak {simulation.peak - graph.fixed_mem:,} B, allocator peak {measured:,} B"
        )
    return rows


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    if "--deterministic" in sys.argv:
        torch.use_deterministic_algorithms(True)
    device = torch.device("cuda")
    print(torch.__version__, torch.cuda.get_device_name(device))
    for name in ("mlp", "resnet", "unet", "gpt2"):
        for row in check(name, device):
            print(row)


if __name__ == "__main__":
    main()
