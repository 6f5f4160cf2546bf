"""The plan cache of the torch APIs: a second process reuses a plan; corrupt or foreign entries are ignored."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import remat_models.torch as rt  # noqa: E402
from remat_models.core.schedule import simulate  # noqa: E402
from remat_models.errors import ConfigurationError  # noqa: E402
from remat_models.heuristics.saveset import saveset_schedule  # noqa: E402
from remat_models.torch.save_budget import eager_peak  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STEP = """
import logging, sys, torch
import remat_models.torch as rt
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
inputs, targets = torch.randn(4, 8), torch.randn(4, 4)

def compile_step(cache_dir):
    return rt.compile(model, inputs, torch.nn.functional.mse_loss, targets, activation_budget=0.0,
                      backend="aot_eager", method="saveset", cache_dir=cache_dir)
"""
SECOND = (
    STEP
    + """
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
step = compile_step(sys.argv[1])
step(inputs, targets).backward()
assert step.plan.fits
"""
)


def compile_here(cache_dir: Path | None):
    namespace: dict = {}
    exec(STEP, namespace)  # the same step the child process compiles
    return namespace["compile_step"](cache_dir)


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def check(step) -> None:
    """The plan's save set simulates to its predicted peak, within the budget."""
    plan = step.plan
    graph = plan.joint.graph
    saved = np.array([graph.names.index(name) for name in plan.saved], dtype=np.int64)
    assert simulate(graph, saveset_schedule(graph, saved)).peak == plan.predicted_peak
    assert plan.predicted_peak <= plan.budget and plan.fits


def test_a_second_process_reuses_the_plan(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="remat_models"):
        check(compile_here(tmp_path))
    assert "save-set partition: planned" in caplog.text
    assert len(entries(tmp_path)) == 1
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-c", SECOND, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert child.returncode == 0, child.stderr
    assert "plan cache: reusing" in child.stderr
    assert "save-set partition: planned" not in child.stderr


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "invalid JSON"),
        (None, "not a save set of this graph"),  # a well-formed entry naming values the graph lacks
    ],
)
def test_corrupt_or_foreign_entries_are_ignored_with_a_warning(tmp_path: Path, caplog, content, why) -> None:
    compile_here(tmp_path)
    (entry,) = entries(tmp_path)
    if content is None:
        data = json.loads(entry.read_text())
        data["payload"]["saved"] = ["no_such_node"]
        content = json.dumps(data)
    entry.write_text(content)
    with caplog.at_level(logging.INFO, logger="remat_models"):
        step = compile_here(tmp_path)
    assert why in caplog.text and "plan cache: ignoring" in caplog.text
    assert "save-set partition: planned" in caplog.text  # planned anew...
    check(step)
    assert json.loads(entry.read_text())["payload"]["saved"] == list(step.plan.saved)  # ...and stored again


def test_an_entry_over_its_budget_is_not_trusted(tmp_path: Path, caplog) -> None:
    step = compile_here(tmp_path)
    (entry,) = entries(tmp_path)
    data = json.loads(entry.read_text())
    data["payload"]["budget"] = step.plan.predicted_peak - 1  # claims a budget its save set does not fit
    entry.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="remat_models"):
        check(compile_here(tmp_path))
    assert "over the budget" in caplog.text


def test_an_exact_save_set_above_eager_is_reused(tmp_path: Path, caplog) -> None:
    """``saveset-exact`` spans the partitioner's view, whose least peak lies above eager's here: still reused."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 32), nn.Linear(32, 8))
    inputs, targets = torch.randn(16, 16), torch.randn(16, 8)
    settings = dict(activation_budget=1.0, backend="aot_eager", method="saveset-exact", cache_dir=tmp_path)
    first = rt.compile(model, inputs, torch.nn.functional.mse_loss, targets, **settings)
    assert first.plan.budget > first.plan.joint.graph.fixed_mem + eager_peak(
        rt.extract(model, inputs, torch.nn.functional.mse_loss, targets).graph
    )
    with caplog.at_level(logging.INFO, logger="remat_models"):
        second = rt.compile(model, inputs, torch.nn.functional.mse_loss, targets, **settings)
    assert "plan cache: reusing" in caplog.text and "plan cache: ignoring" not in caplog.text
    assert second.plan.saved == first.plan.saved and second.plan.fits


def test_the_executor_route_reuses_and_validates_its_schedule(tmp_path: Path, caplog) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    inputs, targets = torch.randn(4, 8), torch.randn(4, 4)
    loss_fn = torch.nn.functional.mse_loss

    def planned():
        return rt.plan(model, inputs, loss_fn, targets, budget="100%", method="chen-greedy", cache_dir=tmp_path)

    first = planned()
    with caplog.at_level(logging.INFO, logger="remat_models"):
        second = planned()
    assert "plan cache: reusing" in caplog.text
    assert second.schedule == first.schedule and second.plan_result.method == first.plan_result.method
    assert simulate(second.torch_graph.graph, second.schedule).peak <= second.plan_result.budget
    (entry,) = entries(tmp_path)
    data = json.loads(entry.read_text())
    data["payload"]["schedule"]["steps"] = data["payload"]["schedule"]["steps"][1:]  # the first Compute lost
    entry.write_text(json.dumps(data))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="remat_models"):
        third = planned()
    assert "plan cache: ignoring" in caplog.text
    assert third.schedule == first.schedule


def test_no_cache_and_bad_cache_dirs(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    inputs = torch.randn(2, 4)
    rt.plan(model, inputs, lambda out: out.sum(), method="chen-greedy", cache_dir=None)
    with pytest.raises(ConfigurationError, match="cache_dir"):
        rt.plan(model, inputs, lambda out: out.sum(), method="chen-greedy", cache_dir=3)
