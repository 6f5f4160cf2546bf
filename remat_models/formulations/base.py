"""What every formulation implements (build, sequence, hints, solve), what a built model offers extensions.

And the one solve chain every path runs (``SolveChain``): build -> extensions -> lower -> backend -> decode ->
evaluate.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from remat_models.backends import Backend, SolveLimits, get_backend
from remat_models.core.graph import Graph
from remat_models.core.option_types import check_option_types
from remat_models.core.plugins import describe_error
from remat_models.core.schedule import Schedule, Step, eager_frees
from remat_models.core.transfer import TransferModel, transfer_of
from remat_models.errors import ConfigurationError, InvalidScheduleError, RematError, SolverError
from remat_models.formulations.build_deadline import BuildTimeUp, build_deadline, check_build_time, solve_time_left
from remat_models.formulations.outcome import SolveOutcome, jsonable
from remat_models.formulations.scaling import Units
from remat_models.model import Model, SolveResult, SolveStatus
from remat_models.model import constructs as C
from remat_models.model.index import IndexMap

if TYPE_CHECKING:
    from remat_models.formulations.peak import PeakPart

log = logging.getLogger(__name__)

Sequenced = list[int | Step]  # a compute sequence, possibly with non-compute steps inserted by extensions


@dataclass
class BuiltModel:
    """An abstract model with what decoding needs, the handles a formulation publishes, and applied extensions.

    ``hooks`` holds formulation-published handles (row batch names with row maps, global names);
    ``extensions`` each applied extension's state by its name; ``applied`` the extension objects.
    """

    model: Model
    graph: Graph
    budget: int
    units: Units
    formulation: str = field(default="", kw_only=True)
    hooks: dict[str, Any] = field(default_factory=dict, kw_only=True)
    extensions: dict[str, Any] = field(default_factory=dict, kw_only=True)
    applied: tuple[Extension, ...] = field(default=(), kw_only=True)

    def cost(self, model_objective: float | None) -> float | None:
        """A model objective (or bound) in the graph's original cost units."""
        return None if model_objective is None else float(model_objective) * self.units.cost_unit

    def index(self, block: str) -> IndexMap:
        """Block ``block``'s cells on named axes (node axes are graph node ids)."""
        return self.model.index(block)

    def peak_bound(self, values: Mapping[str, np.ndarray]) -> float | None:
        """The model's own memory peak in bytes for a solution (None where the formulation has none)."""
        return None

    def require(self, values: Mapping[str, np.ndarray], *blocks: str) -> None:
        """Raise ``SolverError`` naming the block when a solution's values lack one (e.g. no solution found)."""
        missing = [b for b in blocks if b not in values]
        if missing:
            raise SolverError(f"{self.formulation}: no values for block {missing[0]!r}: the solve returned no solution")


@runtime_checkable
class Extension(Protocol):
    """A constraint plug-in: adds blocks, rows and objective terms to a built model through its hooks.

    ``events(built, values, sequence)`` (optional) inserts non-compute steps into the decoded compute
    sequence; ``hints(built, schedule)`` (optional) gives values of the extension's blocks for a warm start.
    """

    name: str
    supports: frozenset[str]

    def apply(self, built: BuiltModel) -> None:
        """Add this extension's variables and constraints to ``built.model``."""
        ...


class PagingPlugin(Protocol):
    """What a family's paging part (its ``paging_part``) reads of the paging extension that calls it."""

    @property
    def name(self) -> str:
        """The extension's name (its key in ``built.extensions``)."""
        ...

    @property
    def transfer(self) -> TransferModel:
        """The transfer model (bandwidths, host capacity)."""
        ...

    @property
    def fetches(self) -> int:
        """Fetch intervals per paged node (Moccasin)."""
        ...

    def paged_nodes(self, graph: Graph) -> np.ndarray:
        """Sorted ids of the nodes whose values may be paged."""
        ...


