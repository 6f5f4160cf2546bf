"""Issue #34: one interrupt path that every phase honours. A signal that stops one solve stops the phases after
it (H-ILP's levels, max batch's probes and exact solve); a solver that ignores its stop is left unread; the run
exits 130 / 143 and records the interrupt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from signal_runs import EXIT, SignalledRun

from remat_models.backends import SolveLimits, get_backend
from remat_models.backends.interrupt import Stopper, interrupted, run_interruptible, stop_event, stop_on_signals
from remat_models.model import SolveStatus

REMAT = [sys.executable, "-P", "-m", "remat_models.cli.app"]
MAIN = threading.current_thread() is threading.main_thread()


@pytest.fixture(scope="module")
def tr8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graphs") / "tr8.json"
    command = [*REMAT, "graph", "generate", "transformer", "--size", "8", "--seed", "1", "-o", str(path)]
    subprocess.run(command, check=True, capture_output=True)
    return path


@pytest.mark.skipif(not MAIN, reason="signal handlers live in the main thread")
def test_a_signal_in_an_inner_phase_stops_the_enclosing_ones() -> None:
    outer, inner = Stopper(), Stopper()
    with stop_on_signals(outer):
        assert interrupted() is None and stop_event() is outer.stopped
        with stop_on_signals(inner):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs between bytecodes
        assert inner.signal is signal.SIGTERM and outer.signal is signal.SIGTERM
        assert interrupted() is signal.SIGTERM
        later = Stopper()
        with stop_on_signals(later):  # the next phase is stopped as it starts, and says so only at debug level
            assert later.stopped.is_set() and later.inherited
    assert interrupted() is None


@pytest.fixture
def sigint_handled() -> Iterator[None]:
    """Python's Ctrl-C handler while the test runs: a pytest started with ``&`` from a script inherits SIGINT
    ignored, and ``stop_on_signals`` leaves an ignored signal alone (the signal the test sends was then lost)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(not MAIN, reason="signal handlers live in the main thread")
@pytest.mark.usefixtures("sigint_handled")
def test_no_solver_starts_inside_a_stopped_phase() -> None:
    from test_backends import _market_split  # a model no backend finishes in seconds

    outer = Stopper()
    with stop_on_signals(outer) as handled:
        assert handled
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        started = time.perf_counter()
        result = get_backend("highs").solve(_market_split(m_rows=4, n=40), SolveLimits(time_limit=60.0))
    assert result.status is SolveStatus.INTERRUPTED and result.interrupt_signal == signal.SIGINT
    assert time.perf_counter() - started < 5.0  # not solved at all (a 60 s limit)


@pytest.mark.skipif(not MAIN, reason="signal handlers live in the main thread")
def test_a_solver_that_ignores_its_stop_is_left_unread() -> None:
    stopper, release = Stopper(), threading.Event()
    stopper.on_stop(lambda: None)  # registered, but the "solver" does not stop

    def solve() -> str:
        release.wait(30)
        return "finished"

    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    try:
        assert run_interruptible("stubborn", solve, stopper, abandoned=lambda: "abandoned") == "abandoned"
    finally:
        release.set()
    assert stopper.signal is signal.SIGTERM


def _run_until(command: list[str], marker: str, signum: signal.Signals) -> tuple[int, str]:
    """Run ``command`` until it logs ``marker``, then send ``signum``: its exit status, stdout and stderr."""
    run = SignalledRun(command)
    run.wait_for(marker)
    code, stdout, stderr = run.finish(signum, timeout=60)
    return code, stdout + stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_hilp_stopped_in_its_levels_exits_with_the_signal(tr8: Path, tmp_path: Path, signum: signal.Signals) -> None:
    out = tmp_path / "plan.json"
    command = [*REMAT, "-v", "solve", str(tr8), "-b", "60%", "-f", "hilp", "--time-limit", "120", "-o", str(out)]
    started = time.monotonic()
    code, output = _run_until(command, "hilp model of", signum)  # a cluster's option ILP is being built
    assert code == EXIT[signum], output
    assert time.monotonic() - started < 100  # stopped, not run to its 120 s limit
    assert output.count("interrupted, stopping the solver") <= 1  # one warning, not one per level
    assert "Traceback" not in output
    assert json.loads(out.read_text())["metadata"]["interrupted_by"] == signum.name


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_max_batch_stopped_by_a_signal_exits_with_it(tr8: Path, signum: signal.Signals) -> None:
    command = [*REMAT, "-v", "max-batch", str(tr8), "--memory", "16GB", "--file-batch", "1", "--time-limit", "120"]
    started = time.monotonic()
    code, output = _run_until([*command, "--json"], "max-batch probe", signum)
    assert code == EXIT[signum], output
    assert time.monotonic() - started < 100
    assert f"interrupted ({signum.name}): max batch stopped early" in output
    assert f'"interrupted_by": "{signum.name}"' in output
