"""The command's own clock: ``--time-limit L`` holds for the whole command, its start-up included.

A command given ``--time-limit L`` (``remat solve``, a run of ``remat bench run``) should end within 1.1 L + 2 s of
its start (docs/reliability.md). The interpreter start, the imports (numba, scipy, networkx: 0.8-2.6 s on a loaded
machine) and the graph read come before the method; the output and the exit after it. The method therefore gets
``L``, less what the start-up took past its share of that allowance (never less than 0.8 ``L``). A bench run's
process counts from its own start; the first run a sweep starts also from the sweep command's (``CLOCK_ENV``), so a
one-run ``remat bench run`` holds the allowance as ``remat solve`` does.
"""

from __future__ import annotations

import logging
import os
import time

from remat_models.core.limits import check_time_limit

log = logging.getLogger(__name__)

ALLOWANCE_SHARE, ALLOWANCE_SECONDS = 0.1, 2.0  # a command ends within (1 + 0.1) x limit + 2 s
AFTER_SECONDS = 1.0  # of that allowance, kept for what comes after the method: its overrun, the output, the exit
LEAST_SHARE = 0.8  # of the limit, the least the method gets however long the start-up took (at half of 5 s on
# 9,607 nodes under load, rotor returned an over-budget plan and warm starts lost the knapsack baseline: 32 % TDI)

HOSTED_SECONDS = 60.0  # a process this old when the command starts hosts it in process (a test's CliRunner, a
# notebook calling the CLI's main): its age is not the command's start-up, which then counts as nothing
CLOCK_ENV = "REMAT_COMMAND_SECONDS"  # seconds the command had run when it started this process (a bench run's)

_IMPORTED = time.monotonic()  # the fallback origin where /proc is missing


def seconds_since_start() -> float:
    """Seconds since this process started, plus what the command that started it had run before (``CLOCK_ENV``).

    From ``/proc`` on Linux, else since this module was imported.
    """
    try:
        before = max(0.0, float(os.environ.get(CLOCK_ENV, "0")))
    except ValueError:
        before = 0.0
    try:
        with open("/proc/self/stat", "rb") as stat:
            started_ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as uptime:
            now = float(uptime.read().split()[0])
        return before + max(0.0, now - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return before + time.monotonic() - _IMPORTED


def method_time_limit(limit: float | None, started: float | None = None) -> float | None:
    """The time limit the method gets when the command was given ``limit`` and began ``started`` seconds ago."""
    limit = check_time_limit(limit)  # NaN, infinities, zero and negatives refused as the library refuses them
    if limit is None:
        return None
    if started is None:
        started = seconds_since_start()
        started = 0.0 if started > HOSTED_SECONDS else started
    left = (1 + ALLOWANCE_SHARE) * limit + ALLOWANCE_SECONDS - AFTER_SECONDS - started
    if left >= limit:
        return limit
    cut = max(left, LEAST_SHARE * limit)
    log.info("the start-up took %.1f s: the method gets %.1f s of the %g s time limit", started, cut, limit)
    return cut
