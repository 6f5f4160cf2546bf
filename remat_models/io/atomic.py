"""Safe output files: check the target before any work, write a temp file beside it, verify, then rename.

Nothing on disk is ever replaced by less than a complete file: the temp file is flushed and
``fsync``-ed, its size is compared with what was written (and, for writers that do not report their
own errors, a ``verify`` callback checks its content) before ``os.replace`` moves it onto the target.
Targets that are not regular files (a symbolic link, a folder, a device, a pipe) are refused rather
than replaced, and :func:`check_output` lets a command fail at once, before a long solve, when its
output cannot be written (or would overwrite one of its inputs). :func:`create_text_atomic` never
replaces an existing file at all.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from remat_models.errors import OutputError

__all__ = [
    "atomic_files",
    "check_not_input",
    "check_output",
    "create_text_atomic",
    "write_atomic",
    "write_bytes_atomic",
    "write_text_atomic",
]

Verify = Callable[[Path], None]  # raises OutputError when the written temp file is not complete
_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK)


class _TargetExists(Exception):
    """A target that must not be replaced (``replace=False``) exists: nothing was moved onto it."""


def check_output(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Return ``path`` if a file can be written there now; else raise OutputError saying why.

    Refused: one of ``inputs`` (the same file, by any name: see :func:`check_not_input`), a target
    that exists and is not a regular file (symbolic link, folder, device, pipe, socket), a missing
    parent folder, a parent that is not a folder, and a folder where no file can be created
    (read-only file system, no permission; found by creating and removing a probe).
    """
    target = Path(path)
    if "\0" in str(target):
        raise OutputError(f"{str(target)!r}: a file name cannot hold a NUL byte")
    check_not_input(target, inputs)
    try:
        info = os.lstat(target)
    except (FileNotFoundError, NotADirectoryError):
        info = None
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise OutputError(f"{target}: {_kind(info.st_mode)}, not a regular file; refusing to replace it")
    folder = target.parent
    if not folder.exists():
        raise OutputError(f"{target}: folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputError(f"{target}: {folder} is not a folder")
    probe = folder / f".{target.name}.{secrets.token_hex(4)}.probe"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:
        raise OutputError(f"{target}: cannot write in {folder}: {exc.strerror or exc}") from exc
    probe.unlink()
    return target


def check_not_input(output: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> None:
    """Raise OutputError if ``output`` is one of ``inputs``: the same file (also through a link) or path."""
    target = Path(output)
    for source in map(Path, inputs):
        try:
            same = os.path.samefile(source, target)
        except OSError:  # one of them does not exist (yet): compare where the names lead
            same = source.resolve() == target.resolve()
        except ValueError:  # a NUL byte in the input's name: no file is called so
            same = False
        if same:
            raise OutputError(f"output {target} is the input {source}: refusing to overwrite it (choose another file)")


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` completely or not at all (see the module docstring)."""
    return write_atomic(path, *_bytes_writer(path, data))


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` completely or not at all."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def create_text_atomic(path: str | os.PathLike[str], text: str) -> bool:
    """Write ``text`` (UTF-8) to ``path`` completely or not at all, unless ``path`` exists.

    Return False, and leave ``path`` as it was, if it exists when the complete file would be moved
    there (a hard link never replaces a file; without hard links, checked just before the rename).
    """
    write, verify = _bytes_writer(path, text.encode("utf-8"))
    try:
        with atomic_files([path], verify, replace=False) as (temp,):
            write(temp)
    except _TargetExists:
        return False
    return True


def _bytes_writer(path: str | os.PathLike[str], data: bytes) -> tuple[Callable[[Path], None], Verify]:
    """A writer of ``data`` to a temp file and the check that all of it reached the disk."""

    def write(temp: Path) -> None:
        with open(temp, "wb") as handle:
            handle.write(data)

    def verify(temp: Path) -> None:
        size = temp.stat().st_size
        if size != len(data):
            kept = _kept([Path(path)])
            raise OutputError(f"{path}: only {size:,} of {len(data):,} bytes reached the disk; {kept}")

    return write, verify


@contextlib.contextmanager
def atomic_files(
    targets: Sequence[str | os.PathLike[str]], verify: Verify | None = None, *, replace: bool = True
) -> Iterator[list[Path]]:
    """Yield temp paths, one per target, to be written by the caller (e.g. an external writer).

    On a clean exit each temp file is fsync-ed, checked to be non-empty and by ``verify``, and then
    all are moved onto their targets (in the order given); on any error every temp file is removed
    and the targets are left as they were. With ``replace=False`` an existing target is never
    replaced (a private ``_TargetExists`` stops the moves; see :func:`create_text_atomic`).
    """
    paths = [check_output(target) for target in targets]
    temps: list[Path] = []
    try:
        temps.extend(_temp_beside(path) for path in paths)
        yield temps
        _finish(paths, temps, verify, replace)
    except OSError as exc:  # e.g. ENOSPC / EFBIG from the writer: one typed line, the old files kept
        names = ", ".join(str(path) for path in paths)
        raise OutputError(f"{names}: write failed, {_kept(paths)}: {exc.strerror or exc}") from exc
    finally:
        for temp in temps:
            with contextlib.suppress(OSError):
                temp.unlink()


def write_atomic(
    path: str | os.PathLike[str], write: Callable[[Path], None], verify: Verify | None = None
) -> Path:
    """Call ``write(temp)`` and move the complete, verified temp file onto ``path``; return ``path``."""
    with atomic_files([path], verify) as (temp,):
        write(temp)
    return Path(path)


def _finish(paths: list[Path], temps: list[Path], verify: Verify | None, replace: bool) -> None:
    for path, temp in zip(paths, temps, strict=True):
        try:
            with open(temp, "rb+") as handle:
                os.fsync(handle.fileno())
                size = os.fstat(handle.fileno()).st_size
        except OSError as exc:
            raise OutputError(f"{path}: the written file could not be synced: {exc.strerror or exc}") from exc
        if size == 0:
            raise OutputError(f"{path}: the writer produced an empty file; {_kept([path])}")
        if verify is not None:
            verify(temp)
    for path, temp in zip(paths, temps, strict=True):
        check_output(path)  # the target may have been swapped for a link or a folder meanwhile
        if replace:
            os.replace(temp, path)
        else:
            _create(temp, path)
    _sync_folder(paths[0].parent)


def _create(temp: Path, path: Path) -> None:
    """Move ``temp`` to ``path`` unless ``path`` exists (then raise _TargetExists; ``temp`` is removed later)."""
    try:
        os.link(temp, path)  # fails if path exists, atomically
    except FileExistsError:
        raise _TargetExists(path) from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(path):  # a file system without hard links: check, then rename
            raise _TargetExists(path) from None
        os.replace(temp, path)


def _kept(paths: Sequence[Path]) -> str:
    """What a failed write left behind: the old file(s), or nothing where there was none."""
    existing = [path for path in paths if os.path.lexists(path)]
    if not existing:
        return "nothing was written"
    return "kept the old file" if len(paths) == 1 else "kept the old files"


def _temp_beside(path: Path) -> Path:
    """Create an empty temp file next to ``path`` with the mode a new file gets (the umask applies).

    It keeps ``path``'s suffix, from which writers such as HiGHS's pick the format.
    """
    temp = path.with_name(f".{path.stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp{path.suffix}")  # writers read it
    try:
        os.close(os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except OSError as exc:
        raise OutputError(f"{path}: cannot create a temporary file beside it: {exc.strerror or exc}") from exc
    return temp


def _sync_folder(folder: Path) -> None:
    """Make the rename durable (a folder fsync; not every file system supports it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
