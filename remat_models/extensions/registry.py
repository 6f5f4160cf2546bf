"""Extensions by name: a registry of factories and the ``NAME[:key=value,...]`` form the CLI and sweeps use.

``paging:in_bw=12e9,out_bw=12e9,host=64GiB`` calls the factory registered as ``paging`` with those keyword
arguments; ``path/to/file.py:factory[:key=value,...]`` (or ``module:factory``) calls a user's own factory.
Values are read as JSON (numbers, true/false, null, lists, quoted strings), else as sizes (``64GiB``), else kept
as strings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from remat_models.core.plugins import describe_error, load_callable
from remat_models.core.units import parse_size
from remat_models.errors import ConfigurationError, RematError
from remat_models.formulations.base import Extension

# name -> "module:factory" (imported lazily)
_REGISTRY: dict[str, str] = {
    "paging": "remat_models.extensions.paging:Paging",
    "paging-overlap": "remat_models.extensions.overlap_paging:OverlapPaging",
}


def register_extension(name: str, target: str) -> None:
    """Register an extension factory given as ``"module:factory"``."""
    _REGISTRY[name] = target


def extension_names() -> list[str]:
    """All registered extension names."""
    return sorted(_REGISTRY)


def make_extension(spec: str | Mapping[str, Any] | Extension) -> Extension:
    """An extension from ``NAME[:k=v,...]``, ``file.py:factory[:k=v,...]``, a table ``{name=..., k=v}`` or itself."""
    if isinstance(spec, Extension):
        return spec
    if isinstance(spec, Mapping):
        table = dict(spec)
        if not isinstance(table.get("name"), str):
            raise ConfigurationError(f"an extension table needs a 'name', got {table!r}")
        name = table.pop("name")
        return _call(name, _factory(name), table)
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(f"an extension is NAME[:key=value,...], got {spec!r}")
    reference, arguments = _split(spec.strip())
    return _call(spec, _factory(reference), arguments)


def extension_code(spec: str | Mapping[str, Any] | Extension) -> str | None:
    """The user code a spec would import and run (``file.py:factory``, ``module:factory``); None for a registered name.

    Sweep files may name code only with an explicit opt-in (``remat bench run --allow-code``).
    """
    if isinstance(spec, Extension):
        return None
    if isinstance(spec, Mapping):
        name = spec.get("name")
        return None if not isinstance(name, str) or name in _REGISTRY or ":" not in name else name
    if not isinstance(spec, str):
        return None
    reference, _ = _split(spec.strip())
    return None if reference in _REGISTRY or ":" not in reference else reference


def make_extensions(specs: Sequence[str | Mapping[str, Any] | Extension] | None) -> list[Extension]:
    """Extensions from a list of specs (None: none)."""
    return [make_extension(spec) for spec in specs or ()]


def _factory(reference: str) -> Callable[..., Any]:
    if reference in _REGISTRY:
        return load_callable(_REGISTRY[reference])
    if ":" in reference:
        return load_callable(reference)
    raise ConfigurationError(
        f"unknown extension {reference!r}; registered: {', '.join(extension_names())}, or give path/file.py:factory"
    )


def _call(label: str, factory: Callable[..., Any], arguments: Mapping[str, Any]) -> Extension:
    try:
        extension = factory(**arguments)
    except RematError:
        raise
    except Exception as error:  # the factory is user code: bad arguments, or anything it raises
        raise ConfigurationError(f"extension {label!r}: {describe_error(error)}") from error
    if not isinstance(extension, Extension):
        raise ConfigurationError(f"extension {label!r}: the factory returned {extension!r}, not an Extension")
    return extension


def _split(text: str) -> tuple[str, dict[str, Any]]:
    """Reference and keyword arguments of ``NAME[:args]`` or ``module:factory[:args]`` / ``file.py:factory[:args]``."""
    head, _, rest = text.partition(":")
    factory, _, arguments = rest.partition(":")
    if head in _REGISTRY or not rest or "=" in factory:  # a name, maybe with arguments (unknown names fail later)
        return head, dict(_pair(item) for item in _items(rest))
    return f"{head}:{factory}", dict(_pair(item) for item in _items(arguments))


def _items(text: str) -> list[str]:
    """Split ``k=v,k=[1,2],k="a,b"`` at the commas outside brackets and quotes."""
    items, depth, quoted, current = [], 0, False, []
    for char in text:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "[{":
            depth += 1
        elif not quoted and char in "]}":
            depth -= 1
        if char == "," and depth == 0 and not quoted:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return [item for item in (i.strip() for i in items) if item]


def _pair(item: str) -> tuple[str, Any]:
    key, equals, value = item.partition("=")
    if not equals or not key.strip().isidentifier():
        raise ConfigurationError(f"extension argument {item!r} is not key=value")
    return key.strip(), parse_value(value.strip())


def parse_value(text: str) -> Any:
    """A command-line value: JSON (numbers, true/false, null, lists, quoted strings), else a size, else the text."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return parse_size(text)
    except RematError:
        return text
