"""``auto``: one method for users, a portfolio run in parallel processes (exact solves' warm start: ``warm_start``).

The portfolio (:mod:`remat_models.planning.portfolio_worker` runs its members) shares one deadline:

- a worker process runs FastSA, then again with the next seeds while a run's time is left and until
  ``restart_patience`` runs in a row bring no improvement (reporting each improvement);
- a second one runs Checkmate's MILP on HiGHS on graphs of up to ``checkmate_nodes`` nodes (a share of
  the time; Moccasin follows unless Checkmate proved its optimum), else Moccasin on CP-SAT; below
  ``INIT_FASTSA_NODES`` nodes it starts from FastSA's schedule if FastSA reports within ``wait_share`` of
  the limit (else from the fast baselines), from there on from ``auto_init`` (its own short FastSA run),
  as ``remat solve -f moccasin`` would;
- this process plans the fallbacks meanwhile: the saved-set knapsack while the workers import, then Chen's
  greedy within ``INIT_SHARE`` of the limit (or while nothing fits).
  Given a transfer model (option ``transfer``, ``plan(..., transfer=...)``) every member is simulated
  under it, and the last ``offload_share`` of the limit goes to the three-way planner (keep, recompute
  or offload each value), started from the members' schedules reported by then (each competes as it is,
  and its order is shaved with offloads): offloading never returns a costlier plan than the recompute-only
  members found.

Each member's schedule is simulated here as it arrives; once an exact member has proved its schedule
optimal and FastSA's first run has reported (FastSA reorders, so it can beat an optimum of the input
order), or at the deadline, the workers still running are stopped. ``auto`` returns the cheapest
schedule within the budget (else the lowest peak) and the best lower bound on cost any member proved.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from remat_models.backends.interrupt import Stopper, stop_on_signals
from remat_models.core.graph import Graph
from remat_models.core.limits import check_count, wait_slice
from remat_models.core.schedule import Schedule, SimulationResult, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError
from remat_models.formulations.base import options_of
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.three_way import three_way
from remat_models.planning.portfolio_worker import Worker
from remat_models.planning.result import MethodRun
from remat_models.planning.warm_start import DEFAULT_TIME_LIMIT, INIT_FASTSA_NODES, INIT_SHARE

log = logging.getLogger(__name__)

STOP_GRACE = 2.0  # seconds past the deadline before workers still running are stopped (at most STOP_GRACE_SHARE)
STOP_GRACE_SHARE = 0.05  # of the time limit: short limits keep 1.1 x limit + 2 s with the process start
WORKER_STOP_S = 1.0  # seconds the stopped workers get together to end before they are killed
STOP_POLL = 0.2  # seconds between checks for a stop (SIGINT, SIGTERM) while waiting for reports


@dataclass(frozen=True)
class AutoOptions:
    """The portfolio's knobs (``plan(..., "auto", options={...})``, ``remat solve -m auto -O key=value``)."""

    checkmate_nodes: int = 150  # Checkmate's MILP (O(n^2) variables) joins the portfolio up to this many nodes
    checkmate_share: float = 0.6  # of the exact worker's time, before Moccasin
    wait_share: float = 0.25  # of the time limit the exact worker waits for FastSA's schedule as its warm start
    restart_patience: int = 8  # FastSA runs in a row without an improvement before its worker stops
    transfer: TransferModel | None = None  # offloading allowed: three-way plans join (plan(..., transfer=...))
    offload_share: float = 0.3  # the last share of the time limit: the three-way planner from the best so far

    def validated(self) -> AutoOptions:
        """Itself, or a ConfigurationError naming the value out of range."""
        check_count(self.checkmate_nodes, "auto option checkmate_nodes", minimum=0)
        check_count(self.restart_patience, "auto option restart_patience", minimum=1)
        for name in ("checkmate_share", "wait_share", "offload_share"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ConfigurationError(f"auto option {name} is a share in (0, 1], got {value!r}")
        return self


def _better(a: SimulationResult, b: SimulationResult | None, budget: int) -> bool:
    """Whether ``a`` ranks before ``b``: within the budget by cost, else by peak."""
    if b is None:
        return True
    fits_a, fits_b = a.peak <= budget, b.peak <= budget
    if fits_a != fits_b:
        return fits_a
    if fits_a:
        return (a.total_cost, a.peak) < (b.total_cost, b.peak)
    return (a.peak, a.total_cost) < (b.peak, b.total_cost)


class _Portfolio:
    """The members' reports: each one's cost, peak, time and bound; the best schedule and the best bound."""

    def __init__(self, graph: Graph, budget: int, transfer: TransferModel | None = None) -> None:
        self.graph, self.budget, self.transfer = graph, budget, transfer
        self.best: tuple[str, Schedule, SimulationResult] | None = None
        self.latest: dict[str, Schedule] = {}  # each member's last schedule (FastSA's: its best so far)
        self.bound: float | None = None
        self.members: list[dict[str, Any]] = []

    def fits(self) -> bool:
        """Whether the best schedule so far fits the budget."""
        return self.best is not None and self.best[2].peak <= self.budget

    def offer(self, report: Mapping[str, Any]) -> None:
        """Record one member's report (``method``, ``schedule`` or None, ``bound``, ``seconds``, ``error``, ``pid``)."""
        schedule = report.get("schedule")
        result = None if schedule is None else simulate(self.graph, schedule, self.transfer)
        member_bound = report.get("bound")
        self.members.append(
            {
                "method": report["method"],
                "seconds": report.get("seconds"),
                "process": report.get("pid", os.getpid()),
                "peak": None if result is None else result.peak,
                "total_cost": None if result is None else result.total_cost,
                "bound": member_bound,
                **({"error": report["error"]} if report.get("error") else {}),
            }
        )
        if member_bound is not None:
            self.bound = member_bound if self.bound is None else max(self.bound, member_bound)
        if schedule is not None:
            self.latest[report["method"]] = schedule
        if result is not None and _better(result, None if self.best is None else self.best[2], self.budget):
            self.best = (report["method"], schedule, result)
        cost = "no schedule" if result is None else f"peak {result.peak:,} B, cost {result.total_cost:g}"
        log.info("auto: %s reported %s; best so far: %s", report["method"], cost, self.best and self.best[0])


def auto(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> MethodRun:
    """The portfolio's best schedule and details: each member's cost, peak, time and bound, and the best bound.

    ``options``: :class:`AutoOptions` fields. SIGINT or SIGTERM stops the workers; the run then carries the
    best schedule reported so far (the fallbacks' at least) and the signal (``interrupted_by``).
    """
    opts = options_of(AutoOptions, options, "auto")
    total = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    deadline = time.monotonic() + total
    small = graph.n <= opts.checkmate_nodes
    exact = {"formulations": ["checkmate", "moccasin"] if small else ["moccasin"], "first_share": opts.checkmate_share}
    wait = opts.wait_share * total if graph.n < INIT_FASTSA_NODES else 0.0  # larger: the exact worker runs auto_init
    jobs = {
        "fastsa": {"role": "fastsa", "patience": opts.restart_patience},
        "exact": {"role": "exact", "wait": wait, **exact},
    }
    portfolio, stopper = _Portfolio(graph, budget, opts.transfer), Stopper()
    with stop_on_signals(stopper):  # SIGINT/SIGTERM: stop the workers, return the best reported so far
        workers: dict[str, Worker] = {}
        try:
            for name in jobs:
                workers[name] = Worker.start(name)
            _fallback(graph, budget, "knapsack", portfolio)  # planned while the workers import (seconds at 10k nodes)
            for name, job in jobs.items():  # each send waits for that worker's imports
                workers[name].send({"graph": graph, "budget": budget, "seed": seed, "deadline": deadline, **job})
            if time.monotonic() < deadline - (1 - INIT_SHARE) * total or not portfolio.fits():
                _fallback(graph, budget, "chen-greedy", portfolio)  # within a warm start's share of the limit
            live = {worker.conn: worker for worker in workers.values()}
            grace = min(STOP_GRACE, STOP_GRACE_SHARE * total)
            until = deadline + grace
            if opts.transfer is not None:  # the members report until the offload share, then offload from the best
                reserve = opts.offload_share * total
                if not _collect(workers, live, portfolio, deadline - reserve, relay=wait > 0, stopper=stopper):
                    until = 0.0  # a proven optimum or a stop: nothing more to wait for
                if not stopper.stopped.is_set():  # late (a slow fallback): the grace at least
                    seconds = min(reserve, max(deadline - time.monotonic(), grace))
                    _offload(graph, budget, opts.transfer, portfolio, seconds)
            _collect(workers, live, portfolio, until, relay=wait > 0, stopper=stopper)
        finally:  # every worker asked at once, then each waited for
            for worker in workers.values():
                worker.terminate()
            until = time.monotonic() + WORKER_STOP_S
            for worker in workers.values():
                worker.stop(max(0.0, until - time.monotonic()))
    assert portfolio.best is not None
    name, schedule, result = portfolio.best
    bound = portfolio.bound
    gap = None if bound is None or result.peak > budget or not result.total_cost else 1 - bound / result.total_cost
    interrupted = stopper.signal if stopper.stopped.is_set() else None
    if interrupted is not None:
        log.warning("auto: interrupted (%s): returning the best schedule its members reported", interrupted.name)
    log.info("auto on %s: %s chosen, cost %s, bound %s", graph.name, name, result.total_cost, bound)
    details = {"chosen": name, "bound": bound, "gap": gap, "portfolio": portfolio.members}
    return MethodRun("auto", schedule, details, simulation=result, interrupted_by=interrupted)


def _fallback(graph: Graph, budget: int, name: str, portfolio: _Portfolio) -> None:
    """Offer the baseline ``name``'s schedule, planned in this process."""
    t0 = time.perf_counter()
    schedule = BASELINES[name](graph, budget)
    portfolio.offer({"method": name, "schedule": schedule, "seconds": time.perf_counter() - t0})


def _offload(graph: Graph, budget: int, transfer: TransferModel, portfolio: _Portfolio, seconds: float) -> None:
    """Offer the three-way planner's plan, started from the members' schedules (the best first), within ``seconds``."""
    t0 = time.perf_counter()
    inits = [] if portfolio.best is None else [portfolio.best[1]]
    inits += [schedule for schedule in portfolio.latest.values() if all(schedule is not s for s in inits)]
    found = three_way(graph, budget, transfer, time_limit=max(seconds, 0.0), inits=inits).schedule
    portfolio.offer({"method": "three-way", "schedule": found, "seconds": time.perf_counter() - t0})


def _collect(
    workers: dict[str, Worker],
    live: dict[Any, Worker],
    portfolio: _Portfolio,
    until: float,
    relay: bool,
    stopper: Stopper,
) -> bool:
    """Offer the ``live`` workers' reports until all are done, ``until`` or a stop (then only those already sent).

    ``live`` maps connections to the workers not done yet (the done ones leave it). With ``relay`` FastSA's
    reports go on to the exact worker. True unless it ended on a stop or a proven optimum (nothing left
    worth waiting for).
    """
    proven = False  # an exact member proved its schedule optimal (FastSA may still reorder below it)
    while live and time.monotonic() < until:
        stopped = stopper.stopped.is_set()
        timeout = 0.0 if stopped else min(STOP_POLL, wait_slice(until - time.monotonic()))
        ready = wait(list(live), timeout=timeout)
        if stopped and not ready:
            return False
        for conn in ready:
            worker = live[conn]  # type: ignore[index]
            report = worker.receive()
            if report is None:  # done, or the process died (its stderr says why)
                del live[conn]
                continue
            portfolio.offer(report)
            proven = proven or bool(report.get("optimal") and report.get("schedule") is not None)
            if proven and any(m["method"] == "fastsa" for m in portfolio.members):
                log.info("auto: an optimum is proven (for its fixed order) and FastSA has run; stopping the members")
                return False
            if relay and report["method"] == "fastsa" and report.get("schedule") is not None:
                workers["exact"].send({"init": report["schedule"]})
    return not stopper.stopped.is_set()
