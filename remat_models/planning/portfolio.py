"""``auto``: one method for users, a portfolio run in parallel processes (exact solves' warm start: ``warm_start``).

The portfolio (:mod:`remat_models.planning.portfolio_worker` runs its members) shares one deadline:

- a worker process runs FastSA, then again with the next seeds while a run's time is left and until
  ``restart_patience`` runs in a row bring no improvement (reporting each improvement);
- a second one runs the exact member: Checkmate's MILP on HiGHS on graphs of up to ``checkmate_nodes``
  nodes (a share of the time; Moccasin follows unless Checkmate proved its optimum), Moccasin on CP-SAT up
  to ``hilp_nodes`` nodes, the hierarchical H-ILP above (Moccasin's model then returns its warm start or
  nothing; H-ILP never returns worse than its start and refines around it). Below ``INIT_FASTSA_NODES``
  nodes it starts from FastSA's schedule if FastSA reports within ``wait_share`` of the limit (else from
  the fast baselines); from there on from the cheaper of ``auto_init``'s (its own short FastSA run, as
  ``remat solve -f moccasin`` would start; reported at once as the member ``warm start``) and the portfolio's
  best by then, which it asks this process for;
- this process plans the fallbacks meanwhile: the saved-set knapsack while the workers import, then Chen's
  greedy within ``INIT_SHARE`` of the limit (or while nothing fits), each less the recomputations the budget does
  not need (:func:`~remat_models.heuristics.least_peak.cheapened`, ``cheapen_share`` of the limit), and where
  neither fits the least-peak search from them (``LEAST_PEAK_SHARE`` of the limit, at most ``LEAST_PEAK_MAX_S``;
  once within the budget its other starts descend as long again, and it returns the cheapest fit): under load
  the exact worker's own search, after its slower baselines, came too late (LLaMA at 25 %).
  Given a transfer model (option ``transfer``, ``plan(..., transfer=...)``) every member is simulated
  under it, and a third worker runs the three-way planner (keep, recompute or offload each value) in the
  last ``offload_share`` of the limit, started from the members' schedules reported by then (each competes
  as it is, and its order is shaved with offloads), while the other workers go on: offloading never
  returns a costlier plan than the recompute-only members found.

Each member's schedule is simulated here as it arrives; once an exact member has proved its schedule
optimal and FastSA's first run has reported (FastSA reorders, so it can beat an optimum of the input
order), the FastSA and exact workers are stopped (the offload planner goes on), and at the deadline every
worker still running. Given ``target`` (``plan()``'s lower bound on cost for every schedule), a fitting schedule
that reaches it ends the run at once: nothing is cheaper. ``auto`` returns the cheapest schedule within the budget
(else the lowest peak) and the best lower bound on cost any member proved.
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
from remat_models.core.schedule import TRANSFER_STEPS, Schedule, SimulationResult, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError
from remat_models.formulations import auto_formulation, options_of
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.fastsa.solver import reaches
from remat_models.heuristics.least_peak import STARTS as LEAST_PEAK_STARTS
from remat_models.heuristics.least_peak import cheapened, least_peak_search
from remat_models.planning.portfolio_worker import Worker
from remat_models.planning.result import MethodRun
from remat_models.planning.warm_start import DEFAULT_TIME_LIMIT, INIT_FASTSA_NODES, INIT_SHARE

log = logging.getLogger(__name__)

STOP_GRACE = 2.0  # seconds past the deadline before workers still running are stopped (at most STOP_GRACE_SHARE)
STOP_GRACE_SHARE = 0.05  # of the time limit: short limits keep 1.1 x limit + 2 s with the process start
LEAST_PEAK_SHARE = 0.85  # of the time limit: the least-peak search in this process when no fallback fits
LEAST_PEAK_MAX_S = 10.0  # seconds, at most (it returns soon after its first fit: ~1 s on the zoo at 25 %)
LEAST_PEAK_MIN_S = 0.5  # seconds: less than this left, it does not start
WORKER_STOP_S = 1.0  # seconds the stopped workers get together to end before they are killed (at most STOP_GRACE_SHARE)
STOP_POLL = 0.2  # seconds between checks for a stop (SIGINT, SIGTERM) while waiting for reports


@dataclass(frozen=True)
class AutoOptions:
    """The portfolio's knobs (``plan(..., "auto", options={...})``, ``remat solve -m auto -O key=value``)."""

    checkmate_nodes: int = 150  # Checkmate's MILP (O(n^2) variables) joins the portfolio up to this many nodes
    checkmate_share: float = 0.6  # of the exact worker's time, before Moccasin
    hilp_share: float = 0.75  # of the exact worker's time on graphs above hilp_nodes, before Moccasin's windows
    hilp_nodes: int = 500  # above this many nodes the exact worker runs the hierarchical H-ILP, not Moccasin
    wait_share: float = 0.25  # of the time limit the exact worker waits for FastSA's schedule as its warm start
    restart_patience: int = 8  # FastSA runs in a row without an improvement before its worker stops
    transfer: TransferModel | None = None  # offloading allowed: three-way plans join (plan(..., transfer=...))
    offload_share: float = 0.3  # the last share of the time limit: the three-way planner from the best so far
    cheapen_share: float = 0.02  # of the time limit, at most, per fallback: its recomputations that can go removed

    def validated(self) -> AutoOptions:
        """Itself, or a ConfigurationError naming the value out of range."""
        check_count(self.checkmate_nodes, "auto option checkmate_nodes", minimum=0)
        check_count(self.hilp_nodes, "auto option hilp_nodes", minimum=0)
        check_count(self.restart_patience, "auto option restart_patience", minimum=1)
        for name in ("checkmate_share", "hilp_share", "wait_share", "offload_share", "cheapen_share"):
            value, none = getattr(self, name), name == "cheapen_share"  # 0: no cheapening
            real = not isinstance(value, bool) and isinstance(value, (int, float))
            if not real or not (0 <= value <= 1 if none else 0 < value <= 1):
                raise ConfigurationError(f"auto option {name} is a share in {'[' if none else '('}0, 1], got {value!r}")
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
        self.plain: tuple[Schedule, SimulationResult] | None = None  # the best without transfers: a start to share
        self.proven = False  # an exact member proved its schedule optimal (FastSA may still reorder below it)
        self.latest: dict[str, Schedule] = {}  # each member's last schedule (FastSA's: its best so far)
        self.bound: float | None = None
        self.members: list[dict[str, Any]] = []

    def starts(self) -> list[Schedule]:
        """The members' latest schedules, the best first: the offload planner's starts."""
        inits = [] if self.best is None else [self.best[1]]
        return inits + [schedule for schedule in self.latest.values() if all(schedule is not s for s in inits)]

    def fits(self) -> bool:
        """Whether the best schedule so far fits the budget."""
        return self.best is not None and self.best[2].peak <= self.budget

    def at_target(self, target: float | None) -> bool:
        """Whether the best schedule fits at no more than ``target``, a proven lower bound: then it is optimal."""
        if target is None or self.best is None or not self.fits():
            return False
        return reaches(self.best[2].total_cost, target)

    def offer(self, report: Mapping[str, Any]) -> None:
        """Record one member's report.

        Its keys: ``method``, ``schedule`` or None, ``bound``, ``seconds``, ``error``, ``pid`` and ``cheapened`` (a
        fallback less the recomputations that could go).
        """
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
                **({"cheapened": True} if report.get("cheapened") else {}),
            }
        )
        if member_bound is not None:
            self.bound = member_bound if self.bound is None else max(self.bound, member_bound)
        if schedule is not None:
            self.latest[report["method"]] = schedule
        if result is not None and _better(result, None if self.best is None else self.best[2], self.budget):
            self.best = (report["method"], schedule, result)
        plain = result is not None and not any(isinstance(step, TRANSFER_STEPS) for step in schedule.steps)
        if plain and _better(result, None if self.plain is None else self.plain[1], self.budget):
            self.plain = (schedule, result)
        self.proven = self.proven or bool(report.get("optimal") and schedule is not None)
        cost = "no schedule" if result is None else f"peak {result.peak:,} B, cost {result.total_cost:g}"
        log.info("auto: %s reported %s; best so far: %s", report["method"], cost, self.best and self.best[0])


