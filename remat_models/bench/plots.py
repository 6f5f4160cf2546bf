"""Plots (PNG and SVG): solve progress, time-space trade-off, a schedule's memory timeline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from remat_models.bench.cells import Record, group_cells
from remat_models.bench.files import write_atomic
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, input_order_schedule, simulate
from remat_models.errors import ConfigurationError
from remat_models.model.result import Status

_MAX_PANELS = 12
_MARKERS = "os^vDPX*<>hpd"
_COLORS = [f"C{i}" for i in range(10)] + ["black", "darkgoldenrod", "navy", "lime", "maroon", "teal"]


def _styles(records: list[Record]) -> dict[str, tuple[str, str]]:
    """One colour and marker per method label, the same in every panel."""
    labels = sorted({r["method"] for r in records})
    return {label: (_COLORS[i % len(_COLORS)], _MARKERS[i % len(_MARKERS)]) for i, label in enumerate(labels)}


def require_matplotlib() -> None:
    """Raise ConfigurationError (saying how to install it) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise ConfigurationError("plots need matplotlib: pip install 'remat_models[bench]'") from error


def _figure(panels: int, width: float = 4.6, height: float = 3.4) -> tuple[Any, list[Any]]:
    require_matplotlib()
    from matplotlib.figure import Figure

    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    figure = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False).ravel().tolist()
    for extra in axes[panels:]:
        extra.set_visible(False)
    return figure, axes[:panels]


def save(figure: Any, stem: str | Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` atomically; return both paths."""
    base = Path(stem)
    paths = []
    for suffix in (".png", ".svg"):
        target = base.with_suffix(suffix)
        paths.append(write_atomic(target, lambda temp, s=suffix: figure.savefig(temp, format=s[1:], dpi=90)))
    return paths


def plot_progress(records: list[Record], stem: str | Path) -> list[Path]:
    """Objective (as TDI %) against time per method, one panel per graph and budget (Moccasin Fig. 1/5)."""
    cells = group_cells(records)
    slots: dict[tuple[str, int], list[Any]] = {}
    for (file, budget, _), cell in cells.items():
        if any(r.get("trajectory") or r.get("status") == Status.WITHIN_BUDGET for r in cell.records):
            slots.setdefault((file, budget), []).append(cell)
    slots = {k: v for k, v in slots.items() if any(r.get("trajectory") for c in v for r in c.records)}
    if not slots:
        raise ConfigurationError("no run with a solver trajectory to plot (exact solvers or FastSA)")

    def solvers(key: tuple[str, int]) -> int:
        return sum(1 for cell in slots[key] if any(r.get("trajectory") for r in cell.records))

    chosen = sorted(sorted(slots, key=lambda k: (-solvers(k), k))[:_MAX_PANELS])  # most solvers first
    styles = _styles(records)
    figure, axes = _figure(len(chosen))
    for axis, key in zip(axes, chosen, strict=True):
        first = slots[key][0].first
        for cell in sorted(slots[key], key=lambda c: c.first["method"]):
            for number, record in enumerate(cell.records):
                label = cell.first["method"] if number == 0 else None
                _progress_line(axis, record, styles[cell.first["method"]], label)
        axis.set_title(f"{first['graph_file']} at {100 * first['budget_fraction']:.0f} %", fontsize=10)
        axis.set_xlim(left=0)
        axis.set_yscale("symlog", linthresh=1.0)  # 0-1 % linear, then logarithmic: first incumbents can be huge
        axis.set_ylim(bottom=0)
        axis.set_xlabel("time (s)")
        axis.set_ylabel("TDI of incumbent (%, symlog)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    return save(figure, stem)


def _progress_line(axis: Any, record: Record, style: tuple[str, str], label: str | None) -> None:
    color, marker = style
    base = record.get("graph_total_cost") or 0.0
    points = [(t, 100 * (v - base) / base) for t, v in record.get("trajectory") or []] if base else []
    if points:
        end = max(record.get("wall_s") or points[-1][0], points[-1][0])
        xs = [t for t, _ in points] + [end]
        ys = [y for _, y in points] + [points[-1][1]]
        axis.plot(xs, ys, drawstyle="steps-post", color=color, label=label, alpha=0.85)
        axis.plot(xs[-1:], ys[-1:], marker, color=color, markersize=5)
    elif record.get("status") == Status.WITHIN_BUDGET and record.get("tdi") is not None:
        axis.plot([record.get("time_to_best_s") or 0.0], [record["tdi"]], marker, color=color, label=label, alpha=0.8)


def plot_tradeoff(records: list[Record], stem: str | Path) -> list[Path]:
    """Cost increase against budget per method, one panel per graph (FastSA Fig. 9); best over seeds joined."""
    by_graph: dict[str, dict[str, list[tuple[float, float, bool]]]] = {}
    for (file, _, method), cell in group_cells(records).items():
        fraction = 100 * cell.first["budget_fraction"]
        points = by_graph.setdefault(file, {}).setdefault(method, [])
        for record in cell.fitting:
            points.append((fraction, record["tdi"], record is cell.best))
    by_graph = {g: m for g, m in by_graph.items() if any(p for p in m.values())}
    if not by_graph:
        raise ConfigurationError("no run fits its budget: nothing to plot")
    chosen = sorted(by_graph)[:_MAX_PANELS]
    styles = _styles(records)
    figure, axes = _figure(len(chosen))
    for axis, file in zip(axes, chosen, strict=True):
        for method, points in sorted(by_graph[file].items()):
            if not points:
                continue
            color, marker = styles[method]
            best = sorted((x, y) for x, y, is_best in points if is_best)
            xs, ys = [x for x, _ in best], [y for _, y in best]
            axis.plot(xs, ys, "-", marker=marker, color=color, label=method, markersize=5, alpha=0.75, lw=1.2)
            axis.scatter([x for x, _, _ in points], [y for _, y, _ in points], color=color, alpha=0.3, s=10)
        axis.set_title(file, fontsize=10)
        axis.set_xlabel("budget (% of input-order peak)")
        axis.set_ylabel("cost increase (%)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    return save(figure, stem)


def plot_timeline(
    graph: Graph, schedules: Sequence[tuple[str, Schedule]], budget: int | None, stem: str | Path
) -> list[Path]:
    """Memory in use at every step of each schedule (and of the input order), with the budget line."""
    figure, (axis,) = _figure(1, width=9.0, height=4.0)
    reference = simulate(graph, input_order_schedule(graph))
    unit, scale = _unit(max(reference.peak, budget or 0))
    label = f"input order (peak {reference.peak / scale:.3g})"
    axis.plot(reference.timeline / scale, color="0.6", lw=3, alpha=0.5, label=label)
    for index, (name, schedule) in enumerate(schedules):
        sim = simulate(graph, schedule)
        axis.plot(sim.timeline / scale, color=f"C{index % 10}", lw=1, label=f"{name} (peak {sim.peak / scale:.3g})")
    if budget is not None:
        axis.axhline(budget / scale, color="red", ls="--", lw=1, label=f"budget {budget / scale:.3g} {unit}")
    axis.set_title(f"memory timeline: {graph.name}", fontsize=10)
    axis.set_xlabel("step")
    axis.set_ylabel(f"memory in use ({unit})")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    return save(figure, stem)


def _unit(value: int) -> tuple[str, float]:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= 10 * scale:
            return unit, float(scale)
    return "B", 1.0
