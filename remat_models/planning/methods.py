"""The one table of planning methods: heuristics, the ``auto`` portfolio, formulations on backends, approximations.

A method is named ``NAME`` (a heuristic or ``auto``), ``FORMULATION[/BACKEND]`` or ``FORMULATION/APPROXIMATION``
(e.g. ``checkmate/lp-rounding``); :func:`parse_method_name` resolves the name once against the registries and
:func:`run_method` runs it. Every front end (CLI, bench, max batch, torch) goes through ``plan()``, which calls these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from remat_models.backends import SolveLimits, backend_class
from remat_models.backends.interrupt import run_stoppable
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.errors import ConfigurationError
from remat_models.formulations import (
    Extension,
    approximation_names,
    approximation_options,
    formulation_names,
    get_formulation,
)
from remat_models.heuristics.registry import HEURISTICS, run_heuristic
from remat_models.planning.portfolio import AutoOptions, auto
from remat_models.planning.result import MethodRun
from remat_models.planning.solve import run_formulation

DEFAULT_METHOD = "auto"  # what every front end plans with when no method is named
PORTFOLIOS: dict[str, Callable[..., MethodRun]] = {"auto": auto}

Method = Callable[[Graph, int], Schedule]


@dataclass(frozen=True)
class MethodRef:
    """What a method name means: a heuristic or portfolio, or a formulation on a backend, or an approximation of it."""

    method: str | None = None
    formulation: str | None = None
    backend: str | None = None
    approx: str | None = None

    @property
    def is_solver(self) -> bool:
        """Whether this is a formulation (solved or approximated), which takes init, extensions and solver options."""
        return self.formulation is not None

    @property
    def label(self) -> str:
        """The name results carry: ``NAME``, ``FORMULATION/BACKEND`` (default backend filled in), ``.../APPROX``."""
        if self.formulation is None:
            return str(self.method)
        return f"{self.formulation}/{self.approx or self.backend or get_formulation(self.formulation).default_backend}"

    def option_names(self) -> list[str]:
        """The option names the method takes (its options dataclass's fields; an approximation's keywords)."""
        if self.formulation is not None:
            if self.approx is not None:
                return approximation_options(self.approx, self.formulation)
            return [f.name for f in fields(get_formulation(self.formulation).options_type)]
        if self.method in PORTFOLIOS:
            return [f.name for f in fields(AutoOptions)]
        return list(HEURISTICS[str(self.method)].options)

    @property
    def takes_time_limit(self) -> bool:
        """Whether the method runs under a time limit (solvers, FastSA, portfolios; the baselines take none)."""
        if self.formulation is not None or self.method in PORTFOLIOS:
            return True
        return HEURISTICS[str(self.method)].configurable


def method_names() -> list[str]:
    """Names of the heuristic and portfolio methods (formulations are named ``FORMULATION[/BACKEND]``)."""
    return [*HEURISTICS, *PORTFOLIOS]


def all_methods() -> list[MethodRef]:
    """Every method of the table: heuristics, portfolios, each formulation (default backend) and approximation."""
    refs = [MethodRef(method=name) for name in method_names()]
    for name in formulation_names():
        refs.append(MethodRef(formulation=name))
        refs += [MethodRef(formulation=name, approx=approx) for approx in approximation_names(name)]
    return refs


def methods() -> dict[str, Method]:
    """Every heuristic and portfolio method by name, with default knobs, as ``(graph, budget) -> Schedule``."""
    return {name: _default_run(name) for name in method_names()}


def _default_run(name: str) -> Method:
    return lambda graph, budget: run_method(MethodRef(method=name), graph, budget).schedule  # type: ignore[return-value]


def parse_method_name(text: str) -> MethodRef:
    """``NAME`` (heuristic or portfolio) or ``FORMULATION[/BACKEND]`` or ``FORMULATION/APPROXIMATION``.

    One parser for the CLI, bench sweeps and ``plan()``; the parts are checked against the registries.
    """
    text = text.strip()
    if not text:
        raise ConfigurationError("empty method name")
    head, slash, tail = text.partition("/")
    if not slash:
        if head in formulation_names():
            return MethodRef(formulation=head)
        if head not in method_names():
            known = ", ".join([*method_names(), *(f"{f}/BACKEND" for f in formulation_names())])
            raise ConfigurationError(f"unknown method {head!r}; choose one of {known}")
        return MethodRef(method=head)
    get_formulation(head)
    if not tail:
        raise ConfigurationError(f"method {text!r}: give a backend or approximation after '/'")
    if tail in approximation_names(head):
        return MethodRef(formulation=head, approx=tail)
    backend_class(tail.partition(":")[0])
    return MethodRef(formulation=head, backend=tail)


def resolve_method(
    method: str | MethodRef | None, formulation: str | None, backend: str | None, approx: str | None
) -> MethodRef:
    """The method ``plan()`` was given: a name or reference, or a formulation with its backend or approximation."""
    if method is not None and (formulation, backend, approx) != (None, None, None):
        raise ConfigurationError("give either a method or a formulation (with its backend or approximation), not both")
    if isinstance(method, MethodRef):
        return method
    if method is not None:
        return parse_method_name(method)
    if formulation is None:
        if backend is not None or approx is not None:
            raise ConfigurationError("a backend or approximation needs a formulation")
        return MethodRef(method=DEFAULT_METHOD)
    get_formulation(formulation)
    return MethodRef(formulation=formulation, backend=backend, approx=approx)


def run_method(
    ref: MethodRef,
    graph: Graph,
    budget: int,
    *,
    seed: int = 0,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    init: str | Schedule | None = "auto",
    extensions: Sequence[Extension] = (),
    workers: int = 1,
    solver_options: Mapping[str, Any] | None = None,
    windows: bool | None = None,
    target: float | None = None,
) -> MethodRun:
    """Run the method ``ref`` names (its schedule not yet checked against the budget).

    ``windows`` (formulations): re-solve windows of the warm start (True), the whole model (False), or by the
    formulation's ``window_nodes`` (None; see :func:`~remat_models.planning.solve.run_formulation`).
    ``target``: a proven lower bound on the total cost, where ``auto`` and FastSA stop once a fitting schedule
    reaches it (nothing is cheaper); the formulations prove their own optima and do not take it.
    """
    if ref.formulation is not None:
        limits = SolveLimits(time_limit=time_limit, workers=workers, seed=seed, solver_options=solver_options or {})
        return run_formulation(
            graph,
            budget,
            ref.formulation,
            backend=ref.backend,
            approx=ref.approx,
            init=init,
            options=options,
            extensions=extensions,
            limits=limits,
            windows=windows,
        )
    assert ref.method is not None
    if windows is not None:
        raise ConfigurationError("windows apply to formulations, not to heuristic methods or auto")
    if extensions or solver_options or init not in (None, "auto", "none"):
        raise ConfigurationError(
            "extensions, approx, init and solver options apply to formulations, not to heuristic methods"
        )
    portfolio = PORTFOLIOS.get(ref.method)
    if portfolio is not None:
        return portfolio(graph, budget, seed=seed, time_limit=time_limit, options=options, target=target)
    name = ref.method
    settings = dict(seed=seed, time_limit=time_limit, options=options, target=target)
    (schedule, details), interrupted = run_stoppable(  # SIGINT/SIGTERM: FastSA returns its best so far
        lambda stop: run_heuristic(name, graph, budget, stop=stop, **settings)
    )
    return MethodRun(ref.method, schedule, details, interrupted_by=interrupted)
