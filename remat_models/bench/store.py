"""Results as JSON Lines: one whole line per finished run, appended and flushed; a torn last line is ignored."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from remat_models.errors import ConfigurationError, OutputError

log = logging.getLogger(__name__)

RETRYABLE = frozenset({"error", "oom", "timeout", "crashed"})


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every complete record of a results file (lines that do not parse, e.g. a torn last line, are skipped)."""
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise ConfigurationError(f"{source}: cannot read results: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        raise ConfigurationError(
            f"{source}: not a results file of `remat bench run` (not UTF-8 text: byte {error.start:,})"
        ) from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            log.warning("%s:%d: skipping an incomplete record", source, number)
            continue
        if isinstance(record, dict) and "run_id" in record:
            _check_record(record, f"{source}:{number}")
            records.append(record)
    return records


# fields whose type the reports rely on (a record edited by hand, or written by another tool)
RECORD_TYPES: dict[str, tuple[type, ...]] = {
    "machine": (dict,),
    "versions": (dict,),
    "trajectory": (list,),
    "method_spec": (dict,),
    "status": (str,),
    "method": (str,),
    "graph": (str,),
    "budget_spec": (str,),
}


def _check_record(record: dict[str, Any], where: str) -> None:
    """Raise ConfigurationError naming the line and field of a record whose field has the wrong type (or null)."""
    for key, types in RECORD_TYPES.items():
        value = record.get(key)
        if value is not None and not isinstance(value, types):
            expected = " or ".join("an object" if t is dict else "a list" if t is list else "a string" for t in types)
            raise ConfigurationError(f"{where}: record field {key!r} must be {expected}, got {value!r}")


RECORD_START = '{"run_id":'  # how every record line begins (run_isolated puts run_id first): a torn one too


def check_results_file(path: str | Path) -> None:
    """Refuse to append to a file that exists, is not empty and is not a results file (a plan, a graph, a CSV).

    Every non-empty line must be a JSON object with a ``run_id``, or the torn beginning of one. Raises
    OutputError naming the first line that is not, before any run and before anything is appended.
    """
    source = Path(path)
    try:
        data = source.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return
    except OSError:
        return  # unreadable: ResultStore.exclusive says why it cannot be written
    refuse = f"{source} is not a results file of `remat bench run`"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise OutputError(f"{refuse} (not UTF-8 text: byte {error.start:,}); refusing to append to it") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or _is_record_or_torn(line):
            continue
        raise OutputError(f"{refuse} (line {number} is not a run record); refusing to append to it (choose another -o)")


def _is_record_or_torn(line: str) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return line.startswith(RECORD_START)  # the torn beginning of a record (a sweep killed while it appended)
    return isinstance(record, dict) and "run_id" in record


def finished_ids(records: Iterable[dict[str, Any]], *, retry_failed: bool = False) -> set[str]:
    """Run ids to skip on resume (failed runs too, unless ``retry_failed``; never runs the sweep interrupted)."""
    rerun = RETRYABLE if retry_failed else frozenset()
    return {r["run_id"] for r in records if r.get("status") not in rerun | {"interrupted"}}


class ResultStore:
    """Append-only JSONL file; each record is one ``write`` of a whole line, flushed and fsynced."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the results file for one sweep: it must be writable now, and no other sweep may hold it.

        Raises OutputError at once when the file cannot be created or appended to, or is not a results file
        (:func:`check_results_file`; before any run),
        and ConfigurationError when another ``remat bench run`` holds it (which would run the same jobs).
        A file this call created and nothing was appended to is removed again.
        """
        check_results_file(self.path)
        created = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as error:
            raise OutputError(f"{self.path}: cannot write results: {error.strerror or error}") from error
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConfigurationError(
                    f"{self.path} is being written by another `remat bench run`; wait for it, or give another -o"
                ) from None
            yield
        finally:
            if created and os.fstat(fd).st_size == 0:
                self.path.unlink(missing_ok=True)
            os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        """All complete records so far."""
        return read_records(self.path)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as a single line (a torn previous line is first closed with a newline)."""
        line = json.dumps(_finite(record), separators=(",", ":"), allow_nan=False, default=_default) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            prefix = b"\n" if _needs_newline(fd) else b""
            os.write(fd, prefix + line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)


def _needs_newline(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def _finite(value: Any) -> Any:
    """Replace NaN and infinities (not JSON) by None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
