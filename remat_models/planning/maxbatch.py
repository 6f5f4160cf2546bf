"""Maximum batch size (Checkmate section 6.4): the largest batch that trains within ``memory`` under a cost cap.

``max_batch(graph, memory, ...)`` takes a graph that carries a :class:`~remat_models.core.batch.BatchScaling`
and finds the largest batch B at which a schedule fits (simulated peak of ``graph.at_batch(B)`` at most
``memory``) and costs at most the cap (by default one extra forward pass, eq. (10)). Methods:

- ``bisection``: any heuristic (checkpoint-all, Chen, Griewank, FastSA: the baselines of Fig. 6) or any
  formulation/backend through :func:`remat_models.planning.plan.plan`, probed at batches between checkpoint-all's
  batch and the lower-bound limit. A formulation probe minimizes cost and is feasible when its simulated
  schedule fits and meets the cap; a probe the solver proves infeasible (or whose proven minimum cost is over
  the cap) caps the proven upper bound; one that runs out of time counts as infeasible without proof.
- ``min-peak`` / ``product``: one exact solve (``remat_models/formulations/maxbatch.py``).
- ``auto``: min-peak when memory is proportional to the batch, else bisection.

Every returned schedule is re-simulated at the returned batch (peak <= memory, cost <= cap).
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from remat_models.backends.interrupt import run_stoppable
from remat_models.core.batch import (
    DEFAULT_CAP_KINDS,
    BatchScaling,
    cost_cap,
    lower_bound_limit,
    schedule_limit,
    within_cap,
)
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Schedule, SimulationResult, input_order_schedule, simulate
from remat_models.errors import BudgetInfeasibleError, ConfigurationError, SolverError
from remat_models.formulations import DEFAULT_FORMULATION, get_formulation
from remat_models.planning.plan import Status, methods, plan
from remat_models.planning.warm_start import FAST_BASELINES

log = logging.getLogger(__name__)

METHODS = ("auto", "min-peak", "product", "bisection")
HEURISTICS = ("checkpoint-all", "chen-sqrtn", "chen-greedy", "griewank", "fastsa")
FASTSA_PROBE_LIMIT = 10.0  # seconds per FastSA probe when no time limit is given


@dataclass(frozen=True)
class Probe:
    """One batch tried: whether a schedule fit and met the cap, and whether a negative answer is proven."""

    batch: int
    feasible: bool
    proven: bool  # infeasible probes: the solver proved that nothing fits under the cap
    peak: int | None
    total_cost: float | None
    status: str
    wall_time: float

    def summary(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "batch": self.batch,
            "feasible": self.feasible,
            "proven": self.proven,
            "peak": self.peak,
            "total_cost": self.total_cost,
            "status": self.status,
            "wall_time_s": self.wall_time,
        }


@dataclass(frozen=True)
class MaxBatchResult:
    """The largest batch found, its schedule simulated at that batch, and how it was found.

    ``status`` (a ``Status``): ``optimal`` (batch == the lower-bound limit: no schedule fits a larger one),
    ``optimal_in_model`` (batch == upper_bound, a bound the solver proved for its model only), ``feasible`` (a
    batch, not proven largest), ``infeasible`` (proven: nothing fits at batch 1), ``no_schedule_in_model`` (the
    model holds no batch), ``no_solution_within_limit`` (none found, nothing proven; ``no_solution`` before).
    ``upper_bound`` is a proven bound within the method (None for heuristics); ``lower_limit`` is
    checkpoint-all's batch and ``upper_limit`` the lower-bound limit (no schedule fits a larger batch).
    """

    graph_name: str
    method: str
    base: str
    batch: int
    upper_bound: int | None
    status: Status
    memory: int
    cap: float
    lower_limit: int
    upper_limit: int
    schedule: Schedule | None
    simulation: SimulationResult | None
    per_sample_peak: int | None
    probes: tuple[Probe, ...] = ()
    wall_time: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    interrupted_by: signal.Signals | None = None  # SIGINT/SIGTERM stopped the search: the best batch so far

    @property
    def peak(self) -> int | None:
        """Simulated peak at ``batch`` in bytes."""
        return None if self.simulation is None else self.simulation.peak

    @property
    def total_cost(self) -> float | None:
        """Simulated total cost at ``batch``."""
        return None if self.simulation is None else self.simulation.total_cost

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (no schedule)."""
        return {
            "graph_name": self.graph_name,
            "method": self.method,
            "base": self.base,
            "batch": self.batch,
            "upper_bound": self.upper_bound,
            "status": self.status,
            "memory": self.memory,
            "peak": self.peak,
            "total_cost": self.total_cost,
            "cap": self.cap,
            "per_sample_peak": self.per_sample_peak,
            "checkpoint_all_batch": self.lower_limit,
            "lower_bound_limit": self.upper_limit,
            "wall_time_s": self.wall_time,
            "probes": [probe.summary() for probe in self.probes],
            **self.details,
        }


