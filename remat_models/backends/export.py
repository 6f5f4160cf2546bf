"""Export a model to a file (``.lp``/``.mps`` via HiGHS's writers, ``.mzn`` + ``.dzn``); atomic, pluggable."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from remat_models.errors import ConfigurationError, SolverError
from remat_models.model import Model

Exporter = Callable[..., None]  # fn(model, tmp_path, *companion_tmp_paths)


def _highs_writer(model: Model, path: Path) -> None:
    """Lower for HiGHS and write with ``Highs.writeModel`` (format from the suffix)."""
    import highspy

    from remat_models.backends.highs import HighsBackend, build

    h = build(HighsBackend().compile(model).model)
    if h.writeModel(str(path)) == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS could not write {path}")


def _minizinc_writer(model: Model, path: Path, data_path: Path) -> None:
    """Lower for the generic MiniZinc model; write it to ``path`` and the data to ``data_path``."""
    from remat_models.backends import mzn

    mzn.write(mzn.lowered(model), path, data_path)


_EXPORTERS: dict[str, tuple[Exporter, tuple[str, ...]]] = {
    ".lp": (_highs_writer, ()),
    ".mps": (_highs_writer, ()),
    ".mzn": (_minizinc_writer, (".dzn",)),
}


def register_exporter(suffix: str, fn: Exporter, companions: tuple[str, ...] = ()) -> None:
    """Register a writer for a file suffix; it also writes one file per companion suffix (``.mzn`` -> ``.dzn``)."""
    _EXPORTERS[suffix] = (fn, companions)


def export(model: Model, path: str | Path) -> Path:
    """Write ``model`` to ``path`` (and its companions beside it); the format follows the suffix.

    Nothing is left half-written: every file goes to a temp file in the target folder first and is
    ``os.replace``d once all are written (companions before ``path``).
    """
    path = Path(path)
    if path.suffix not in _EXPORTERS:
        raise ConfigurationError(f"no exporter for {path.suffix!r}; known: {', '.join(sorted(_EXPORTERS))}")
    writer, companions = _EXPORTERS[path.suffix]
    targets = [path.with_suffix(s) for s in companions] + [path]
    tmps: list[Path] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for target in targets:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=target.suffix, dir=target.parent)
            os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; give the mode any new file would get
            os.close(fd)
            tmps.append(Path(tmp))
        writer(model, tmps[-1], *tmps[:-1])
        for tmp, target in zip(tmps, targets, strict=True):
            os.replace(tmp, target)
    except BaseException:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
        raise
    return path
