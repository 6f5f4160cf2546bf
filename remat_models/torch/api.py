"""One-call API: trace a model's training step, plan it under a budget, run it with exact gradients."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.core.limits import check_count, check_time_limit
from remat_models.core.schedule import Schedule, SimulationResult, input_order_peak, simulate
from remat_models.errors import (
    BudgetError,
    BudgetInfeasibleError,
    ConfigurationError,
    GraphError,
    InvalidScheduleError,
    RematError,
    SolverError,
)
from remat_models.heuristics.least_peak import least_peak_search
from remat_models.io.schedule_json import schedule_from_dict, schedule_to_dict
from remat_models.planning.methods import resolve_method
from remat_models.planning.plan import PlanResult, PlanStatus
from remat_models.planning.plan import plan as plan_graph
from remat_models.planning.result import over_budget_error
from remat_models.torch.compiled_step import GeneratedStep, supports
from remat_models.torch.copies_first import copies_first
from remat_models.torch.costs import CostModel, check_cost_model, flop_cost
from remat_models.torch.executor import Executor, StepResult
from remat_models.torch.mapping import TorchGraph, to_graph
from remat_models.torch.plan_cache import DEFAULT, CacheDir, PlanCache
from remat_models.torch.trace import LossFn, TensorSpec, TracedStep, as_tensors, trace_step

log = logging.getLogger(__name__)

FLOOR_METHODS = ("chen-greedy", "knapsack")  # fast methods whose lowest peak is activation budget 0
LEAST_SLICE = 0.01  # seconds left to the method when the floor's search took the whole time limit
FLOOR_SECONDS = 1.0  # the least-peak search's time for activation budget 0, at most (it counts against the limit)
FLOOR_SHARE = 0.2  # of a planning time limit, for that search
FALLBACK_MIN_SECONDS = 0.05  # left to the limit, else a method's miss gives way to the floor's schedule, no search
PLAN_SECONDS = 5.0  # the torch APIs' default planning time: a training start, not a benchmark (time_limit= for more)
Tensors = torch.Tensor | Sequence[torch.Tensor]


def model_state(model: nn.Module, traced: TracedStep) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The model's parameters and buffers by name; GraphError if they or ``model.training`` differ from the trace."""
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    if tuple(params) != traced.param_names or tuple(buffers) != traced.buffer_names:
        raise GraphError("the model's parameters or buffers differ from the traced ones; trace it again")
    if model.training != traced.training:
        raise GraphError(f"the step was traced with training={traced.training}; trace it again after .train/.eval")
    return params, buffers


def fixed_tensors(
    model: nn.Module,
    traced: TracedStep,
    inputs: Tensors,
    targets: Tensors | None,
    state: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]] | None = None,
) -> list[torch.Tensor]:
    """Params, buffers, inputs and targets in placeholder order; GraphError if they differ from the trace."""
    params, buffers = model_state(model, traced) if state is None else state
    given = as_tensors(inputs, "inputs")
    wanted = as_tensors(targets, "targets")
    for what, tensors, specs in (("inputs", given, traced.input_specs), ("targets", wanted, traced.target_specs)):
        found = tuple(TensorSpec.of(t) for t in tensors)
        if found != specs:
            raise GraphError(f"{what} {found} differ from the traced {specs}; the graph is specialised to them")
    return [*(p.detach() for p in params.values()), *buffers.values(), *given, *wanted]


def extract(
    model: nn.Module,
    example_inputs: Tensors,
    loss_fn: LossFn,
    example_targets: Tensors | None = None,
    *,
    cost: CostModel = "flops",
    repeats: int = 3,
    name: str = "",
) -> TorchGraph:
    """Trace a training step with fake tensors and map it to a Graph (costs: FLOPs, or op times measured here)."""
    check_cost_model(cost)
    check_count(repeats, "repeats")
    traced = trace_step(model, example_inputs, loss_fn, example_targets, name=name)
    torch_graph = to_graph(traced, flop_cost)
    if cost == "time":
        fixed = fixed_tensors(model, traced, example_inputs, example_targets)
        times = Executor(torch_graph).measure_times(fixed, repeats)
        graph = torch_graph.graph.replaced(cost=[times[node] for node in torch_graph.fx_nodes])
        torch_graph = dataclasses.replace(torch_graph, graph=graph)
    return torch_graph


