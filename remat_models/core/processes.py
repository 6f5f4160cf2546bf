"""Child processes we start: never with the working folder on their module path, and dying with their parent.

``python -m`` puts the working folder first on ``sys.path``, so a ``numpy.py`` lying there would run in every
child (issue #34). :func:`python_command` starts a module with ``-P`` (``sys.flags.safe_path``: nothing is
prepended) and :func:`child_env` hands over the parent's own module path (absolute entries only; ``''`` would
be the child's working folder) with ``PYTHONSAFEPATH=1``, which also covers any Python process a child starts.

:func:`die_with_parent` asks the kernel (Linux ``prctl(PR_SET_PDEATHSIG)``) to signal a child when the thread
that started it ends, SIGKILL of the parent included; elsewhere :func:`watch_parent` polls the parent's pid.
:func:`kill_tree_on_parent_death` starts a small watchdog process that kills every descendant of its caller (a
solver binary and the processes it starts, e.g. ``minizinc`` and ``fzn-gecode``, which MiniZinc puts in a group
of its own) and removes temporary folders once the caller or the process it guards is gone, whatever killed it.
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


def watch_parent(parent: int, signum: int = signal.SIGKILL, after: float = 0.0) -> threading.Thread:
    """A daemon thread that sends this process ``signum`` ``after`` seconds once its parent ``parent`` is gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S)
        time.sleep(after)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=watch, name="remat-parent-watch", daemon=True)
    thread.start()
    return thread


def preexec_die_with_parent() -> None:
    """A ``preexec_fn``: the started program gets SIGKILL when the thread that started it ends (Linux)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def kill_tree_on_parent_death(guarded: int, folders: Iterable[str] = ()) -> subprocess.Popen[bytes]:
    """Start a watchdog process that SIGKILLs the caller's descendants and removes ``folders`` once ``guarded`` or
    the caller dies.

    The watchdog notes the caller's descendants every ``POLL_S`` (Linux ``/proc``), so that processes orphaned by
    the caller's death (``minizinc``, and ``fzn-gecode``, which MiniZinc moves to a group of its own) are still
    found; the caller stays in its parent's process group. The caller ends the watchdog with
    :func:`stop_watchdog` once its work has finished normally.
    """  # noqa: D205
    command = [sys.executable, "-I", "-S", os.path.abspath(__file__), str(guarded), str(os.getpid()), *folders]
    return subprocess.Popen(  # -I -S: this file alone, the standard library only (no site, no working folder)
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a SIGINT to the terminal's group does not reach it
        close_fds=True,
    )


def stop_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
    """End a watchdog started by :func:`kill_tree_on_parent_death` (the processes and folders left alone)."""
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


def _processes() -> dict[int, tuple[int, bytes]]:
    """Every process: pid -> (parent pid, start time) from ``/proc`` (empty where there is none)."""
    found = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
                found[int(entry.name)] = (int(fields[1]), fields[19])
            except (OSError, IndexError, ValueError):
                continue  # ended meanwhile
    return found


def descendants(root: int | None, known: dict[int, bytes] | None = None) -> dict[int, bytes]:
    """The descendants of ``root`` now (None: none), and of ``known`` still running, with ``known`` itself:
    pid -> start time (a pid reused by another process is not the one noted). Never pid 1's: that is every process.
    """  # noqa: D205
    table = _processes()
    alive = {pid: start for pid, start in (known or {}).items() if table.get(pid, (0, None))[1] == start and pid > 1}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = [*([root] if root is not None and root > 1 else []), *alive]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in alive:
                alive[child] = table[child][1]
                stack.append(child)
    alive.pop(os.getpid(), None)
    return alive


def kill_tree(root: int | None, known: dict[int, bytes] | None = None) -> None:
    """SIGKILL the descendants of ``root`` (a live process; None once it is gone) and ``known`` (noted earlier)."""
    for _ in range(3):  # a process may start another while its parent is killed
        found = descendants(root, known)
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        known = found


def _watchdog(guarded: int, caller: int, folders: list[str]) -> None:
    """Wait until ``guarded`` or this process's parent (the caller) is gone, then kill what the caller left.

    Only processes noted as the caller's descendants while it ran are killed (never by the parent pid once the
    caller is gone: it is then another process's, or init's); a caller gone before this started leaves none noted.
    """
    known: dict[int, bytes] = {}
    while caller > 1 and os.getppid() == caller and _alive(guarded):
        known = descendants(caller, known)
        time.sleep(POLL_S)
    kill_tree(None, known)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only the caller's kill() (SIGKILL) or its death ends it
    _watchdog(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
