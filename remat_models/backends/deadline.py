"""Large solves run in a forked process that is killed at a hard deadline: solvers overrun their limits there.

HiGHS 1.14 runs 15-30 s past its time limit on MIPs of 1.5-2 M columns (presolve probing and enumeration,
the feasibility jump and the MIP set-up do not check it) and CP-SAT 9.15 spends its whole limit in presolve
on models of 1 M+ variables and overshoots it by 4-13 s (docs/performance.md). A solve of a model that
large, with a time limit, therefore runs in a forked child (the model is shared copy-on-write, nothing is
pickled on the way in), killed at the limit itself: its solver gets the limit less a grace (1 s + 5 %,
:func:`killed_at_the_limit`) to stop by itself in, so the grace no longer comes on top of the limit (at 5 s it
was half of the 1.1 x limit + 2 s a run may take). MiniZinc, Pyomo and CVXPY run every timed solve there
(``isolate_timed``): they flatten or build the solver's model outside any solver limit (Checkmate of a 199-node
transformer through Pyomo: 15 s under a 5 s limit). The child sends
each improving solution its solver reports (:func:`publish_incumbent`, from the backends' incumbent
callbacks), so a killed solve answers ``FEASIBLE`` with the last one, or ``NO_SOLUTION`` without any.
Ctrl-C or SIGTERM reaches the child as SIGINT, which stops its solver and returns its incumbent.

The child dies with the parent, SIGKILL included (``PR_SET_PDEATHSIG``), with its own temporary folder
(``tempfile.tempdir``, ``TMPDIR``): a small watchdog process
(:func:`remat_models.core.processes.kill_tree_on_parent_death`) kills what the child started, solver binaries such
as ``minizinc`` and ``fzn-gecode`` included, and removes the folder once the child or its parent is gone.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np

from remat_models.backends.interrupt import STOP_SIGNALS, Stopper
from remat_models.core.limits import wait_slice
from remat_models.core.processes import die_with_parent, kill_tree_on_parent_death, stop_watchdog
from remat_models.errors import SolverError
from remat_models.model import SolveResult, SolveStatus

log = logging.getLogger(__name__)

ISOLATE_SIZE = 200_000  # from this many columns + rows on, a timed solve runs in a child with a hard deadline
ISOLATE_NONZEROS = 1_000_000  # or from this many nonzeros (HiGHS: 3 s in its set-up of MONeT's 2 M, limit 0.1 s)
GRACE_SECONDS, GRACE_SHARE = 1.0, 0.05  # the child is killed at time limit + 1 s + 5 % of the limit
STOP_GRACE_S = 0.8  # an interrupted child that has not answered this long after the stop is killed


_incumbent_sink: Connection | None = None  # the pipe to the parent, in a hard-deadline child only


def publishing() -> bool:
    """Whether this process is a hard-deadline child whose incumbents go to the parent."""
    return _incumbent_sink is not None


def publish_incumbent(x: np.ndarray) -> None:
    """Send an improving solution (the flat values of the solved model) to the parent, which keeps the last."""
    if _incumbent_sink is not None:
        _incumbent_sink.send(("incumbent", np.array(x, dtype=np.float64)))


def isolation_available() -> bool:
    """Whether this platform can fork (Linux, macOS)."""
    return "fork" in multiprocessing.get_all_start_methods()


def hard_deadline(time_limit: float) -> float:
    """Seconds after which a child solving within ``time_limit`` is killed."""
    return time_limit + GRACE_SECONDS + GRACE_SHARE * time_limit


class _Timed(Protocol):
    time_limit: float | None


TimedT = TypeVar("TimedT", bound=_Timed)


def limit_killed_at(seconds: float) -> float:
    """The time limit whose child :func:`hard_deadline` kills after ``seconds`` (at least 0.1 s: later below 1.1 s)."""
    return max(0.1, (seconds - GRACE_SECONDS) / (1.0 + GRACE_SHARE))


def killed_at_the_limit(limits: TimedT) -> TimedT:
    """``limits`` (``SolveLimits``) cut so that a timed solve's child is killed at the time limit, not 1 s + 5 % after.

    Every hard-deadline solve takes them (``LoweringBackend.solve``): the solver gets what is left of the cut
    limit, and a killed child answers with the last incumbent it published.
    """
    if limits.time_limit is None:
        return limits
    return replace(limits, time_limit=limit_killed_at(limits.time_limit))


def run_with_deadline(name: str, solve: Callable[[], SolveResult], seconds: float, stopper: Stopper) -> SolveResult:
    """``solve()`` in a forked child, killed after ``seconds``: then ``FEASIBLE`` with its last incumbent."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(solve, sender, stopper, os.getpid()), daemon=True)
    child.start()
    sender.close()
    stopper.on_stop(lambda: child.pid is not None and os.kill(child.pid, signal.SIGINT))
    deadline = time.monotonic() + seconds
    incumbent: np.ndarray | None = None
    try:
        while True:
            if stopper.stopped.is_set():  # interrupted: the child's model build ignores the stop (Pyomo: 8 s)
                deadline = min(deadline, stopper.stopped_at + STOP_GRACE_S)
            if not receiver.poll(wait_slice(min(deadline - time.monotonic(), 0.1))):
                if time.monotonic() < deadline:  # a slice of a wait longer than poll() takes
                    continue
                _kill(child)
                if stopper.stopped.is_set():
                    kept = "its last incumbent kept" if incumbent is not None else "no incumbent"
                    log.info("%s: killed %.1f s after the interrupt; %s", name, STOP_GRACE_S, kept)
                    status = SolveStatus.NO_SOLUTION if incumbent is None else SolveStatus.FEASIBLE
                    return SolveResult(status, x=incumbent, log=f"{name}: killed after the interrupt; {kept}")
                return _killed(name, seconds, incumbent)
            try:
                kind, payload = receiver.recv()
            except EOFError:
                child.join()
                raise SolverError(f"{name}: the solver process died (exit code {child.exitcode})") from None
            if kind != "incumbent":
                break
            incumbent = payload
    finally:
        receiver.close()
        child.join(timeout=5.0)
        if child.is_alive():
            _kill(child)
    if kind == "error":
        raise payload
    return payload


