"""Plans on disk, so a second process with the same model and budget reuses the first one's plan.

An entry is one JSON file named by the SHA-256 of its key: the graph's content hash, the budget as given,
the method and its options, and the versions of torch and remat_models. Entries are written atomically
(a temp file renamed into place). Reading never trusts a file: an unreadable, malformed or foreign entry
(another key) is ignored with a logged warning, and each caller validates the plan against the graph
(names and count through the schedule reader, then the simulator within the budget) before using it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch

import remat_models
from remat_models.errors import ConfigurationError, RematError
from remat_models.io.files import read_json, write_json_atomic

log = logging.getLogger(__name__)

CACHE_FORMAT = "remat-plan-cache"
CACHE_VERSION = 1
CacheDir = str | os.PathLike[str] | bool | None
DEFAULT: CacheDir = True  # the torch APIs' default: the user's cache folder


def default_folder() -> Path:
    """``$XDG_CACHE_HOME/remat_models``, else ``~/.cache/remat_models``."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "remat_models"


class PlanCache:
    """Entries under ``folder`` (``cache_dir``: a path, True for :func:`default_folder`, None/False: no cache)."""

    def __init__(self, cache_dir: CacheDir = DEFAULT) -> None:
        if cache_dir is None or cache_dir is False:
            self.folder: Path | None = None
        elif cache_dir is True:
            self.folder = default_folder()
        elif isinstance(cache_dir, (str, os.PathLike)):
            self.folder = Path(cache_dir)
        else:
            raise ConfigurationError(f"cache_dir must be a folder, True or None, got {cache_dir!r}")

    def key(self, **fields: Any) -> dict[str, Any]:
        """The key of a plan: ``fields`` (JSON-ready) plus the versions of torch and remat_models."""
        return {**fields, "torch": torch.__version__, "remat_models": remat_models.__version__}

    def path(self, key: dict[str, Any]) -> Path | None:
        """The file of ``key``'s entry (None without a cache)."""
        if self.folder is None:
            return None
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=repr).encode()).hexdigest()
        return self.folder / f"{digest}.json"

    def load(self, key: dict[str, Any]) -> dict[str, Any] | None:
        """The payload stored under ``key``, or None (no cache, no entry, or an entry not to trust: warned)."""
        path = self.path(key)
        if path is None or not path.exists():
            return None
        try:
            data = read_json(path, ConfigurationError)
        except RematError as error:
            log.warning("plan cache: ignoring %s (%s)", path, error)
            return None
        stored = json.loads(json.dumps(key, sort_keys=True, default=repr))
        if (
            not isinstance(data, dict)
            or data.get("format") != CACHE_FORMAT
            or data.get("version") != CACHE_VERSION
            or data.get("key") != stored
            or not isinstance(data.get("payload"), dict)
        ):
            log.warning("plan cache: ignoring %s (not an entry of this key)", path)
            return None
        return data["payload"]

    def store(self, key: dict[str, Any], payload: dict[str, Any]) -> None:
        """Write ``payload`` under ``key`` atomically; a folder that cannot be written is warned about, not raised."""
        path = self.path(key)
        if path is None:
            return
        entry = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "key": key, "payload": payload}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, json.loads(json.dumps(entry, sort_keys=True, default=repr)))
        except (OSError, RematError) as error:
            log.warning("plan cache: cannot write %s (%s)", path, error)
            return
        log.info("plan cache: stored %s", path)

    def reject(self, key: dict[str, Any], why: str) -> None:
        """Warn that the entry under ``key`` failed validation (it is then planned anew and overwritten)."""
        log.warning("plan cache: ignoring %s (%s)", self.path(key), why)
