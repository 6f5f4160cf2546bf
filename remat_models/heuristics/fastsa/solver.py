"""FastSA driver: grouping, the two annealing stages of D.4, decoding and re-simulation."""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field, fields, replace
from typing import Literal

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.limits import check_count, check_time_limit
from remat_models.core.option_types import check_option_types
from remat_models.core.schedule import Schedule, SimulationResult, input_order_peak, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError
from remat_models.heuristics.fastsa import _kernels as ann
from remat_models.heuristics.fastsa.grouping import Units, group_nodes, plain_units, with_fetches
from remat_models.heuristics.fastsa.state import SAState, decode, schedule_of

logger = logging.getLogger(__name__)

Objective = Literal["product", "elu", "memory"]
OBJECTIVES: dict[str, int] = {"product": ann.OBJ_PRODUCT, "elu": ann.OBJ_ELU, "memory": ann.OBJ_MEMORY}
PAPER_ITERATIONS = (20_000_000, 2_000_000)
TARGET_RTOL = 1e-8  # a cost within this share (of |target| + 1) above target_cost reaches it: the bounds' float margin
MAX_COPIES = 1 << 16  # occurrences of one unit a user may ask for (each costs slots in every state)
REAL_OPTIONS = ("max_expansion", "p_add", "p_remove", "initial_temperature", "final_ratio", "cost_epsilon", "reheat")


@dataclass(frozen=True)
class FastSAOptions:
    """Tuning knobs; defaults follow the paper (D.4) where it gives a value."""

    slots: int | None = None  # T; default: a power of two >= spacing * (sequence length + 1) (paper: 2**20)
    spacing: int = 64  # nops per node when slots is not given
    copies: int = 16  # most occurrences of one unit (raised to the initial count when larger)
    objective: Objective = "elu"  # "product": eq. 1; "elu": footnote 2 (used for Table 1); "memory": M
    grouping: bool = True  # stage 1 on grouped nodes (2.2.2)
    max_expansion: float = 2.0  # grouping stops before the expanded sequence exceeds this many times n
    logaddexp: bool = False  # objective on the logaddexp tree's smooth peak (C.2)
    order_only: bool = False  # rotations only: a memory-minimising topological order (B.2)
    p_add: float = 1 / 3  # share of add mutations
    p_remove: float = 1 / 3  # share of remove mutations (the rest are rotations)
    initial_temperature: float = 1e-3  # h_i = this * initial objective (D.4: 0.1 %)
    final_ratio: float = 1e-4  # h_f = this * h_i (D.4: 0.01 %)
    cost_epsilon: float = 1e-6  # each computation adds this * mean node cost to the objective's cost
    chunk: int = 1 << 16  # attempts per kernel call (granularity of the time limit and trajectory)
    prune: bool = True  # greedy redundancy removal before and after stage 2
    reheat: float = 1e-3  # stage 2 starts at this * its initial objective (0: at stage 1's final temperature, D.4)
    fill_time: bool = False  # with a time limit, stretch stage 2 (and its cooling) to end at the limit
    restarts: int = 1  # independent runs of both stages (run r > 0 seeded (seed, stage, r)), time split evenly
    transfer: TransferModel | None = None  # offloading (App. B.3): fetch units, the schedule simulated under it
    p_fetch: float = 0.2  # with a transfer model: share of attempts that flip a fetch on (B.3; removes flip it off)
    target_cost: float | None = None  # stop once the best state fits at a total cost this low (a proven lower bound)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ConfigurationError(f"unknown FastSA objective {self.objective!r}; choose one of {list(OBJECTIVES)}")
        if not 0 <= self.p_fetch <= 1:
            raise ConfigurationError(f"FastSA p_fetch must be in [0, 1], got {self.p_fetch!r}")
        if not (self.p_add >= 0 and self.p_remove >= 0 and self.p_add + self.p_remove <= 1):
            raise ConfigurationError("FastSA mutation shares p_add, p_remove must be >= 0 with a sum <= 1")
        if self.copies < 1 or self.spacing < 1 or self.chunk < 1 or self.restarts < 1:
            raise ConfigurationError("FastSA copies, spacing, chunk and restarts must be positive")
        if self.copies > MAX_COPIES:
            raise ConfigurationError(f"FastSA copies must be at most {MAX_COPIES:,}, got {self.copies:,}")
        infinite = {name: getattr(self, name) for name in REAL_OPTIONS if not math.isfinite(getattr(self, name))}
        if infinite:
            raise ConfigurationError(f"FastSA options must be finite numbers, got {infinite}")
        if self.slots is not None and self.slots < 16:
            raise ConfigurationError(f"FastSA slots must be at least 16, got {self.slots}")
        if self.target_cost is not None and not (math.isfinite(self.target_cost) and self.target_cost >= 0):
            raise ConfigurationError(f"FastSA target_cost must be a finite number >= 0, got {self.target_cost!r}")

    @classmethod
    def from_kwargs(cls, options: dict[str, object]) -> FastSAOptions:
        """Build from keyword options, naming any unknown one."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigurationError(f"unknown FastSA option(s) {unknown}; known: {sorted(known)}")
        check_option_types(cls, options, "FastSA")
        return cls(**options)  # type: ignore[arg-type]


@dataclass(frozen=True)
class TrajectoryPoint:
    """The search after a chunk of attempts: seconds since start, stage, attempts, current and best state."""

    time: float
    stage: int
    iteration: int
    objective: float
    peak: int
    cost: float
    best_peak: int
    best_cost: float


@dataclass(frozen=True)
class StageReport:
    """What one annealing stage did."""

    stage: int
    units: int
    slots: int
    iterations: int
    valid: int
    accepted: int
    met_budget: bool
    peak: int
    cost: float
    wall_time: float
    pruned: int = 0  # computations removed by the greedy pass (stage 2: before and after annealing)


@dataclass(frozen=True)
class FastSAResult:
    """A FastSA run: the re-simulated schedule, whether it fits, and how the search went."""

    schedule: Schedule
    simulation: SimulationResult
    budget: int
    met_budget: bool
    seed: int
    stages: tuple[StageReport, ...]
    wall_time: float
    compile_time: float
    trajectory: tuple[TrajectoryPoint, ...] = field(repr=False)

    @property
    def peak(self) -> int:
        """Simulated peak memory in bytes."""
        return self.simulation.peak

    @property
    def cost(self) -> float:
        """Simulated total cost."""
        return self.simulation.total_cost

    @property
    def iterations(self) -> tuple[int, ...]:
        """Mutation attempts made in each stage."""
        return tuple(stage.iterations for stage in self.stages)


_compiled = False


def warmup() -> float:
    """Compile (or load from numba's cache) every kernel once per process; return the seconds it took."""
    global _compiled
    if _compiled:
        return 0.0
    started = time.perf_counter()
    graph = Graph.from_arrays(["a", "b", "c"], [1.0, 1.0, 1.0], [1, 2, 1], [(0, 1), (1, 2), (0, 2)])
    for logaddexp in (False, True):
        state = SAState(graph, plain_units(graph), graph.order, slots=16, logaddexp=logaddexp)
        _Stage(state, FastSAOptions(logaddexp=logaddexp), budget=3, stage=1).run(64, deadline=math.inf)
        state.soft_peak() if logaddexp else state.profile()
    _compiled = True
    return time.perf_counter() - started


class _Stage:
    """One annealing stage over a state: parameters, counters, best record, chunked runs."""

    def __init__(
        self,
        state: SAState,
        options: FastSAOptions,
        *,
        budget: int,
        stage: int,
        key: tuple[int, int] = (0, 0),
        stop: threading.Event | None = None,
    ) -> None:
        self.state = state
        self.stop = stop  # once set, the stage ends after its current chunk (an interrupt keeps the best so far)
        self.options = options
        self.stage = stage
        data = state.units.data
        self.addable = np.flatnonzero(data.recomputable).astype(np.int64)
        self.fetch_of = np.full(state.graph.n, ann.NONE, dtype=np.int64)  # value -> its fetch unit
        self.fetch_of[data.out[state.units.fetches()]] = state.units.fetches()
        mean_cost = float(data.cost.mean()) if data.cost.size and data.cost.mean() > 0 else 1.0
        par = np.zeros(ann.N_PARAMS, dtype=np.float64)
        par[ann.P_BUDGET] = budget
        par[ann.P_FIXED] = state.graph.fixed_mem
        par[ann.P_OBJ] = OBJECTIVES[options.objective]
        par[ann.P_ADD] = 0.0 if options.order_only else options.p_add
        par[ann.P_REMOVE] = 0.0 if options.order_only else options.p_remove
        par[ann.P_STOP_MET] = 1.0 if stage == 1 else 0.0
        par[ann.P_COST_EPS] = options.cost_epsilon * mean_cost
        par[ann.P_FETCH] = options.p_fetch if state.units.fetches().size else 0.0
        self.par = par
        self.initial_objective = self.objective()
        self.counters = np.zeros(4, dtype=np.int64)
        seed, restart = key
        entropy = [seed, stage] if restart == 0 else [seed, stage, restart]
        self.rng = np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)
        self.best = np.zeros(6, dtype=np.float64)
        self.best[ann.B_F] = self.initial_objective
        self.best[ann.B_MET] = float(state.peak() <= budget)
        self.best[ann.B_DIRTY] = 1.0
        self.best_t = np.zeros(state.size, dtype=np.int64)
        self.best_u = np.zeros(state.size, dtype=np.int64)
        self.met = False
        self.chunk_seconds = 0.0  # how long the last chunk took

    def set_temperatures(self, initial: float, final: float, total: int) -> None:
        """Geometric schedule h_i * (h_f / h_i) ** (i / N) over ``total`` attempts."""
        self.par[ann.P_H0] = initial
        self.par[ann.P_HF] = final
        self.par[ann.P_N] = total

    def run(self, n_iter: int, *, deadline: float, started: float = 0.0, trajectory: list | None = None) -> None:
        """Attempt up to n_iter mutations in chunks, stopping at the deadline or (stage 1) once the budget is met."""
        if self.par[ann.P_N] == 0:
            self.set_temperatures(0.0, 0.0, n_iter)
        a = self.state.arrays
        while self.counters[ann.C_ITER] < n_iter:
            chunk = min(self.options.chunk, n_iter - int(self.counters[ann.C_ITER]))
            chunk_started = time.perf_counter()
            self.met = bool(
                ann.anneal(
                    *a, self.addable, self.fetch_of, self.par, self.counters, self.rng, self.best, self.best_t,
                    self.best_u, chunk,
                )
            )  # fmt: skip
            if self.options.logaddexp:
                self.state.rebuild_trees()
            if trajectory is not None:
                trajectory.append(self._point(time.perf_counter() - started))
            now = time.perf_counter()
            self.chunk_seconds = now - chunk_started
            if self.met or now + self.chunk_seconds > deadline or self.stopped or self.at_target:
                break  # (another chunk would end past the deadline)
        if self.best[ann.B_DIRTY] > 0:
            ann.snapshot(a.S, a.occ, a.tree, a.ints, a.floats, self.par, self.best, self.best_t, self.best_u)

    def run_until(self, n_min: int, *, deadline: float, started: float, trajectory: list | None = None) -> None:
        """Run chunks until the deadline, rescaling N so the cooling schedule tracks elapsed time (at least n_min).

        At least one chunk runs (its end records the best state, which the stage's result is read from).
        """
        mark = time.perf_counter()
        while True:
            done = int(self.counters[ann.C_ITER])
            self.run(done + self.options.chunk, deadline=deadline, started=started, trajectory=trajectory)
            now = time.perf_counter()
            if now + self.chunk_seconds > deadline or self.stopped or self.at_target:
                break
            span = (deadline - mark) / max(now - mark, 1e-9)
            self.par[ann.P_N] = max(n_min, int(self.counters[ann.C_ITER] * span))

    @property
    def stopped(self) -> bool:
        """Whether the caller asked the run to stop."""
        return self.stop is not None and self.stop.is_set()

    @property
    def at_target(self) -> bool:
        """Whether the best state fits the budget at no more than the options' ``target_cost`` (nothing is cheaper)."""
        target = self.options.target_cost
        if target is None or self.best[ann.B_MET] == 0:
            return False
        cost = self.state.cost() if self.best[ann.B_DIRTY] > 0 else float(self.best[ann.B_COST])  # dirty: the current
        return reaches(cost, target)

    def objective(self) -> float:
        """Objective value of the current state."""
        a = self.state.arrays
        return float(ann.current_objective(a.tree, a.ltree, a.ints, a.floats, self.par))

    def _point(self, elapsed: float) -> TrajectoryPoint:
        return TrajectoryPoint(
            time=elapsed,
            stage=self.stage,
            iteration=int(self.counters[ann.C_ITER]),
            objective=self.objective(),
            peak=self.state.peak(),
            cost=self.state.cost(),
            best_peak=int(self.best[ann.B_PEAK]) if self.best[ann.B_DIRTY] == 0 else self.state.peak(),
            best_cost=float(self.best[ann.B_COST]) if self.best[ann.B_DIRTY] == 0 else self.state.cost(),
        )

    def best_sequence(self) -> np.ndarray:
        """Node compute sequence of the best state seen."""
        n = int(self.best[ann.B_N])
        return decode(self.state.units, self.best_t[:n], self.best_u[:n])

    def best_slots(self) -> tuple[np.ndarray, np.ndarray]:
        """Units and their slots, in time order, of the best state seen."""
        n = int(self.best[ann.B_N])
        order = np.argsort(self.best_t[:n], kind="stable")
        return self.best_u[:n][order], self.best_t[:n][order]

    def report(self, wall_time: float) -> StageReport:
        """Summary of this stage (peak and cost of its best state, as the annealer counts them)."""
        return StageReport(
            stage=self.stage,
            units=self.state.units.count,
            slots=self.state.size,
            iterations=int(self.counters[ann.C_ITER]),
            valid=int(self.counters[ann.C_VALID]),
            accepted=int(self.counters[ann.C_ACCEPTED]),
            met_budget=bool(self.best[ann.B_MET] > 0),
            peak=int(self.best[ann.B_PEAK]),
            cost=float(self.best[ann.B_COST]),
            wall_time=wall_time,
        )


