"""Formulation solves by name on the one solve chain (``formulations.base.SolveChain``); approximations.

``plan()`` reaches these through :func:`remat_models.planning.solve.run_formulation` (warm start and fallback).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from remat_models.backends import SolveLimits
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
from remat_models.formulations.base import SolveChain

DEFAULT_LIMITS = SolveLimits()
MIN_SECONDS = 1e-3  # the least time limit a solve is handed (its build then stops at once: "no schedule")


def build_for_backend(
    graph: Graph,
    budget: int,
    formulation: str,
    backend_spec: str | None = None,
    options: Any = None,
    extensions: Sequence[Extension] = (),
) -> BuiltModel:
    """Build ``formulation``'s model for ``backend_spec`` (default: the formulation's), extensions applied."""
    return SolveChain(get_formulation(formulation), backend_spec).build(graph, budget, options, extensions)


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
    """``formulation``'s solve chain on ``backend`` (default: the formulation's; see ``SolveChain.solve``).

    Build, warm-start from ``init`` if it fits the model's structure, solve, decode; the schedule is simulated.
    A time limit below the formulation's ``least_seconds`` builds nothing and ``plan`` returns the warm start.
    Finding the backend counts against the limit (MiniZinc's probe of its solver: 0.4 s, 1 s under load).
    """
    started = time.perf_counter()
    chain = SolveChain(get_formulation(formulation), backend)
    if limits.time_limit is not None:
        limits = replace(limits, time_limit=max(MIN_SECONDS, limits.time_limit - (time.perf_counter() - started)))
    return chain.solve(graph, budget, options=options, limits=limits, init=init, extensions=extensions)


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
