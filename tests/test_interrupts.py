"""SIGINT and SIGTERM stop a real `remat solve` (formulations, their warm starts, FastSA and ``auto``): the best
schedule is printed and written.

Also: non-finite solver numbers never reach JSON or the tables, and auto's worker processes die with their parent.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from signal_runs import EXIT, SignalledRun, default_sigint

from remat_models.backends.interrupt import Stopper, run_stoppable, stop_on_signals
from remat_models.cli.app import _number
from remat_models.core.budget import parse_budget
from remat_models.core.schedule import simulate
from remat_models.formulations.outcome import SolveOutcome
from remat_models.io import linear_chain, read_graph, read_schedule, write_graph
from remat_models.model import SolveResult, SolveStatus
from remat_models.planning.result import PlanResult, PlanStatus

SOLVING = "Ctrl-C stops it"  # logged (with -v) once a solver runs
FASTSA_REPORTED = "auto: fastsa"  # logged (with -v) by auto when FastSA reports a schedule
ANNEALING = "annealing for at most"  # logged (with -v) when a FastSA run starts
WORKER = b"remat_models.planning.portfolio_worker"


@pytest.fixture(scope="module")
def tr8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 199-node transformer: no exact solver finishes on it at 70 % within seconds."""
    path = tmp_path_factory.mktemp("graphs") / "tr8.json"
    command = [sys.executable, "-m", "remat_models.cli.app", "graph", "generate", "transformer", "--size", "8"]
    subprocess.run([*command, "--seed", "1", "-o", str(path)], check=True, capture_output=True)
    return path


# `remat` with one more heuristic, "fastsa-fill": the real FastSA stretched to 60 s (fill_time), stoppable, so
# that a warm start runs long enough to be interrupted
WITH_FILLING_FASTSA = """
import sys
from remat_models.cli.app import main
from remat_models.heuristics.registry import HEURISTICS, Heuristic, register_heuristic

def fill(graph, budget, *, seed=0, stop=None, **_):
    options = {"fill_time": True}
    return HEURISTICS["fastsa"].run(graph, budget, seed=seed, time_limit=60.0, options=options, stop=stop)

register_heuristic("fastsa-fill", Heuristic(fill, stoppable=True))
main()
"""
REMAT = ["-m", "remat_models.cli.app"]


class Solve(SignalledRun):
    """A `remat -v solve` subprocess whose stderr is collected in the background."""

    def __init__(self, graph: Path, out: Path, args: list[str], budget: str = "70%", remat: list[str] = REMAT) -> None:
        command = [sys.executable, *remat, "-v", "solve", str(graph), "-b", budget, *args]
        super().__init__([*command, "-o", str(out)], columns=200)  # log lines unwrapped


def _check_written(graph_path: Path, out: Path) -> None:
    """The file is strict JSON (no Infinity, NaN) and its schedule simulates within 70 %."""
    json.loads(out.read_text(), parse_constant=lambda name: pytest.fail(f"{name} in {out}"))
    graph = read_graph(graph_path)
    assert simulate(graph, read_schedule(out, graph)).peak <= parse_budget("70%", graph)


