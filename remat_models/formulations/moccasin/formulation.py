"""Moccasin (Bartan et al., ICML 2023): the Formulation, whose ``solve`` is the two-phase solve of sec. 2.4.

The model itself is in ``moccasin_model.py``, the interval layout and warm starts in ``moccasin_layout.py``;
docs/moccasin.md describes the semantics, the choices made and the benchmark.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from remat_models.backends import SolveLimits
from remat_models.backends.export import export
from remat_models.core.budget import check_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.errors import ConfigurationError, SolverError
from remat_models.formulations.base import (
    BuiltModel,
    Extension,
    FormulationBase,
    PagingPart,
    SolveChain,
    apply_extensions,
)
from remat_models.formulations.moccasin.layout import IntervalValues, compute_sequence, intervals_from_sequence
from remat_models.formulations.moccasin.model import MoccasinModel, MoccasinOptions, build_model, hint_values
from remat_models.formulations.moccasin.paging import MoccasinPagingPart
from remat_models.formulations.moccasin.peak import MoccasinPeak
from remat_models.formulations.outcome import SolveOutcome
from remat_models.formulations.peak import PeakPart
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.staged_greedy import staged_greedy_sequence
from remat_models.model import SolveResult, SolveStatus

__all__ = ["MOCCASIN", "MoccasinFormulation", "MoccasinOptions", "export_moccasin", "solve_moccasin"]

log = logging.getLogger(__name__)

PHASE_MIN_SECONDS, PHASE_MIN_SHARE = 1.0, 0.05  # a phase is skipped with less time left than this
PHASE1_SHARE = 0.7  # of the time left phase 1 may take (phase 2 may prove infeasibility when phase 1 cannot)
GREEDY_SHARE = 0.3  # of the time limit the staged greedy start may take
STAGED_GREEDY_NODES = 3000  # largest graph whose start comes from the staged greedy (else the input order)
BUILD_SECONDS_PER_NODE = 1.5e-4  # model build: 0.06-0.07 ms a node at load 4-5 (967-9,607-node transformers)


class MoccasinFormulation(FormulationBase):
    """The Formulation protocol for Moccasin: phase-2 model, two-phase solve (sec. 2.4) from a greedy start."""

    name: ClassVar[str] = "moccasin"
    window_nodes: ClassVar[int | None] = 500  # larger graphs: windows of a start (planning/lns.py)
    paging_part: ClassVar[type[PagingPart] | None] = MoccasinPagingPart
    peak_model: ClassVar[type[PeakPart] | None] = MoccasinPeak
    options_type: ClassVar[type] = MoccasinOptions
    default_backend: ClassVar[str] = "cpsat"

    def build(
        self, graph: Graph, budget: int, options: MoccasinOptions | Mapping[str, Any] | None = None
    ) -> MoccasinModel:
        """Phase-2 model: minimize total cost under ``budget`` bytes."""
        return build_model(graph, budget, self.options(options))

    def least_seconds(self, graph: Graph) -> float:
        """The least time limit worth building for: the build's estimate plus the shortest phase started."""
        return BUILD_SECONDS_PER_NODE * graph.n + PHASE_MIN_SECONDS

    def sequence(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> list[int | Any]:
        """Active interval starts sorted: the compute sequence."""
        mb = _moccasin(built)
        mb.require(values, "retain.start", "retain.presence")
        intervals = mb.interval_values(values)
        assert mb.layout is not None
        return list(compute_sequence(mb.layout, intervals.start, intervals.presence))

    def _hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Warm start from any Schedule (at most C_v computations per node kept)."""
        mb = _moccasin(built)
        assert mb.layout is not None
        return hint_values(mb, intervals_from_sequence(mb.layout, schedule.compute_sequence()))

    def solve(
        self, built: BuiltModel, backend: str | SolveChain, limits: SolveLimits, init: Schedule | None = None
    ) -> SolveOutcome:
        """Start from ``init``, else the input order, else the staged greedy plan; phase 1 if over budget; phase 2.

        The time limit bounds both phases together; extensions applied to ``built`` apply to phase 1 too. Both
        phases run on the one chain (``SolveChain.run``, ``SolveChain.outcome``).
        """
        return _TwoPhase(_moccasin(built), SolveChain.of(self, backend), limits).run(init)


MOCCASIN = MoccasinFormulation()  # the instance the formulation registry can name: "...moccasin:MOCCASIN"


class _TwoPhase:
    """One two-phase Moccasin solve (kept as a class so each step is a short method)."""

    def __init__(self, built: MoccasinModel, chain: SolveChain, limits: SolveLimits) -> None:
        self.built, self.chain, self.limits = built, chain, limits
        self.t0 = time.perf_counter()
        self.deadline = None if limits.time_limit is None else self.t0 + limits.time_limit
        self.phases: dict[str, SolveResult] = {}

    def _time_is_up(self) -> bool:
        """Whether less than 1 s + 5 % of the time limit is left (too little to build and start a solve)."""
        if self.deadline is None or self.limits.time_limit is None:
            return False
        return self.deadline - time.perf_counter() < PHASE_MIN_SECONDS + PHASE_MIN_SHARE * self.limits.time_limit

    def _limits(self, share: float = 1.0) -> SolveLimits:
        """The limits with ``share`` of the time left (at least 0.5 s)."""
        left = None if self.deadline is None else max(share * (self.deadline - time.perf_counter()), 0.5)
        return replace(self.limits, time_limit=left, log=self.limits.log or self.built.options.solver_log)

    def run(self, init: Schedule | None) -> SolveOutcome:
        built, graph, budget = self.built, self.built.graph, self.built.budget
        start = self._start(init)
        best = start if built.peak(start) <= budget and self._satisfies_extensions(built, start) else None
        time_to_first = time.perf_counter() - self.t0 if best is not None else None
        if best is None and built.options.two_phase and not self._time_is_up():
            best, proven_infeasible = self._phase1(start)
            if proven_infeasible:
                return self._outcome(SolveResult(SolveStatus.INFEASIBLE), None, None, init)
            if self.phases["phase1"].status is SolveStatus.INTERRUPTED:  # Ctrl-C in phase 1: no phase 2
                values = None if best is None else self._hint_values(built, best)
                return self._outcome(SolveResult(SolveStatus.INTERRUPTED), values, SolveStatus.INTERRUPTED, init)
            time_to_first = time.perf_counter() - self.t0 if best is not None else None
        offset = time.perf_counter() - self.t0
        hints = self._hint_values(built, best or start)
        if self._time_is_up():  # its model build alone would overrun the limit
            log.info("moccasin on %s: no time left for phase 2 after %.1f s", graph.name, offset)
            phase2 = SolveResult(SolveStatus.NO_SOLUTION)
        else:
            phase2 = self.chain.run(built.model, self._limits(), hints)
        self.phases["phase2"] = phase2
        if phase2.has_solution:
            outcome = self._outcome(phase2, None, None, init, offset)
            final = phase2.objective
            outcome.time_to_best = next((offset + t for t, obj in phase2.trajectory if obj <= final + 1e-9), None)
            if time_to_first is not None and final >= built.model.objective_value(hints) - 1e-9:
                outcome.time_to_best = time_to_first  # phase 2 only found the fitting start again
            outcome.time_to_first = time_to_first if time_to_first is not None else outcome.time_to_first or offset
        elif best is not None:  # phase 2 found nothing better within its time: keep the fitting start / phase 1
            interrupted = phase2.status is SolveStatus.INTERRUPTED  # a signal ends the solve, whatever it has
            failed = phase2.status is SolveStatus.SOLVER_ERROR  # the start stands, but the error is the status
            status = (
                SolveStatus.INTERRUPTED if interrupted else SolveStatus.SOLVER_ERROR if failed else SolveStatus.FEASIBLE
            )
            outcome = self._outcome(phase2, hints, status, init, offset)
            outcome.time_to_first = outcome.time_to_best = time_to_first
        else:
            outcome = self._outcome(phase2, None, None, init, offset)
        if outcome.simulation is not None and outcome.simulation.peak > budget:
            raise SolverError(
                f"moccasin: decoded schedule peaks at {outcome.simulation.peak} B over the budget {budget} B"
                " (a formulation bug: the cumulative must bound the simulated peak)"
            )
        log.info(
            "moccasin %s on %s: %s, cost %s, peak %s (budget %d) in %.1f s",
            built.options.order,
            graph.name,
            outcome.status.value,
            outcome.total_cost,
            outcome.peak,
            budget,
            outcome.wall_time,
        )
        return outcome

    def _start(self, init: Schedule | None) -> IntervalValues:
        built, graph = self.built, self.built.graph
        layout = built.layout
        assert layout is not None
        start = intervals_from_sequence(layout, graph.order if init is None else init.compute_sequence())
        small = graph.n <= STAGED_GREEDY_NODES  # beyond, the greedy (per-candidate profiles) takes minutes
        if init is None and built.options.greedy and small and built.peak(start) > built.budget:
            deadline = None if self.deadline is None else self.t0 + GREEDY_SHARE * (self.deadline - self.t0)
            sequence = staged_greedy_sequence(graph, built.budget, layout.counts, deadline=deadline)
            start = intervals_from_sequence(layout, sequence)
        return start

    def _phase1(self, start: IntervalValues) -> tuple[IntervalValues | None, bool]:
        """Sec. 2.4 phase 1: minimize max(M_var, budget) from ``start``; (fitting intervals or None, infeasible?)."""
        built, graph = self.built, self.built.graph
        ceiling = built.peak(start)
        if not self._satisfies_extensions(built, start):  # then the start's peak does not bound phase 1's optimum
            ceiling = max(ceiling, graph.fixed_mem + int(graph.mem.sum()) + int(graph.workspace.max(initial=0)))
        p1 = build_model(graph, built.budget, built.options, phase1_peak=ceiling)
        p1.formulation = built.formulation
        apply_extensions(p1, built.applied)
        res = self.chain.run(p1.model, self._limits(PHASE1_SHARE), self._hint_values(p1, start))
        self.phases["phase1"] = res
        if res.has_solution:
            found = p1.interval_values(res.values)
            if p1.peak(found) <= built.budget:
                return found, False
            return None, res.status == SolveStatus.OPTIMAL  # the least peak reachable is over budget
        return None, res.status == SolveStatus.INFEASIBLE

    def _satisfies_extensions(self, built: MoccasinModel, intervals: IntervalValues) -> bool:
        """Whether ``intervals`` meet every row the extensions added (a start must, to count as a solution)."""
        return not built.applied or not built.model.check(self._hint_values(built, intervals))

    def _hint_values(self, built: MoccasinModel, intervals: IntervalValues) -> dict[str, np.ndarray]:
        """Formulation hints for ``intervals`` plus the applied extensions' hints for the schedule they decode to."""
        values = hint_values(built, intervals)
        if built.applied:
            schedule = self.chain.form.decode(built, values)
            for extension in built.applied:
                extra = getattr(extension, "hints", None)
                if extra is not None:
                    values.update(extra(built, schedule))
        return values

    def _outcome(
        self,
        result: SolveResult,
        values: Mapping[str, np.ndarray] | None,
        status: SolveStatus | None,
        init: Schedule | None,
        offset: float = 0.0,
    ) -> SolveOutcome:
        return self.chain.outcome(
            self.built,
            result,
            phases=self.phases,
            warm_start=init is not None,
            started=self.t0,
            values=values,
            status=status,
            time_offset=offset,
        )


def solve_moccasin(
    graph: Graph,
    budget: int,
    *,
    backend: str = "cpsat",
    time_limit: float | None = None,
    workers: int | None = None,
    seed: int = 0,
    init: Schedule | None = None,
    extensions: Sequence[Extension] = (),
    **options: Any,
) -> SolveOutcome:
    """Plan ``graph`` under ``budget`` bytes with Moccasin (``options``: ``MoccasinOptions`` fields).

    The start is ``init``, else the input order (each node once), else, if that is over budget and
    ``greedy``, the staged greedy plan (input order plus recomputations, at most C_v computations).
    Phase 1 (``two_phase``, when the start is over budget) minimizes max(peak, budget) from the start;
    its solution warm-starts phase 2, which minimizes the total cost. ``time_limit`` bounds both phases
    together; ``workers`` defaults to all cores. The schedule is simulated (peak <= budget).
    """
    check_budget(graph, budget)
    limits = SolveLimits(time_limit=time_limit, workers=workers or os.cpu_count() or 1, seed=seed)
    return solve_model(
        graph, budget, "moccasin", backend, options=options, limits=limits, init=init, extensions=extensions
    )


def export_moccasin(graph: Graph, budget: int, path: str | Path, **options: Any) -> Path:
    """Write the phase-2 model (options as ``MoccasinOptions`` fields) to ``path`` (.lp/.mps/.mzn by suffix)."""
    return export(MOCCASIN.build(graph, budget, options).model, path)


def _moccasin(built: BuiltModel) -> MoccasinModel:
    if not isinstance(built, MoccasinModel) or built.layout is None:
        raise ConfigurationError(f"expected a model built by Moccasin, got {type(built).__name__}")
    return built
