"""Loading user code by reference: ``module:attribute`` or ``path/to/file.py:attribute``."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from remat_models.errors import ConfigurationError, RematError


def describe_error(error: BaseException) -> str:
    """An exception raised by user code as ``Type: message`` on one line, for a ConfigurationError's message."""
    return " ".join(f"{type(error).__name__}: {error}".split())


def load_callable(reference: str) -> Any:
    """Import ``module:name`` or ``file.py:name`` and return that callable.

    ConfigurationError names the reference if it is malformed, the module cannot be found or fails while it is
    executed (a syntax error, an exception at import time), or it has no such callable.
    """
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
    except RematError:
        raise
    except Exception as error:  # user code failing while it is executed, a SyntaxError included
        raise ConfigurationError(f"cannot import {reference!r}: {describe_error(error)}") from error
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigurationError(f"{reference!r}: {target} has no callable {name!r}")
    return function