def _stage_one_units(graph: Graph, budget: int, options: FastSAOptions) -> tuple[Units, np.ndarray]:
    """Grouped units (2.2.2) unless grouping is off, order-only, or the input order already fits."""
    if options.grouping and not options.order_only and input_order_peak(graph) > budget:
        units, sequence = group_nodes(graph, graph.order, max_expansion=options.max_expansion)
        return _with_fetches(graph, units, options), sequence
    return _with_fetches(graph, plain_units(graph), options), graph.order.astype(np.int64)


def _with_fetches(graph: Graph, units: Units, options: FastSAOptions) -> Units:
    """``units``, and with a transfer model one fetch unit per value they produce that may be paged (App. B.3)."""
    transfer = options.transfer
    if transfer is None:
        return units
    if not isinstance(transfer, TransferModel):
        raise ConfigurationError(f"FastSA transfer must be a TransferModel, got {transfer!r}")
    if transfer.host_capacity is not None:
        raise ConfigurationError("FastSA's fetch units do not model a host capacity; plan with three-way or paging")
    mem = graph.mem.astype(np.float64)
    out_time, in_time = transfer.out_latency + mem / transfer.out_bw, transfer.in_latency + mem / transfer.in_bw
    return with_fetches(graph, units, out_time, in_time)


