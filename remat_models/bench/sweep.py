"""Sweeps: graphs x budgets x methods x seeds, read from TOML/YAML or built from the command line, expanded to runs."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remat_models.bench.methods import MethodSpec, method_from_mapping, parse_method
from remat_models.bench.paths import resolve_graph
from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak
from remat_models.errors import BudgetError, ConfigurationError
from remat_models.io import read_graph

log = logging.getLogger(__name__)

DEFAULT_TIME_LIMIT = 60.0
MAX_TIME_LIMIT = 1e9  # seconds (31 years): a run's limit and grace are clamped here, as solvers clamp theirs
DEFAULT_GRACE = 30.0
_GROUP_KEYS = {"name", "graphs", "budgets", "methods", "seeds", "time_limit", "grace", "memory_limit"}
_TOP_KEYS = _GROUP_KEYS | {"description", "method", "groups"}


@dataclass(frozen=True)
class Group:
    """One block of a sweep: every graph x budget x method x seed."""

    name: str
    graphs: tuple[str, ...]
    budgets: tuple[str, ...]
    methods: tuple[MethodSpec, ...]
    seeds: tuple[int, ...] = (0,)
    time_limit: float = DEFAULT_TIME_LIMIT
    grace: float = DEFAULT_GRACE  # the run's process is killed at time_limit + grace
    memory_limit: int | None = None  # bytes of address space per run (RLIMIT_AS); None: unlimited


@dataclass(frozen=True)
class Sweep:
    """A named list of groups; graph names resolve relative to ``base`` too."""

    name: str
    groups: tuple[Group, ...]
    base: Path | None = None


@dataclass(frozen=True)
class RunSpec:
    """One run: everything the isolated process needs, and what identifies it for resuming."""

    run_id: str
    sweep: str
    group: str
    graph_path: str
    graph_file: str
    graph_name: str
    graph_hash: str
    n: int
    m: int
    graph_total_cost: float
    reference_peak: int
    budget_spec: str
    budget: int
    method: MethodSpec
    seed: int
    time_limit: float
    grace: float
    memory_limit: int | None = None
    schedule_dir: str | None = None

    @property
    def budget_fraction(self) -> float:
        """Budget as a fraction of the input-order peak."""
        return self.budget / self.reference_peak if self.reference_peak else 0.0

    def to_task(self) -> dict[str, Any]:
        """JSON-ready form sent to the worker process."""
        data = {key: getattr(self, key) for key in self.__dataclass_fields__}
        data["method"] = self.method.to_dict()
        return data

    @classmethod
    def from_task(cls, data: Mapping[str, Any]) -> RunSpec:
        """Inverse of :meth:`to_task`."""
        return cls(**{**data, "method": method_from_mapping(data["method"])})


def load_sweep(path: str | Path, *, allow_code: bool = False) -> Sweep:
    """Read a sweep file (``.toml``, ``.yaml``/``.yml``); ConfigurationError names the file and the problem.

    A sweep file that names code (a plug-in method, an extension file or module) is refused unless
    ``allow_code`` (``remat bench run --allow-code``); its ``name`` must be a plain file name (see
    :func:`check_sweep_name`).
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigurationError(f"{source}: cannot read sweep file: {error.strerror or error}") from error
    if source.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigurationError(f"{source}: invalid TOML: {error}") from error
    elif source.suffix in (".yaml", ".yml"):
        data = _load_yaml(text, source)
    else:
        raise ConfigurationError(f"{source}: sweep files end in .toml, .yaml or .yml")
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"{source}: a sweep file holds a table at the top level")
    try:
        return sweep_from_mapping(data, name=source.stem, base=source.resolve().parent, allow_code=allow_code)
    except ConfigurationError as error:
        raise ConfigurationError(f"{source}: {error}") from error


def _load_yaml(text: str, source: Path) -> Any:
    try:
        import yaml
    except ImportError as error:
        raise ConfigurationError("YAML sweeps need PyYAML: pip install 'remat_models[bench]'") from error
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{source}: invalid YAML: {error}") from error


