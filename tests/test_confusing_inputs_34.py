"""Issue #34, silently ignored or confusing inputs: each is a refusal (one line) or a warning now."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from remat_models.cli.options import parse_pairs, transfer_model
from remat_models.errors import BudgetError, ConfigurationError

REMAT = [sys.executable, "-P", "-m", "remat_models.cli.app"]


def _remat(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REMAT, *args], capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"})


def test_repeated_keys_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="-O sets 'C' twice"):
        parse_pairs(["C=2", "C=3"], "-O")
    with pytest.raises(ConfigurationError, match="--transfer sets 'bw' twice"):
        transfer_model("bw=1,bw=2")


def test_a_bandwidth_per_second_needs_flops() -> None:
    with pytest.raises(ConfigurationError, match="bytes per second: give flops="):
        transfer_model("bw=25GB/s")
    assert transfer_model("bw=25GB/s,flops=1e12") is not None
    assert transfer_model("bw=25e9") is not None  # a plain number: bytes per cost unit


def test_cli_refuses_repeated_options_in_one_line(chain8: Path) -> None:
    for args in (["-O", "C=2", "-O", "C=3", "-f", "moccasin"], ["-f", "checkmate", "--transfer", "bw=1,bw=2"]):
        done = _remat("solve", str(chain8), "-b", "80%", "--time-limit", "3", *args)
        assert done.returncode == 1 and done.stderr.startswith("error:") and "twice" in done.stderr
        assert "Traceback" not in done.stderr


def test_a_recompute_only_heuristic_says_it_does_not_offload(chain8: Path) -> None:
    done = _remat("solve", str(chain8), "-b", "80%", "-m", "chen-greedy", "--transfer", "bw=2e6")
    assert done.returncode == 0 and "chen-greedy never offloads" in done.stderr


def test_simulate_a_graph_whose_nodes_hold_no_memory(chain8: Path, tmp_path: Path) -> None:
    data = json.loads(chain8.read_text())
    for node in data["nodes"]:
        node["mem"] = 0
    zero = tmp_path / "zero.json"
    zero.write_text(json.dumps(data))
    plan = tmp_path / "plan.json"
    assert _remat("solve", str(zero), "-b", "100", "-m", "chen-greedy", "-o", str(plan)).returncode == 0
    done = _remat("simulate", str(zero), str(plan))
    assert done.returncode == 0, done.stderr
    assert "ZeroDivisionError" not in done.stderr and "0 B (- of input order)" in done.stdout


def test_save_budgets_are_checked_before_torch_compiles() -> None:
    pytest.importorskip("torch")
    from remat_models.torch.save_budget import SaveBudget

    for budget in (-5, 0, math.nan, math.inf, True, [1]):
        with pytest.raises(BudgetError):
            SaveBudget(budget=budget)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="activation_budget must be a number"):
        SaveBudget(activation=True)
    assert SaveBudget(budget="60%").budget == "60%" and SaveBudget(activation=1).activation == 1