def auto(
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    target: float | None = None,
) -> MethodRun:
    """The portfolio's best schedule and details: each member's cost, peak, time and bound, and the best bound.

    ``options``: :class:`AutoOptions` fields. SIGINT or SIGTERM stops the workers; the run then carries the
    best schedule reported so far (the fallbacks' at least) and the signal (``interrupted_by``). ``target``, a
    proven lower bound on the total cost: once a fitting schedule costs no more, the members are stopped and
    it is returned (FastSA gets it too).
    """
    opts = options_of(AutoOptions, options, "auto")
    total = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    deadline = time.monotonic() + total
    first_share = opts.hilp_share if graph.n > opts.hilp_nodes else opts.checkmate_share  # H-ILP's, else Checkmate's
    exact = {"formulations": _exact_members(graph.n, opts), "first_share": first_share}
    wait = opts.wait_share * total if graph.n < INIT_FASTSA_NODES else 0.0  # larger: the exact worker runs auto_init
    jobs: dict[str, dict[str, Any]] = {
        "fastsa": {"role": "fastsa", "patience": opts.restart_patience, "target": target},
        "exact": {"role": "exact", "wait": wait, **exact},
    }
    if opts.transfer is not None:  # started now (imports), it waits for its starts
        jobs["offload"] = {"role": "offload", "transfer": opts.transfer}
    portfolio, stopper = _Portfolio(graph, budget, opts.transfer), Stopper()
    with stop_on_signals(stopper):  # SIGINT/SIGTERM: stop the workers, return the best reported so far
        workers: dict[str, Worker] = {}
        try:
            for name in jobs:
                workers[name] = Worker.start(name)
            cheapen = opts.cheapen_share * total
            _fallback(graph, budget, "knapsack", portfolio, cheapen)  # while the workers import (seconds at 10k nodes)
            if portfolio.at_target(target):  # optimal already: no member can do better
                return _finished(graph, budget, portfolio, stopper, target)
            for name, job in jobs.items():  # each send waits for that worker's imports
                workers[name].send({"graph": graph, "budget": budget, "seed": seed, "deadline": deadline, **job})
            if time.monotonic() < deadline - (1 - INIT_SHARE) * total or not portfolio.fits():
                _fallback(graph, budget, "chen-greedy", portfolio, cheapen)  # within a warm start's share of the limit
            if not portfolio.fits():  # feasibility first, here too: the exact worker's own search may come too late
                seconds = min(LEAST_PEAK_MAX_S, LEAST_PEAK_SHARE * total, deadline - time.monotonic())
                _least_peak_fallback(graph, budget, portfolio, seconds, stopper)
            if portfolio.at_target(target):
                return _finished(graph, budget, portfolio, stopper, target)
            live = {worker.conn: worker for name, worker in workers.items() if name != "offload"}
            grace = min(STOP_GRACE, STOP_GRACE_SHARE * total)
            until = deadline
            collecting = dict(relay=wait > 0, stopper=stopper, target=target)
            if "offload" in workers:  # the members report until the offload share, then offload from theirs
                reserve = opts.offload_share * total
                _collect(workers, live, portfolio, deadline - reserve, **collecting)
                if not (stopper.stopped.is_set() or portfolio.at_target(target)):  # late: the grace at least
                    now = time.monotonic()
                    until = max(now + min(reserve, deadline - now), now + grace)
                    workers["offload"].send({"inits": portfolio.starts(), "until": until})
                    live[workers["offload"].conn] = workers["offload"]
            _collect(workers, live, portfolio, max(deadline, until) + grace, **collecting)
        finally:  # every worker asked at once, then each waited for
            for worker in workers.values():
                worker.terminate()
            until = time.monotonic() + min(WORKER_STOP_S, STOP_GRACE_SHARE * total)  # then killed: the limit holds
            for worker in workers.values():
                worker.stop(max(0.0, until - time.monotonic()))
    return _finished(graph, budget, portfolio, stopper, target)


