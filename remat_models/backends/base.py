"""The interface every solver backend implements, and the lowering pipeline most of them share."""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, ClassVar, Protocol

import numpy as np

from remat_models.backends.deadline import (
    ISOLATE_NONZEROS,
    ISOLATE_SIZE,
    hard_deadline,
    isolation_available,
    killed_at_the_limit,
    publish_incumbent,
    publishing,
    run_with_deadline,
)
from remat_models.backends.interrupt import Stopper, interrupted, run_interruptible
from remat_models.backends.registry import natively_taking
from remat_models.core.limits import check_count, check_time_limit
from remat_models.errors import ConfigurationError, UnsupportedConstructError
from remat_models.model import Model, SizeEstimate, SolveResult, SolveStatus
from remat_models.model.lowering import ORDER, LoweredModel, effective_native, estimate, lower

__all__ = ["Backend", "LoweringBackend", "SolveLimits", "SolveResult", "SolveStatus"]

log = logging.getLogger(__name__)

FEASIBILITY_TOL = 1e-5  # of :meth:`LoweringBackend.proven` (solvers' own feasibility tolerances are ~1e-6)
LOWERED_NONZEROS_PER_SECOND = 10_000_000  # a timed solve lowers only what this rate writes within its limit (a
# Moccasin window of the 9,607-node transformer lowered to 61 M nonzeros for CVXPY: 6.1 s at load 9, of a 3.4 s limit)


class NoTimeToLower(Exception):
    """A timed solve whose lowering alone would outlast its limit (``solve`` answers no solution, unsolved)."""


@dataclass(frozen=True)
class SolveLimits:
    """Limits and knobs common to all backends (a backend ignores what its solver lacks, and logs it)."""

    time_limit: float | None = None
    workers: int = 1
    seed: int = 0
    mip_gap: float | None = None
    max_variables: int | None = 50_000_000
    max_nonzeros: int | None = 200_000_000
    log: bool = False  # keep the solver's log in SolveResult.log
    solver_options: Mapping[str, Any] = field(default_factory=dict)  # the solver's own, set last (they win)

    def __post_init__(self) -> None:
        check_time_limit(self.time_limit)
        check_count(self.workers, "workers")
        check_count(self.seed, "seed", minimum=0)
        if self.mip_gap is not None and not (isinstance(self.mip_gap, (int, float)) and 0 <= self.mip_gap < math.inf):
            raise ConfigurationError(f"mip_gap must be a finite number >= 0, got {self.mip_gap!r}")


class Backend(Protocol):
    """A solver plug-in: takes the abstract model, returns a SolveResult with values per variable block."""

    name: ClassVar[str]
    native_constructs: ClassVar[frozenset[str]]
    install_hint: ClassVar[str]
    options: ClassVar[tuple[str, ...]]
    option: str | None

    @classmethod
    def available(cls) -> bool:
        """Whether the solver is installed and usable in this process."""
        ...

    def solve(self, model: Model, limits: SolveLimits = ..., hints: dict[str, Any] | None = None) -> SolveResult:
        """Solve ``model`` within ``limits``, starting from ``hints`` (values by block; NaN = no hint)."""
        ...


