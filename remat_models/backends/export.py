"""Export a model to a file (``.lp``/``.mps`` via HiGHS's writers, ``.mzn`` + ``.dzn``); atomic, pluggable."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from remat_models.errors import ConfigurationError, OutputError, SolverError
from remat_models.io.atomic import atomic_files, check_not_input
from remat_models.model import Model

Exporter = Callable[..., None]  # fn(model, tmp_path, *companion_tmp_paths)


def _highs_writer(model: Model, path: Path) -> None:
    """Lower for HiGHS and write with ``Highs.writeModel`` (format from the suffix)."""
    import highspy

    from remat_models.backends.highs import HighsBackend, build

    lowered = HighsBackend().compile(model).model
    h = build(lowered)
    for col, name in enumerate(lp_names(lowered.col_names())):
        h.passColName(col, name)
    for row, name in enumerate(lp_names(lowered.row_labels())):
        h.passRowName(row, name)
    if h.writeModel(str(path)) == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS could not write {path}")
    check_highs_file(path)


_LP_ALLOWED = re.compile(r"[^A-Za-z0-9!\"#$%&()/,.;?@_`'{}|~]")


def lp_names(names: list[str]) -> list[str]:
    """Names valid in .lp and free .mps files: brackets become parentheses, other characters outside the
    CPLEX LP set become ``_``, a leading digit or period gets ``_``, and repeats get a ``~k`` suffix.
    """  # noqa: D205
    seen: dict[str, int] = {}
    result = []
    for name in names:
        clean = _LP_ALLOWED.sub("_", name.replace("[", "(").replace("]", ")"))
        clean = f"_{clean}" if not clean or clean[0].isdigit() or clean[0] == "." else clean
        count = seen.get(clean, 0)
        seen[clean] = count + 1
        result.append(clean if count == 0 else f"{clean}~{count}")
    return result


def _minizinc_writer(model: Model, path: Path, data_path: Path) -> None:
    """Lower for the generic MiniZinc model; write it to ``path`` and the data to ``data_path``."""
    from remat_models.backends import mzn

    mzn.write(mzn.lowered(model), path, data_path, readable=True)


_EXPORTERS: dict[str, tuple[Exporter, tuple[str, ...]]] = {
    ".lp": (_highs_writer, ()),
    ".mps": (_highs_writer, ()),
    ".mzn": (_minizinc_writer, (".dzn",)),
}


def register_exporter(suffix: str, fn: Exporter, companions: tuple[str, ...] = ()) -> None:
    """Register a writer for a file suffix; it also writes one file per companion suffix (``.mzn`` -> ``.dzn``)."""
    _EXPORTERS[suffix] = (fn, companions)


def companion_files(path: str | Path) -> list[Path]:
    """The files an export to ``path`` writes beside it (``keep.mzn`` -> ``keep.dzn``); none for an unknown suffix."""
    path = Path(path)
    return [path.with_suffix(suffix) for suffix in _EXPORTERS.get(path.suffix, (None, ()))[1]]


def check_companions(path: str | Path, inputs: Iterable[str | os.PathLike[str]] = (), *, force: bool = False) -> None:
    """Refuse companions of ``path`` that are inputs (always) or exist (unless ``force``): the user named only ``path``.

    The output itself follows the usual rule (``check_output``); a companion such as ``keep.dzn`` is never
    replaced silently: OutputError names it and says that ``--force`` replaces it.
    """
    sources = list(inputs)
    for companion in companion_files(path):
        check_not_input(companion, sources)
        if os.path.lexists(companion) and not force:
            raise OutputError(
                f"{companion} exists (written beside {Path(path).name}); refusing to overwrite it (--force replaces it)"
            )


def export(
    model: Model, path: str | Path, *, force: bool = False, inputs: Iterable[str | os.PathLike[str]] = ()
) -> Path:
    """Write ``model`` to ``path`` (and its companions beside it); the format follows the suffix.

    Nothing is left half-written (see ``remat_models.io.atomic``): the targets are checked first, every
    file goes to a temp file (same suffix) in the target folder, is synced and checked, and all are
    ``os.replace``d once complete (companions before ``path``). An existing companion (``.dzn`` beside an
    ``.mzn``) is kept, OutputError, unless ``force``; no target may be one of ``inputs``.
    """
    path = Path(path)
    if path.suffix not in _EXPORTERS:
        raise ConfigurationError(f"no exporter for {path.suffix!r}; known: {', '.join(sorted(_EXPORTERS))}")
    sources = list(inputs)
    check_not_input(path, sources)
    check_companions(path, sources, force=force)
    writer, companions = _EXPORTERS[path.suffix]
    targets = [path.with_suffix(s) for s in companions] + [path]
    with atomic_files(targets) as temps:
        writer(model, temps[-1], *temps[:-1])
    return path


_LAST_LINES = {".lp": "end", ".mps": "endata"}  # what HiGHS writes last


def check_highs_file(path: Path) -> None:
    """Raise OutputError unless ``path`` ends with the last line HiGHS writes (its writer ignores I/O errors)."""
    expected = _LAST_LINES[path.suffix]
    with open(path, "rb") as handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - 64))
        tail = handle.read().decode("ascii", errors="replace").split()
    if not tail or tail[-1].lower() != expected:
        raise OutputError(
            f"HiGHS wrote an incomplete {path.suffix} file (no final {expected!r} line; is the disk full?); "
            "kept the old file"
        )