def sweep_from_mapping(
    data: Mapping[str, Any], *, name: str = "sweep", base: Path | None = None, allow_code: bool = False
) -> Sweep:
    """Build a sweep from decoded TOML/YAML: top-level defaults, ``[method.LABEL]`` definitions, ``[[groups]]``.

    Code named in it (plug-ins, extension files) is refused unless ``allow_code``; see :func:`load_sweep`.
    """
    _check_keys(data, _TOP_KEYS, "sweep")
    check_sweep_name(data.get("name", name))
    defined = {label: _defined(label, spec, allow_code) for label, spec in (data.get("method") or {}).items()}
    defaults = {key: data[key] for key in _GROUP_KEYS - {"name"} if key in data}
    raw_groups = data.get("groups") or [{"name": "main"}]
    if not isinstance(raw_groups, list):
        raise ConfigurationError("groups must be a list of tables ([[groups]])")
    groups = [_group({**defaults, **raw}, index, defined, allow_code) for index, raw in enumerate(raw_groups)]
    return Sweep(name=str(data.get("name", name)), groups=tuple(groups), base=base)


def check_sweep_name(name: Any) -> str:
    """A sweep name names the results file (``bench_results/NAME.jsonl``): a plain file name, no folder in it.

    Refused: empty, ``.`` or ``..``, a path separator, a NUL byte, a leading ``~``.
    """
    text = str(name)
    bad = text.strip() in ("", ".", "..") or "\0" in text or text.startswith("~")
    if bad or any(sep in text for sep in ("/", "\\", os.sep)):
        raise ConfigurationError(
            f"sweep name {name!r} must be a plain file name (it names bench_results/NAME.jsonl): no folder, no '..'"
        )
    return text


def sweep_from_options(
    graphs: Sequence[str],
    budgets: Sequence[str],
    methods: Sequence[str],
    *,
    seeds: Sequence[int] = (0,),
    time_limit: float = DEFAULT_TIME_LIMIT,
    grace: float = DEFAULT_GRACE,
    name: str = "cli",
) -> Sweep:
    """A one-group sweep from command-line values (methods in :func:`parse_method` syntax)."""
    raw = {"graphs": list(graphs), "budgets": list(budgets), "methods": list(methods), "seeds": list(seeds)}
    group = _group({**raw, "time_limit": time_limit, "grace": grace, "name": "cli"}, 0, {})
    return Sweep(name=name, groups=(group,))


def expand(
    sweep: Sweep,
    *,
    graphs_dir: Path | None = None,
    schedule_dir: Path | None = None,
    only: Iterable[str] | None = None,
) -> list[RunSpec]:
    """Every run of the sweep (groups filtered by ``only``), graphs read and budgets resolved; duplicates dropped."""
    wanted = None if only is None else set(only)
    if wanted is not None and (unknown := wanted - {g.name for g in sweep.groups}):
        raise ConfigurationError(f"no group named {', '.join(sorted(unknown))} in sweep {sweep.name!r}")
    graphs: dict[Path, Graph] = {}
    runs: dict[str, RunSpec] = {}
    for group in sweep.groups:
        if wanted is not None and group.name not in wanted:
            continue
        for name in group.graphs:
            path = resolve_graph(name, graphs_dir, sweep.base)
            graph = graphs[path] if path in graphs else graphs.setdefault(path, read_graph(path))
            peak = input_order_peak(graph)
            for budget_spec in group.budgets:
                budget = parse_budget(budget_spec, graph)
                for method in group.methods:
                    for seed in method.seeds or group.seeds:
                        run = _run(sweep, group, path, graph, peak, budget_spec, budget, method, seed, schedule_dir)
                        runs.setdefault(run.run_id, run)
    return list(runs.values())