def _check_interrupted(code: int, stdout: str, stderr: str, signum: signal.Signals, method: str) -> None:
    assert code == EXIT[signum], stderr
    assert "Traceback" not in stderr and f"interrupted ({signum.name})" in stderr, stderr
    assert method in stdout and "fits" in stdout  # the table of the best schedule
    assert "inf" not in stdout and "nan" not in stdout


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_checkmate_stopped_by_a_signal_prints_and_writes_its_best(
    tr8: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "x.json"
    solve = Solve(tr8, out, ["-f", "checkmate", "--time-limit", "60"])
    solve.wait_for(SOLVING)
    time.sleep(1.0)  # HiGHS has no bound yet (-inf): it must be written as null, shown as nothing
    code, stdout, stderr = solve.finish(signum)
    _check_interrupted(code, stdout, stderr, signum, "checkmate/highs")
    assert "interrupted" in stdout  # the solver table's status
    _check_written(tr8, out)
    assert json.loads(out.read_text())["metadata"]["interrupted_by"] == signum.name


def test_moccasin_stopped_before_its_first_incumbent_keeps_the_warm_start(tr8: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    solve = Solve(tr8, out, ["-f", "moccasin", "--backend", "cpsat", "--time-limit", "60"])
    solve.wait_for(SOLVING)  # phase 2 from the fitting warm start (no phase 1)
    code, stdout, stderr = solve.finish(signal.SIGINT)
    _check_interrupted(code, stdout, stderr, signal.SIGINT, "moccasin/cpsat")
    assert "interrupted" in stdout and "feasible" not in stdout
    _check_written(tr8, out)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_auto_stopped_by_a_signal_returns_the_best_member_schedule(
    tr8: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "x.json"
    solve = Solve(tr8, out, ["-m", "auto", "--time-limit", "60"])
    solve.wait_for(FASTSA_REPORTED)
    code, stdout, stderr = solve.finish(signum)
    _check_interrupted(code, stdout, stderr, signum, "auto")
    _check_written(tr8, out)
    assert "Traceback" not in stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_fastsa_stopped_by_a_signal_prints_and_writes_its_best(
    tr8: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "x.json"
    solve = Solve(tr8, out, ["-m", "fastsa", "--time-limit", "60", "-O", "fill_time=true"])
    solve.wait_for(ANNEALING)
    time.sleep(2.0)  # annealing (stage 1 meets 70 % within its first chunk)
    started = time.monotonic()
    code, stdout, stderr = solve.finish(signum)
    assert time.monotonic() - started < 30  # not run to its 60 s limit
    _check_interrupted(code, stdout, stderr, signum, "fastsa")
    _check_written(tr8, out)
    assert json.loads(out.read_text())["metadata"]["interrupted_by"] == signum.name


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_formulation_stopped_in_its_warm_start_returns_the_warm_start_unsolved(
    tr8: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "x.json"
    args = ["-f", "checkmate", "--init", "fastsa-fill", "--time-limit", "120"]
    solve = Solve(tr8, out, args, remat=["-c", WITH_FILLING_FASTSA])
    solve.wait_for(ANNEALING)
    time.sleep(2.0)
    code, stdout, stderr = solve.finish(signum)
    _check_interrupted(code, stdout, stderr, signum, "checkmate/highs")
    assert "during its warm start" in stderr and SOLVING not in stderr  # no solver ran
    _check_written(tr8, out)
    metadata = json.loads(out.read_text())["metadata"]
    assert metadata["interrupted_by"] == signum.name and metadata["interrupted_in"] == "warm_start"


def test_a_warm_start_stopped_before_anything_fits_is_one_line_and_no_file(tr8: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    args = ["-f", "checkmate", "--init", "fastsa-fill", "--time-limit", "120"]
    solve = Solve(tr8, out, args, budget="18%", remat=["-c", WITH_FILLING_FASTSA])  # FastSA's best: 22 % here
    solve.wait_for(ANNEALING)
    time.sleep(2.0)
    code, stdout, stderr = solve.finish(signal.SIGTERM)
    assert code == EXIT[signal.SIGTERM], stderr
    assert "interrupted (SIGTERM): checkmate/highs stopped before it found a schedule; nothing written" in stderr
    assert "Traceback" not in stderr and "┃" not in stdout  # no table
    assert not out.exists() and not list(tmp_path.iterdir())  # nothing half-written


def test_a_signal_between_two_phases_stops_the_next_one() -> None:
    """SIGTERM while a model is built (outside any solve) stops the solve that follows, at its start."""

    def work(stop: threading.Event) -> tuple[bool, signal.Signals | None]:
        os.kill(os.getpid(), signal.SIGTERM)  # "during the build": handled by the outer block
        solve = Stopper()
        with stop_on_signals(solve):  # the solve's own block
            return solve.stopped.is_set(), solve.signal

    (stopped, inner), outer = run_stoppable(work)
    assert stopped and inner is signal.SIGTERM and outer is signal.SIGTERM
    with stop_on_signals(fresh := Stopper()):  # nothing pending once the blocks are left
        assert not fresh.stopped.is_set()


def _workers_of(parent: int) -> list[int]:
    """Pids of the running portfolio workers whose parent is ``parent`` (read from /proc)."""
    found = []
    for pid in _children_of(parent):
        try:
            if WORKER in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:  # ended meanwhile
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_auto_workers_die_with_a_killed_parent(tr8: Path, tmp_path: Path) -> None:
    solve = Solve(tr8, tmp_path / "x.json", ["-m", "auto", "--time-limit", "60"])
    solve.wait_for(FASTSA_REPORTED)
    time.sleep(3.0)  # the exact worker is solving from FastSA's schedule (deaf to its connection meanwhile)
    workers = _workers_of(solve.process.pid)
    assert len(workers) == 2, (workers, solve.stderr)
    solve.process.kill()
    solve.process.wait()  # not communicate(): orphans would hold its pipes open
    deadline = time.monotonic() + 30  # SIGTERM on the parent's death: each worker stops its solve, then ends
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert not any(_alive(pid) for pid in workers), "orphaned auto workers"
    finally:
        for pid in filter(_alive, workers):
            os.kill(pid, signal.SIGKILL)


def test_non_finite_numbers_are_null_in_json_and_dashes_in_tables() -> None:
    outcome = SolveOutcome(
        formulation="checkmate",
        backend="highs",
        status=SolveStatus.INTERRUPTED,
        objective=10.0,
        bound=-math.inf,
        phases={"solve": SolveResult(SolveStatus.INTERRUPTED, objective=10.0, bound=-math.inf, interrupt_signal=15)},
    )
    summary = outcome.summary()
    assert summary["bound"] is None and summary["gap"] is None and summary["phases"]["solve"]["bound"] is None
    assert outcome.interrupt_signal == signal.SIGTERM
    result = PlanResult(
        "g", "h", "checkmate/highs", 1, 1, PlanStatus.NO_SCHEDULE, None, None, 0.0, details={"bound": math.nan}
    )
    json.dumps(result.metadata(), allow_nan=False)
    assert result.metadata()["bound"] is None
    assert _number(-math.inf) == "-" and _number(math.nan) == "-" and _number(1.5) == "1.5"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the run's process in /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_bench_sweep_stopped_by_a_signal_kills_its_run_and_records_it(tmp_path: Path, signum: signal.Signals) -> None:
    graph, results = tmp_path / "chain.json", tmp_path / "r.jsonl"
    write_graph(linear_chain(4), graph)
    hang = f"{Path(__file__).resolve().parent / 'test_bench.py'}:hang"  # sleeps 60 s in the run's process
    options = ["-g", str(graph), "-b", "0.9", "-m", hang, "-o", str(results), "--time-limit", "30", "--grace", "30"]
    run, code, stderr, _ = _signal_sweep(options, signum, settle=1.0)  # the run is sleeping in its plug-in
    assert code == EXIT[signum], stderr
    assert f"interrupted ({signum.name})" in stderr and "Traceback" not in stderr, stderr
    assert not _alive(run), "the run outlived its sweep"
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["status"] == "interrupted"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the run's process in /proc")
def test_a_bench_run_stopped_by_sigterm_keeps_its_best_schedule(tr8: Path, tmp_path: Path) -> None:
    results, schedules, sweep_file = tmp_path / "r.jsonl", tmp_path / "schedules", tmp_path / "sweep.toml"
    method = '{ formulation = "checkmate", backend = "highs", init = "chen-greedy", label = "cm-warm" }'
    sweep_file.write_text(
        f'graphs = ["{tr8}"]\nbudgets = ["70%"]\nmethods = [{method}]\ntime_limit = 120\ngrace = 30\n'
    )
    options = [str(sweep_file), "-o", str(results), "--schedules", str(schedules)]
    # after 8 s of CPU time HiGHS is searching from the warm start (it cannot finish in 120 s)
    run, code, stderr, seconds = _signal_sweep(options, signal.SIGTERM, settle=1.0, cpu=8.0)
    assert code == EXIT[signal.SIGTERM], stderr
    assert seconds < 40  # stopped (HiGHS may take ~16 s to honour it in some phases), not run to its 120 s limit
    group = run  # the run leads its own process group
    assert not [pid for pid in _pids() if _alive(pid) and _group_of(pid) == group], "the run left processes"
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["status"] == "interrupted" and record["tdi"] is not None, record  # the run's best, kept
    (written,) = schedules.iterdir()
    _check_written(tr8, written)


def _signal_sweep(options: list[str], signum: int, settle: float, cpu: float = 0.0) -> tuple[int, int, str, float]:
    """Start `remat bench run OPTIONS`, send ``signum`` ``settle`` s after its run (the leader of its own process
    group) has used ``cpu`` s of CPU time: the run's pid, the sweep's exit status, its stderr and the seconds
    it took to end after the signal."""
    sweep = subprocess.Popen(
        [sys.executable, *REMAT, "bench", "run", *options],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while not (runs := _children_of(sweep.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(runs) == 1, "the sweep started no run"
        while _cpu_seconds(runs[0]) < cpu and time.monotonic() < deadline + 120:  # CPU time: load-independent
            time.sleep(0.2)
        time.sleep(settle)
        sent = time.monotonic()
        sweep.send_signal(signum)
        _, stderr = sweep.communicate(timeout=60)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    return runs[0], sweep.returncode, stderr, time.monotonic() - sent


def _cpu_seconds(group: int) -> float:
    """User + system CPU seconds of the running processes of a process group (a solve may run in a child)."""
    ticks = 0
    for pid in _pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12]) if int(fields[2]) == group else 0
    return ticks / os.sysconf("SC_CLK_TCK")


def _group_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _children_of(parent: int) -> list[int]:
    """Pids of the running processes whose parent is ``parent``."""
    return [pid for pid in _pids() if _ppid(pid) == parent and _alive(pid)]


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
