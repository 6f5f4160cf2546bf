"""`remat bench run` guards (issue 17): killed sweeps leave nothing running, one sweep per results file,
unwritable results and misspelled methods fail before the first run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from remat_models.bench.methods import method_from_mapping
from remat_models.bench.pools import run_sweep
from remat_models.bench.sweep import expand, load_sweep, sweep_from_options
from remat_models.cli.bench import bench_app
from remat_models.errors import ConfigurationError, OutputError
from remat_models.io import linear_chain, write_graph

HANG = f"{Path(__file__).resolve().parent / 'test_bench.py'}:hang"  # sleeps 60 s in the run's process


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.json"
    write_graph(linear_chain(4), path)
    return path


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status  # a zombie has stopped running


def _wait_for(condition: object, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to find the run's process")
def test_a_killed_sweep_leaves_no_run_behind_and_a_second_sweep_is_refused(chain: Path, tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    options = ["-g", str(chain), "-b", "0.9", "-m", HANG, "-o", str(results), "--time-limit", "30", "--grace", "30"]
    sweep = subprocess.Popen([sys.executable, "-m", "remat_models.cli.app", "bench", "run", *options])
    try:
        assert _wait_for(lambda: _children(sweep.pid), 60), "the sweep started no run"
        (child,) = _children(sweep.pid)
        folder = Path(Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[-2].decode()).parent
        assert folder.is_dir()
        again = sweep_from_options([str(chain)], ["0.9"], [HANG], time_limit=30, grace=30)
        started: list[int] = []
        with pytest.raises(ConfigurationError, match="being written by another `remat bench run`"):
            run_sweep(expand(again), results, on_start=lambda pending, done: started.append(pending))
        assert started == []
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait()
        assert _wait_for(lambda: not _alive(child), 10), f"run {child} outlived its killed sweep"
        assert _wait_for(lambda: not folder.exists(), 5), f"{folder} was left behind"
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()


def test_an_unwritable_results_file_fails_before_the_first_run(chain: Path, tmp_path: Path) -> None:
    runs = expand(sweep_from_options([str(chain)], ["0.9"], [HANG], time_limit=30, grace=30))
    started: list[int] = []
    with pytest.raises(OutputError, match="cannot write results"):
        run_sweep(runs, tmp_path, on_start=lambda pending, done: started.append(pending))  # a folder
    if os.geteuid() == 0:
        read_only = Path("/sys/remat-results.jsonl")  # root writes through permission bits
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        read_only = tmp_path / "ro" / "r.jsonl"
    with pytest.raises(OutputError, match="cannot write results"):
        run_sweep(runs, read_only, on_start=lambda pending, done: started.append(pending))
    assert started == []


def test_a_misspelled_method_fails_when_the_sweep_is_loaded(chain: Path, tmp_path: Path) -> None:
    sweep_file = tmp_path / "typo.toml"
    sweep_file.write_text(f'graphs = ["{chain}"]\nbudgets = ["90%"]\nmethods = ["chen-greedy", "chen-gredy"]\n')
    with pytest.raises(ConfigurationError, match="unknown method 'chen-gredy'; choose one of"):
        load_sweep(sweep_file)
    for typo, message in (
        ("checkmate/higs", "unknown backend 'higs'"),
        ("checkmat/highs", "unknown formulation"),
    ):
        sweep_file.write_text(f'graphs = ["{chain}"]\nbudgets = ["90%"]\nmethods = ["{typo}"]\n')
        with pytest.raises(ConfigurationError, match=message):
            load_sweep(sweep_file)
    with pytest.raises(ConfigurationError, match="unknown approximation 'lp-roundin'; choose one of lp-rounding"):
        method_from_mapping({"formulation": "checkmate", "approx": "lp-roundin"})
    app = typer.Typer()
    app.add_typer(bench_app, name="bench")
    result = CliRunner().invoke(app, ["bench", "run", str(sweep_file), "-o", str(tmp_path / "out.jsonl")])
    assert result.exit_code != 0 and isinstance(result.exception, ConfigurationError)
    assert not (tmp_path / "out.jsonl").exists()
