"""The worker processes of the ``auto`` portfolio: one member each, reporting schedules over a socket pair.

A worker is ``python -m remat_models.planning.portfolio_worker FD PARENT_PID`` (a fresh interpreter: nothing of
the caller's ``__main__`` is imported, so scripts without a ``__main__`` guard are safe). It reads its job
(graph, budget, seed, deadline on the shared monotonic clock, role) from the connection, sends reports
(``method``, ``schedule``, ``bound``, ``seconds``, ``optimal``, ``error``: one per exact member, one per FastSA
improvement, one from the offload planner) and ends with ``{"done": True}``. The exact worker may ask for the
portfolio's best schedule so far (``{"request": "best"}``, answered ``{"best": schedule or None}``); the offload
worker waits for its starts (``{"inits": [...], "until": t}``). It ignores Ctrl-C: the parent stops it; it dies
with its parent (SIGTERM from the kernel on Linux when the parent dies, even by SIGKILL).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from remat_models.backends import SolveLimits
from remat_models.core.limits import MAX_COUNT, wait_slice
from remat_models.core.processes import child_env, die_with_parent, python_command, watch_parent
from remat_models.core.schedule import Schedule, simulate
from remat_models.errors import RematError
from remat_models.heuristics.registry import run_heuristic
from remat_models.heuristics.three_way import three_way
from remat_models.io import linear_chain
from remat_models.planning.result import MethodRun
from remat_models.planning.solve import run_formulation
from remat_models.planning.warm_start import WarmStart, auto_init, cheapest_fitting, fast_baselines

log = logging.getLogger(__name__)

FINISH_MARGIN = 1.0  # seconds a member leaves before the deadline to decode and report
FINISH_SHARE = 0.2  # ... plus this share of the limit (decoding; CP-SAT presolve overshoots on 1M+ variables)
ASK_SECONDS = 5.0  # the most the exact worker waits for the parent's answer (it answers between reports)
MAX_RESTARTS = 1000  # FastSA runs (seeds) in one portfolio at most
ORPHAN_GRACE_S = 2.0  # seconds a worker outlives its parent at most (the kernel's SIGTERM first: a solve stops)


class Worker:
    """A running worker process and the parent's end of its connection."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], conn: Connection) -> None:
        self.name, self.process, self.conn = name, process, conn
        self.terminated = False  # SIGTERM sent (once: a second one abandons the worker's solve with a traceback)

    @classmethod
    def start(cls, name: str) -> Worker:
        """Start the worker ``name`` (a fresh interpreter: seconds of imports under load); ``send`` its job next.

        Sending a large graph blocks until the worker reads it, after its imports: start every worker first.
        """
        ours, theirs = socket.socketpair()
        with theirs:
            parent = str(os.getpid())
            command = python_command("remat_models.planning.portfolio_worker", str(theirs.fileno()), parent)
            env = child_env()  # finds what we found, never a module in the working folder (-P)
            process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
        return cls(name, process, Connection(ours.detach()))

    def send(self, message: dict[str, Any]) -> None:
        """Send ``message``; a worker that has already ended is skipped."""
        try:
            self.conn.send(message)
        except OSError:
            log.debug("auto: worker %s has ended; message dropped", self.name)

    def receive(self) -> dict[str, Any] | None:
        """The next report, or None once the worker is done (or has died)."""
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            log.warning("auto: worker %s ended without finishing (exit %s)", self.name, self.process.poll())
            return None
        return None if message.get("done") else message

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM: a solve keeps its incumbent) if it still runs and was not asked yet."""
        if not self.terminated and self.process.poll() is None:
            self.process.terminate()
            self.terminated = True

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the process if it still runs (killed after ``timeout`` seconds) and close the connection."""
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.conn.close()


def _seconds_left(job: dict[str, Any], total: float) -> float:
    return job["deadline"] - time.monotonic() - FINISH_MARGIN - FINISH_SHARE * total


