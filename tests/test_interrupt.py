"""Ctrl-C (SIGINT) during a real solve: the incumbent is kept and the status says interrupted (issue 17)."""

from __future__ import annotations

import importlib.util
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from remat_models.budget import parse_budget
from remat_models.io import read_graph, read_schedule
from remat_models.schedule import simulate

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "graphs" / "unet_train.json"
READY = "Ctrl-C stops it"  # logged (with -v) once the solver runs in its worker thread


def _minizinc_missing() -> bool:
    return importlib.util.find_spec("minizinc") is None or shutil.which("minizinc") is None


@pytest.mark.parametrize(
    ("formulation", "backend"),
    [
        ("checkmate", "highs"),
        ("checkmate", "cpsat"),
        pytest.param(
            "checkmate",
            "minizinc",
            marks=pytest.mark.skipif(_minizinc_missing(), reason="needs the minizinc binary and package"),
        ),
    ],
)
def test_sigint_keeps_the_incumbent_and_says_interrupted(tmp_path: Path, formulation: str, backend: str) -> None:
    out = tmp_path / "plan.json"
    args = ["-v", "solve", str(EXAMPLE), "-b", "60%", "-f", formulation, "--backend", backend]
    args += ["--init", "chen-greedy", "--time-limit", "600", "-o", str(out)]
    solve = subprocess.Popen(
        [sys.executable, "-m", "remat_models.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(solve.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while not any(READY in line for line in lines) and time.monotonic() < deadline and solve.poll() is None:
            time.sleep(0.2)
        assert any(READY in line for line in lines), "".join(lines)
        time.sleep(1.0)  # let the solver start searching from the warm start
        solve.send_signal(signal.SIGINT)
        stdout, _ = solve.communicate(timeout=120)
    finally:
        if solve.poll() is None:
            solve.kill()
            solve.wait()
    reader.join(5)
    stderr = "".join(lines)
    assert solve.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert "interrupted" in stdout  # the solver table shows the status
    graph = read_graph(EXAMPLE)
    schedule = read_schedule(out, graph)  # the incumbent was written
    assert simulate(graph, schedule).peak <= parse_budget("60%", graph)
