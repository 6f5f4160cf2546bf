"""Rich consoles for the command line: tables are never cut when the output is not a terminal."""

from __future__ import annotations

from rich.console import Console

PIPE_WIDTH = 10_000  # columns when writing to a pipe, a file or a CI log: tables keep their natural width


def make_console(*, stderr: bool = False) -> Console:
    """A Console that uses the terminal's width on a terminal, and never truncates table cells elsewhere.

    Rich assumes 80 columns when the output is not a terminal and then cuts wide cells with an
    ellipsis; a table printed into a pipe or a CI log would lose digits. Tables are not expanded, so
    a large width only lets them take the room they need.
    """
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=PIPE_WIDTH)