def _kill(child: multiprocessing.process.BaseProcess) -> None:
    """SIGKILL the child; its watchdog then kills what it started (a solver binary) and removes its folder."""
    child.kill()
    child.join()
    if child.pid is not None:  # killed before it started its watchdog: its folder is ours to remove
        for folder in Path(tempfile.gettempdir()).glob(f"remat-solve-{child.pid}-*"):
            shutil.rmtree(folder, ignore_errors=True)


def _killed(name: str, seconds: float, incumbent: np.ndarray | None) -> SolveResult:
    """The answer for a child killed at the hard deadline."""
    kept = "its last incumbent kept" if incumbent is not None else "no incumbent"
    log.warning("%s: killed %.0f s after its start (the solver overran its time limit); %s", name, seconds, kept)
    status = SolveStatus.NO_SOLUTION if incumbent is None else SolveStatus.FEASIBLE
    return SolveResult(status, x=incumbent, log=f"{name}: killed at the hard deadline ({seconds:.1f} s); {kept}")


def _child(solve: Callable[[], SolveResult], sender: Connection, stopper: Stopper, parent: int) -> None:
    global _incumbent_sink
    die_with_parent(parent)  # SIGKILL when the parent dies; its watchdog then kills what it started
    folder = tempfile.mkdtemp(prefix=f"remat-solve-{os.getpid()}-")  # the parent finds it by the pid
    tempfile.tempdir = os.environ["TMPDIR"] = folder  # every temporary file of this process and its solver's
    watchdog = kill_tree_on_parent_death(parent, [folder])
    _incumbent_sink = sender
    for signum in STOP_SIGNALS:  # the parent forwards its stop as SIGINT; a SIGTERM stops too
        signal.signal(signum, lambda signum, frame: stopper.stop(signum))
    logging.disable(logging.CRITICAL)  # a handler's lock (rich's status line) may have been held at the fork
    try:
        message: tuple[str, object] = ("result", solve())
    except BaseException as error:  # re-raised by the parent
        message = ("error", error)
        try:
            pickle.dumps(error)
        except Exception:
            message = ("error", SolverError(f"{type(error).__name__}: {error}"))
    sender.send(message)
    sender.close()
    stop_watchdog(watchdog)
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)  # no interpreter teardown in a forked child
