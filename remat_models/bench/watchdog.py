"""The isolated run's own guard: it never outlives the sweep that started it, nor its deadline.

The parent (:mod:`remat_models.bench.isolate`) kills a run at time limit + grace, but a parent that is
itself killed (SIGKILL, out of memory) can no longer do so. A daemon thread in the child therefore
watches the parent's pid and the deadline: when the parent is gone it removes the run's temporary
folder, and in both cases it kills the run's process group (the child leads its own session, so this
also stops solver processes it started, e.g. MiniZinc) without touching anything else.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

PARENT_ENV = "REMAT_BENCH_PARENT"  # the sweep's pid, set by the parent for its children
MARGIN_S = 10.0  # the child's own deadline lies this far past the parent's kill time
POLL_S = 0.2


def start_watchdog(folder: Path, deadline_s: float) -> threading.Thread | None:
    """Guard this process (see the module docstring); None when not started by a sweep (no parent pid given)."""
    parent = os.environ.get(PARENT_ENV)
    if parent is None or not parent.isdigit():
        return None
    thread = threading.Thread(
        target=_watch, args=(int(parent), folder, deadline_s + MARGIN_S), name="remat-bench-watchdog", daemon=True
    )
    thread.start()
    return thread


def _watch(parent: int, folder: Path, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while True:
        orphaned = os.getppid() != parent
        if orphaned or time.monotonic() > end:
            break
        time.sleep(POLL_S)
    if orphaned:  # nobody will read the result or remove the folder
        log.warning("bench: the sweep (pid %d) is gone; stopping this run", parent)
        shutil.rmtree(folder, ignore_errors=True)
    else:
        log.warning("bench: run past its deadline (%.0f s) and not stopped by the sweep; stopping it", deadline_s)
    _kill_own_group()


def _kill_own_group() -> None:
    """SIGKILL this run's process group if this process leads it, else just this process."""
    if os.getpgid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
