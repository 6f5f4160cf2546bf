"""Ctrl-C (SIGINT) or SIGTERM during a solve stops the solver and keeps its best solution (status INTERRUPTED).

The blocking solve runs in a worker thread while the main thread waits, so that Python's signal
handler runs at once; it calls the stop functions the backend registered on its :class:`Stopper`
(``CpSolver.stop_search``, ``Highs.cancelSolve``, ``Model.terminate``, cancelling MiniZinc's stream),
and the solver returns its incumbent; the stopper records which signal came. A second signal abandons
the solve (KeyboardInterrupt). Outside the main thread, or when both signals are ignored, the solve
simply runs where it is called. :func:`run_stoppable` does the same for work that stops itself: it sets
an event that the work checks between short steps. A signal that stops an inner block also stops every
enclosing one, so the phases after it (H-ILP's next level, max batch's next probe) stop as soon as they start
(one warning, not one per phase).
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # each stops a solve and keeps its best solution
_ACTIVE: list[Stopper] = []  # the stoppers of the enclosing stop_on_signals blocks, outermost first


class Stopper:
    """Collects how to stop the running solve; ``stop()`` calls them (at once for ones registered later)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._actions: list[Callable[[], Any]] = []
        self.stopped = threading.Event()
        self.signal: signal.Signals | None = None  # the signal that stopped the solve (None: none, or a call)
        self.stopped_at = math.inf  # time.monotonic() of the first stop
        self.inherited = False  # stopped on entry because an enclosing block had been stopped (logged there)

    def on_stop(self, action: Callable[[], Any]) -> None:
        """Register ``action`` (thread-safe, cheap, safe to repeat: it is re-issued until the solve ends)."""
        with self._lock:
            self._actions.append(action)
            late = self.stopped.is_set()
        if late:
            self.stop()

    @property
    def stoppable(self) -> bool:
        """Whether any stop action is registered."""
        with self._lock:
            return bool(self._actions)

    def stop(self, signum: int | None = None) -> None:
        """Ask the solver to finish now with what it has (``signum``: the signal that asks, recorded once)."""
        with self._lock:
            if signum is not None and self.signal is None:
                self.signal = signal.Signals(signum)
            if not self.stopped.is_set():
                self.stopped_at = time.monotonic()
            self.stopped.set()
            actions = list(self._actions)
        for action in actions:
            try:
                action()
            except Exception as error:  # e.g. the solver finished (and was freed) just now
                log.debug("stopping the solver: %s", error)


@contextmanager
def stop_on_signals(stopper: Stopper) -> Iterator[bool]:
    """While inside, SIGINT and SIGTERM call ``stopper.stop(signum)`` (a second one raises KeyboardInterrupt).

    Yields whether any handler was installed (not outside the main thread, nor for an ignored signal).
    Inside a block whose stopper a signal already stopped (e.g. one that came while a model was built),
    ``stopper`` is stopped at once with that signal.
    """
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    pending = next((outer for outer in _ACTIVE if outer.stopped.is_set()), None)
    if pending is not None:
        stopper.inherited = True  # an enclosing phase was stopped: this one says nothing more about it
        stopper.stop(pending.signal)
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    handled = [signum for signum, handler in previous.items() if handler not in (signal.SIG_IGN, None)]

    def on_signal(signum: int, frame: object) -> None:  # no logging here: it may interrupt a log write
        if stopper.stopped.is_set():
            raise KeyboardInterrupt  # a second signal: give up
        stopper.stop(signum)
        for outer in list(_ACTIVE):  # the enclosing phases too: each later phase (an H-ILP level, a max-batch
            if outer is not stopper and not outer.stopped.is_set():  # probe) then stops as soon as it starts
                outer.stop(signum)

    for signum in handled:
        signal.signal(signum, on_signal)
    _ACTIVE.append(stopper)
    try:
        yield bool(handled)
    finally:
        _ACTIVE.remove(stopper)
        for signum in handled:
            signal.signal(signum, previous[signum])


def interrupted() -> signal.Signals | None:
    """The signal that stopped an enclosing :func:`stop_on_signals` block (None if none was, or outside any).

    For long work made of many short phases (H-ILP's cluster options) to skip what is left once interrupted.
    """
    pending = next((outer for outer in _ACTIVE if outer.stopped.is_set()), None)
    return None if pending is None else pending.signal or signal.SIGINT


def stop_event() -> threading.Event | None:
    """The event a signal sets in the outermost :func:`stop_on_signals` block (None outside any), for cooperative
    work (FastSA) started deep inside a phase that does not hand it one.
    """  # noqa: D205
    return _ACTIVE[0].stopped if _ACTIVE else None


def run_stoppable(work: Callable[[threading.Event], T]) -> tuple[T, signal.Signals | None]:
    """``work(stop)`` in this thread, SIGINT and SIGTERM meanwhile setting ``stop``; its value and that signal.

    For cooperative work (FastSA, warm starts) that checks ``stop`` between short steps and then returns
    its best so far; the signal is None when none came.
    """
    stopper = Stopper()
    with stop_on_signals(stopper):
        value = work(stopper.stopped)
    return value, stopper.signal if stopper.stopped.is_set() else None


def run_interruptible(
    name: str, solve: Callable[[], T], stopper: Stopper, abandoned: Callable[[], T] | None = None
) -> T:
    """Return ``solve()``; SIGINT or SIGTERM meanwhile calls ``stopper.stop()`` (see the module docstring).

    With ``abandoned``, a solve still running ``ABANDON_AFTER_S`` seconds after the stop is left to finish in
    its (daemon) thread, unread, and ``abandoned()`` is returned: HiGHS ignores a stop for up to ~16 s in its
    presolve, and a stopped run must end within about a second.
    """
    with stop_on_signals(stopper) as handled:
        if not handled:
            return solve()
        return _wait_for(name, solve, stopper, abandoned)


ABANDON_AFTER_S = 1.2  # seconds a stopped solver gets to return its incumbent (a deadline child: STOP_GRACE_S)


def _wait_for(name: str, solve: Callable[[], T], stopper: Stopper, abandoned: Callable[[], T] | None = None) -> T:
    """Run ``solve()`` in a worker thread and wait for it, re-issuing a stop once one was asked for."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = solve()
        except BaseException as error:  # re-raised in the calling thread
            box["error"] = error

    worker = threading.Thread(target=work, name=f"remat-solve-{name}", daemon=True)
    worker.start()
    log.info("%s: solving (Ctrl-C stops it and keeps the best solution so far)", name)
    announced, polls = False, 0  # a solver that registers no stop within 1 s of the interrupt cannot be stopped
    while worker.is_alive():
        worker.join(0.1)
        if not stopper.stopped.is_set():
            continue
        stopper.stop()  # again: a stop that came before the solver started searching may be lost
        polls += 1
        if abandoned is not None and polls * 0.1 >= ABANDON_AFTER_S and worker.is_alive():
            log.warning("%s: interrupted; the solver did not stop within %.1f s: left unread", name, ABANDON_AFTER_S)
            return abandoned()
        if not announced and stopper.inherited:
            log.debug("%s: stopped at its start (interrupted earlier)", name)
            announced = True
        if not announced and (stopper.stoppable or polls >= 10):
            how = "keeping its best solution" if stopper.stoppable else "it cannot be stopped early; waiting"
            log.warning("%s: interrupted, stopping the solver (%s; Ctrl-C again to abandon)", name, how)
            announced = True
    if "error" in box:
        raise box["error"]
    return box["value"]