def max_batch(
    graph: Graph,
    memory: int,
    *,
    method: str = "auto",
    heuristic: str | None = None,
    formulation: str | None = None,
    backend: str | None = None,
    cap: float | None = None,
    cap_factor: float = 2.0,
    cap_kinds: Iterable[NodeKind | str] = DEFAULT_CAP_KINDS,
    time_limit: float | None = None,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    init: str | Schedule | None = "auto",
) -> MaxBatchResult:
    """Largest batch of ``graph`` (carrying a batch scaling) within ``memory`` bytes under the cost cap.

    Give a ``heuristic`` (bisection on the simulator) or a ``formulation`` (default checkmate) on a
    ``backend`` (default: the formulation's own). ``cap`` overrides ``cost_cap(graph, cap_factor,
    cap_kinds)``. ``time_limit`` bounds the whole search (split evenly among bisection probes). ``init``
    (a heuristic name, searched by bisection first, or a Schedule) warm-starts a formulation: its batch is
    the starting point, so the result is never below it (default ``auto``: the best batch of the fast
    baselines every warm start tries, ``FAST_BASELINES``; None: checkpoint-all).
    """
    if method not in METHODS:
        raise ConfigurationError(f"unknown max-batch method {method!r}; choose one of {', '.join(METHODS)}")
    if heuristic is not None and formulation is not None:
        raise ConfigurationError("give either a heuristic or a formulation, not both")
    scaling = _scaling(graph)
    memory = int(memory)
    if cap is None:
        cap = cost_cap(graph, cap_factor, cap_kinds)
    started = time.perf_counter()
    search = _Search(graph, scaling, memory, float(cap))
    if heuristic is not None and method not in ("auto", "bisection"):
        raise ConfigurationError(f"heuristic {heuristic!r} runs by bisection, not {method!r}")

    def run(stop: threading.Event) -> MaxBatchResult:  # SIGINT/SIGTERM set ``stop``: no probe starts after it
        search.stop = stop
        if heuristic is not None:
            return search.heuristic(heuristic, time_limit=time_limit, seed=seed, options=options)
        base = formulation or DEFAULT_FORMULATION
        solver = backend or get_formulation(base).default_backend
        chosen = ("min-peak" if scaling.proportional_memory else "bisection") if method == "auto" else method
        if init is not None:
            search.warm_start(init, seed=seed)
        if chosen == "bisection":
            return search.formulation(base, solver, time_limit=time_limit, seed=seed, options=options)
        from remat_models.formulations.maxbatch import solve_exact

        if stop.is_set():  # stopped in the warm start: its batch, unsolved
            return search.finish(chosen, f"{base}/{solver}", max(search.start_batch, 0), search.start, None)
        exact = solve_exact(
            graph, memory, search.cap, method=chosen, base=base, backend=solver,
            lower=max(search.start_batch, 0), upper=search.upper, time_limit=time_limit, seed=seed,
            options=options, start=search.start,
        )  # fmt: skip
        return search.finish(
            chosen, f"{base}/{solver}", exact.batch, exact.schedule, exact.upper_bound, exact.details,
            per_sample=exact.per_sample_peak,
        )  # fmt: skip

    result, interrupted = run_stoppable(run)
    if interrupted is not None:
        log.warning("max batch: interrupted (%s); the largest batch found so far", interrupted.name)
        details = {**result.details, "interrupted_by": interrupted.name}
        result = replace(result, interrupted_by=interrupted, details=details)
    return _with_time(result, time.perf_counter() - started)