def _finished(graph: Graph, budget: int, portfolio: _Portfolio, stopper: Stopper, target: float | None) -> MethodRun:
    """The run of the portfolio's best schedule, its bound and gap, the members and any interrupt."""
    assert portfolio.best is not None
    name, schedule, result = portfolio.best
    if portfolio.at_target(target):
        log.info("auto: %s's cost %g reaches the lower bound: no schedule is cheaper", name, result.total_cost)
    bound = portfolio.bound
    gap = None if bound is None or result.peak > budget or not result.total_cost else 1 - bound / result.total_cost
    interrupted = stopper.signal if stopper.stopped.is_set() else None
    if interrupted is not None:
        log.warning("auto: interrupted (%s): returning the best schedule its members reported", interrupted.name)
    log.info("auto on %s: %s chosen, cost %s, bound %s", graph.name, name, result.total_cost, bound)
    details = {"chosen": name, "bound": bound, "gap": gap, "portfolio": portfolio.members}
    return MethodRun("auto", schedule, details, simulation=result, interrupted_by=interrupted)


def _fallback(graph: Graph, budget: int, name: str, portfolio: _Portfolio, cheapen: float) -> None:
    """Offer the baseline ``name``'s schedule, planned in this process, less the recomputations that can go.

    The baselines recompute whole segments; removing what the budget does not need took Chen's greedy on the
    zoo GPT-2's joint graph (with dropout) from a TDI of 27 % to 15 % in 0.01 s. ``cheapen``: seconds for that.
    """
    t0 = time.perf_counter()
    schedule = BASELINES[name](graph, budget)
    cheaper = cheapened(graph, schedule, budget, cheapen)
    seconds = time.perf_counter() - t0
    portfolio.offer({"method": name, "schedule": cheaper, "seconds": seconds, "cheapened": cheaper is not schedule})


