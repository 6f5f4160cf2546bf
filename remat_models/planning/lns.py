"""Exact neighbourhoods (large-neighbourhood search): windows of the best schedule re-solved by a formulation.

From a fitting start, repeatedly pick a window (:mod:`remat_models.planning.windows`): the steps around a costly
recomputation together with the steps around that value's first computation, or the steps around the peak. The
window becomes a graph of its own; :func:`~remat_models.formulations.solving.solve_model` solves it with the
chosen formulation on the chosen backend, warm-started from the window's current steps. The solution is spliced
into the whole sequence, simulated, and kept only if it fits and costs less. Window sizes adapt: a window solved
to optimality in well under its time share grows, one that runs out of time shrinks. Every choice is drawn from a
seeded generator, so a run is reproducible up to the solvers' own timing.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from remat_models.backends import SolveLimits
from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Schedule, SimulationResult, eager_frees, simulate
from remat_models.errors import RematError
from remat_models.formulations.solving import solve_model
from remat_models.model import SolveResult, SolveStatus
from remat_models.planning.windows import Lifetimes, window_of

log = logging.getLogger(__name__)

MIN_STEPS, MAX_STEPS = 8, 400  # window half-range bounds (positions on each side of a centre)
START_STEPS = 24
MAX_WINDOW_NODES = 500  # the largest window graph solved (formulations declaring window_nodes use theirs)
WINDOW_SECONDS = 5.0  # the most one window solve may take
GROW, SHRINK = 1.4, 0.6
RECOMPUTE_SHARE = 0.8  # of the windows centred on recomputations (the rest on the peak)
PAIR_SHARE = 0.5  # of those, centred on two recomputations
SWAP_SHARE = 0.5  # of those, with a value held across the peak (cheap per byte) too


@dataclass
class WindowSearch:
    """What a window search did: its best schedule (simulated), counts and the improvement trajectory."""

    schedule: Schedule
    simulation: SimulationResult
    windows: int = 0
    improved: int = 0
    failed: int = 0
    interrupted: SolveResult | None = None  # the window solve a signal stopped (the search stops after it)
    skipped: int = 0  # windows too large, or whose current steps exceed the budget on the window graph
    trajectory: list[tuple[float, float]] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        """JSON-ready counts."""
        return {
            "windows": self.windows,
            "windows_improved": self.improved,
            "windows_failed": self.failed,
            "windows_skipped": self.skipped,
        }


def improve_by_windows(
    graph: Graph,
    budget: int,
    formulation: str,
    backend: str | None,
    start: Schedule,
    *,
    time_limit: float,
    seed: int = 0,
    options: object = None,
    stop: threading.Event | None = None,
    start_simulation: SimulationResult | None = None,
    max_nodes: int = MAX_WINDOW_NODES,
) -> WindowSearch:
    """Re-solve windows of ``start`` with ``formulation`` until ``time_limit`` seconds pass; the best schedule found.

    ``start`` must fit ``budget`` and hold compute and free steps only. Windows of more than ``max_nodes`` nodes
    are skipped. Each accepted window is logged (INFO).
    """
    started = time.perf_counter()
    deadline = started + time_limit
    simulation = start_simulation or simulate(graph, start)
    search = WindowSearch(start, simulation, trajectory=[(0.0, simulation.total_cost)])
    rng = np.random.default_rng(seed)
    half = START_STEPS
    sequence = start.compute_sequence()
    lifetimes = Lifetimes.of(graph, sequence)
    tried: dict[int, int] = {}  # recomputed node -> windows centred on it since the last improvement
    while time.perf_counter() < deadline - 0.2 and not (stop is not None and stop.is_set()):
        ranges = _pick(graph, lifetimes, search.simulation, search.schedule, half, rng, tried)
        left = deadline - time.perf_counter()
        limit = min(WINDOW_SECONDS, (left - 0.1) / 1.5)  # builds and decodes run past a solver limit
        if limit < 0.2:
            break
        search.windows += 1
        solved_at = time.perf_counter()
        try:
            window = window_of(graph, lifetimes, ranges)
            if window.graph.n > max_nodes:  # long middles cut into many chunks: the model would not build in time
                search.skipped += 1
                half = max(MIN_STEPS, int(half * SHRINK))
                continue
            if simulate(window.graph, window.init).peak > budget:  # a middle held longer than it is: no room
                search.skipped += 1
                continue
            outcome = solve_model(
                window.graph,
                budget,
                formulation,
                backend,
                options=options,
                limits=SolveLimits(time_limit=limit, seed=int(rng.integers(0, 2**31 - 1))),
                init=window.init,
            )
        except RematError as error:
            search.failed += 1
            log.debug("window %s: %s", ranges, error)
            continue
        if outcome.details.get("build_skipped"):  # too little time left for any window's build and solve
            search.windows -= 1
            break
        seconds = time.perf_counter() - solved_at
        log.debug("window %s: %d nodes, %s in %.1f s", ranges, window.graph.n, outcome.status.value, seconds)
        if outcome.status.is_optimal and seconds < limit / 4:  # optimal for the window's model
            half = min(MAX_STEPS, int(half * GROW) + 1)
        elif not outcome.status.is_optimal:
            half = max(MIN_STEPS, int(half * SHRINK))
        if outcome.status is SolveStatus.INTERRUPTED:  # the solver's own handler took the signal
            search.interrupted = next((p for p in outcome.phases.values() if p.interrupt_signal is not None), None)
            search.interrupted = search.interrupted or next(iter(outcome.phases.values()), None)
        if outcome.schedule is None:
            if search.interrupted is not None:
                break
            continue
        candidate = eager_frees(graph, window.splice(lifetimes.sequence, outcome.schedule))
        try:
            result = simulate(graph, candidate)
        except RematError as error:  # a splice the window graph allowed but the whole graph does not
            search.failed += 1
            log.debug("window %s: splice rejected: %s", ranges, error)
            continue
        if result.fits(budget) and result.total_cost < search.simulation.total_cost * (1 - 1e-9):
            log.info(
                "window %s (%d nodes, %s): TDI %.3f %% -> %.3f %%",
                ranges, window.graph.n, outcome.status.value, search.simulation.tdi, result.tdi,
            )  # fmt: skip
            search.schedule, search.simulation = candidate, result
            search.improved += 1
            search.trajectory.append((time.perf_counter() - started, result.total_cost))
            lifetimes = Lifetimes.of(graph, candidate.compute_sequence())
            tried.clear()
        if search.interrupted is not None:
            break
    return search


def _pick(
    graph: Graph,
    lifetimes: Lifetimes,
    simulation: SimulationResult,
    schedule: Schedule,
    half: int,
    rng: np.random.Generator,
    tried: dict[int, int],
) -> list[tuple[int, int]]:
    """A window of one of three kinds, drawn at random; ranges of ``half`` steps each side of its positions.

    - a costly recomputation and its value's first computation, with a second such pair half the time (two
      layers: what one holds at the peak the other may drop);
    - a *swap*: a costly recomputation with a value held across the peak that is cheap per byte (keep the first,
      recompute the second: the window sees both values' making and use);
    - the peak's steps and the making of the largest value alive there.

    A recomputation is drawn by its cost, less often each time a window was centred on its node since the last
    improvement (``tried``).
    """
    sequence = lifetimes.sequence
    first: dict[int, int] = {}
    recomputed: list[int] = []
    for position, v in enumerate(sequence):
        if v in first:
            recomputed.append(position)
        else:
            first[v] = position
    steps = [k for k, s in enumerate(schedule.steps) if isinstance(s, Compute)]
    peak = min(int(np.searchsorted(steps, simulation.peak_step)), len(sequence) - 1)
    draw = rng.random()
    if recomputed and draw < RECOMPUTE_SHARE:
        count = min(len(recomputed), 1 + int(rng.random() < PAIR_SHARE))
        centres = _recomputations(graph, sequence, recomputed, count, rng, tried)
        positions = [p for c in centres for p in (c, first[sequence[c]])]
        held = _held_cheap(graph, lifetimes, peak, rng) if rng.random() < SWAP_SHARE else None
        if held is not None:
            positions += list(held)
    else:
        centre = min(max(peak + int(rng.integers(-half, half + 1)), 0), len(sequence) - 1)
        positions = [centre, _producer_of_largest(graph, lifetimes, centre)]
    return _ranges(positions, half, len(sequence))


def _recomputations(
    graph: Graph,
    sequence: tuple[int, ...],
    recomputed: list[int],
    count: int,
    rng: np.random.Generator,
    tried: dict[int, int],
) -> list[int]:
    """``count`` recomputation positions drawn by cost, less often for nodes ``tried`` more (counted here)."""
    nodes = [sequence[p] for p in recomputed]
    weights = (graph.cost[nodes] + 1e-12) / (1.0 + np.array([tried.get(v, 0) for v in nodes])) ** 2
    picked = rng.choice(len(recomputed), size=count, replace=False, p=weights / weights.sum()).tolist()
    for c in picked:
        tried[nodes[c]] = tried.get(nodes[c], 0) + 1
    return [recomputed[c] for c in picked]


def _held_cheap(graph: Graph, lifetimes: Lifetimes, peak: int, rng: np.random.Generator) -> tuple[int, int] | None:
    """A value held across the peak, drawn by bytes per unit of cost: where it was made and next read after it."""
    sequence = lifetimes.sequence
    held = [p for p in range(peak) if lifetimes.alive_after(p, peak + 1) and not lifetimes.kept[p]]
    held = [p for p in held if graph.mem[sequence[p]] > 0 and graph.recomputable[sequence[p]]]
    if not held:
        return None
    weights = graph.mem[[sequence[p] for p in held]] / (graph.cost[[sequence[p] for p in held]] + 1e-9)
    made = held[int(rng.choice(len(held), p=weights / weights.sum()))]
    v = sequence[made]
    pred_ptr, pred_idx = graph.pred_ptr, graph.pred_idx
    for position in range(peak + 1, len(sequence)):
        w = sequence[position]
        if v in pred_idx[pred_ptr[w] : pred_ptr[w + 1]]:
            return made, position
    return None


def _producer_of_largest(graph: Graph, lifetimes: Lifetimes, position: int) -> int:
    """The position that made the largest value alive at ``position`` (itself if none)."""
    best, where = -1, position
    for p in range(position):
        if lifetimes.alive_after(p, position) and int(graph.mem[lifetimes.sequence[p]]) > best:
            best, where = int(graph.mem[lifetimes.sequence[p]]), p
    return where


def _ranges(positions: list[int], half: int, total: int) -> list[tuple[int, int]]:
    """Ranges of ``half`` steps each side of each position, merged where they touch (a middle needs a step)."""
    merged: list[tuple[int, int]] = []
    for centre in sorted(positions):
        a, b = max(0, centre - half), min(total, centre + half + 1)
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged
