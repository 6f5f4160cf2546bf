"""Issue 30: every formulation solve path runs on the one solve chain (``formulations.base.SolveChain``).

Each path looks its backend up once and sends every model it solves through ``SolveChain.run``: the whole chain
(``remat solve -f``), Moccasin's two phases, LP rounding's LPs, H-ILP's level ILPs and exact max batch. Every
schedule a path returns is re-simulated here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import remat_models
from remat_models.backends import SolveLimits
from remat_models.core.batch import BatchScaling
from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.formulations import SolveOutcome, base
from remat_models.formulations.base import SolveChain
from remat_models.formulations.solving import approximate, build_for_backend, solve_model
from remat_models.io.generators import linear_chain, unet
from remat_models.planning.maxbatch import max_batch

LIMITS = SolveLimits(time_limit=30)
FORMULATIONS = Path(remat_models.__file__).parent / "formulations"


@dataclass
class Chains:
    """Backend look-ups made by the chain and the models it solved (by the model's column count)."""

    lookups: list[str] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)


@pytest.fixture
def chains(monkeypatch: pytest.MonkeyPatch) -> Iterator[Chains]:
    seen = Chains()
    lookup, run = base.get_backend, SolveChain.run

    def counting_lookup(spec: str):
        seen.lookups.append(spec)
        return lookup(spec)

    def counting_run(self: SolveChain, model, limits, hints=None):
        seen.runs.append(model.num_cols)
        return run(self, model, limits, hints)

    monkeypatch.setattr(base, "get_backend", counting_lookup)
    monkeypatch.setattr(SolveChain, "run", counting_run)
    yield seen


def fits(graph: Graph, budget: int, outcome: SolveOutcome) -> None:
    """The outcome's schedule, re-simulated: within the budget, and the simulation it carries."""
    assert outcome.schedule is not None and outcome.simulation is not None
    sim = simulate(graph, outcome.schedule)
    assert sim.peak <= budget
    assert (sim.peak, sim.total_cost) == (outcome.simulation.peak, outcome.simulation.total_cost)


def test_no_formulation_looks_a_backend_up_but_the_chain() -> None:
    users = sorted(
        str(path.relative_to(FORMULATIONS)) for path in FORMULATIONS.rglob("*.py") if "get_backend" in path.read_text()
    )
    assert users == ["base.py"]


@pytest.mark.parametrize(
    ("formulation", "backend"), [("checkmate", "highs"), ("checkmate", "cpsat"), ("monet", "highs")]
)
def test_one_solve_is_one_lookup_and_one_run(chains: Chains, formulation: str, backend: str) -> None:
    graph = linear_chain(8)
    budget = int(0.8 * input_order_peak(graph))
    outcome = solve_model(graph, budget, formulation, backend, limits=LIMITS)
    fits(graph, budget, outcome)
    assert chains.lookups == [backend] and len(chains.runs) == 1 and outcome.backend == backend


def test_moccasin_runs_both_phases_on_its_chain(chains: Chains) -> None:
    graph = linear_chain(8)
    budget = int(0.6 * input_order_peak(graph))
    outcome = solve_model(graph, budget, "moccasin", options={"greedy": False}, limits=LIMITS)  # phase 1 needed
    fits(graph, budget, outcome)
    assert chains.lookups == ["cpsat"] and sorted(outcome.phases) == ["phase1", "phase2"]
    assert len(chains.runs) == 2


def test_lp_rounding_runs_each_lp_on_checkmates_chain(chains: Chains) -> None:
    graph = unet(3)
    budget = int(0.7 * input_order_peak(graph))
    outcome = approximate(graph, budget, "checkmate", "lp-rounding", "highs", limits=LIMITS)
    fits(graph, budget, outcome)
    assert chains.lookups == ["highs:lp"] and len(chains.runs) == len(outcome.phases) >= 1


def test_hierarchical_hilp_runs_every_level_ilp_on_one_chain(chains: Chains) -> None:
    graph = linear_chain(12)
    budget = int(0.8 * input_order_peak(graph))
    options = {"partition": True, "max_leaf": 4, "max_top": 8, "nb_peak": 2, "nb_save": 2, "leaf": "hilp"}
    outcome = solve_model(graph, budget, "hilp", "highs", options=options, limits=LIMITS)
    fits(graph, budget, outcome)
    assert chains.lookups == ["highs"] and len(chains.runs) == outcome.details["ilps"] > 1


@pytest.mark.parametrize("method", ["min-peak", "product"])
def test_exact_max_batch_builds_and_solves_on_its_base_chain(chains: Chains, method: str) -> None:
    graph = BatchScaling.proportional(linear_chain(4), 1).attach(linear_chain(4))
    result = max_batch(graph, 24, formulation="checkmate", backend="highs", method=method)
    assert result.schedule is not None and result.batch >= 1
    assert simulate(graph.at_batch(result.batch), result.schedule).peak <= 24
    assert chains.lookups == ["highs"] and len(chains.runs) == 1


@pytest.mark.parametrize(("backend", "integral"), [("highs", False), ("cpsat", True)])
def test_the_chain_builds_integral_memory_where_the_backend_takes_no_continuous_columns(
    backend: str, integral: bool
) -> None:
    graph = linear_chain(4)
    built = build_for_backend(graph, input_order_peak(graph), "checkmate", backend)
    chain = SolveChain(remat_models.formulations.get_formulation("checkmate"), backend)
    assert chain.integral is integral and SolveChain.of(chain.form, chain) is chain
    assert bool(built.model.col_integer[built.index("U").cols].all()) is integral


@pytest.mark.parametrize(
    ("formulation", "backend"), [("checkmate", "highs"), ("moccasin", "cpsat"), ("monet", "cpsat")]
)
def test_a_solve_normalises_its_options_once(monkeypatch: pytest.MonkeyPatch, formulation: str, backend: str) -> None:
    """The chain's options reach ``warm_options`` and ``build`` as they are (no warm start: nothing derived)."""
    normalised: list[object] = []
    original = base.options_of

    def counting(options_type: type, options: object, name: str) -> object:
        value = original(options_type, options, name)
        if value is not options:
            normalised.append(options)
        return value

    monkeypatch.setattr(base, "options_of", counting)
    graph = linear_chain(8)
    budget = int(0.8 * input_order_peak(graph))
    outcome = solve_model(graph, budget, formulation, backend, options={}, limits=LIMITS)
    fits(graph, budget, outcome)
    assert len(normalised) == 1 and isinstance(normalised[0], dict), normalised  # the mapping given, once