def _at_target(report: StageReport, budget: int, target: float | None) -> bool:
    """Whether a run's final state fits ``budget`` at no more than ``target`` (a lower bound: no restart can help)."""
    return target is not None and report.peak <= budget and reaches(report.cost, target)


def reaches(cost: float, target: float) -> bool:
    """Whether ``cost`` is at most ``target``, a lower bound proven with a float margin (``TARGET_RTOL``)."""
    return cost <= target + TARGET_RTOL * (abs(target) + 1.0)


def _rank(report: StageReport, budget: int) -> tuple[bool, float, int]:
    """Order of restarts: budget met first, then lower cost, then lower peak (ties: the earliest run)."""
    return (report.peak > budget, report.cost, report.peak)


def _stages(
    graph: Graph,
    budget: int,
    opts: FastSAOptions,
    start: tuple[Units, np.ndarray],
    iterations: tuple[int, int],
    key: tuple[int, int],
    deadline: float,
    trajectory: list[TrajectoryPoint],
    stop: threading.Event | None = None,
) -> tuple[np.ndarray, tuple[StageReport, StageReport]]:
    """Stage 1 from ``start``, prune, stage 2, prune (key = seed, restart); return node sequence and reports."""
    n1, n2 = iterations
    started = time.perf_counter()
    spread = {"slots": opts.slots, "spacing": opts.spacing, "copies": opts.copies}
    build = {**spread, "logaddexp": opts.logaddexp}
    plain = _with_fetches(graph, plain_units(graph), opts)
    units, sequence = start
    # stage 2's state is allocated now, for stage 1's start expanded: most of a large state's build time
    # is the first touch of its memory; after stage 1 it takes stage 1's result in place (``respread``)
    expanded = plain.of_nodes(units.expand(sequence))
    # slabs for what stage 1 can reach: each group holding a node may get ``copies`` copies
    room = opts.copies * np.bincount(expanded, minlength=plain.count)
    state = SAState(graph, plain, expanded, capacity=room, **build)
    mark = time.perf_counter()
    state.respread(expanded, **spread)
    # what follows stage 1: two such fills (stage 2's start, the final state), their pruning, the decoding
    reserve = 4.0 * (time.perf_counter() - mark)
    one = _Stage(SAState(graph, *start, **build), opts, budget=budget, stage=1, key=key, stop=stop)
    h1 = opts.initial_temperature * one.initial_objective
    one.set_temperatures(h1, h1 * opts.final_ratio, n1)
    if one.best[ann.B_MET] == 0:
        share = n1 / (n1 + n2) if n1 + n2 else 1.0
        end_one = started + max(0.0, deadline - started - reserve) * share
        one.run(n1, deadline=end_one, started=started, trajectory=trajectory)
    else:
        one.run(0, deadline=started)
    report_one = one.report(time.perf_counter() - started)
    mark = time.perf_counter()
    if not state.respread(plain.of_nodes(one.best_sequence()), **spread):  # more slots or copies than allocated
        state = SAState(graph, plain, plain.of_nodes(one.best_sequence()), **build)
    pruned = state.prune(budget) if opts.prune else 0
    # the final reload, its pruning and decoding after stage 2 take about as long as this: end twice that before
    end = max(time.perf_counter(), deadline - 2.0 * (time.perf_counter() - mark))
    two = _Stage(state, opts, budget=budget, stage=2, key=key, stop=stop)
    h2 = opts.reheat * two.initial_objective if opts.reheat > 0 else h1 * opts.final_ratio
    two.set_temperatures(h2, h2 * opts.final_ratio, n2)
    if opts.fill_time and math.isfinite(deadline):
        two.run_until(n2, deadline=end, started=started, trajectory=trajectory)
    else:
        two.run(n2, deadline=end, started=started, trajectory=trajectory)
    final = two.state
    final.reload(*two.best_slots())  # the same order, so the same pruning as a new state of it (T aside)
    pruned += final.prune(budget) if opts.prune else 0
    report_two = replace(
        two.report(time.perf_counter() - mark),
        peak=final.peak(),
        cost=final.cost(),
        met_budget=final.peak() <= budget,
        pruned=pruned,
    )
    return final.compute_sequence(), (report_one, report_two)