def apply_grads(model: nn.Module | Iterable[torch.Tensor], grads: Sequence[torch.Tensor | None]) -> None:
    """Accumulate gradients into ``.grad`` (the model's parameters, or those given) as ``loss.backward()`` does."""
    params = model.parameters() if isinstance(model, nn.Module) else model
    for param, grad in zip(params, grads, strict=True):
        if grad is None:
            continue
        if param.grad is None:
            param.grad = grad if grad.stride() == param.stride() else grad.clone(memory_format=torch.preserve_format)
        else:
            param.grad += grad


def apply_buffers(model: nn.Module | Mapping[str, torch.Tensor], updates: dict[str, torch.Tensor]) -> None:
    """Copy new buffer values (e.g. BatchNorm running stats) into the model's buffers (or those given by name)."""
    buffers = dict(model.named_buffers()) if isinstance(model, nn.Module) else model
    for buffer_name, value in updates.items():
        buffers[buffer_name].copy_(value)


class RematStep:
    """A planned training step: ``loss = step(inputs, targets)`` fills ``.grad`` like ``loss.backward()``.

    The schedule runs as generated straight-line code (:class:`GeneratedStep`) unless ``compiled=False``,
    ``track=True`` (the interpreter, which records live bytes at every step) or the schedule has steps
    the generated code does not take (Offload/Prefetch, alternative implementations). It runs with its kept
    copies right after their ops and every value freed at its last use (:func:`copies_first`) where that
    peaks no higher: ``self.schedule``, simulated as ``self.simulation``.
    """

    def __init__(
        self, model: nn.Module, torch_graph: TorchGraph, schedule: Schedule | PlanResult, *, compiled: bool = True
    ) -> None:
        self.model = model
        self.torch_graph = torch_graph
        self.executor = Executor(torch_graph)
        self.plan_result = schedule if isinstance(schedule, PlanResult) else None
        if self.plan_result is not None and self.plan_result.graph_hash != torch_graph.graph.content_hash:
            raise InvalidScheduleError(
                f"the plan is for graph {self.plan_result.graph_name!r} ({self.plan_result.graph_hash[:12]}), "
                f"not for {torch_graph.graph.name!r} ({torch_graph.graph.content_hash[:12]})"
            )
        given = schedule.schedule if isinstance(schedule, PlanResult) else schedule
        self.executor.check(given)
        self.schedule = copies_first(torch_graph, given)
        self.simulation = self.executor.check(self.schedule)
        self.generated = GeneratedStep(torch_graph, self.schedule) if compiled and supports(self.schedule) else None
        self.last: StepResult | None = None

    @property
    def predicted_peak(self) -> int:
        """Simulated peak bytes above the model's fixed memory."""
        return self.simulation.peak - self.torch_graph.fixed_mem

    def __call__(self, inputs: Tensors, targets: Tensors | None = None, *, track: bool = False) -> torch.Tensor:
        """Run the schedule on ``inputs``/``targets``; accumulate ``.grad``, update buffers, return the loss.

        ``track=True`` runs the interpreter and records live bytes at every step (``self.last.timeline``).
        """
        params, buffers = state = model_state(self.model, self.torch_graph.traced)
        fixed = fixed_tensors(self.model, self.torch_graph.traced, inputs, targets, state)
        if self.generated is None or track:
            result = self.executor.run(self.schedule, fixed, track=track)
        else:
            loss, grads, updates = self.generated(fixed)
            untracked = np.full(len(self.schedule), -1, dtype=np.int64)
            result = StepResult(loss=loss, grads=grads, buffer_updates=updates, timeline=untracked)
        apply_grads(params.values(), result.grads)
        apply_buffers(buffers, result.buffer_updates)
        self.last = result
        return result.loss


@dataclasses.dataclass(frozen=True)
class Floor:
    """Activation budget 0 of a graph: the least peak found (bytes, the fixed memory included) and its schedule."""

    peak: int
    schedule: Schedule
    method: str
    fast: int  # the fast plans' least peak (the floor before the least-peak search)


FLOORS_KEPT = 32  # graphs whose floor this process remembers (by content hash)
_floors: dict[str, Floor] = {}