def _run(
    sweep: Sweep,
    group: Group,
    path: Path,
    graph: Graph,
    peak: int,
    budget_spec: str,
    budget: int,
    method: MethodSpec,
    seed: int,
    schedule_dir: Path | None,
) -> RunSpec:
    time_limit = method.time_limit or group.time_limit
    key = {"graph": graph.content_hash, "budget": budget, "method": method.identity(), "seed": seed, "tl": time_limit}
    run_id = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return RunSpec(
        run_id=run_id,
        sweep=sweep.name,
        group=group.name,
        graph_path=str(path),
        graph_file=path.stem,
        graph_name=graph.name,
        graph_hash=graph.content_hash,
        n=graph.n,
        m=graph.m,
        graph_total_cost=float(graph.total_cost),
        reference_peak=peak,
        budget_spec=budget_spec,
        budget=budget,
        method=method,
        seed=seed,
        time_limit=time_limit,
        grace=group.grace,
        memory_limit=group.memory_limit,
        schedule_dir=None if schedule_dir is None else str(schedule_dir.resolve()),
    )


def _defined(label: str, spec: Any, allow_code: bool = True) -> MethodSpec:
    if not isinstance(spec, Mapping):
        raise ConfigurationError(f"method.{label} must be a table")
    return method_from_mapping({"label": label, **spec}, allow_code=allow_code)


def _group(raw: Mapping[str, Any], index: int, defined: Mapping[str, MethodSpec], allow_code: bool = True) -> Group:
    _check_keys(raw, _GROUP_KEYS, f"group {index}")
    name = str(raw.get("name", f"group{index}"))
    graphs, budgets, methods = (_list(raw, key, name) for key in ("graphs", "budgets", "methods"))
    specs = tuple(_method(entry, defined, allow_code) for entry in methods)
    labels = [spec.label for spec in specs]
    if len(set(labels)) != len(labels):
        raise ConfigurationError(f"group {name!r}: two methods share a label in {labels}; give each a label")
    seeds = tuple(raw.get("seeds", (0,)))
    if not seeds or not all(isinstance(s, int) for s in seeds):
        raise ConfigurationError(f"group {name!r}: seeds must be a non-empty list of integers")
    time_limit, grace = _seconds(raw.get("time_limit", DEFAULT_TIME_LIMIT)), _seconds(raw.get("grace", DEFAULT_GRACE))
    if not (math.isfinite(time_limit) and math.isfinite(grace)) or time_limit <= 0 or grace < 0:
        raise ConfigurationError(
            f"group {name!r}: time_limit must be a finite number > 0 and grace one >= 0, got {time_limit!r} and"
            f" {grace!r}"
        )
    if time_limit > MAX_TIME_LIMIT:  # as `remat solve` does: solvers clamp further (MiniZinc 1e6 s, GLPK int32)
        log.warning("group %r: time limit %g s clamped to %g s", name, time_limit, MAX_TIME_LIMIT)
        time_limit = MAX_TIME_LIMIT
    grace = min(grace, MAX_TIME_LIMIT)
    memory = raw.get("memory_limit")
    return Group(
        name=name,
        graphs=tuple(str(g) for g in graphs),
        budgets=tuple(str(b) for b in budgets),
        methods=specs,
        seeds=seeds,
        time_limit=time_limit,
        grace=grace,
        memory_limit=None if memory is None else _bytes(memory),
    )


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigurationError(f"time_limit and grace are numbers of seconds, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ConfigurationError(f"time_limit and grace are numbers of seconds, got {value!r}") from None


def _method(entry: Any, defined: Mapping[str, MethodSpec], allow_code: bool = True) -> MethodSpec:
    if isinstance(entry, Mapping):
        return method_from_mapping(entry, allow_code=allow_code)
    if isinstance(entry, str):
        return defined.get(entry) or parse_method(entry, allow_code=allow_code)
    raise ConfigurationError(f"a method is a name or a table, got {entry!r}")


def _list(raw: Mapping[str, Any], key: str, group: str) -> list[Any]:
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        raise ConfigurationError(f"group {group!r}: {key} must be a non-empty list")
    return value


def _bytes(value: Any) -> int:
    from remat_models.core.units import parse_size

    try:
        return parse_size(value)
    except BudgetError as error:
        raise ConfigurationError(f"memory_limit: {error}") from None


def _check_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigurationError(f"unknown {where} key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