class PagingPart(ABC):
    """A family's part of the paging extension, declared as ``paging_part`` on its formulation class."""

    @staticmethod
    @abstractmethod
    def apply(paging: PagingPlugin, built: Any) -> None:
        """Add the family's paging blocks, rows and transfer costs to ``built``."""

    @staticmethod
    @abstractmethod
    def events(paging: PagingPlugin, built: Any, values: Mapping[str, np.ndarray], sequence: list[Any]) -> list[Any]:
        """The decoded compute ``sequence`` with the chosen Offload/Prefetch steps inserted."""

    @staticmethod
    @abstractmethod
    def hints(paging: PagingPlugin, built: Any, schedule: Schedule) -> dict[str, np.ndarray]:
        """Warm-start values of the paging blocks for ``schedule`` (no paging)."""

    @staticmethod
    def peak_bound(paging: PagingPlugin, built: Any, values: Mapping[str, np.ndarray]) -> float | None:
        """The model's peak with the paging counted, where the base rows do not count it (default: None)."""
        return None


class Formulation(Protocol):
    """Graph + budget -> abstract model; solution values -> Schedule (which the simulator then checks)."""

    name: ClassVar[str]
    options_type: ClassVar[type]
    default_backend: ClassVar[str]
    integral_option: ClassVar[str | None]
    paging_part: ClassVar[type[PagingPart] | None]
    peak_model: ClassVar[type[PeakPart] | None]
    overlap_paging: ClassVar[bool]
    chooses_save_sets: ClassVar[bool]
    window_nodes: ClassVar[int | None]

    def options(self, options: Any = None) -> Any:
        """Options as ``options_type`` from an instance, a mapping or None; unknown keys are errors."""
        ...

    def build(self, graph: Graph, budget: int, options: Any = None) -> BuiltModel:
        """Build the abstract optimization model for ``graph`` under ``budget`` bytes."""
        ...

    def check_size(self, graph: Graph, budget: int, options: Any = None) -> None:
        """Raise ``ModelTooLargeError`` before any work if the model cannot be built here."""
        ...

    def least_seconds(self, graph: Graph) -> float | None:
        """The least time limit worth building for (None: any)."""
        ...

    def chooses_impls(self, graph: Graph, options: Any = None) -> bool:
        """Whether its solve of ``graph`` with ``options`` chooses the operator implementations itself."""
        ...

    def decode(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> Schedule:
        """Turn a solution's values (by block name) into a Schedule."""
        ...

    def hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Map a Schedule to values by block name for a warm start."""
        ...

    def warm_options(self, options: Any, init: Schedule | None) -> Any:
        """Options adjusted to a warm start (e.g. Checkmate's stage order follows the start's first computations)."""
        ...

    def claim(self, status: SolveStatus, built: BuiltModel | None = None) -> SolveStatus:
        """What a solver's ``status`` on this formulation's model proves about the user's problem.

        ``optimal``/``infeasible`` stay only for a model holding every schedule; a restricted model's proofs
        become ``optimal_in_model``/``no_schedule_in_model`` (``FormulationBase.claim``).
        """
        ...

    def solve(
        self, built: BuiltModel, backend: str | SolveChain, limits: SolveLimits, init: Schedule | None = None
    ) -> SolveOutcome:
        """Solve a built model (extensions applied) on ``backend`` (a spec or this formulation's chain) and decode."""
        ...


def options_of(options_type: type, options: Any, formulation: str) -> Any:
    """An ``options_type`` instance from an instance, a mapping of field names or None; unknown names are errors.

    Each given value must fit its field's annotation (see ``_fits``), else ConfigurationError names the option.
    An instance this function returned is returned as is: a solve normalises its options once (``SolveChain``) and
    the formulation's ``warm_options`` and ``build`` take them unchanged.
    """
    if isinstance(options, options_type) and getattr(options, _NORMALISED, False):
        return options
    if options is None:
        value = options_type()
    elif isinstance(options, options_type):
        check_option_types(options_type, {f.name: getattr(options, f.name) for f in fields(options_type)}, formulation)
        value = options
    elif isinstance(options, Mapping):
        known = {f.name for f in fields(options_type)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigurationError(f"unknown {formulation} option(s) {unknown}; known: {sorted(known)}")
        check_option_types(options_type, options, formulation)
        try:
            value = options_type(**dict(options))
        except (TypeError, ValueError) as error:
            raise ConfigurationError(f"bad {formulation} options {dict(options)}: {error}") from None
    else:
        raise ConfigurationError(f"{formulation} options must be a mapping or {options_type.__name__}, got {options!r}")
    validate = getattr(value, "validated", None)
    value = validate() if validate is not None else value
    object.__setattr__(value, _NORMALISED, True)  # not a field: equality, ``replace`` and ``fields`` ignore it
    return value


_NORMALISED = "_normalised_options"  # the mark ``options_of`` leaves on what it returns


class FormulationBase:
    """Defaults of the protocol: option parsing, extension plumbing, build -> solve -> decode.

    A subclass sets ``name`` and ``options_type`` and implements ``build``, ``sequence`` (the compute
    sequence of a solution) and ``_hints``; multi-phase formulations override ``solve``.
    """

    name: ClassVar[str]
    options_type: ClassVar[type]
    default_backend: ClassVar[str] = "highs"
    integral_option: ClassVar[str | None] = None  # options field set when the backend takes no continuous columns
    paging_part: ClassVar[type[PagingPart] | None] = None  # its part of the paging extension, if any
    peak_model: ClassVar[type[PeakPart] | None] = None  # its part of exact max batch (formulations/peak.py)
    overlap_paging: ClassVar[bool] = False  # the overlapped paging extension (``paging-overlap``) applies to its model
    chooses_save_sets: ClassVar[bool] = False  # its plans are save sets (PyTorch's plan space: the torch.compile route)
    window_nodes: ClassVar[int | None] = None  # above this many nodes plans re-solve windows of a start (planning/lns)
    supports_impls: ClassVar[bool] = False  # it chooses operator implementations (graphs handed over as they are)
    # Whether the model holds every schedule of the graph (then its solver's proofs are proofs about the user's
    # problem). No family's does: Checkmate fixes an order and stages, Moccasin C intervals per node, MONeT and
    # H-ILP their option spaces; see ``claim`` and docs/semantics.md, "Status".
    exact_model: ClassVar[bool] = False

    def options(self, options: Any = None) -> Any:
        """Options as ``options_type`` (see ``options_of``)."""
        return options_of(self.options_type, options, self.name)

    def build(self, graph: Graph, budget: int, options: Any = None) -> BuiltModel:
        """Build the model (subclasses)."""
        raise NotImplementedError

    def check_size(self, graph: Graph, budget: int, options: Any = None) -> None:
        """Raise ``ModelTooLargeError`` before any work if the model cannot be built here (default: no check)."""

    def least_seconds(self, graph: Graph) -> float | None:
        """The least time limit worth building for: its build plus the shortest solve phase (default: None, any)."""
        return None

    def chooses_impls(self, graph: Graph, options: Any = None) -> bool:
        """Whether its solve of ``graph`` chooses the implementations itself (default: ``supports_impls``)."""
        return self.supports_impls

    def sequence(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> Sequenced:
        """The compute sequence of a solution (subclasses)."""
        raise NotImplementedError

    def _hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def decode(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> Schedule:
        """``sequence``, then each applied extension's ``events``, then eager frees."""
        steps = self.sequence(built, values)
        for extension in built.applied:
            events = getattr(extension, "events", None)
            if events is not None:
                steps = events(built, values, steps)
        return eager_frees(built.graph, steps)

    def hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Warm-start values of the formulation's blocks and of every applied extension that gives some."""
        values = self._hints(built, schedule)
        for extension in built.applied:
            extra = getattr(extension, "hints", None)
            if extra is not None:
                values.update(extra(built, schedule))
        return values

    def warm_options(self, options: Any, init: Schedule | None) -> Any:
        """Options unchanged (a formulation whose structure follows a start overrides this)."""
        return options

    def claim(self, status: SolveStatus, built: BuiltModel | None = None) -> SolveStatus:
        """What a solver's ``status`` on this formulation's model proves about the user's problem.

        ``optimal``/``infeasible`` stay only for a model holding every schedule (``exact_model``); a restricted
        model's proofs become ``optimal_in_model``/``no_schedule_in_model``.
        """
        return status if self.exact_model else status.in_model()

    def solve(
        self, built: BuiltModel, backend: str | SolveChain, limits: SolveLimits, init: Schedule | None = None
    ) -> SolveOutcome:
        """One solve of ``built`` on ``backend`` from ``init``'s hints, decoded and re-simulated."""
        started = time.perf_counter()
        chain = SolveChain.of(self, backend)
        hints = chain.hints(built, init)
        result = chain.run(built.model, limits, hints)
        return chain.outcome(built, result, phases={"solve": result}, warm_start=hints is not None, started=started)


class SolveChain:
    """One formulation on one backend: build -> extensions -> lower -> backend -> decode -> evaluate.

    The backend is looked up once (its ``native_constructs`` decide integral memory). Every solve path composes
    it: ``solve`` is the whole chain (``remat solve -f``, windows, H-ILP leaves); multi-phase methods (Moccasin's
    two phases, LP rounding, H-ILP's levels, exact max batch) build their models with ``build`` or ``options``,
    solve each with ``run`` and turn a result into an outcome with ``outcome`` (decoded, simulated once).
    """

    def __init__(self, form: Formulation, backend: str | None = None) -> None:
        self.form = form
        self.spec = backend or form.default_backend
        self.backend: Backend = get_backend(self.spec)

    @classmethod
    def of(cls, form: Formulation, backend: str | SolveChain | None) -> SolveChain:
        """``backend`` itself when it is a chain already, else ``form``'s chain on the backend spec."""
        return backend if isinstance(backend, SolveChain) else cls(form, backend)

    @property
    def integral(self) -> bool:
        """Whether the backend takes no continuous columns (then memory is built integral)."""
        return C.CONTINUOUS not in self.backend.native_constructs

    def options(self, options: Any = None) -> Any:
        """The formulation's options, normalised once, with its integral option set for this backend if unset."""
        return integral_options(self.form, options, self.integral)

    def build(
        self, graph: Graph, budget: int, options: Any = None, extensions: Sequence[Extension] = ()
    ) -> BuiltModel:
        """Build for this backend, then apply ``extensions``."""
        return build_extended(self.form, graph, budget, options, extensions, integral=self.integral)

    def hints(self, built: BuiltModel, init: Schedule | None) -> dict[str, np.ndarray] | None:
        """The formulation's hints of ``init``, or None (logged) when the schedule does not fit the model."""
        if init is None:
            return None
        try:
            return self.form.hints(built, init)
        except (InvalidScheduleError, ConfigurationError) as error:
            log.warning("warm start dropped: the initial schedule does not fit the model (%s)", error)
            return None

    def run(self, model: Model, limits: SolveLimits, hints: dict[str, np.ndarray] | None = None) -> SolveResult:
        """Lower ``model`` for the backend (the constructs it does not take natively) and solve it."""
        return self.backend.solve(model, limits, hints)

    def solve(
        self,
        graph: Graph,
        budget: int,
        *,
        options: Any = None,
        limits: SolveLimits,
        init: Schedule | None = None,
        extensions: Sequence[Extension] = (),
    ) -> SolveOutcome:
        """The whole chain: build (extensions applied), warm-start from ``init`` if it fits, solve, decode, simulate.

        Multi-phase formulations (Moccasin) run their own ``solve`` on this chain. A formulation with a
        ``least_seconds(graph)`` estimate (its build plus the shortest solve phase) is not built when the time limit
        is below it: the outcome is "no schedule" (``details["build_skipped"]``). The build counts against the limit:
        one that passes its share of it (``build_deadline``) stops, and one that leaves the solve less than that share
        is not solved; both answer "no schedule" the same way.
        """
        name = self.form.name
        needed = None if limits.time_limit is None else self.form.least_seconds(graph)
        if needed is not None and limits.time_limit is not None and needed > limits.time_limit:
            skipped = f"{limits.time_limit:.1f} s left, the build and a phase need {needed:.1f} s: not built"
            log.info("%s on %s: %s", name, graph.name, skipped)
            return SolveOutcome(name, self.spec, SolveStatus.NO_SOLUTION, details={"build_skipped": skipped})
        started = time.perf_counter()
        opts = self.form.warm_options(self.options(options), init)
        try:
            with build_deadline(limits.time_limit, started):
                built = apply_extensions(self.form.build(graph, budget, opts), extensions)
        except BuildTimeUp as error:
            return self._unsolved(graph, str(error), time.perf_counter() - started)
        build_time = time.perf_counter() - started
        if limits.time_limit is not None:  # Moccasin then skips the phases it has no time for
            left = solve_time_left(limits.time_limit, build_time)
            if left is None:
                why = f"the build took {build_time:.1f} s of {limits.time_limit:.1f} s: no time left to solve"
                return self._unsolved(graph, why, build_time)
            limits = replace(limits, time_limit=left)
        outcome = self.form.solve(built, self, limits, init)
        outcome.build_time = build_time
        outcome.options = {f.name: jsonable(getattr(opts, f.name)) for f in fields(opts)}
        log.info("%s/%s on %s: %s, objective %s", name, self.spec, graph.name, outcome.status.value, outcome.objective)
        return outcome

    def _unsolved(self, graph: Graph, why: str, build_time: float) -> SolveOutcome:
        """No schedule: the build used up the time limit (``plan`` then returns its warm start)."""
        log.info("%s/%s on %s: %s", self.form.name, self.spec, graph.name, why)
        details = {"build_skipped": why}
        return SolveOutcome(self.form.name, self.spec, SolveStatus.NO_SOLUTION, build_time=build_time, details=details)

    def outcome(
        self,
        built: BuiltModel,
        result: SolveResult,
        *,
        phases: dict[str, SolveResult],
        warm_start: bool,
        started: float,
        values: Mapping[str, np.ndarray] | None = None,
        status: SolveStatus | None = None,
        time_offset: float = 0.0,
    ) -> SolveOutcome:
        """The outcome of ``result`` decoded from ``values`` (default: its own), numbers in graph cost units.

        The decoded schedule is simulated once, here (``SolveOutcome.of``).
        """
        if values is None and result.has_solution:
            values = result.values
        message = result.message or next((p.message for p in phases.values() if p.message), None)
        return SolveOutcome.of(
            formulation=self.form.name,
            backend=self.spec,
            status=self.form.claim(status or result.status, built),
            message=message,
            schedule=None if values is None else self.form.decode(built, values),
            graph=built.graph,
            transfer=transfer_of(built.applied),
            objective=None if values is None else built.cost(built.model.objective_value(values)),
            bound=built.cost(result.bound),
            model_peak=None if values is None else built.peak_bound(values),
            solve_time=sum(p.wall_time for p in phases.values()),
            wall_time=time.perf_counter() - started,
            time_to_first=None if result.time_to_first is None else time_offset + result.time_to_first,
            trajectory=[(time_offset + t, built.cost(v) or 0.0) for t, v in result.trajectory],
            solver_version=result.solver_version,
            phases=phases,
            warm_start=warm_start,
        )


def integral_options(form: Formulation, options: Any, integral: bool) -> Any:
    """``form``'s options with its integral option (if it has one and it is unset) set to ``integral``.

    Where a build's options are normalised: ``SolveChain`` passes its backend's need, ``remat export`` (through
    ``build_extended``) the file format's (``.mzn`` integral).
    """
    key = form.integral_option
    if key is not None and (options is None or isinstance(options, Mapping)) and (options or {}).get(key) is None:
        return form.options({**(options or {}), key: integral})  # set before the one normalisation
    opts = form.options(options)
    if key is not None and getattr(opts, key) is None:
        opts = form.options(replace(opts, **{key: integral}))
    return opts


def build_extended(
    form: Formulation,
    graph: Graph,
    budget: int,
    options: Any = None,
    extensions: Sequence[Extension] = (),
    *,
    integral: bool,
) -> BuiltModel:
    """The chain's build and extensions steps without a backend: ``SolveChain.build``, and ``remat export``."""
    return apply_extensions(form.build(graph, budget, integral_options(form, options, integral)), extensions)


def apply_extensions(built: BuiltModel, extensions: Sequence[Extension]) -> BuiltModel:
    """Apply each extension to ``built`` (checking it supports the formulation); returns ``built``.

    An ``apply`` that raises anything but a RematError is a ConfigurationError naming the extension.
    """
    for extension in extensions:
        check_build_time(built.formulation)
        if not isinstance(extension, Extension):
            raise ConfigurationError(f"{extension!r} is not an extension (needs name, supports and apply)")
        if built.formulation not in extension.supports:
            raise ConfigurationError(
                f"extension {extension.name!r} does not support {built.formulation!r}; "
                f"it supports {', '.join(sorted(extension.supports))}"
            )
        try:
            extension.apply(built)
        except RematError:
            raise
        except Exception as error:
            raise ConfigurationError(
                f"extension {extension.name!r} failed to apply to {built.formulation!r}: {describe_error(error)}"
            ) from error
        built.applied = (*built.applied, extension)
    return built


__all__ = [
    "BuiltModel",
    "Extension",
    "Formulation",
    "FormulationBase",
    "PagingPlugin",
    "Sequenced",
    "SolveChain",
    "apply_extensions",
    "build_extended",
    "integral_options",
    "jsonable",
    "options_of",
]
