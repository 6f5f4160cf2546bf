"""Schedule JSON ("remat-schedule", version 1): steps by node name, tied to one graph by its hash."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Free, FreeHost, Offload, Prefetch, Schedule, Step
from remat_models.errors import InvalidScheduleError
from remat_models.io._fields import as_list, as_mapping, as_str, check_header, require
from remat_models.io.atomic import create_text_atomic, write_text_atomic
from remat_models.io.files import dumps_json, read_json

SCHEDULE_FORMAT = "remat-schedule"
SCHEDULE_VERSION = 1
_OPS: dict[str, type[Step]] = {
    "compute": Compute,
    "free": Free,
    "offload": Offload,
    "prefetch": Prefetch,
    "free_host": FreeHost,
}
_OP_NAMES = {step_type: op for op, step_type in _OPS.items()}


def schedule_to_dict(schedule: Schedule, graph: Graph, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Convert ``schedule`` to JSON-ready data: ``[op, node name]`` steps plus the graph's hash and name."""
    names = graph.names
    steps: list[list[str]] = []
    for k, step in enumerate(schedule.steps):
        op = _OP_NAMES.get(type(step))
        if op is None or not 0 <= step.node < graph.n:
            raise InvalidScheduleError(f"{step!r} is not a step on a node of {graph!r}", step=k)
        entry = [op, names[step.node]]
        if isinstance(step, Compute) and step.impl:
            entry.append(impl_name(graph, step, k))
        steps.append(entry)
    return {
        "format": SCHEDULE_FORMAT,
        "version": SCHEDULE_VERSION,
        "graph_hash": graph.content_hash,
        "graph_name": graph.name,
        "steps": steps,
        "metadata": dict(metadata or {}),
    }


def schedule_from_dict(data: Any, graph: Graph) -> Schedule:
    """Read a "remat-schedule" object for ``graph``; InvalidScheduleError if it is for another graph or malformed."""
    data = check_header(data, SCHEDULE_FORMAT, SCHEDULE_VERSION, InvalidScheduleError)
    found_hash = as_str(
        require(data, "graph_hash", SCHEDULE_FORMAT, InvalidScheduleError), "graph_hash", InvalidScheduleError
    )
    found_name = as_str(
        require(data, "graph_name", SCHEDULE_FORMAT, InvalidScheduleError), "graph_name", InvalidScheduleError
    )
    if found_hash != graph.content_hash:
        raise InvalidScheduleError(
            f"schedule is for graph {found_name!r} (hash {found_hash}), "
            f"not for graph {graph.name!r} (hash {graph.content_hash})"
        )
    as_mapping(require(data, "metadata", SCHEDULE_FORMAT, InvalidScheduleError), "metadata", InvalidScheduleError)
    steps = as_list(require(data, "steps", SCHEDULE_FORMAT, InvalidScheduleError), "steps", InvalidScheduleError)
    return Schedule(tuple(_step(entry, k, graph) for k, entry in enumerate(steps)))


def write_schedule(
    path: str | os.PathLike[str],
    schedule: Schedule,
    graph: Graph,
    metadata: Mapping[str, Any] | None = None,
    *,
    replace: bool = True,
) -> bool:
    """Write ``schedule`` of ``graph`` (and JSON-ready ``metadata``) to ``path`` atomically; return whether written.

    With ``replace=False`` an existing ``path`` is kept as it was (and False returned).
    """
    text = dumps_json(schedule_to_dict(schedule, graph, metadata))
    if not replace:
        return create_text_atomic(path, text)
    write_text_atomic(path, text)
    return True


def read_schedule(path: str | os.PathLike[str], graph: Graph) -> Schedule:
    """Read a schedule file written for ``graph``; InvalidScheduleError names the path on any problem."""
    data = read_json(path, InvalidScheduleError)
    try:
        return schedule_from_dict(data, graph)
    except InvalidScheduleError as exc:
        wrapped = InvalidScheduleError(f"{path}: {exc}")
        wrapped.step = exc.step
        raise wrapped from exc


def _step(entry: Any, k: int, graph: Graph) -> Step:
    """Decode one ``[op, node name]`` entry as a Compute, Free, Offload, Prefetch or FreeHost step.

    A compute may name its implementation: ``["compute", node name, impl name]`` (missing: impl 0).
    """
    if isinstance(entry, list) and len(entry) == 3 and entry[0] == "compute":
        node = _step(entry[:2], k, graph).node
        return Compute(node, impl_index(graph, node, entry[2], k))
    if not (isinstance(entry, list) and len(entry) == 2):
        raise InvalidScheduleError(f"expected [op, node name] or [\"compute\", node, impl], got {entry!r}", step=k)
    op, name = entry
    step_type = _OPS.get(op) if isinstance(op, str) else None
    if step_type is None:
        raise InvalidScheduleError(f"unknown op {op!r} (expected one of {sorted(_OPS)})", step=k)
    index = graph.index.get(name) if isinstance(name, str) else None
    if index is None:
        raise InvalidScheduleError(f"unknown node {name!r} in graph {graph.name!r}", step=k)
    return step_type(index)


def impl_name(graph: Graph, step: Compute, k: int) -> str:
    """The name of the implementation a Compute step runs (InvalidScheduleError if there is none)."""
    impls = graph.impls
    if impls is None or not 0 <= step.impl < len(impls[step.node]):
        raise InvalidScheduleError(f"{step!r}: {graph.names[step.node]!r} has no implementation {step.impl}", step=k)
    return impls[step.node][step.impl].name


def impl_index(graph: Graph, node: int, name: Any, k: int) -> int:
    """The index of ``node``'s implementation called ``name`` (InvalidScheduleError if there is none)."""
    for index, impl in enumerate(graph.impls[node] if graph.impls is not None else ()):
        if impl.name == name:
            return index
    raise InvalidScheduleError(f"node {graph.names[node]!r} has no implementation {name!r}", step=k)