def _least_peak_fallback(graph: Graph, budget: int, portfolio: _Portfolio, seconds: float, stopper: Stopper) -> None:
    """Offer the least-peak search's schedule (from the fallbacks' schedules), planned in this process."""
    if seconds < LEAST_PEAK_MIN_S:
        return
    t0 = time.perf_counter()
    starts = {name: schedule for name, schedule in portfolio.latest.items() if name in LEAST_PEAK_STARTS}
    found = least_peak_search(graph, budget, time_limit=seconds, stop=stopper.stopped, starts=starts)
    portfolio.offer({"method": "least-peak", "schedule": found.schedule, "seconds": time.perf_counter() - t0})


def _exact_members(nodes: int, opts: AutoOptions) -> list[str]:
    """The exact worker's formulations in turn: H-ILP above ``hilp_nodes``, else [Checkmate (small), Moccasin].

    Moccasin follows H-ILP too: above its ``window_nodes`` it re-solves windows of the best schedule so far.
    """
    if nodes > opts.hilp_nodes:
        return [auto_formulation("large"), auto_formulation("every")]
    small = [auto_formulation("small")] if nodes <= opts.checkmate_nodes else []
    return [*small, auto_formulation("every")]


def _collect(
    workers: dict[str, Worker],
    live: dict[Any, Worker],
    portfolio: _Portfolio,
    until: float,
    relay: bool,
    stopper: Stopper,
    target: float | None = None,
) -> None:
    """Offer the ``live`` workers' reports until all are done, ``until`` or a stop (then only those already sent).

    ``live`` maps connections to the workers not done yet (the done ones leave it). A request for the best
    schedule so far is answered. With ``relay`` FastSA's reports go on to the exact worker. Once an optimum
    is proven and FastSA has reported, the FastSA and exact workers are stopped (the offload planner goes on);
    once the best schedule reaches ``target`` (a lower bound for every schedule), collecting ends.
    """
    while live and time.monotonic() < until:
        stopped = stopper.stopped.is_set()
        timeout = 0.0 if stopped else min(STOP_POLL, wait_slice(until - time.monotonic()))
        ready = wait(list(live), timeout=timeout)
        if stopped and not ready:
            return
        for conn in ready:
            worker = live.get(conn)  # type: ignore[call-overload]
            report = None if worker is None else worker.receive()
            if report is None:  # done, died (its stderr says why) or stopped in this round
                live.pop(conn, None)  # type: ignore[call-overload]
                continue
            if report.get("request"):
                worker.send({"best": None if portfolio.plain is None else portfolio.plain[0]})
                continue
            portfolio.offer(report)
            if portfolio.at_target(target):  # optimal: the workers are stopped on return
                live.clear()
                return
            if portfolio.proven and any(m["method"] == "fastsa" for m in portfolio.members):
                log.info("auto: an optimum is proven (for its fixed order) and FastSA has run; stopping the members")
                for name in ("fastsa", "exact"):
                    workers[name].terminate()
                    live.pop(workers[name].conn, None)
            elif relay and report["method"] == "fastsa" and report.get("schedule") is not None:
                workers["exact"].send({"init": report["schedule"]})
