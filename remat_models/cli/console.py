"""Rich consoles for the command line: tables are never cut when the output is not a terminal."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.status import Status

PIPE_WIDTH = 10_000  # columns when writing to a pipe, a file or a CI log: tables keep their natural width


STATUS_MESSAGE_CHARS = 90  # of a log message shown on the status line


def make_console(*, stderr: bool = False) -> Console:
    """A Console that uses the terminal's width on a terminal, and never truncates table cells elsewhere.

    Rich assumes 80 columns when the output is not a terminal and then cuts wide cells with an
    ellipsis; a table printed into a pipe or a CI log would lose digits. Tables are not expanded, so
    a large width only lets them take the room they need.
    """
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=PIPE_WIDTH)


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
