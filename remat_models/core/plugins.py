"""Loading user code by reference: ``module:attribute`` or ``path/to/file.py:attribute``."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from remat_models.errors import ConfigurationError


def load_callable(reference: str) -> Any:
    """Import ``module:name`` or ``file.py:name`` and return that callable; ConfigurationError if it is not there."""
    target, _, name = reference.rpartition(":")
    if not target or not name:
        raise ConfigurationError(f"{reference!r} is not of the form module:name or path/to/file.py:name")
    try:
        if target.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(target).stem, target)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {target}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except (ImportError, OSError) as error:
        raise ConfigurationError(f"cannot import {reference!r}: {error}") from error
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigurationError(f"{reference!r}: {target} has no callable {name!r}")
    return function