class LoweringBackend(ABC):
    """Base of backends that take a lowered model: estimate -> size check -> lower -> solve -> restore.

    Subclasses set ``name``, ``native_constructs``, ``module`` (the import that must work) and
    ``install_hint``, and implement ``_solve_lowered`` on a model holding only native constructs.
    """

    name: ClassVar[str]
    native_constructs: ClassVar[frozenset[str]]
    module: ClassVar[str]
    install_hint: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()
    isolate_large: ClassVar[bool] = False  # large timed solves run in a child killed at a hard deadline
    isolate_timed: ClassVar[bool] = False  # every timed solve does (building the solver's model ignores the limit)
    takes_solver_options: ClassVar[bool] = False  # applies ``SolveLimits.solver_options`` (``set_solver_options``)

    def __init__(self, option: str | None = None) -> None:
        self.option = option
        self.stopper = Stopper()  # a fresh one per solve; backends register how to stop their solver
        self.started = time.perf_counter()  # reset by each solve: lowering and model passing count too
        self.compiled_size: SizeEstimate | None = None  # the last compiled model's size after lowering

    @property
    def spec(self) -> str:
        """The registry spelling of this backend, e.g. ``highs:lp``."""
        return self.name if self.option is None else f"{self.name}:{self.option}"

    @property
    def integral(self) -> bool:
        """Whether solutions respect integrality (False for relaxations)."""
        return True

    @classmethod
    def available(cls) -> bool:
        """Whether the solver's Python module can be found."""
        return importlib.util.find_spec(cls.module) is not None

    def compile(self, model: Model, limits: SolveLimits = SolveLimits()) -> LoweredModel:
        """Check the constructs and the size, then lower ``model`` to this backend's native constructs."""
        native = effective_native(self.native_constructs)
        for construct in sorted(model.constructs() - native - set(ORDER)):
            takers = natively_taking(construct)
            raise UnsupportedConstructError(
                f"backend {self.name!r} cannot take construct {construct!r} and there is no lowering for it;"
                f" backends that take it natively: {', '.join(takers) or 'none'}"
            )
        est = estimate(model, native)
        log.debug("%s: size after lowering %s", self.name, est)
        est.check(limits.max_variables, limits.max_nonzeros)
        self.check_size(est)
        added = est.nonzeros - model.num_nonzeros  # what the lowering writes, in the parent before any hard deadline
        if limits.time_limit is not None and added > LOWERED_NONZEROS_PER_SECOND * limits.time_limit:
            seconds = added / LOWERED_NONZEROS_PER_SECOND
            raise NoTimeToLower(
                f"{self.spec}: lowering to {est.nonzeros:,} nonzeros would take about {seconds:.0f} s of a "
                f"{limits.time_limit:.1f} s limit: not solved"
            )
        self.compiled_size = est  # a reservoir counts its events as rows: CP-SAT expands Moccasin's into rows
        return lower(model, native)

    def check_size(self, size: SizeEstimate) -> None:
        """Raise ``ModelTooLargeError`` if the solver would refuse a model of ``size`` (after lowering): none here.

        Called before lowering, so a refusal the solver would give only after a long build comes at once.
        """
        del size

    def solve(
        self, model: Model, limits: SolveLimits = SolveLimits(), hints: dict[str, Any] | None = None
    ) -> SolveResult:
        """Solve ``model``; values are returned by block name of the original model.

        Inside a phase a signal has already stopped (:func:`~remat_models.backends.interrupt.interrupted`) no
        solver starts: INTERRUPTED without values at once (HiGHS ignores a stop for seconds in its presolve).
        """
        self.started = start = time.perf_counter()
        if limits.solver_options and not self.takes_solver_options:
            raise ConfigurationError(
                f"backend {self.name!r} takes no solver options (got {', '.join(limits.solver_options)}); "
                "highs, cpsat, gurobi, cvxpy and the pyomo backends do"
            )
        signum = interrupted()
        if signum is not None:
            log.debug("%s: not solving (interrupted by %s before the solve)", self.spec, signum.name)
            return SolveResult(SolveStatus.INTERRUPTED, backend=self.spec, interrupt_signal=signum)
        try:
            lowered = self.compile(model, limits)
        except NoTimeToLower as error:
            log.info("%s", error)
            return SolveResult(
                SolveStatus.NO_SOLUTION, backend=self.spec, log=str(error), wall_time=time.perf_counter() - start
            )
        hint = None
        if hints:
            hint = np.full(lowered.model.num_cols, np.nan)
            hint[: model.num_cols] = model.flatten(hints)
        self.stopper = stopper = Stopper()
        isolated = self._hard_deadline(limits)  # the solver may overrun its own limit at this size
        given = limits.time_limit
        if isolated:  # the grace inside the limit: the solver stops 1 s + 5 % before its child is killed at the limit
            limits = killed_at_the_limit(limits)
        solve: Callable[[], SolveResult] = partial(self._solve_lowered, lowered.model, limits, hint)
        if isolated:
            spent = time.perf_counter() - start  # the lowering counts against the limit
            # killed at the limit itself, also below 1.1 s (where the solver's own limit is its least, 0.1 s)
            seconds = max(0.1, min(given, hard_deadline(limits.time_limit)) - spent)  # type: ignore[type-var,arg-type]
            solve = partial(run_with_deadline, self.spec, solve, seconds, stopper)
        result = run_interruptible(self.spec, solve, stopper, self._abandoned)
        if stopper.stopped.is_set() and result.status in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION):
            result.status = SolveStatus.INTERRUPTED  # Ctrl-C: the incumbent (if any) is kept
            result.interrupt_signal = stopper.signal
        result.backend = self.spec
        result.wall_time = time.perf_counter() - start
        if result.status is SolveStatus.SOLVER_ERROR and not result.message:  # a solver error always says why
            tail = (result.log or "").strip().splitlines()
            result.message = tail[-1] if tail else "the solver reported an error"
        if result.x is not None:
            if result.objective is None:  # an incumbent kept from a solver killed at the hard deadline
                result.objective = lowered.model.objective_value(result.x)
            result.x = lowered.restore(result.x)
            result.values = model.split(result.x, round_integers=self.integral)
        return result

    def _abandoned(self) -> SolveResult:
        """What a solve left running after an interrupt answers (INTERRUPTED below, without values)."""
        return SolveResult(SolveStatus.NO_SOLUTION, log=f"{self.spec}: did not stop after the interrupt; left unread")

    def _hard_deadline(self, limits: SolveLimits) -> bool:
        """Whether the solve just compiled runs in a child killed at a hard deadline (``backends/deadline.py``)."""
        if limits.time_limit is None or not isolation_available():
            return False
        size = self.compiled_size
        large = size is not None and (
            size.variables + size.constraints >= ISOLATE_SIZE or size.nonzeros >= ISOLATE_NONZEROS
        )
        return self.isolate_timed or (self.isolate_large and large)

    def limits_left(self, limits: SolveLimits) -> SolveLimits:
        """``limits`` with the time limit less what this solve has spent so far (lowering, building), >= 0.1 s.

        Backends take it just before handing over to the solver, so the whole call holds the limit.
        """
        if limits.time_limit is None:
            return limits
        return replace(limits, time_limit=max(0.1, limits.time_limit - (time.perf_counter() - self.started)))

    def proven(self, model: Model, x: np.ndarray | None) -> np.ndarray | None:
        """``x`` if it satisfies ``model``, else None: a solver stopped at a limit may return values that do not."""
        if x is None:
            return None
        broken = model.check(x, tol=FEASIBILITY_TOL)
        if broken:
            log.debug("%s: the values at the limit are no solution (%s); none kept", self.spec, "; ".join(broken[:3]))
            return None
        return x

    def set_solver_options(self, limits: SolveLimits, set_one: Callable[[str, Any], object]) -> None:
        """Apply ``limits.solver_options`` with ``set_one(name, value)``; a rejected one raises ConfigurationError.

        A thread count (``threads``, ``num_workers``, ...) above ``max_threads()`` is clamped to it with a warning:
        HiGHS given ``threads=1000000`` hung starting them.
        """
        for name, value in limits.solver_options.items():
            threads = name.lower() in THREAD_OPTIONS and isinstance(value, int) and not isinstance(value, bool)
            if threads and value > max_threads():
                log.warning("%s: %s=%d clamped to %d threads", self.name, name, value, max_threads())
                value = max_threads()
            try:
                set_one(name, value)
            except Exception as error:
                raise ConfigurationError(f"{self.name}: solver option {name}={value!r} rejected: {error}") from error

    @abstractmethod
    def _solve_lowered(self, model: Model, limits: SolveLimits, hint: np.ndarray | None) -> SolveResult:
        """Solve a model holding only native constructs; return flat column values in ``x``."""


THREAD_OPTIONS = frozenset({"threads", "num_workers", "num_search_workers", "thread_count", "nthreads"})


def max_threads() -> int:
    """The most solver threads a solver option may ask for: 4 per CPU of this machine, at least 64."""
    return max(64, 4 * (os.cpu_count() or 1))


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` (a solver's message) names the option ``name`` as a whole word (``--name``, ``'name'``)."""
    return re.search(rf"(?<![\w/]){re.escape(name)}(?![\w/])", text) is not None


class Trajectory:
    """Records (seconds since start, objective) of improving incumbents."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.points: list[tuple[float, float]] = []

    def record(self, objective: float, solution: Callable[[], np.ndarray] | None = None) -> None:
        """Note an incumbent found now; in a hard-deadline child, ``solution()`` (its values) goes to the parent."""
        self.points.append((time.perf_counter() - self.start, float(objective)))
        if solution is not None and publishing():
            publish_incumbent(solution())

    @property
    def first(self) -> float | None:
        """Time of the first incumbent."""
        return self.points[0][0] if self.points else None