class _Search:
    """The limits of one max-batch search and the helpers every method shares."""

    def __init__(self, graph: Graph, scaling: BatchScaling, memory: int, cap: float) -> None:
        self.graph, self.scaling, self.memory, self.cap = graph, scaling, memory, cap
        self.upper = lower_bound_limit(graph, memory)
        self.baseline = input_order_schedule(graph)
        self.lower = min(schedule_limit(graph, self.baseline, memory), self.upper)
        if not within_cap(graph.total_cost, cap):
            self.lower = -1  # the cap is below one plain pass: not even checkpoint-all qualifies
        self.start_batch, self.start = self.lower, self.baseline if self.lower > 0 else None
        self.probes: list[Probe] = []
        self.stop = threading.Event()  # set by SIGINT/SIGTERM (max_batch): no probe starts after it

    def warm_start(self, init: str | Schedule, *, seed: int) -> None:
        """Start from a heuristic's best batch (its own bisection) or a schedule's, where it beats checkpoint-all.

        ``"auto"``: the best of the fast baselines' (``FAST_BASELINES``, as the default warm start of a solve).
        """
        if init == "auto":
            for name in FAST_BASELINES:
                self.warm_start(name, seed=seed)
            return
        if isinstance(init, str):
            inner = _Search(self.graph, self.scaling, self.memory, self.cap)
            inner.stop = self.stop
            found = inner.heuristic(init, time_limit=None, seed=seed, options=None)
            batch, schedule = found.batch, found.schedule
        else:
            cost = simulate(self.graph.at_batch(max(self.lower, 1)), init).total_cost
            batch = schedule_limit(self.graph, init, self.memory) if within_cap(cost, self.cap) else -1
            batch, schedule = min(batch, self.upper), init
        if schedule is not None and batch > self.start_batch:
            self.start_batch, self.start = batch, schedule
            log.info("max-batch warm start: batch %d", batch)

    def heuristic(
        self, name: str, *, time_limit: float | None, seed: int, options: Mapping[str, Any] | None
    ) -> MaxBatchResult:
        """Bisection on the simulator for one heuristic (checkpoint-all is exact, without probes)."""
        if name not in methods():
            raise ConfigurationError(f"unknown heuristic {name!r}; choose one of {', '.join(methods())}")
        if name == "checkpoint-all":
            return self.finish("bisection", name, max(self.lower, 0), self.baseline if self.lower > 0 else None, None)
        per_probe = None
        if name == "fastsa":
            per_probe = FASTSA_PROBE_LIMIT if time_limit is None else time_limit / self._planned_probes(0)
        elif time_limit is not None or options:
            raise ConfigurationError(f"heuristic {name!r} takes no time limit or options (fastsa does)")

        def probe(batch: int) -> tuple[Probe, Schedule | None]:
            t0 = time.perf_counter()
            try:
                result = plan(
                    self.graph.at_batch(batch), self.memory, name, time_limit=per_probe, seed=seed, options=options,
                    allow_over_budget=True,
                )  # fmt: skip
            except BudgetInfeasibleError:  # the memory is below the batch's peak lower bound: a proof
                return _refused(batch, t0), None
            sim = result.simulation
            ok = sim is not None and sim.fits(self.memory) and within_cap(sim.total_cost, self.cap)
            status = "fits" if ok else "over_cap" if sim is not None and sim.fits(self.memory) else "over_memory"
            found = Probe(batch, ok, False, _peak(sim), _cost(sim), status, time.perf_counter() - t0)
            return found, result.schedule if ok else None

        batch, schedule, _ = self._bisect(probe, 0, None, max(self.upper, 0))
        return self.finish("bisection", name, batch, schedule, None)

    def formulation(
        self, name: str, backend: str, *, time_limit: float | None, seed: int, options: Mapping[str, Any] | None
    ) -> MaxBatchResult:
        """Bisection with ``plan(formulation=name, backend=backend)`` probes, from checkpoint-all's batch."""
        per_probe = None if time_limit is None else time_limit / self._planned_probes(max(self.start_batch, 0))

        def probe(batch: int) -> tuple[Probe, Schedule | None]:
            t0 = time.perf_counter()
            try:
                result = plan(
                    self.graph.at_batch(batch), self.memory, formulation=name, backend=backend,
                    time_limit=per_probe, seed=seed, options=options, allow_over_budget=True,
                )  # fmt: skip
            except BudgetInfeasibleError:  # the memory is below the batch's peak lower bound: a proof
                return _refused(batch, t0), None
            sim = result.simulation
            fits = sim is not None and sim.fits(self.memory)
            ok = fits and within_cap(sim.total_cost, self.cap)  # type: ignore[union-attr]
            solver = result.solver_status
            proven = result.status.is_no_schedule_proof or (fits and solver is not None and solver.is_optimal)
            status = "fits" if ok else "over_cap" if fits else result.status.value
            found = Probe(batch, ok, not ok and proven, _peak(sim), _cost(sim), status, time.perf_counter() - t0)
            return found, result.schedule if ok else None

        deadline = None if time_limit is None else time.perf_counter() + time_limit
        batch, schedule, bound = self._bisect(
            probe, max(self.start_batch, 0), self.start, max(self.upper, 0), deadline
        )
        return self.finish("bisection", f"{name}/{backend}", batch, schedule, bound)

    def _planned_probes(self, lo: int) -> int:
        return max(1, math.ceil(math.log2(max(self.upper - lo, 0) + 1)))

    def _bisect(
        self,
        probe: Callable[[int], tuple[Probe, Schedule | None]],
        lo: int,
        lo_schedule: Schedule | None,
        hi: int,
        deadline: float | None = None,
    ) -> tuple[int, Schedule | None, int]:
        """Largest feasible batch in (lo, hi] assuming monotone feasibility; lo is feasible (or 0).

        Returns (batch, schedule, proven upper bound): the bound is the smallest proven-infeasible probe
        minus one, else ``hi`` (the lower-bound limit). No probe starts after ``deadline``.
        """
        best, schedule, bound = lo, lo_schedule, hi
        while best < hi and (deadline is None or time.perf_counter() < deadline) and not self.stop.is_set():
            mid = (best + hi + 1) // 2
            found, mid_schedule = probe(mid)
            self.probes.append(found)
            log.info("max-batch probe %d: %s", mid, found.status)
            if found.feasible:
                best, schedule = mid, mid_schedule
            else:
                hi = mid - 1
                if found.proven:
                    bound = min(bound, mid - 1)
        return best, schedule, bound

    def finish(
        self,
        method: str,
        base: str,
        batch: int,
        schedule: Schedule | None,
        upper_bound: int | None,
        details: dict[str, Any] | None = None,
        per_sample: int | None = None,
    ) -> MaxBatchResult:
        """Re-simulate at ``batch``, check memory and cap, and set the status.

        ``per_sample``: the schedule's per-sample peak where the caller simulated it (else simulated here).
        """
        simulation = None
        if schedule is not None and batch >= 1:
            simulation = simulate(self.graph.at_batch(batch), schedule)
            if not simulation.fits(self.memory) or not within_cap(simulation.total_cost, self.cap):
                raise SolverError(
                    f"{base}: the schedule found for batch {batch} peaks at {simulation.peak} B (memory"
                    f" {self.memory} B) and costs {simulation.total_cost} (cap {self.cap})"
                )
            if per_sample is None:
                per_sample = simulate(self.scaling.per_sample(self.graph), schedule).peak
        else:
            batch, schedule, per_sample = 0, None, None
        if upper_bound is not None:
            upper_bound = max(min(upper_bound, self.upper), 0)
        # only the lower-bound limit (self.upper) holds for every schedule; a solver's bound holds in its model
        if batch >= 1:
            proven = upper_bound is not None and batch >= upper_bound
            status = Status.OPTIMAL if batch >= self.upper else Status.OPTIMAL_IN_MODEL if proven else Status.FEASIBLE
        elif self.upper < 1:
            status = Status.INFEASIBLE
        else:
            status = Status.NO_SCHEDULE_IN_MODEL if upper_bound == 0 else Status.NO_SOLUTION
        return MaxBatchResult(
            graph_name=self.graph.name,
            method=method,
            base=base,
            batch=batch,
            upper_bound=upper_bound,
            status=status,
            memory=self.memory,
            cap=self.cap,
            lower_limit=max(self.lower, 0),
            upper_limit=max(self.upper, 0),
            schedule=schedule,
            simulation=simulation,
            per_sample_peak=per_sample,
            probes=tuple(self.probes),
            details=details or {},
        )


