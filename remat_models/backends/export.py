"""Export a model to a file (``.lp``/``.mps`` via HiGHS's writers); atomic writes, pluggable formats."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from remat_models.errors import ConfigurationError, SolverError
from remat_models.model import Model

Exporter = Callable[[Model, Path], None]


def _highs_writer(model: Model, path: Path) -> None:
    """Lower for HiGHS and write with ``Highs.writeModel`` (format from the suffix)."""
    import highspy

    from remat_models.backends.highs import HighsBackend, build

    h = build(HighsBackend().compile(model).model)
    if h.writeModel(str(path)) == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS could not write {path}")


_EXPORTERS: dict[str, Exporter] = {".lp": _highs_writer, ".mps": _highs_writer}


def register_exporter(suffix: str, fn: Exporter) -> None:
    """Register a writer for a file suffix (e.g. the MiniZinc backend registers ``.mzn``)."""
    _EXPORTERS[suffix] = fn


def export(model: Model, path: str | Path) -> Path:
    """Write ``model`` to ``path``; the format follows the suffix; nothing is left half-written."""
    path = Path(path)
    writer = _EXPORTERS.get(path.suffix)
    if writer is None:
        raise ConfigurationError(f"no exporter for {path.suffix!r}; known: {', '.join(sorted(_EXPORTERS))}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        writer(model, Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
