"""Warm-start options: the sub-schedule a whole-graph schedule induces on a cluster (issue 22).

Given a schedule of the whole graph, a cluster's induced option runs, in the schedule's order, the
cluster's forward nodes computed before the loss (its forward part) and the computations after the
loss that its backward nodes need (its backward part; recomputations that only other clusters read
are the level above's ``ff``). Adding it
to the cluster's options lets the level above represent the warm start cluster by cluster, so the
hierarchy cannot lose it to a coarse option grid.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from remat_models.backends.interrupt import stop_event
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.impls import step_impl
from remat_models.core.schedule import TRANSFER_STEPS, Compute, Schedule, SimulationResult, lift_schedule, simulate
from remat_models.formulations.hilp.alternatives import local_run, once_ok
from remat_models.formulations.hilp.local import LocalGraph
from remat_models.heuristics.fastsa.solver import PAPER_ITERATIONS
from remat_models.heuristics.registry import run_heuristic

log = logging.getLogger(__name__)

WARM_SHARE = 0.15  # of a total time limit: the most a FastSA warm start of the hierarchical solve may take
WARM_SECONDS = 10.0  # ... and at most this many seconds (FastSA's own limit without a total one)
FASTSA_SETUP_SECONDS_PER_NODE = 1.5e-4  # FastSA's time beyond its limit: 0.9-1.8 s on the 9,607-node transformer
FASTSA_FULL_NODES = 100  # FastSA gets the paper's attempts (20M, 2M) from this many nodes, a share n / this below


class Start(NamedTuple):
    """A fitting whole-graph schedule and its simulation."""

    schedule: Schedule
    simulation: SimulationResult


def fitting_starts(
    graph: Graph, budget: int, init: Schedule | None, time_limit: float | None, seed: int = 0, fastsa: bool = True
) -> list[Start]:
    """The warm starts that fit ``budget``: ``init``, and (``fastsa``) a short FastSA run's schedule.

    FastSA runs even when ``init`` fits (``plan``'s default init on small graphs is a fast baseline's schedule,
    whose induced options can be far from the optimum: docs/hilp.md, UNet), within min(10 s, 15 % of the
    limit), unless ``init`` fits and FastSA's setup (estimated from the graph's size) would take longer than
    that share: the run would then overrun it. Its schedule is kept unless it equals ``init``.
    """
    starts: list[Start] = []
    if init is not None and not any(isinstance(step, TRANSFER_STEPS) for step in init.steps):
        simulation = simulate(graph, init)
        if simulation.fits(budget):
            starts.append(Start(init, simulation))
    if not fastsa:
        return starts
    seconds = WARM_SECONDS if time_limit is None else min(WARM_SECONDS, WARM_SHARE * time_limit)
    if starts and FASTSA_SETUP_SECONDS_PER_NODE * graph.n > seconds:
        log.info("hilp warm start: no FastSA run (its setup would take more than its %.1f s)", seconds)
        return starts
    started = time.perf_counter()
    view = graph.default_view()  # with implementations: FastSA plans the default ones (edges: their reads only)
    stop = stop_event()  # SIGINT/SIGTERM: FastSA ends with its best so far
    share = min(1.0, view.n / FASTSA_FULL_NODES)  # a forced hierarchy on a 24-node chain annealed for 10 s of 11
    options = {"iterations": tuple(int(share * attempts) for attempts in PAPER_ITERATIONS)}
    limit = max(0.1, seconds)
    schedule = run_heuristic("fastsa", view, budget, seed=seed, time_limit=limit, options=options, stop=stop)[0]
    if view is not graph:
        schedule = lift_schedule(graph, schedule)
    simulation = simulate(graph, schedule)
    log.info("hilp warm start: FastSA in %.1f s, peak %d of %d", time.perf_counter() - started, simulation.peak, budget)
    if simulation.fits(budget) and all(start.schedule.steps != schedule.steps for start in starts):
        starts.append(Start(schedule, simulation))
    return starts


class Halves(NamedTuple):
    """A whole-graph compute sequence split at its first loss computation: each node's positions in either half."""

    before: dict[int, list[int]]
    after: dict[int, list[int]]


