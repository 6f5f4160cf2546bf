"""Shared pytest fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from remat_models.io import linear_chain, write_graph

SHARED_DIR = Path(os.environ.get("REMAT_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))


@pytest.fixture(scope="session", autouse=True)
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache folder of the test run's own (the torch APIs cache plans under ``$XDG_CACHE_HOME`` by default)."""
    folder = tmp_path_factory.mktemp("cache")
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(scope="session")
def shared_graphs_dir() -> Path:
    """The benchmark graphs folder (``$REMAT_SHARED/graphs``, default ``../shared/graphs``); skip if absent."""
    graphs = SHARED_DIR / "graphs"
    if not graphs.is_dir():
        pytest.skip(f"benchmark graphs folder {graphs} is absent (set REMAT_SHARED to the shared folder)")
    return graphs


@pytest.fixture(scope="session")
def shared_reference_dir() -> Path:
    """The published tables (``$REMAT_SHARED/reference``, default ``../shared/reference``); skip if absent."""
    reference = SHARED_DIR / "reference"
    if not reference.is_dir():
        pytest.skip(f"published reference folder {reference} is absent (set REMAT_SHARED to the shared folder)")
    return reference


@pytest.fixture
def chain8(tmp_path: Path) -> Path:
    """``remat graph generate chain --size 8`` written to a graph file in the test's folder."""
    path = tmp_path / "chain8.json"
    write_graph(linear_chain(8), path)
    return path