def baselines(
    graph: Graph,
    memory: int,
    names: Iterable[str] = HEURISTICS,
    *,
    time_limit: float | None = None,
    **kwargs: Any,
) -> dict[str, MaxBatchResult]:
    """The largest batch of each heuristic under the cap, by bisection on the simulator (Fig. 6 baselines)."""
    results = {}
    for name in names:
        limit = time_limit if name == "fastsa" else None
        results[name] = max_batch(graph, memory, heuristic=name, time_limit=limit, **kwargs)
    return results


def _scaling(graph: Graph) -> BatchScaling:
    if graph.batch_scaling is None:
        raise ConfigurationError(
            f"graph {graph.name!r} has no batch scaling: BatchScaling.proportional(graph, file_batch).attach(graph)"
        )
    return graph.batch_scaling


def _with_time(result: MaxBatchResult, wall_time: float) -> MaxBatchResult:
    log.info("max batch of %s by %s %s: %d (%s)", result.graph_name, result.base, result.method, result.batch,
             result.status)  # fmt: skip
    return replace(result, wall_time=wall_time)


def _peak(sim: SimulationResult | None) -> int | None:
    return None if sim is None else sim.peak


def _cost(sim: SimulationResult | None) -> float | None:
    return None if sim is None else sim.total_cost


def _refused(batch: int, started: float) -> Probe:
    """The probe of a batch whose peak lower bound exceeds the memory (``plan`` refused it): proven infeasible."""
    return Probe(batch, False, True, None, None, "infeasible", time.perf_counter() - started)
