"""Atomic output files for reports and plots: write to a temp file beside the target, then ``os.replace``."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path


def write_atomic(target: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(temp_path)`` and move the result onto ``target``; nothing is left behind on failure."""
    path = Path(target)
    temp = path.with_name(f".{path.stem}.{os.getpid()}.{secrets.token_hex(4)}{path.suffix}")
    try:
        write(temp)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return path


def write_text_atomic(target: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``target`` atomically."""
    return write_atomic(target, lambda temp: temp.write_text(text, encoding="utf-8"))
