"""Rich consoles for the command line: tables are never cut when the output is not a terminal."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TextIO, cast

from rich.console import Console
from rich.status import Status

from remat_models.errors import OutputError

# Exit statuses of the commands (docs/semantics.md, "Status"): 0 a fitting schedule (whatever the solver proved),
# 1 a library error, 3 no schedule within the budget (over_budget, infeasible, no_schedule_in_model, no_schedule),
# 4 the solver failed (solver_error; a warm start may still be shown), 128 + the signal when one stopped the run.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_NO_SCHEDULE = 3
EXIT_SOLVER_ERROR = 4

PIPE_WIDTH = 10_000  # columns when writing to a pipe, a file or a CI log: tables keep their natural width


STATUS_MESSAGE_CHARS = 90  # of a log message shown on the status line


def make_console(*, stderr: bool = False) -> Console:
    """A Console that uses the terminal's width on a terminal, and never truncates table cells elsewhere.

    Rich assumes 80 columns when the output is not a terminal and then cuts wide cells with an
    ellipsis; a table printed into a pipe or a CI log would lose digits. Tables are not expanded, so
    a large width only lets them take the room they need.
    """
    if stderr:
        console = Console(stderr=True)
        return console if console.is_terminal else Console(stderr=True, width=PIPE_WIDTH)
    stdout = cast("IO[str]", _Stdout())
    console = Console(file=stdout)
    return console if console.is_terminal else Console(file=stdout, width=PIPE_WIDTH)


class _Stdout:
    """The process's stdout as it is at each write (tests swap ``sys.stdout``, as rich's live display does).

    A failed write (a full disk, ``> /dev/full``) raises OutputError, which the command prints as one
    line; a reader that went away stays a BrokenPipeError, on which rich ends the command quietly.
    """

    @property
    def _stream(self) -> TextIO:
        return getattr(sys.stdout, "rich_proxied_file", sys.stdout)  # past rich's live-display proxy, as rich does

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def write(self, text: str) -> int:
        with _stdout_errors():
            return self._stream.write(text)

    def flush(self) -> None:
        with _stdout_errors():
            self._stream.flush()


@contextmanager
def _stdout_errors() -> Iterator[None]:
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        discard_stdout()  # what stdout still buffers would fail again at exit
        raise OutputError(f"cannot write to standard output: {exc.strerror or exc}") from exc


def discard_stdout() -> None:
    """Point the stdout file descriptor at the null device (after it failed), as rich does on a broken pipe."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    finally:
        os.close(null)


class _StatusHandler(logging.Handler):
    """Shows the library's latest log message (and the seconds since the start) on a rich status line."""

    def __init__(self, status: Status, text: str) -> None:
        super().__init__(logging.INFO)
        self.status, self.text, self.started = status, text, time.perf_counter()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage().splitlines()[0][:STATUS_MESSAGE_CHARS]
        self.status.update(f"{self.text} [{time.perf_counter() - self.started:.0f} s] {message}")


@contextmanager
def planning_status(console: Console, text: str) -> Iterator[Status]:
    """A status line (rich shows it on terminals only) that follows the library's progress messages.

    The ``remat_models`` logger is lowered to INFO for the duration; with no handler of its own at that
    level (no ``-v``) nothing more is printed, the messages only reach the status line.
    """
    logger = logging.getLogger("remat_models")
    with console.status(text) as status:
        handler, previous = _StatusHandler(status, text), logger.level
        logger.addHandler(handler)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        try:
            yield status
        finally:
            logger.removeHandler(handler)
            logger.setLevel(previous)