def _decoding_seconds(graph: Graph, transfer: TransferModel | None) -> float:
    """Seconds the final decoding and simulation take, measured on the input order (0.35 s at 19k nodes)."""
    mark = time.perf_counter()
    simulate(graph, schedule_of(graph, graph.order), transfer)
    return time.perf_counter() - mark


def fastsa(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    iterations: tuple[int, int] | None = None,
    time_limit: float | None = None,
    stop: threading.Event | None = None,
    **options: object,
) -> FastSAResult:
    """Plan ``graph`` under ``budget`` bytes with FastSA; the returned schedule is re-simulated.

    ``iterations`` = (N1, N2) mutation attempts for stage 1 (grouped nodes, stops once the budget is
    met) and stage 2 (plain nodes); default the paper's (20M, 2M). ``time_limit`` (seconds, numba's
    compile or cache load included), less the final decoding's time (measured once on the input order), is split
    evenly between restarts and within one in proportion N1 : N2, after a reserve for what follows stage 1 (stage
    2's state allocated up front and filled in place: 4x one fill, measured), stage 2 also getting what stage 1
    leaves (all of it with ``fill_time``) and ending 2x its own setup time before the deadline (the final reload
    and pruning follow). Each stage 2 is bracketed by greedy
    pruning. Other keyword options: see :class:`FastSAOptions`. Deterministic for a seed unless the
    time limit cuts in or ``fill_time`` is on. Once ``stop`` is set (an interrupt) the run ends
    within a chunk with the best state it has, as at its time limit.
    """
    opts = FastSAOptions.from_kwargs(options)
    n1, n2 = PAPER_ITERATIONS if iterations is None else iterations
    if n1 < 0 or n2 < 0:
        raise ConfigurationError(f"FastSA iterations must be >= 0, got {(n1, n2)}")
    check_count(seed, "FastSA seed", minimum=0)  # below 2**63, as every solver's
    limit = math.inf if time_limit is None else check_time_limit(time_limit, "FastSA time limit")
    compile_time = warmup()
    limit = max(0.0, limit - compile_time)
    started = time.perf_counter()
    trajectory: list[TrajectoryPoint] = []
    units, sequence = _stage_one_units(graph, budget, opts)
    search = max(0.0, limit - _decoding_seconds(graph, opts.transfer)) if math.isfinite(limit) else limit
    runs = []
    for restart in range(opts.restarts):
        if runs and ((stop is not None and stop.is_set()) or _at_target(runs[-1][1][-1], budget, opts.target_cost)):
            break
        deadline = started + search * (restart + 1) / opts.restarts
        key = (seed, restart)
        runs.append(_stages(graph, budget, opts, (units, sequence), (n1, n2), key, deadline, trajectory, stop))
    sequence, reports = min(runs, key=lambda run: _rank(run[1][-1], budget))
    schedule = schedule_of(graph, sequence)
    simulation = simulate(graph, schedule, opts.transfer)
    if simulation.peak != reports[-1].peak:
        logger.warning("FastSA: simulated peak %d differs from the annealer's %d", simulation.peak, reports[-1].peak)
    wall_time = time.perf_counter() - started
    logger.info(
        "FastSA on %s: peak %d (budget %d), TDI %.2f%%, %s attempts, %.2fs (+%.2fs compile)",
        graph.name, simulation.peak, budget, simulation.tdi, [r.iterations for r in reports], wall_time, compile_time,
    )  # fmt: skip
    return FastSAResult(
        schedule=schedule,
        simulation=simulation,
        budget=budget,
        met_budget=simulation.peak <= budget,
        seed=seed,
        stages=tuple(reports),
        wall_time=wall_time,
        compile_time=compile_time,
        trajectory=tuple(trajectory),
    )


def fastsa_schedule(graph: Graph, budget: int) -> Schedule:
    """Method-registry adapter: FastSA with default options and seed 0."""
    return fastsa(graph, budget).schedule
