"""FastSA with fetch units (App. B.3 flip fetch): cross-checked against Checkmate with the paging plug-in."""

from __future__ import annotations

import pytest
from offload_cases import C_CASES, c1_graph
from test_offload_three_way import frozen_chain

from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError
from remat_models.extensions import Paging
from remat_models.heuristics.fastsa import fastsa
from remat_models.io import linear_chain
from remat_models.planning.plan import PlanStatus, plan

ITERATIONS = (200_000, 200_000)


def at_speed(graph: Graph, speed: float) -> TransferModel:
    """Bandwidths at which copying every value once costs ``speed`` x the graph's compute."""
    bw = float(graph.mem.sum()) / (speed * float(graph.cost.sum()))
    return TransferModel(out_bw=bw, in_bw=bw)


def exact(graph: Graph, budget: int, transfer: TransferModel) -> float:
    """Checkmate's proven optimum with paging (fixed input order)."""
    result = plan(graph, budget, formulation="checkmate", backend="highs", extensions=[Paging(transfer)], time_limit=60)
    assert result.solver_status is not None and result.solver_status.value == "optimal_in_model"
    return result.simulation.total_cost


@pytest.mark.parametrize(("case", "transfer", "budget", "optimum"), C_CASES[:3], ids=[c[0] for c in C_CASES[:3]])
def test_spec_c_cases(case, transfer, budget, optimum) -> None:
    result = fastsa(c1_graph(), budget, transfer=transfer, iterations=ITERATIONS)
    simulated = simulate(c1_graph(), result.schedule, transfer)
    assert simulated.peak <= budget and simulated.total_cost == pytest.approx(optimum)
    assert (simulated.offloads > 0) == (case == "C1-B9")


@pytest.mark.parametrize(("n", "fraction"), [(4, 0.5), (6, 0.8)])
@pytest.mark.parametrize("speed", [0.05, 0.5])
def test_same_or_better_than_the_exact_formulation_with_paging(n, fraction, speed) -> None:
    graph = linear_chain(n)
    budget = max(int(fraction * input_order_peak(graph)), graph.lower_bound)
    transfer = at_speed(graph, speed)
    result = fastsa(graph, budget, transfer=transfer, iterations=ITERATIONS, grouping=False)
    simulated = simulate(graph, result.schedule, transfer)  # raises on an invalid schedule
    assert simulated.peak <= budget
    assert simulated.total_cost <= exact(graph, budget, transfer) + 1e-9


def test_fetches_fit_where_recomputation_cannot() -> None:
    graph = frozen_chain()
    transfer = TransferModel(out_bw=4.0, in_bw=4.0, mode="overlap")
    assert not fastsa(graph, graph.lower_bound, iterations=ITERATIONS).met_budget
    result = plan(graph, graph.lower_bound, "fastsa", transfer=transfer, options={"iterations": ITERATIONS})
    assert result.status is PlanStatus.WITHIN_BUDGET and result.simulation.offloads > 0
    assert simulate(graph, result.schedule, transfer).peak <= graph.lower_bound


def test_bad_fetch_options_are_typed_errors() -> None:
    with pytest.raises(ConfigurationError, match="host capacity"):
        fastsa(c1_graph(), 9, transfer=TransferModel(out_bw=2, in_bw=2, host_capacity=8), iterations=ITERATIONS)
    with pytest.raises(ConfigurationError, match="p_fetch"):
        fastsa(c1_graph(), 9, transfer=TransferModel(out_bw=2, in_bw=2), p_fetch=1.5)
    with pytest.raises(ConfigurationError, match="TransferModel"):
        fastsa(c1_graph(), 9, transfer="bw=2", iterations=ITERATIONS)