def halves(graph: Graph, schedule: Schedule) -> Halves | None:
    """Where ``schedule`` computes each node before and after the (first) loss, None without a loss node."""
    seq = [step.node for step in schedule.steps if isinstance(step, Compute)]
    cut = next((i for i, v in enumerate(seq) if graph.kind[v] == NodeKind.LOSS), None)
    if cut is None:
        return None
    before: dict[int, list[int]] = {}
    after: dict[int, list[int]] = {}
    for i, v in enumerate(seq):
        if i != cut:
            (before if i < cut else after).setdefault(v, []).append(i)
    return Halves(before, after)


def _events(at: dict[int, list[int]], nodes: Iterable[int]) -> list[int]:
    """The computations of ``nodes`` in one half, in schedule order."""
    return [v for _, v in sorted((p, v) for v in nodes for p in at.get(v, ()))]


def induced(lg: LocalGraph, split: Halves) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The option (fwd, bwd) in ``lg``'s local indices that ``split`` runs on the cluster, None if it is no option.

    fwd: the cluster's forward nodes run before the loss, then those first run after it (the loss does not read
    them). bwd: its backward nodes run before the loss (they read forward values only), then its computations
    after the loss that its backward nodes need (:func:`_needed`). It is none when an out-data value or a
    backward node is never computed in its part, a node reads a value not computed before it in the local run,
    or a non-recomputable node does not run once.
    """
    local = lg.local_of
    is_v = np.zeros(lg.graph.n, dtype=bool)
    is_v[lg.forward] = True
    own = [local[v] for v in _events(split.before, local)]
    fwd = [i for i in own if is_v[i]]
    early = [i for i in own if not is_v[i]]  # backward nodes reading forward values only may run before the loss
    after = [local[v] for v in _events(split.after, local)]
    needed = _needed(lg, after)
    done = set(fwd)
    for k, i in enumerate(after):  # forward nodes the loss does not read, first run after it
        if is_v[i] and i not in done:
            done.add(i)
            fwd.append(i)
            needed[k] = False
    bwd = early + [i for k, i in enumerate(after) if needed[k]]
    if not set(lg.out_data.tolist()) <= done or not set(lg.backward.tolist()) <= set(bwd):
        return None
    if not once_ok(lg, fwd, bwd) or not _reads_ok(lg, local_run(lg, fwd, bwd)):
        return None
    return tuple(fwd), tuple(bwd)


def _needed(lg: LocalGraph, after: list[int]) -> list[bool]:
    """Which of the cluster's computations after the loss (``after``, local indices) its backward needs.

    Its backward nodes, and the latest computation of every cluster value that a needed computation reads.
    Recomputations of its forward nodes that only other clusters read are left out: the level above runs ``ff``.
    """
    is_w = np.zeros(lg.graph.n, dtype=bool)
    is_w[lg.backward] = True
    latest: dict[int, int] = {}
    producers: list[list[int]] = []
    for k, i in enumerate(after):
        producers.append([latest[u] for u in lg.graph.preds(i).tolist() if u in latest])
        latest[i] = k
    needed = [bool(is_w[i]) for i in after]
    for k in range(len(after) - 1, -1, -1):
        if needed[k]:
            for p in producers[k]:
                needed[p] = True
    return needed


def _reads_ok(lg: LocalGraph, seq: list[int]) -> bool:
    """Whether every node of ``seq`` reads only values computed earlier (eager frees keep them until read).

    Reads are the default implementation's (induced options run the default ones).
    """
    seen = np.zeros(lg.graph.n, dtype=bool)
    for k, v in enumerate(seq):
        if not seen[list(step_impl(lg.graph, v, 0, k).reads)].all():
            return False
        seen[v] = True
    return True
