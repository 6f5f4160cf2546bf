"""Moccasin (Bartan et al., ICML 2023): the Formulation and ``solve_moccasin``, the two-phase solve of sec. 2.4.

The model itself is in ``moccasin_model.py``, the interval layout and warm starts in ``moccasin_layout.py``;
docs/moccasin.md describes the semantics, the choices made and the benchmark.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from remat_models.backends import SolveLimits, get_backend
from remat_models.backends.export import export
from remat_models.budget import check_budget
from remat_models.errors import SolverError
from remat_models.formulations.base import BuiltModel
from remat_models.formulations.moccasin_layout import (
    DEFAULT_C,
    IntervalValues,
    Order,
    compute_sequence,
    intervals_from_sequence,
)
from remat_models.formulations.moccasin_model import MoccasinModel, MoccasinOptions, build_model, hint_values
from remat_models.formulations.scaling import DEFAULT_PRECISION
from remat_models.graph import Graph
from remat_models.heuristics.staged_greedy import staged_greedy_sequence
from remat_models.model import SolveResult, SolveStatus
from remat_models.schedule import Schedule, SimulationResult, eager_frees, simulate

__all__ = ["MOCCASIN", "MoccasinFormulation", "MoccasinOptions", "MoccasinResult", "export_moccasin", "solve_moccasin"]

log = logging.getLogger(__name__)


class MoccasinFormulation:
    """The Formulation protocol for Moccasin (phase-2 model; see moccasin_model.py)."""

    name = "moccasin"

    def __init__(self, options: MoccasinOptions | None = None) -> None:
        self.options = options or MoccasinOptions()

    def build(
        self, graph: Graph, budget: int, options: MoccasinOptions | Mapping[str, Any] | None = None
    ) -> MoccasinModel:
        """Phase-2 model: minimize total cost under ``budget`` bytes."""
        return build_model(graph, budget, self._options(options))

    def decode(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> Schedule:
        """Active interval starts sorted give the compute sequence; eager frees give the schedule."""
        return _schedule(_moccasin(built), _moccasin(built).interval_values(values))

    def hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Warm start from any Schedule (at most C_v computations per node kept)."""
        mb = _moccasin(built)
        return hint_values(mb, intervals_from_sequence(mb.layout, schedule.compute_sequence()))  # type: ignore[arg-type]

    def _options(self, options: MoccasinOptions | Mapping[str, Any] | None) -> MoccasinOptions:
        if options is None:
            return self.options
        if isinstance(options, MoccasinOptions):
            return options
        return replace(self.options, **dict(options))


MOCCASIN = MoccasinFormulation()  # the instance the formulation registry can name: "...moccasin:MOCCASIN"


@dataclass
class MoccasinResult:
    """Outcome of ``solve_moccasin``: the simulated schedule, both phases' solves, timings (s since the call)."""

    status: SolveStatus
    schedule: Schedule | None
    simulation: SimulationResult | None
    budget: int
    backend: str
    options: MoccasinOptions
    graph_name: str
    graph_hash: str
    cost_bound: float | None = None  # proven lower bound on the total cost within this formulation
    wall_time: float = 0.0
    time_to_first: float | None = None  # first schedule within the budget
    time_to_best: float | None = None
    trajectory: list[tuple[float, float]] = field(default_factory=list)  # (s, total cost) of phase-2 incumbents
    phase1: SolveResult | None = None
    phase2: SolveResult | None = None

    @property
    def total_cost(self) -> float | None:
        """Simulated total cost (the graph's cost units)."""
        return None if self.simulation is None else self.simulation.total_cost

    @property
    def tdi(self) -> float | None:
        """Simulated total duration increase in %."""
        return None if self.simulation is None else self.simulation.tdi

    @property
    def peak(self) -> int | None:
        """Simulated peak memory in bytes."""
        return None if self.simulation is None else self.simulation.peak

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (no schedule)."""
        return {
            "formulation": "moccasin",
            "graph_name": self.graph_name,
            "graph_hash": self.graph_hash,
            "budget": self.budget,
            "backend": self.backend,
            "C": self.options.C,
            "order": self.options.order,
            "status": self.status.value,
            "total_cost": self.total_cost,
            "tdi": self.tdi,
            "peak": self.peak,
            "cost_bound": self.cost_bound,
            "wall_time_s": self.wall_time,
            "time_to_first_s": self.time_to_first,
            "time_to_best_s": self.time_to_best,
            "trajectory": [list(p) for p in self.trajectory],
            "phase1": None if self.phase1 is None else self.phase1.summary(),
            "phase2": None if self.phase2 is None else self.phase2.summary(),
        }


def solve_moccasin(
    graph: Graph,
    budget: int,
    *,
    backend: str = "cpsat",
    C: int = DEFAULT_C,
    order: Order = "input",
    time_limit: float | None = None,
    workers: int | None = None,
    seed: int = 0,
    init: Schedule | None = None,
    greedy: bool = True,
    two_phase: bool = True,
    C_nodes: Mapping[str, int] | None = None,
    cost_precision: float = DEFAULT_PRECISION,
    solver_log: bool = False,
) -> MoccasinResult:
    """Plan ``graph`` under ``budget`` bytes with Moccasin; the returned schedule is simulated (peak <= budget).

    The start is ``init``, else the input order (each node once), else, if that is over budget and
    ``greedy``, the staged greedy plan (input order plus recomputations, at most C_v computations).
    Phase 1 (``two_phase``, when the start is over budget) minimizes max(peak, budget) from the start;
    its solution warm-starts phase 2, which minimizes the total cost. ``time_limit`` bounds both phases
    together; ``workers`` defaults to all cores.
    """
    t0 = time.perf_counter()
    check_budget(graph, budget)
    options = MoccasinOptions(C=C, C_nodes=C_nodes, order=order, cost_precision=cost_precision)
    solver = get_backend(backend)
    deadline = None if time_limit is None else t0 + time_limit

    def limits() -> SolveLimits:
        left = None if deadline is None else max(deadline - time.perf_counter(), 0.5)
        return SolveLimits(time_limit=left, workers=workers or os.cpu_count() or 1, seed=seed, log=solver_log)

    built = build_model(graph, budget, options)
    layout = built.layout
    assert layout is not None
    start = intervals_from_sequence(layout, graph.order if init is None else init.compute_sequence())
    start_peak = built.peak(start)
    if init is None and greedy and start_peak > budget:
        start = intervals_from_sequence(layout, staged_greedy_sequence(graph, budget, layout.counts))
        start_peak = built.peak(start)
    result = MoccasinResult(
        SolveStatus.NO_SOLUTION,
        None,
        None,
        budget,
        solver.spec if hasattr(solver, "spec") else backend,
        options,
        graph.name,
        graph.content_hash,
    )
    best: IntervalValues | None = start if start_peak <= budget else None
    if best is not None:
        result.time_to_first = time.perf_counter() - t0
    elif two_phase:
        best = _phase1(graph, budget, options, solver, limits, start, start_peak, result)
        if best is None and result.status == SolveStatus.INFEASIBLE:
            result.wall_time = time.perf_counter() - t0
            return result
        if best is not None:
            result.time_to_first = time.perf_counter() - t0
    offset = time.perf_counter() - t0
    hints = hint_values(built, best or start)
    phase2 = solver.solve(built.model, limits(), hints=hints)
    result.phase2 = phase2
    unit = built.units.cost_unit
    result.trajectory = [(offset + t, obj * unit) for t, obj in phase2.trajectory]
    if phase2.has_solution:
        best = built.interval_values(phase2.values)
        result.status = phase2.status
        result.cost_bound = None if phase2.bound is None else phase2.bound * unit
        final = phase2.objective
        result.time_to_best = next((offset + t for t, obj in phase2.trajectory if obj <= final + 1e-9), None)
        if result.time_to_first is not None and final >= built.model.objective_value(hints) - 1e-9:
            result.time_to_best = result.time_to_first  # phase 2 only found the fitting start again
        if result.time_to_first is None:
            result.time_to_first = result.trajectory[0][0] if result.trajectory else offset
    elif phase2.status == SolveStatus.INFEASIBLE:
        result.status = SolveStatus.INFEASIBLE
    elif best is not None:  # phase 2 found nothing better within its time: keep phase 1's plan
        result.status = SolveStatus.FEASIBLE
        result.time_to_best = result.time_to_first
    if best is not None:
        result.schedule = _schedule(built, best)
        result.simulation = simulate(graph, result.schedule)
        if result.simulation.peak > budget:
            raise SolverError(
                f"moccasin: decoded schedule peaks at {result.simulation.peak} B over the budget {budget} B"
                " (a formulation bug: the cumulative must bound the simulated peak)"
            )
    result.wall_time = time.perf_counter() - t0
    log.info(
        "moccasin %s on %s: %s, cost %s, peak %s (budget %d) in %.1f s",
        order,
        graph.name,
        result.status.value,
        result.total_cost,
        result.peak,
        budget,
        result.wall_time,
    )
    return result


def _phase1(
    graph: Graph,
    budget: int,
    options: MoccasinOptions,
    solver: Any,
    limits: Any,
    start: IntervalValues,
    start_peak: int,
    result: MoccasinResult,
) -> IntervalValues | None:
    """Sec. 2.4 phase 1: minimize max(M_var, budget) from ``start``; the intervals if they fit, else None."""
    p1 = build_model(graph, budget, options, phase1_peak=start_peak)
    res = solver.solve(p1.model, limits(), hints=hint_values(p1, start))
    result.phase1 = res
    if res.has_solution:
        found = p1.interval_values(res.values)
        if p1.peak(found) <= budget:
            return found
        if res.status == SolveStatus.OPTIMAL:  # the least peak this formulation reaches is over budget
            result.status = SolveStatus.INFEASIBLE
    elif res.status == SolveStatus.INFEASIBLE:
        result.status = SolveStatus.INFEASIBLE
    return None


def export_moccasin(graph: Graph, budget: int, path: str | Path, **options: Any) -> Path:
    """Write the phase-2 model (options as ``MoccasinOptions`` fields) to ``path`` (.lp/.mps/.mzn by suffix)."""
    return export(build_model(graph, budget, MoccasinOptions(**options)).model, path)


def _moccasin(built: BuiltModel) -> MoccasinModel:
    if not isinstance(built, MoccasinModel) or built.layout is None:
        raise TypeError(f"expected a model built by MoccasinFormulation, got {type(built).__name__}")
    return built


def _schedule(built: MoccasinModel, intervals: IntervalValues) -> Schedule:
    """Decode intervals: the compute sequence with eager frees."""
    assert built.layout is not None
    return eager_frees(built.graph, compute_sequence(built.layout, intervals.start, intervals.presence))
