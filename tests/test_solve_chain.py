"""Issue 30: the top-level ``remat_models.plan``, and how often one solve simulates a schedule."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import remat_models
from remat_models.core import schedule as core_schedule
from remat_models.core.batch import BatchScaling
from remat_models.core.graph import Graph
from remat_models.core.schedule import Schedule, SimulationResult, input_order_peak
from remat_models.errors import BudgetError, InputTypeError
from remat_models.io.generators import linear_chain, unet
from remat_models.planner import PlanStatus
from remat_models.planner import plan as plan_bytes
from remat_models.planning.maxbatch import max_batch
from remat_models.planning.warm_start import WARM_BASELINES


@pytest.fixture(scope="module")
def chain() -> Graph:
    return linear_chain(8)


# --- remat_models.plan: budgets as text or bytes -------------------------------------------------------------


@pytest.mark.parametrize("budget", ["80%", "0.8", 0.8])
def test_plan_reads_a_budget_of_the_input_order_peak(chain: Graph, budget: str | float) -> None:
    result = remat_models.plan(chain, budget, method="chen-greedy", allow_over_budget=True)
    assert result.budget == remat_models.parse_budget("80%", chain) == int(0.8 * input_order_peak(chain))
    assert result.method == "chen-greedy"


def test_plan_takes_units_and_bytes(chain: Graph) -> None:
    peak = input_order_peak(chain)
    assert remat_models.plan(chain, peak, "checkpoint-all").budget == peak  # an int is bytes, never a fraction
    assert remat_models.plan(chain, f"{peak}B", "checkpoint-all").budget == peak
    assert remat_models.plan(chain, "1GiB", "checkpoint-all").budget == 2**30


def test_plan_defaults_to_auto_and_matches_the_planner(chain: Graph) -> None:
    top = remat_models.plan(chain, "100%", time_limit=3)
    assert top.method == "auto" and top.status is PlanStatus.WITHIN_BUDGET
    same = plan_bytes(chain, input_order_peak(chain), "chen-greedy")
    assert remat_models.plan(chain, "100%", "chen-greedy").schedule == same.schedule


@pytest.mark.parametrize("text", ["eighty percent", "80%%", "12XB", "1.5"])
def test_a_budget_it_cannot_read_is_a_budget_error_naming_it(chain: Graph, text: str) -> None:
    with pytest.raises(BudgetError, match=f"budget '{text}'"):
        remat_models.plan(chain, text, "chen-greedy")


def test_wrong_types_are_still_named(chain: Graph) -> None:
    with pytest.raises(InputTypeError, match="bool True"):
        remat_models.plan(chain, True, "chen-greedy")
    with pytest.raises(InputTypeError, match="expected a Graph, got str"):
        remat_models.plan("graph.json", "80%", "chen-greedy")  # type: ignore[arg-type]


def test_import_remat_models_does_not_import_planning() -> None:
    import subprocess

    code = "import sys, remat_models; print('remat_models.planning' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --- how often one solve simulates -------------------------------------------------------------------------------


@dataclass
class Simulations:
    """The calls of ``simulate`` in this process: the schedule (kept alive, so ids stay distinct) and the caller.

    The lower bounds' simulations of the input order (``planning/bounds.py``, for every plan's details) are kept
    apart in ``bounds``: the schedules the method makes are what the issue's bound counts.
    """

    schedules: list[object] = field(default_factory=list)
    callers: list[str] = field(default_factory=list)
    bounds: list[str] = field(default_factory=list)
    graphs: list[tuple[int, int, int]] = field(default_factory=list)  # (nodes, bytes, fixed bytes) per call

    def __len__(self) -> int:
        return len(self.schedules)

    def resimulated(self) -> list[str]:
        """The callers that simulated a schedule object already simulated."""
        seen: set[int] = set()
        again = []
        for schedule, caller in zip(self.schedules, self.callers, strict=True):
            if id(schedule) in seen:
                again.append(caller)
            seen.add(id(schedule))
        return again

    def repeated(self, schedule: object) -> list[str]:
        """The callers that simulated ``schedule`` on a graph equal to one it was simulated on before."""
        seen: set[tuple[int, int, int]] = set()
        again = []
        for simulated, graph, caller in zip(self.schedules, self.graphs, self.callers, strict=True):
            if simulated is schedule:
                if graph in seen:
                    again.append(caller)
                seen.add(graph)
        return again


@pytest.fixture
def simulations(monkeypatch: pytest.MonkeyPatch) -> Iterator[Simulations]:
    """Count ``simulate`` calls: the function replaced in ``core.schedule`` and in every module that imported it.

    Modules are found by identity (any ``remat_models`` module whose ``simulate`` is the original), so a new
    ``from remat_models.core.schedule import simulate`` is counted without editing this list. In-process only.
    """
    import remat_models.formulations.maxbatch  # every module a solve uses, loaded before patching
    import remat_models.planning.plan  # noqa: F401

    original = core_schedule.simulate
    seen = Simulations()

    def counting(graph: Graph, schedule: object, *args: object, **kwargs: object) -> SimulationResult:
        frame = traceback.extract_stack(limit=2)[0]
        caller = f"{frame.filename.rsplit('remat_models/', 1)[-1]}:{frame.lineno}"
        if caller.startswith("planning/bounds.py"):
            seen.bounds.append(caller)
        else:
            seen.schedules.append(schedule)
            seen.callers.append(caller)
            seen.graphs.append((graph.n, int(graph.mem.sum()), int(graph.fixed_mem)))
        return original(graph, schedule, *args, **kwargs)  # type: ignore[arg-type]

    for name, module in list(sys.modules.items()):
        if name.startswith("remat_models") and getattr(module, "simulate", None) is original:
            monkeypatch.setattr(module, "simulate", counting)
    yield seen


@pytest.fixture(scope="module", params=["chain8", "unet2"])
def small(request: pytest.FixtureRequest) -> Graph:
    graph = linear_chain(8) if request.param == "chain8" else unet(2)  # 35 nodes: Checkmate proves it in seconds
    input_order_peak(graph)  # the reference peak: cached per graph, so not counted below
    return graph


def test_checkmate_simulates_each_schedule_once(small: Graph, simulations: Simulations) -> None:
    """``remat solve -f checkmate``: each warm-start candidate once (the chosen one not again), the result once.

    With the default ``--init auto`` that is one per warm-start baseline plus the result, no schedule twice.
    """
    result = remat_models.plan(small, "80%", formulation="checkmate", backend="highs", time_limit=4)
    assert result.status is PlanStatus.WITHIN_BUDGET and result.method == "checkmate/highs"
    assert simulations.resimulated() == []
    assert len(simulations) <= len(WARM_BASELINES) + 1, simulations.callers
    assert sum(caller.startswith("planning/warm_start.py") for caller in simulations.callers) == len(WARM_BASELINES)


@pytest.mark.parametrize("init", ["chen-greedy", "none"])
def test_checkmate_with_one_warm_start_simulates_at_most_twice(
    small: Graph, simulations: Simulations, init: str
) -> None:
    """The issue's bound: a solve from one warm start simulates twice (warm start, result), without one once."""
    limit = 30 if init == "none" else 4  # from nothing, HiGHS needs its incumbent; a warm start is one
    result = remat_models.plan(small, "80%", formulation="checkmate", backend="highs", time_limit=limit, init=init)
    assert result.status is PlanStatus.WITHIN_BUDGET
    assert len(simulations) == (2 if init != "none" else 1), simulations.callers


