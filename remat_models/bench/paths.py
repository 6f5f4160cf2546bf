"""Where benchmark graphs are found: ``--graphs DIR``, the sweep file's folder, the working folder, shared."""

from __future__ import annotations

import os
from pathlib import Path

from remat_models.errors import GraphError

_REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """The shared folder: ``$REMAT_SHARED`` or ``../shared`` next to the repository."""
    return Path(os.environ.get("REMAT_SHARED", _REPO_ROOT.parent / "shared"))


def default_graphs_dir() -> Path:
    """The reference graphs (``<shared>/graphs``)."""
    return shared_dir() / "graphs"


def default_reference_dir() -> Path:
    """The published numbers (``<shared>/reference``)."""
    return shared_dir() / "reference"


def resolve_graph(name: str, graphs_dir: Path | None = None, base: Path | None = None) -> Path:
    """Find graph ``name`` (a path, or a file name with or without ``.json``); GraphError lists where it looked."""
    given = Path(name).expanduser()
    names = [given] if given.suffix else [given, given.with_suffix(".json")]
    if given.is_absolute():
        folders: list[Path] = [Path("/")]
    else:
        folders = [f for f in (graphs_dir, base, Path.cwd(), default_graphs_dir(), _REPO_ROOT) if f is not None]
    for folder in folders:
        for candidate in names:
            path = folder / candidate
            if path.is_file():
                return path.resolve()
    raise GraphError(f"graph {name!r} not found in {', '.join(str(f) for f in dict.fromkeys(folders))}")