def _member(conn: Connection, name: str, call: Callable[[], MethodRun]) -> MethodRun | None:
    """Run one member and send its report, or its error (a member's failure is not the portfolio's: None)."""
    started = time.perf_counter()
    try:
        report = call()
    except RematError as error:
        _send(conn, name, None, error=str(error))
        return None
    outcome, seconds = report.outcome, time.perf_counter() - started
    optimal = outcome is not None and outcome.status.is_optimal  # in the member's model (auto's stop rule)
    bound = None if outcome is None else outcome.bound
    _send(conn, report.label, report.schedule, bound=bound, seconds=seconds, optimal=optimal)
    return report


def _send(
    conn: Connection,
    method: str,
    schedule: Schedule | None,
    *,
    bound: float | None = None,
    seconds: float | None = None,
    error: str | None = None,
    optimal: bool = False,
) -> None:
    """Send one member's report to the parent (``optimal``: the solver proved the schedule optimal)."""
    report = {"method": method, "schedule": schedule, "bound": bound, "seconds": seconds, "pid": os.getpid()}
    conn.send({**report, "optimal": optimal, **({"error": error} if error else {})})


def _fastsa(conn: Connection, job: dict[str, Any], total: float) -> None:
    """FastSA with the job's seed, then with the next seeds while a run's time is left, reporting improvements.

    It stops after the job's ``patience`` runs in a row without one (small graphs: ``auto`` can return early).
    """
    graph, budget = job["graph"], job["budget"]
    best: tuple[bool, float] | None = None  # (over budget, cost) of the best run so far
    last, since_best = 0.0, 0
    for restart in range(MAX_RESTARTS):
        left = _seconds_left(job, total)
        if left < max(0.5, last) or since_best >= job["patience"]:
            return
        seed, started = (job["seed"] + restart) % (MAX_COUNT + 1), time.perf_counter()  # seeds stay below 2**63
        try:
            schedule, _ = run_heuristic("fastsa", graph, budget, seed=seed, time_limit=left, target=job.get("target"))
        except RematError as error:
            _send(conn, "fastsa", None, error=str(error))
            return
        last = time.perf_counter() - started
        result = simulate(graph, schedule)
        rank = (result.peak > budget, result.total_cost)
        since_best += 1
        if best is None or rank < best:
            best, since_best = rank, 0
            _send(conn, "fastsa" if restart == 0 else f"fastsa (seed {seed})", schedule, seconds=last)


def _exact(conn: Connection, job: dict[str, Any], total: float) -> None:
    """Start as a plain exact solve would, then solve the formulations in turn, each from the best so far.

    With ``wait`` (small graphs, where FastSA reports within seconds) the start is the cheapest of the fast
    baselines, the FastSA worker's schedule and the portfolio's best by then (the parent's least-peak fallback
    where no fast baseline fits: a held-out DistilBERT at 50 %); else the cheaper of ``auto_init``'s (its own
    short FastSA run, so the exact member never does worse than ``remat solve -f FORMULATION`` with the same
    time) and the portfolio's best by then (FastSA's further seeds, the fallbacks), asked of the parent.
    """
    graph, budget = job["graph"], job["budget"]
    if job["wait"] > 0:
        candidates = list(fast_baselines(graph, budget).values())
        if _poll(conn, min(job["wait"], _seconds_left(job, total))):
            candidates.append(conn.recv()["init"])
        candidates += _portfolio_best(conn, min(ASK_SECONDS, max(0.0, _seconds_left(job, total))))
    else:  # its own start, and the portfolio's best by then (FastSA's worker has often reported)
        started, reported = time.perf_counter(), []

        def report_start(start: WarmStart) -> None:  # a member of its own: never above the exact solves' start
            reported.append(start.schedule)
            _send(conn, "warm start", start.schedule, seconds=time.perf_counter() - started)

        own = auto_init(graph, budget, seed=job["seed"], time_limit=total, on_baseline=report_start)
        candidates = [own.schedule] if own is not None else []
        if own is not None and own.schedule not in reported:  # the polish or FastSA beat the baselines
            report_start(own)
        candidates += _portfolio_best(conn, min(ASK_SECONDS, max(0.0, _seconds_left(job, total))))
    found = cheapest_fitting(graph, budget, candidates)
    start = None if found is None else found.schedule
    formulations = job["formulations"]
    for position, formulation in enumerate(formulations):
        left = _seconds_left(job, total)
        if left < 1.0:
            return
        share = job["first_share"] if position < len(formulations) - 1 else 1.0
        limits = SolveLimits(time_limit=max(1.0, share * left), seed=job["seed"])

        def solve(formulation: str = formulation, limits: SolveLimits = limits, init: Any = start) -> MethodRun:
            return run_formulation(graph, budget, formulation, init=init or "none", limits=limits)

        report = _member(conn, formulation, solve)
        if report is None:
            continue
        proven = report.outcome is not None and report.outcome.status.is_optimal
        if report.interrupted_by is not None or proven:
            return  # stopped (the parent's SIGTERM reaches a warm start or solve as an interrupt), or proven
        found = cheapest_fitting(graph, budget, [s for s in (start, report.schedule) if s is not None])
        start = None if found is None else found.schedule


