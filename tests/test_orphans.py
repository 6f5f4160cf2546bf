"""A process that swallows the kernel's SIGTERM on its parent's death still ends (``watch_parent(..., after=)``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

CHILD = """
import os, signal, sys, time
from remat_models.core.processes import die_with_parent, watch_parent
parent = os.getppid()
signal.signal(signal.SIGTERM, lambda signum, frame: None)  # a solve's handler: the SIGTERM only stops it
die_with_parent(parent, signal.SIGTERM)
watch_parent(parent, signal.SIGKILL, after=0.5)
print(os.getpid(), flush=True)
time.sleep(60)
"""

MIDDLE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True)
print(child.stdout.readline().strip(), flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_an_orphan_that_caught_the_sigterm_is_killed_after_its_grace() -> None:
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, CHILD], stdout=subprocess.PIPE, text=True)
    child = int(middle.stdout.readline())
    assert _alive(child)
    middle.kill()
    middle.wait()
    time.sleep(0.2)
    assert _alive(child)  # the SIGTERM was caught: without the watch it would sleep its 60 s
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert not _alive(child), "the orphan outlived its grace"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
