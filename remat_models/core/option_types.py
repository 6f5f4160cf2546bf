"""Option values checked against their dataclass field's annotation, with a message naming the option."""

from __future__ import annotations

import functools
import logging
import numbers
import types
from collections.abc import Collection, Mapping, Sequence, Set
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import numpy as np

from remat_models.errors import ConfigurationError

log = logging.getLogger(__name__)


@functools.cache
def _field_types(options_type: type) -> dict[str, Any]:
    """The resolved annotation of each field of ``options_type`` (none where they cannot be resolved)."""
    try:
        return get_type_hints(options_type)
    except (NameError, TypeError) as error:
        log.debug("options of %s are not type-checked: %s", options_type.__name__, error)
        return {}


def check_option_types(options_type: type, values: Mapping[str, Any], formulation: str) -> None:
    """Raise ConfigurationError naming the first option whose value does not fit its field's annotation."""
    hints = _field_types(options_type)
    for name, value in values.items():
        hint = hints.get(name, Any)
        if not _fits(value, hint):
            raise ConfigurationError(
                f"{formulation} option {name}={value!r}: expected {_describe(hint)}, got {type(value).__name__}"
            )


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits the annotation ``hint``.

    An int fits a float, a bool fits only bool, a list (or tuple) fits a sequence, a set, a mapping their
    kinds (items checked); a comma-separated string fits a set of strings (the command line's form); a
    value of a literal's type fits it (which values are allowed is left to ``validated``). Annotations of
    other kinds accept anything.
    """
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is Literal:  # the type only: which values are allowed is the options' own check (``validated``)
        return any(_fits(value, type(arg)) for arg in args)
    if hint is bool:
        return isinstance(value, (bool, np.bool_))
    if hint in (int, float):
        number = numbers.Integral if hint is int else numbers.Real
        return isinstance(value, number) and not isinstance(value, (bool, np.bool_))
    if isinstance(origin, type) and issubclass(origin, Mapping):
        key, item = args or (Any, Any)
        return isinstance(value, Mapping) and all(_fits(k, key) and _fits(v, item) for k, v in value.items())
    if isinstance(origin, type) and issubclass(origin, (Sequence, Set)):
        item = args[0] if args else Any
        unordered = issubclass(origin, Set)
        if isinstance(value, (str, bytes)):
            return unordered and item is str and isinstance(value, str)
        kinds = (Collection,) if unordered else (Sequence, np.ndarray)
        if not isinstance(value, kinds) or isinstance(value, Mapping):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args, strict=True))
        return all(_fits(v, item) for v in value)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _describe(hint: Any) -> str:
    """An annotation in words, for messages: ``int or None``, ``a list of int``, ``str (one of 'input', 'free')``."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is type(None):
        return "None"
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in args)
    if origin is Literal:
        kinds = dict.fromkeys(type(arg).__name__ for arg in args)
        return f"{' or '.join(kinds)} (one of {', '.join(repr(arg) for arg in args)})"
    if isinstance(origin, type) and issubclass(origin, Mapping) and args:
        return f"a mapping of {_describe(args[0])} to {_describe(args[1])}"
    if isinstance(origin, type) and issubclass(origin, (Sequence, Set)) and args:
        words = f"a list of {_describe(args[0])}"
        return words + " (or a comma-separated string)" if issubclass(origin, Set) and args[0] is str else words
    return getattr(hint, "__name__", str(hint))
