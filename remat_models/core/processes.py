"""Child processes we start: never with the working folder on their module path, and dying with their parent.

``python -m`` puts the working folder first on ``sys.path``, so a ``numpy.py`` lying there would run in every
child (issue #34). :func:`python_command` starts a module with ``-P`` (``sys.flags.safe_path``: nothing is
prepended) and :func:`child_env` hands over the parent's own module path (absolute entries only; ``''`` would
be the child's working folder) with ``PYTHONSAFEPATH=1``, which also covers any Python process a child starts.

:func:`die_with_parent` asks the kernel (Linux ``prctl(PR_SET_PDEATHSIG)``) to signal a child when the thread
that started it ends, SIGKILL of the parent included; elsewhere :func:`watch_parent` polls the parent's pid.
:func:`kill_session_on_parent_death` starts a small watchdog process that kills a whole session (a solver
binary and the processes it starts, e.g. ``minizinc`` and ``fzn-gecode``, which MiniZinc puts in a group of its
own) and removes temporary folders once the process it guards is gone, whatever killed it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # prctl option: the signal this process gets when its parent dies (linux/prctl.h)
POLL_S = 0.2  # how often a watchdog looks at the parent's pid


def python_command(module: str, *args: str) -> list[str]:
    """``python -P -m module args...`` with this interpreter (``-P``: the working folder is not on the path)."""
    return [sys.executable, "-P", "-m", module, *args]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: ours, our module path (absolute entries) as ``PYTHONPATH``, safe paths on."""
    path = [entry for entry in sys.path if entry and os.path.isabs(entry)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONSAFEPATH": "1", **(extra or {})}


def die_with_parent(parent: int, signum: int = signal.SIGKILL) -> None:
    """Have the kernel send ``signum`` when the parent dies (Linux; a thread watches elsewhere); end now if gone."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
                log.warning("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
        except (OSError, AttributeError) as error:  # no prctl in this libc
            log.debug("prctl unavailable: %s", error)
            watch_parent(parent, signum)
    else:
        watch_parent(parent, signum)
    if os.getppid() != parent:  # it died before the prctl took effect: nobody to report to
        os._exit(0)


def watch_parent(parent: int, signum: int = signal.SIGKILL) -> threading.Thread:
    """A daemon thread that sends this process ``signum`` once its parent ``parent`` is gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=watch, name="remat-parent-watch", daemon=True)
    thread.start()
    return thread


def preexec_die_with_parent() -> None:
    """A ``preexec_fn``: the started program gets SIGKILL when the thread that started it ends (Linux)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def kill_session_on_parent_death(guarded: int, session: int, folders: Iterable[str] = ()) -> subprocess.Popen[bytes]:
    """Start a watchdog process that SIGKILLs ``session`` and removes ``folders`` once ``guarded`` or the caller dies.

    The caller (the watchdog's parent) leads ``session``; the watchdog polls both pids and is ended by the caller
    with :func:`stop_watchdog` once the session's work has finished normally.
    """
    command = [sys.executable, "-I", "-S", os.path.abspath(__file__), str(guarded), str(session), *folders]
    return subprocess.Popen(  # -I -S: this file alone, the standard library only (no site, no working folder)
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a SIGINT to the terminal's group does not reach it
        close_fds=True,
    )


def stop_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
    """End a watchdog started by :func:`kill_session_on_parent_death` (its session and folders left alone)."""
    if watchdog is None:
        return
    with contextlib.suppress(ProcessLookupError):
        watchdog.kill()
    watchdog.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def session_members(session: int) -> list[int]:
    """Pids of the processes of ``session`` (Linux ``/proc``; empty elsewhere)."""
    members = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue  # ended meanwhile
            if len(fields) > 3 and int(fields[3]) == session:
                members.append(int(entry.name))
    return members


def kill_session(session: int) -> None:
    """SIGKILL every process of ``session`` and its group (a solver may move its own children to another group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(session, signal.SIGKILL)
    for pid in session_members(session):
        if pid != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _watchdog(guarded: int, session: int, folders: list[str]) -> None:
    """Wait until ``guarded`` is gone (or this process's parent, the caller, is), then clean up after it."""
    parent = os.getppid()
    while _alive(guarded) and os.getppid() == parent:
        time.sleep(POLL_S)
    kill_session(session)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only the caller's kill() (SIGKILL) or its death ends it
    _watchdog(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