def _portfolio_best(conn: Connection, seconds: float) -> list[Schedule]:
    """The portfolio's best schedule so far, asked of the parent (empty if none or no answer within ``seconds``)."""
    conn.send({"request": "best"})
    until = time.monotonic() + seconds
    while _poll(conn, max(0.0, until - time.monotonic())):
        message = conn.recv()
        if "best" in message:  # a relayed FastSA schedule ("init") may come first: the answer is newer
            return [] if message["best"] is None else [message["best"]]
    return []


def _offload(conn: Connection, job: dict[str, Any], total: float) -> None:
    """The three-way planner (keep, recompute or offload) from the starts the parent sends, until its ``until``.

    While it waits, a plan of a 7-node chain loads the planner's compiled kernels (~1 s in a fresh process).
    """
    transfer, chain = job["transfer"], linear_chain(3)
    three_way(chain, chain.lower_bound, transfer, time_limit=0.0)
    if not _poll(conn, max(0.0, job["deadline"] - time.monotonic())):
        return
    message, started = conn.recv(), time.perf_counter()
    seconds = max(0.0, message["until"] - time.monotonic() - FINISH_MARGIN)
    try:
        found = three_way(job["graph"], job["budget"], transfer, time_limit=seconds, inits=message["inits"])
    except RematError as error:
        _send(conn, "three-way", None, error=str(error))
        return
    _send(conn, "three-way", found.schedule, seconds=time.perf_counter() - started)


def _poll(conn: Connection, seconds: float) -> bool:
    """Whether a message arrives on ``conn`` within ``seconds`` (waited in slices: one ``poll`` overflows)."""
    until = time.monotonic() + seconds
    while not conn.poll(wait_slice(until - time.monotonic())):
        if time.monotonic() >= until:
            return False
    return True


ROLES: dict[str, Callable[[Connection, dict[str, Any], float], None]] = {
    "fastsa": _fastsa,
    "exact": _exact,
    "offload": _offload,
}


def main(argv: list[str]) -> None:
    """Run the job received on the connection whose file descriptor is ``argv[1]`` (``argv[2]``: the parent's pid)."""
    die_with_parent(int(argv[2]), signal.SIGTERM)
    watch_parent(int(argv[2]), signal.SIGKILL, after=ORPHAN_GRACE_S)  # a handler may have taken that SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="auto worker: %(levelname)s %(message)s")
    conn = Connection(int(argv[1]))
    try:
        job = conn.recv()
        total = job["deadline"] - time.monotonic()
        ROLES[job["role"]](conn, job, total)
        conn.send({"done": True})
    except (EOFError, OSError):  # the parent has gone (stopped or killed): nobody to report to
        pass
    os._exit(0)  # skip interpreter teardown (solver threads, numba): the parent has what it needs


if __name__ == "__main__":
    main(sys.argv)
