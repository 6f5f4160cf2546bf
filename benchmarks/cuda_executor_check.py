"""Run planned schedules (recompute-only and paging) on a CUDA device and compare with plain autograd.

For every example model: extract the graph on the device, plan with a heuristic (FastSA at 80 %) and a
paging plan (offload idle values, input order), run both with the executor on CUDA, and check that the loss
and every gradient are bit-identical to the executor's input-order run, that the executor's live device bytes
equal the simulator's timeline at every step, and that torch's allocator peak matches the prediction.

Then the overlap-mode plans on copy streams (``StreamCopies``): the graph is extracted again with measured op
times (cost unit: seconds), the link is measured here (pinned 64 MiB copies each way, 4 KiB for the latency),
and a paging plan (idle values, input order) and a three-way plan (50 % budget, or the lower bound) under
that ``overlap`` model run with ``SyncCopies`` and ``StreamCopies``: gradients equal (to each other and to
the input order), allocator peak vs predicted, and the median step time of each (``track=False``) vs the
model's makespan. The executor is a Python loop over ATen ops: on small models its own overhead is part of
the step time.

    python benchmarks/cuda_executor_check.py [--deterministic]   # needs torch with CUDA

Every run starts from the same seed (GPT-2 has dropout). The input-order schedule is run twice first: where
CUDA kernels are not deterministic, even two identical runs differ; ``--deterministic`` turns on
``torch.use_deterministic_algorithms`` (set ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` for cuBLAS).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from dataclasses import replace
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
from remat_models.torch.copy_engine import StreamCopies, SyncCopies

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


def _same(a, b) -> bool:
    """Loss and every gradient bit-identical."""
    return torch.equal(a.loss, b.loss) and all(
        (g is None and r is None) or torch.equal(g, r) for g, r in zip(a.grads, b.grads, strict=True)
    )


def _copy_seconds(device: torch.device, nbytes: int, to_host: bool, repeats: int = 5) -> float:
    """Median seconds of one pinned, non-blocking copy of ``nbytes`` bytes in one direction."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst, src = (host, src) if to_host else (src, host)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def measured_link(device: torch.device) -> TransferModel:
    """The overlap model of this machine's host link, in seconds (bandwidth from 64 MiB, latency from 4 KiB)."""
    big, small = 64 << 20, 4 << 10
    sides = {}
    for to_host in (True, False):
        latency = _copy_seconds(device, small, to_host)
        sides[to_host] = (big / max(_copy_seconds(device, big, to_host) - latency, 1e-9), latency)
    (out_bw, out_latency), (in_bw, in_latency) = sides[True], sides[False]
    return TransferModel(out_bw=out_bw, in_bw=in_bw, out_latency=out_latency, in_latency=in_latency, mode="overlap")


def check_overlap(name: str, device: torch.device, link: TransferModel, repeats: int = 5) -> list[str]:
    """Overlap-mode plans on a time-cost graph, run with SyncCopies and StreamCopies."""
    model, inputs, targets, loss_fn = _models().EXAMPLES[name]()
    model, inputs, targets = model.to(device), _to(device, inputs), _to(device, targets)
    torch_graph = rt.extract(model, inputs, loss_fn, targets, cost="time", name=name)
    graph = torch_graph.graph
    fixed = fixed_tensors(model, torch_graph.traced, inputs, targets)
    executor = rt.Executor(torch_graph)

    def run(schedule, copies, track=True):
        torch.manual_seed(0)
        return executor.run(schedule, fixed, track=track, transfer=link, copies=copies)

    def step_time(schedule, copies) -> float:
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize(device)
            started = time.perf_counter()
            run(schedule, copies, track=False)
            torch.cuda.synchronize(device)
            times.append(time.perf_counter() - started)
        return float(np.median(times))

    reference = run(input_order_schedule(graph), SyncCopies(device))
    budget = max(parse_budget("50%", graph), graph.lower_bound)
    three_way = plan(graph, budget, "three-way", transfer=link, time_limit=10, allow_over_budget=True)
    rows = []
    for label, schedule in (
        ("paging", page_idle_values(graph, graph.order, min_gap=2)),
        ("three-way 50%", three_way.schedule),
    ):
        simulation = simulate(graph, schedule, link)
        predicted = simulation.peak - graph.fixed_mem
        sync = run(schedule, SyncCopies(device))
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        streamed = run(schedule, StreamCopies(device))
        torch.cuda.synchronize(device)
        measured = torch.cuda.max_memory_allocated(device) - base
        within = abs(measured - predicted) <= max(0.01 * predicted, 1 << 20)
        t_sync, t_stream = step_time(schedule, SyncCopies(device)), step_time(schedule, StreamCopies(device))
        rows.append(
            f"{name:7s} {label:13s} streams: gradients {'bit-identical' if _same(streamed, sync) else 'DIFFER'} to"
            f" sync, {'bit-identical' if _same(streamed, reference) else 'DIFFER'} to input order;"
            f" {simulation.offloads}/{simulation.prefetches} offloads/prefetches;"
            f" predicted peak {predicted:,} B, allocator peak {measured:,} B ({'within' if within else 'NOT within'}"
            f" 1 % or 1 MiB); step {t_stream * 1e3:.2f} ms streams, {t_sync * 1e3:.2f} ms sync;"
            f" overlap model {simulation.total_cost * 1e3:.2f} ms (compute {graph.total_cost * 1e3:.2f} ms,"
            f" serial model {simulate(graph, schedule, replace(link, mode='serial')).total_cost * 1e3:.2f} ms)"
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
    link = measured_link(device)
    print(
        f"link: out {link.out_bw / 1e9:.1f} GB/s + {link.out_latency * 1e6:.1f} us,"
        f" in {link.in_bw / 1e9:.1f} GB/s + {link.in_latency * 1e6:.1f} us"
    )
    for name in ("mlp", "resnet", "unet", "gpt2"):
        for row in check_overlap(name, device, link):
            print(row)


if __name__ == "__main__":
    main()
