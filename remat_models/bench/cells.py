"""Records grouped by (graph, budget, method): the best run over seeds and a status summary."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from remat_models.model.result import Status

Record = dict[str, Any]
CellKey = tuple[str, int, str]  # graph file, budget bytes, method label


@dataclass(frozen=True)
class Cell:
    """Every record of one method on one graph at one budget (one per seed)."""

    records: tuple[Record, ...]

    @property
    def first(self) -> Record:
        """Any record (for the fields that all share: graph, budget, method)."""
        return self.records[0]

    @property
    def fitting(self) -> list[Record]:
        """Records whose simulated schedule fits the budget."""
        return [r for r in self.records if r.get("status") == Status.WITHIN_BUDGET]

    @property
    def best(self) -> Record | None:
        """The cheapest fitting record, else the lowest-peak record with a schedule, else None."""
        if self.fitting:
            return min(self.fitting, key=lambda r: (r["total_cost"], r.get("time_to_best_s") or 0.0))
        scheduled = [r for r in self.records if r.get("peak") is not None]
        return min(scheduled, key=lambda r: r["peak"]) if scheduled else None

    @property
    def status(self) -> str:
        """``within_budget`` (with ``k/N`` over seeds when some differ), else the most common status."""
        counts = Counter(r.get("status", "?") for r in self.records)
        if len(self.records) == 1:
            return next(iter(counts))
        if self.fitting:
            return f"within_budget {len(self.fitting)}/{len(self.records)}"
        return ", ".join(f"{status} x{count}" for status, count in counts.most_common())


def group_cells(records: list[Record]) -> dict[CellKey, Cell]:
    """Group records by graph file, budget and method label (insertion order kept); later duplicates win."""
    latest: dict[str, Record] = {}
    for record in records:
        latest[record["run_id"]] = record
    grouped: dict[CellKey, list[Record]] = {}
    for record in latest.values():
        grouped.setdefault((record["graph_file"], record["budget"], record["method"]), []).append(record)
    return {key: Cell(tuple(items)) for key, items in grouped.items()}


def geometric_mean(values: list[float]) -> float | None:
    """Geometric mean of positive numbers (None for an empty list)."""
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))
