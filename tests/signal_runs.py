"""A command run in a child process, its stderr read meanwhile, then stopped by a signal: the signal tests' shape."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}  # the exit status of a run stopped by each signal


def default_sigint() -> None:
    """In the child: SIGINT back to its default (a runner started with ``&`` hands SIG_IGN down to us)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class SignalledRun:
    """``command`` in a child process (unwrapped log lines), its stderr collected in the background."""

    def __init__(self, command: list[str], columns: int = 250) -> None:
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": str(columns)},
            preexec_fn=default_sigint,
        )
        self.lines: list[str] = []
        assert self.process.stderr is not None
        stderr = self.process.stderr
        self.reader = threading.Thread(target=lambda: self.lines.extend(stderr), daemon=True)
        self.reader.start()

    @property
    def stderr(self) -> str:
        """What the command wrote to stderr so far."""
        return "".join(self.lines)

    def wait_for(self, text: str, seconds: float = 120.0) -> None:
        """Wait until ``text`` is logged (the test fails if the command ends or the time runs out first)."""
        deadline = time.monotonic() + seconds
        while text not in self.stderr and time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.05)
        assert text in self.stderr, self.stderr

    def finish(self, signum: int, timeout: float = 120.0) -> tuple[int, str, str]:
        """Send ``signum``, wait for the end (killed after ``timeout`` s): the exit status, stdout and stderr."""
        try:
            self.process.send_signal(signum)
            self.process.wait(timeout=timeout)  # stdout (a table) fits the pipe; stderr is read by the reader
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self.reader.join(5)
        assert self.process.stdout is not None
        return self.process.returncode, self.process.stdout.read(), self.stderr
