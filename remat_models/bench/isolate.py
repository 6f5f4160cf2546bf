"""Run one task in a fresh Python process; kill it at time limit + grace; record crashes instead of raising.

An interrupted sweep (:func:`stop_running`) sends its running children SIGTERM, which stops their solver
as in ``remat solve``: a child that writes its result within ``STOP_GRACE_S`` keeps it (best schedule,
numbers), recorded with status ``interrupted``; the rest, and whatever a child left in its group, are killed.

A fresh interpreter (``subprocess``, not ``fork``) is safe for OR-Tools and HiGHS threads and works inside
daemonic Dask workers, which may not start ``multiprocessing`` children. The child gets its own session so
a kill also takes down whatever it started (e.g. a MiniZinc process); it watches this process and its own
deadline (:mod:`remat_models.bench.watchdog`), so a sweep that is killed outright leaves nothing running.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from remat_models.bench.clock import CLOCK_ENV, seconds_since_start
from remat_models.bench.record import OUTCOME_FIELDS, machine, versions
from remat_models.bench.sweep import RunSpec
from remat_models.bench.watchdog import PARENT_ENV
from remat_models.core.limits import wait_slice
from remat_models.core.processes import child_env, python_command

log = logging.getLogger(__name__)
_STDERR_TAIL = 2000
_LIVE: set[subprocess.Popen[bytes]] = set()  # children of this process still running
_LIVE_LOCK = threading.Lock()
_STOPPED: set[int] = set()  # pids of runs stopped by stop_running: recorded as interrupted
_CLOCK_GIVEN = False  # whether a run got this process's start-up to count (the first one does: bench/clock.py)
STOP_GRACE_S = 30.0  # seconds a stopped run gets to stop its solver and write its best (HiGHS: up to ~16 s seen)


def stop_running(grace: float = STOP_GRACE_S) -> int:
    """Stop every run this process has started and not yet reaped (an interrupted sweep); return how many.

    SIGTERM first; after ``grace`` seconds (or at a KeyboardInterrupt meanwhile: a second Ctrl-C) each run's
    process group is killed, which also ends anything a run that did stop left behind.
    """
    with _LIVE_LOCK:
        live = list(_LIVE)
        _STOPPED.update(process.pid for process in live)
    for process in live:
        process.send_signal(signal.SIGTERM)  # a no-op for a process already reaped
    try:
        until = time.monotonic() + grace
        while any(process.poll() is None for process in live) and time.monotonic() < until:
            time.sleep(0.1)
    finally:
        for process in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    return len(live)


def run_isolated(task: dict[str, Any]) -> dict[str, Any]:
    """Execute a task (``RunSpec.to_task()``) in its own process and return the complete JSONL record."""
    run = RunSpec.from_task(task)
    started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    deadline = run.time_limit + run.grace
    with tempfile.TemporaryDirectory(prefix="remat-bench-") as folder:
        result_path, log_path = Path(folder) / "outcome.json", Path(folder) / "output.log"
        started = time.perf_counter()
        with open(log_path, "wb") as output:
            process = subprocess.Popen(
                python_command("remat_models.bench.child", str(result_path)),  # -P: no module of the working folder
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=child_env({PARENT_ENV: str(os.getpid()), **_command_clock()}),  # it stops if this process dies
            )
            with _LIVE_LOCK:
                _LIVE.add(process)
            try:
                timed_out = _wait(process, json.dumps(task).encode(), deadline)
            finally:
                with _LIVE_LOCK:
                    _LIVE.discard(process)
                    stopped = process.pid in _STOPPED
                    _STOPPED.discard(process.pid)
        elapsed = time.perf_counter() - started
        outcome = _read_outcome(result_path)
        if stopped:  # with what the run had found, if it wrote it in time
            outcome = {**(outcome or {"output": _tail(log_path)}), "status": "interrupted"}
            outcome.setdefault("error", "the sweep was interrupted")
        elif outcome is None:
            outcome = _failure(process.returncode, timed_out, deadline, _tail(log_path))
    outcome.setdefault("process_s", elapsed)
    record = _base(run, started_at)
    record.update(dict.fromkeys(OUTCOME_FIELDS), trajectory=[])
    record.update(outcome)
    record.update(elapsed_s=elapsed, versions=versions(), machine=machine())
    log.info("%s on %s at %s: %s", run.method.label, run.graph_file, run.budget_spec, record["status"])
    return record


def _command_clock() -> dict[str, str]:
    """For the first run this process starts: the seconds it has run (its start-up counts against that run's limit)."""
    global _CLOCK_GIVEN
    with _LIVE_LOCK:
        first, _CLOCK_GIVEN = not _CLOCK_GIVEN, True
    return {CLOCK_ENV: f"{seconds_since_start():.3f}"} if first else {}


def _wait(process: subprocess.Popen[bytes], payload: bytes, deadline: float) -> bool:
    """Send the task and wait; kill the process group at ``deadline`` seconds. True if it was killed.

    The wait is taken in slices (``wait_slice``): one ``communicate`` of a huge limit (3e6 s) overflows.
    """
    until = time.monotonic() + deadline
    try:
        data: bytes | None = payload
        while True:
            try:
                process.communicate(data, timeout=wait_slice(until - time.monotonic()))
                return False
            except subprocess.TimeoutExpired:
                data = None  # sent (communicate keeps what is left of it for the next call)
                if time.monotonic() >= until:
                    _kill(process)
                    return True
    except BaseException:  # an interrupted sweep must not leave solvers running
        _kill(process)
        raise


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _read_outcome(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _failure(code: int | None, timed_out: bool, deadline: float, output: str) -> dict[str, Any]:
    if timed_out:
        return {"status": "timeout", "error": f"killed after {deadline:g} s (time limit + grace)", "output": output}
    signal_name = None
    if code is not None and code < 0:
        signal_name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
    reason = f"killed by {signal_name}" if signal_name else f"exit code {code}"
    if signal_name == "SIGKILL":
        reason += " (out of memory?)"
    return {
        "status": "crashed",
        "exit_code": code,
        "signal": signal_name,
        "error": f"process died without a result: {reason}",
        "output": output,
    }


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-_STDERR_TAIL:].decode("utf-8", errors="replace")


def _base(run: RunSpec, started_at: str) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "sweep": run.sweep,
        "group": run.group,
        "graph": run.graph_name,
        "graph_file": run.graph_file,
        "graph_hash": run.graph_hash,
        "n": run.n,
        "m": run.m,
        "graph_total_cost": run.graph_total_cost,
        "reference_peak": run.reference_peak,
        "budget_spec": run.budget_spec,
        "budget": run.budget,
        "budget_fraction": run.budget_fraction,
        "method": run.method.label,
        "method_kind": run.method.kind,
        "paper": run.method.paper,
        "method_spec": run.method.to_dict(),
        "seed": run.seed,
        "time_limit": run.time_limit,
        "grace": run.grace,
        "started_at": started_at,
    }
