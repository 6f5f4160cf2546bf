"""`remat max-batch` run as a subprocess: JSON output, the written schedule, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from remat_models.core.batch import BatchScaling
from remat_models.core.schedule import simulate
from remat_models.io import read_graph, read_schedule, write_graph
from remat_models.io.generators import linear_chain


def remat(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remat_models.cli.app", *map(str, args)],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": ""},
        check=False,
    )


@pytest.fixture
def chain_file(tmp_path: Path) -> Path:
    """Checkmate's chain n=4 (1 byte per value) written as if exported at batch 1."""
    path = tmp_path / "chain4.json"
    write_graph(linear_chain(4), path)
    return path


def test_json_object_and_written_schedule(chain_file: Path, tmp_path: Path) -> None:
    """Spec D B2: chain n=4, 24 bytes, cap 13 -> batch 6; the schedule re-simulates within memory and cap."""
    out = tmp_path / "plan.json"
    run = remat("max-batch", chain_file, "--memory", "24", "--file-batch", "1", "--json", "--out", out)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert {"batch", "upper_bound", "status", "peak", "total_cost", "cap"} <= set(result)
    # the cap binds below the lower-bound limit: batch 6 is proven largest in Checkmate's model only
    assert (result["batch"], result["upper_bound"], result["status"], result["cap"]) == (6, 6, "optimal_in_model", 13)
    graph = read_graph(chain_file)
    scaled = BatchScaling.proportional(graph, 1).attach(graph).at_batch(6)
    sim = simulate(scaled, read_schedule(out, scaled))
    assert sim.peak == result["peak"] <= 24 and sim.total_cost == result["total_cost"] <= 13


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--method", "bisection", "--cap-factor", "100"], 8),  # B2 without a binding cap
        (["--fixed", "7", "--memory", "31", "-f", "moccasin", "-O", "C=3"], 6),  # B2 with fixed_const 7
    ],
)
def test_methods_and_options(chain_file: Path, extra: list[str], expected: int) -> None:
    args = ["--memory", "24", *extra] if "--memory" not in extra else extra
    run = remat("max-batch", chain_file, "--file-batch", "1", "--json", *args)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["batch"] == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--memory", "24", "--file-batch", "0"], "file batch must be"),
        (["--memory", "24XB", "--file-batch", "1"], "cannot read size"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(chain_file: Path, args: list[str], message: str) -> None:
    run = remat("max-batch", chain_file, *args)
    assert run.returncode == 1
    assert message in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_nothing_fits_exits_3(chain_file: Path) -> None:
    run = remat("max-batch", chain_file, "--memory", "2", "--file-batch", "1", "--json")
    assert run.returncode == 3
    assert json.loads(run.stdout)["status"] == "infeasible"