def activation_floor(graph: Graph, seconds: float = FLOOR_SECONDS) -> Floor:
    """The least peak of the fast plans (Chen's greedy sweep, the knapsack) and of the least-peak search.

    The fast plans are asked for the graph's least budget: its step lower bound, or the peak lower bound
    ``plan`` names when it refuses that (values that cannot be recomputed, e.g. dropout masks, stay resident),
    again until no call refuses it (the bound's search is timed: a later call may prove more). The least-peak
    search descends from them for ``seconds`` (on the zoo ResNet's joint graph: 6.9 MB by the fast plans,
    3.4 MB by the search in 0.5 s). Remembered per graph in this process, so every activation budget of one
    graph spans the same range.
    """
    floor = _floors.get(graph.content_hash)
    if floor is not None:
        return floor
    budget = graph.lower_bound
    while True:
        try:
            results = [plan_graph(graph, budget, name, allow_over_budget=True) for name in FLOOR_METHODS]
            break
        except BudgetInfeasibleError as error:
            budget = max(budget + 1, error.lower_bound)
    best = min(results, key=lambda result: result.simulation.peak)  # type: ignore[union-attr]
    fast = best.simulation.peak  # type: ignore[union-attr]
    floor = Floor(fast, best.schedule, best.method, fast)  # type: ignore[arg-type]
    found = least_peak_search(graph, time_limit=seconds)
    if found.peak < fast:
        floor = Floor(found.peak, found.schedule, "least-peak", fast)
    log.info("activation floor of %s: %d B by %s (the fast plans: %d B)", graph.name, floor.peak, floor.method, fast)
    while len(_floors) >= FLOORS_KEPT:
        del _floors[next(iter(_floors))]
    _floors[graph.content_hash] = floor
    return floor


def least_peak(graph: Graph) -> int:
    """The least peak a plan reaches quickly: activation budget 0's bytes (:func:`activation_floor`)."""
    return activation_floor(graph).peak


def activation_top(graph: Graph, eager: int | None = None) -> int:
    """The bytes of activation budget 1: the input-order peak, or ``eager`` above the fixed memory if lower."""
    peak = input_order_peak(graph)
    return peak if eager is None else min(peak, eager + graph.fixed_mem)


