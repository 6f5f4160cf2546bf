"""Method specs of a sweep: a heuristic, a formulation on a backend (exact or approximate), or a plug-in."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from remat_models.errors import ConfigurationError
from remat_models.extensions.registry import extension_code, make_extensions
from remat_models.formulations import paper_family
from remat_models.planning.methods import MethodRef, parse_method_name

# Published method families (columns of the reference tables) by our method's identity.
_HEURISTIC_FAMILIES = {
    "fastsa": "fastsa",
    "ap-sqrtn": "ap_sqrtn",
    "ap-greedy": "ap_greedy",
    "griewank": "griewank_logn",
}


@dataclass(frozen=True)
class MethodSpec:
    """How one run plans: exactly one of ``name`` (heuristic), ``formulation`` or ``plugin`` ("module:function")."""

    label: str
    name: str | None = None
    formulation: str | None = None
    backend: str | None = None  # None: the formulation's default backend
    approx: str | None = None
    init: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    plugin: str | None = None
    time_limit: float | None = None  # overrides the sweep's
    seeds: tuple[int, ...] | None = None  # overrides the sweep's
    workers: int = 1
    paper: str | None = None  # published method family this row is compared with
    extensions: tuple[Any, ...] = ()  # NAME[:k=v,...] strings or tables {name = ..., k = v} (see --with)

    @property
    def kind(self) -> str:
        """``heuristic``, ``exact``, ``approx`` or ``plugin``."""
        if self.plugin is not None:
            return "plugin"
        if self.name is not None:
            return "heuristic"
        return "approx" if self.approx else "exact"

    @property
    def ref(self) -> MethodRef:
        """The planning method this spec runs (not for plug-ins)."""
        return MethodRef(method=self.name, formulation=self.formulation, backend=self.backend, approx=self.approx)

    def identity(self) -> dict[str, Any]:
        """What makes two runs the same computation (label, paper family and seed list excluded)."""
        data = asdict(self)
        for key in ("label", "paper", "seeds", "time_limit"):
            data.pop(key)
        return data

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (round-trips through :func:`method_from_mapping`)."""
        data = asdict(self)
        data["seeds"] = None if self.seeds is None else list(self.seeds)
        return data


_KEYS = {f.name for f in fields(MethodSpec)} | {"seed"}  # a sweep's method table: the spec's fields (seed: one seed)


def parse_method(text: str, *, allow_code: bool = True) -> MethodSpec:
    """Read the command-line form: ``NAME`` (heuristic), ``FORMULATION/BACKEND``, ``checkmate/lp-rounding``,
    or a plug-in ``module:function`` / ``path/to/file.py:function``.
    """  # noqa: D205
    text = text.strip()
    if not text:
        raise ConfigurationError("empty method name")
    if ":" in text and (text.rsplit(":", 1)[0].endswith(".py") or "/" not in text):
        return method_from_mapping({"plugin": text}, allow_code=allow_code)
    ref = parse_method_name(text)
    if ref.method is not None:
        return method_from_mapping({"name": ref.method})
    return method_from_mapping({"formulation": ref.formulation, "backend": ref.backend, "approx": ref.approx})


