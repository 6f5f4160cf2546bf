"""Formulation solves by name: build (extensions applied), warm-start, solve, decode, re-simulate; approximations.

``plan()`` reaches these through :func:`remat_models.planning.solve.run_formulation` (warm start and fallback).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule
from remat_models.errors import ConfigurationError
from remat_models.formulations import (
    BuiltModel,
    Extension,
    SolveOutcome,
    approximation_options,
    get_approximation,
    get_formulation,
)
from remat_models.formulations.outcome import jsonable

log = logging.getLogger(__name__)

DEFAULT_LIMITS = SolveLimits()


def build_for_backend(
    graph: Graph,
    budget: int,
    formulation: str,
    backend_spec: str | None = None,
    options: Any = None,
    extensions: Sequence[Extension] = (),
) -> BuiltModel:
    """Build ``formulation``'s model for ``backend_spec`` (default: the formulation's), extensions applied."""
    form = get_formulation(formulation)
    return form.build_for(graph, budget, backend_spec or form.default_backend, options, extensions)  # type: ignore[attr-defined]


def solve_model(
    graph: Graph,
    budget: int,
    formulation: str,
    backend: str | None = None,
    *,
    options: Mapping[str, Any] | Any = None,
    limits: SolveLimits = DEFAULT_LIMITS,
    init: Schedule | None = None,
    extensions: Sequence[Extension] = (),
) -> SolveOutcome:
    """Build, warm-start from ``init`` if it fits the model's structure, solve, decode; the schedule is simulated.

    ``backend`` defaults to the formulation's own (HiGHS for Checkmate, CP-SAT for Moccasin). Multi-phase
    formulations (Moccasin) run their own ``solve``; extensions apply in every phase. A formulation with a
    ``least_seconds(graph)`` estimate (its build plus the shortest solve phase) is not built when the time limit
    is below it: the outcome is "no schedule" (``details["build_skipped"]``) and ``plan`` returns the warm start.
    """
    form = get_formulation(formulation)
    backend = backend or form.default_backend
    least = getattr(form, "least_seconds", None)  # a build that cannot finish with time to solve is not started
    needed = None if least is None or limits.time_limit is None else least(graph)
    if needed is not None and limits.time_limit is not None and needed > limits.time_limit:
        skipped = f"{limits.time_limit:.1f} s left, the build and a phase need {needed:.1f} s: not built"
        log.info("%s on %s: %s", formulation, graph.name, skipped)
        return SolveOutcome(formulation, backend, SolveStatus.NO_SOLUTION, details={"build_skipped": skipped})
    started = time.perf_counter()
    opts = form.warm_options(form.options(options), init)
    built = form.build_for(graph, budget, backend, opts, extensions)  # type: ignore[attr-defined]
    build_time = time.perf_counter() - started
    if limits.time_limit is not None:  # the build counts against the time limit too (Moccasin then skips its phases)
        limits = replace(limits, time_limit=max(0.1, limits.time_limit - build_time))
    outcome = form.solve(built, backend, limits, init)
    outcome.build_time = build_time
    outcome.options = {k: jsonable(v) for k, v in vars(opts).items()}
    log.info("%s/%s on %s: %s, objective %s", formulation, backend, graph.name, outcome.status.value, outcome.objective)
    return outcome


def approximate(
    graph: Graph,
    budget: int,
    formulation: str,
    approx: str,
    backend: str | None = None,
    *,
    options: Mapping[str, Any] | None = None,
    limits: SolveLimits = DEFAULT_LIMITS,
    extensions: Sequence[Extension] = (),
) -> SolveOutcome:
    """Run the approximation ``approx`` of ``formulation`` (e.g. checkmate's ``lp-rounding``)."""
    function = get_approximation(approx, formulation)
    known = approximation_options(approx, formulation)
    unknown = sorted(set(options or {}) - set(known))
    if unknown:
        raise ConfigurationError(f"unknown {approx} option(s) {unknown}; known: {known}")
    backend = backend or get_formulation(formulation).default_backend
    return function(
        graph, budget, backend=backend, limits=limits, seed=limits.seed, extensions=extensions, **dict(options or {})
    )