def activation_bytes(
    graph: Graph, fraction: float, eager: int | None = None, floor_seconds: float = FLOOR_SECONDS
) -> int:
    """Budget bytes for an activation budget: floor + fraction x (top - floor), monotone in ``fraction``.

    0 is the least peak a plan reaches quickly (:func:`activation_floor`, its search taking ``floor_seconds``
    at most; where a method finds nothing within it, :func:`cached_plan` runs the floor's own schedule), 1 the
    input-order peak (no recomputation needed) or, where lower, ``eager``: eager autograd's peak above the
    fixed memory (:func:`~remat_models.torch.save_budget.eager_peak`; on a traced step's own Graph the
    input-order peak is eager's); the resolved bytes are logged.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise BudgetError(f"activation_budget must be a number in [0, 1], got {fraction!r}")
    floor = min(activation_floor(graph, floor_seconds).peak, input_order_peak(graph))
    peak = max(floor, activation_top(graph, eager))  # eager's peak may lie below the least a plan reaches
    limit = floor + math.floor(fraction * (peak - floor))
    log.info("activation budget %.3g of %s: %d B (floor %d B, peak %d B)", fraction, graph.name, limit, floor, peak)
    return limit


def plan(
    model: nn.Module,
    example_inputs: Tensors,
    loss_fn: LossFn,
    example_targets: Tensors | None = None,
    *,
    budget: str | int | float = "100%",
    method: str | None = None,
    cost: CostModel = "flops",
    allow_over_budget: bool = False,
    implementations: bool = False,
    activation_budget: float | None = None,
    compiled: bool = True,
    time_limit: float | None = None,
    cache_dir: CacheDir = DEFAULT,
    **options: Any,
) -> RematStep:
    """Trace, plan under ``budget`` (bytes, units, or % of the input-order peak) with ``method``, return the step.

    ``step = plan(model, inputs, loss_fn, targets, budget="60%")`` then ``loss = step(inputs, targets)``;
    ``loss_fn(outputs, targets)`` is traced with the example targets (omit them for a loss of the outputs
    alone). A plan that does not fit raises BudgetExceededError unless ``allow_over_budget``. Extra
    keyword ``options`` go to :func:`remat_models.planning.plan.plan` (e.g. ``formulation="checkmate",
    backend="highs"`` instead of a ``method``; the default method is ``auto``, the portfolio).
    ``implementations=True`` attaches alternative op implementations (``torch/impl_ops.py``), which
    ``formulation="monet"`` (or ``"checkmate-impls"``) chooses among. ``activation_budget`` (in [0, 1],
    instead of ``budget``) is PyTorch's ``activation_memory_budget``: the share of the memory above the
    least peak a plan reaches up to the input-order peak (see :func:`activation_bytes`). The step runs
    as generated code (``compiled=False``: the interpreter, see :class:`RematStep`). Its ``plan_result``
    carries the lower bounds that hold for every schedule (``lower_bound``, ``lower_bound_gap``,
    ``peak_lower_bound``); a budget below the peak lower bound raises BudgetInfeasibleError naming it.
    Planning takes at most ``time_limit`` seconds (for methods that take one: default ``PLAN_SECONDS``, the
    activation budget's floor included). A plan that fits is stored in ``cache_dir``
    (:mod:`remat_models.torch.plan_cache`; default the user's cache folder, None: no cache) and reused,
    once validated, by the next call with the same graph, budget, method, options and versions
    (``plan_result.details["plan_cache"]`` names the file; a cached plan carries no bounds or outcome).
    """
    try:
        torch_graph = extract(model, example_inputs, loss_fn, example_targets, cost=cost)
    except GraphError as error:
        if example_targets is None and isinstance(error.__cause__, TypeError):  # a loss that takes targets?
            hint = "a loss that takes targets needs them: plan(model, inputs, loss_fn, targets)"
            raise GraphError(f"{error} ({hint})") from error
        raise
    if implementations:
        from remat_models.torch.impl_ops import attach_impls

        torch_graph = attach_impls(torch_graph)
    graph = torch_graph.graph
    accepted = inspect.signature(plan_graph).parameters
    unknown = [key for key in options if key not in accepted]
    if unknown:
        raise ConfigurationError(f"planner.plan takes no option(s) {', '.join(unknown)}")
    given = parse_budget(budget, graph) if activation_budget is None else None
    result = cached_plan(
        graph,
        given,
        activation_budget,
        method,
        time_limit=time_limit,
        cache=PlanCache(cache_dir),
        allow_over_budget=allow_over_budget,
        **options,
    )
    limit = result.budget
    if result.schedule is None:
        raise SolverError(f"{result.method} returned no schedule ({result.status.value}) for budget {limit:,} B")
    if result.status is PlanStatus.SOLVER_ERROR:
        why = result.details.get("solver_message")
        log.warning("%s: the solver failed (%s); running the warm start it kept", result.method, why)
    if result.simulation is not None and not result.simulation.fits(limit):
        peak = result.simulation.peak
        log.warning("%s found no schedule within %d B (peak %d B); running its best", result.method, limit, peak)
    return RematStep(model, torch_graph, result, compiled=compiled)


def cached_plan(
    graph: Graph,
    budget: int | None,
    activation_budget: float | None,
    method: str | None,
    *,
    time_limit: float | None,
    cache: PlanCache,
    allow_over_budget: bool = False,
    eager: int | None = None,
    **options: Any,
) -> PlanResult:
    """``plan()`` of ``graph`` within ``budget`` bytes (or ``activation_budget``, 1 capped by ``eager``), via ``cache``.

    A method that takes a time limit gets ``PLAN_SECONDS`` when ``time_limit`` is None (the activation
    budget's floor counts against it) and, only if that plan does not fit, a second run with the method's own
    default time. Within an activation budget, a plan that does not fit gives way to the least-peak search's
    cheapest fit, else to the floor's schedule (:func:`activation_floor`), which fits every activation budget;
    each of those searches takes ``FLOOR_SHARE`` of the time limit (at most ``FLOOR_SECONDS``), the second
    only what the method left of it.
    A plan that fits is stored; a stored one is reused once validated.
    """
    time_limit = check_time_limit(time_limit)
    ref = resolve_method(method, options.get("formulation"), options.get("backend"), options.get("approx"))
    short = time_limit is None and ref.takes_time_limit
    key = cache.key(
        kind="schedule",
        graph=graph.content_hash,
        budget=budget,
        activation_budget=activation_budget,
        eager=eager,
        method=method,
        time_limit=time_limit,
        options=options,
    )
    result = _cached(cache, key, graph, budget, activation_top(graph, eager))
    if result is not None:
        return result
    started = time.monotonic()
    seconds = PLAN_SECONDS if short else time_limit
    search = FLOOR_SECONDS if seconds is None else min(FLOOR_SECONDS, FLOOR_SHARE * seconds)
    deadline = None if seconds is None else started + seconds
    limit = budget if budget is not None else activation_bytes(graph, activation_budget, eager, search)  # type: ignore[arg-type]
    if budget is None and deadline is not None:
        seconds = max(deadline - time.monotonic(), LEAST_SLICE)
    first_over = short or allow_over_budget or budget is None
    result = plan_graph(graph, limit, method, allow_over_budget=first_over, time_limit=seconds, **options)
    if budget is None and not _fits(result, limit) and activation_floor(graph).peak <= limit:
        left = search if deadline is None else min(search, deadline - time.monotonic())
        result = _floor_result(graph, limit, options.get("transfer"), left)
    if short and not _fits(result, limit):
        why = "%s: nothing within %d B in %.0f s; planning again with the method's own time"
        log.info(why, ref.label, limit, PLAN_SECONDS)
        result = plan_graph(graph, limit, method, allow_over_budget=allow_over_budget, **options)
    elif result.simulation is not None and not _fits(result, limit) and not allow_over_budget:
        raise over_budget_error(result)
    if result.schedule is not None and _fits(result, limit):
        stored = schedule_to_dict(result.schedule, graph)
        cache.store(key, {"schedule": stored, "budget": limit, "method": result.method})
    return result


def _cached(cache: PlanCache, key: dict[str, Any], graph: Graph, budget: int | None, top: int) -> PlanResult | None:
    """The plan stored under ``key`` if it is a schedule of ``graph`` within its budget, else None (warned).

    ``budget``: bytes; None (an activation budget) takes the stored bytes, which must not exceed ``top``
    (activation budget 1's bytes).
    """
    payload = cache.load(key)
    if payload is None:
        return None
    try:
        schedule = schedule_from_dict(payload["schedule"], graph)
        limit = budget if budget is not None else int(payload["budget"])
        simulation = simulate(graph, schedule)
        method = str(payload["method"])
    except (RematError, KeyError, TypeError, ValueError) as error:
        cache.reject(key, str(error))
        return None
    if not simulation.fits(limit) or (budget is None and limit > top):
        cache.reject(key, f"its peak {simulation.peak:,} B is over the budget {limit:,} B")
        return None
    log.info("plan cache: reusing the %s plan of %s within %d B", method, graph.name, limit)
    return _schedule_result(graph, limit, method, schedule, simulation, {"plan_cache": str(cache.path(key))})


def _fits(result: PlanResult, limit: int) -> bool:
    """Whether ``result`` has a schedule simulated within ``limit`` bytes."""
    return result.simulation is not None and result.simulation.fits(limit)


def _floor_result(graph: Graph, limit: int, transfer: Any, seconds: float) -> PlanResult:
    """The least-peak search's cheapest schedule within ``limit`` (at or above the floor), else the floor's own.

    The search takes ``seconds``; with less than ``FALLBACK_MIN_SECONDS`` the floor's schedule runs at once.
    """
    floor = activation_floor(graph)
    schedule, method = floor.schedule, floor.method
    if seconds >= FALLBACK_MIN_SECONDS:
        found = least_peak_search(graph, limit, time_limit=seconds)
        if found.peak <= limit:
            schedule, method = found.schedule, "least-peak"
    log.info("nothing planned within %d B: running the %s schedule (the activation floor's search)", limit, method)
    simulation = simulate(graph, schedule, transfer)
    return _schedule_result(graph, limit, method, schedule, simulation, {"activation_floor": True})


def _schedule_result(
    graph: Graph,
    limit: int,
    method: str,
    schedule: Schedule,
    simulation: SimulationResult,
    details: dict[str, Any],
) -> PlanResult:
    """A schedule already simulated within ``limit`` as a PlanResult (no bounds, no solver outcome)."""
    return PlanResult(
        graph_name=graph.name,
        graph_hash=graph.content_hash,
        method=method,
        budget=limit,
        reference_peak=input_order_peak(graph),
        status=PlanStatus.WITHIN_BUDGET,
        schedule=schedule,
        simulation=simulation,
        wall_time=0.0,
        details=details,
    )