def test_a_plan_does_not_simulate_the_input_order_again(chain: Graph, simulations: Simulations) -> None:
    """The reference (input order) is simulated once per graph and cached; a plan adds no simulation of it."""
    remat_models.plan(chain, "80%", formulation="checkmate", backend="highs", time_limit=30)
    assert simulations.bounds == []


def test_checkmate_from_a_given_schedule_simulates_it_at_most_once(chain: Graph, simulations: Simulations) -> None:
    """A warm start given as a Schedule is simulated only where it may be returned."""
    start = plan_bytes(chain, remat_models.parse_budget("80%", chain), "chen-greedy").schedule
    assert isinstance(start, Schedule)
    simulations.schedules.clear()
    simulations.callers.clear()
    remat_models.plan(chain, "80%", formulation="checkmate", backend="highs", time_limit=30, init=start)
    assert simulations.resimulated() == [] and len(simulations) <= 2, simulations.callers


def test_auto_simulates_once_per_report_in_this_process(chain: Graph, simulations: Simulations) -> None:
    """``auto``, counted in this process only (its members run in worker processes, not counted here).

    The portfolio simulates each schedule offered (its two fallbacks, each member report) once as it arrives,
    and ``plan()`` reuses the chosen one's simulation: nothing at the end.
    """
    result = remat_models.plan(chain, "80%", time_limit=5)
    assert result.method == "auto" and result.status is PlanStatus.WITHIN_BUDGET
    reports = len(result.details["portfolio"])
    assert len(simulations) == reports, (reports, simulations.callers)
    assert simulations.resimulated() == []
    assert all(caller.startswith("planning/portfolio.py") for caller in simulations.callers)


@pytest.mark.parametrize("method", ["min-peak", "product"])
def test_exact_max_batch_simulates_its_schedule_once_per_graph(simulations: Simulations, method: str) -> None:
    """The returned schedule: simulated per sample by the exact solve and at its batch by the result, once each."""
    graph = BatchScaling.proportional(linear_chain(6), 1).attach(linear_chain(6))
    result = max_batch(graph, 40, formulation="checkmate", backend="highs", method=method)
    assert simulations.repeated(result.schedule) == [], simulations.callers
    assert result.schedule is not None and result.batch >= 1
    assert core_schedule.simulate(graph.at_batch(result.batch), result.schedule).peak <= 40
    assert result.per_sample_peak == core_schedule.simulate(graph.at_batch(1), result.schedule).peak