def method_from_mapping(data: Mapping[str, Any], *, allow_code: bool = True) -> MethodSpec:
    """Build a MethodSpec from a TOML/YAML table; unknown keys and ambiguous kinds raise ConfigurationError.

    ``allow_code=False`` (a sweep file without ``--allow-code``) refuses a plug-in and extensions that are files or
    modules before anything is imported: a sweep file is data, and runs no code of its own unless asked to.
    """
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigurationError(f"unknown method key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KEYS))}")
    if not allow_code:
        check_no_code(data)
    chosen = [key for key in ("name", "formulation", "plugin") if data.get(key) is not None]
    if len(chosen) != 1:
        raise ConfigurationError(f"a method needs exactly one of name, formulation or plugin; got {dict(data)!r}")
    if data.get("approx") is not None and data.get("formulation") is None:
        raise ConfigurationError(f"approx {data['approx']!r} needs a formulation")
    options = data.get("options") or {}
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"method options must be a table, got {options!r}")
    seeds = _seeds(data.get("seeds", data.get("seed")))
    time_limit = data.get("time_limit")
    if time_limit is not None and (
        isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not 0 < time_limit < math.inf
    ):
        raise ConfigurationError(f"method time_limit must be a finite positive number of seconds, got {time_limit!r}")
    if time_limit is not None:
        time_limit = min(time_limit, 1e9)  # clamped as a group's (sweep.MAX_TIME_LIMIT)
    spec = MethodSpec(
        label="",
        name=data.get("name"),
        formulation=data.get("formulation"),
        backend=None if data.get("backend") is None else str(data["backend"]),
        approx=data.get("approx"),
        init=data.get("init"),
        options=dict(options),
        plugin=data.get("plugin"),
        time_limit=None if time_limit is None else float(time_limit),
        seeds=seeds,
        workers=int(data.get("workers", 1)),
        paper=data.get("paper"),
        extensions=_extensions(data.get("extensions")),
    )
    _check_known(spec)
    label = data.get("label") or _default_label(spec)
    paper = spec.paper if spec.paper is not None else _family(spec)
    return replace(spec, label=str(label), paper=paper)


def check_no_code(data: Mapping[str, Any]) -> None:
    """Refuse a method table that names code to run (a plug-in, an extension file or module); see above."""
    extensions = data.get("extensions")
    named = [data["plugin"]] if data.get("plugin") is not None else []
    if isinstance(extensions, (list, tuple)):
        named += [code for code in map(extension_code, extensions) if code is not None]
    if named:
        raise ConfigurationError(
            f"the sweep file names code to run ({', '.join(map(repr, named))}); a sweep file runs code only when"
            " asked: pass --allow-code (remat bench run) or allow_code=True (load_sweep) if you trust it"
        )


def _check_known(spec: MethodSpec) -> None:
    """Refuse a misspelled method, formulation, backend or approximation when the sweep is loaded, not per run."""
    from remat_models.backends import backend_class
    from remat_models.formulations import approximation_names, formulation_names
    from remat_models.planning.plan import methods

    known = {
        "method": (spec.name, list(methods())),
        "formulation": (spec.formulation, formulation_names()),
        "approximation": (spec.approx, approximation_names(spec.formulation)),
        "warm start (init)": (spec.init, list(methods())),
    }
    for what, (value, names) in known.items():
        if value is not None and value not in names:
            raise ConfigurationError(f"unknown {what} {value!r}; choose one of {', '.join(names)}")
    if spec.formulation is not None and spec.approx is None and spec.backend is not None:
        name, _, option = spec.backend.partition(":")
        cls = backend_class(name)  # ConfigurationError naming the known backends
        if option and option not in cls.options:
            raise ConfigurationError(f"backend {name!r} has no option {option!r}; options: {', '.join(cls.options)}")


def _extensions(value: Any) -> tuple[Any, ...]:
    """Extension specs, checked now (a misspelled one fails the sweep at load, not every run)."""
    if not isinstance(value, (list, tuple, type(None))):
        raise ConfigurationError(f"method extensions must be a list of NAME[:k=v] strings or tables, got {value!r}")
    specs = tuple(value or ())
    make_extensions(specs)
    return specs


def _seeds(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    values = value if isinstance(value, (list, tuple)) else [value]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ConfigurationError(f"seeds must be an integer or a non-empty list of integers, got {value!r}")
    return tuple(values)


def _default_label(spec: MethodSpec) -> str:
    if spec.plugin is not None:
        return spec.plugin.rsplit("/", 1)[-1]
    if spec.name is not None:
        return spec.name
    label = f"{spec.formulation}/{spec.approx or spec.backend or 'default'}"
    label += "".join(f"+with={e if isinstance(e, str) else e.get('name')}" for e in spec.extensions)
    return label + (f"+init={spec.init}" if spec.init else "")


def _family(spec: MethodSpec) -> str | None:
    if spec.name is not None:
        return _HEURISTIC_FAMILIES.get(spec.name)
    if spec.approx == "lp-rounding":
        return "checkmate_lp_rounding"
    return paper_family(spec.formulation)
