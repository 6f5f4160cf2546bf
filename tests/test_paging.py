"""The paging plug-in on Checkmate and Moccasin: spec C1-C4 optima, soundness against the simulator."""

from __future__ import annotations

import pytest
from checkmate_graphs import tiny_unet
from offload_cases import C_CASES, c1_graph, c1_transfer

from remat_models.core.schedule import Offload, Prefetch, input_order_schedule, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import BudgetInfeasibleError, ConfigurationError
from remat_models.extensions import Paging
from remat_models.io.generators import linear_chain, random_layered
from remat_models.planning.plan import PlanStatus, plan

SOLVERS = [("checkmate", "highs"), ("checkmate", "cpsat"), ("moccasin", "cpsat")]


def solve(graph, budget, formulation, backend, extensions=()):
    result = plan(graph, budget, formulation=formulation, backend=backend, extensions=list(extensions), time_limit=30)
    assert result.status is PlanStatus.WITHIN_BUDGET, result.status
    return result


def check_against_simulator(graph, budget, result, transfer) -> None:
    """Simulated cost == objective; simulated peak <= model peak <= budget, under the plug-in's transfer model."""
    simulation = simulate(graph, result.schedule, transfer)
    assert simulation.total_cost == pytest.approx(result.simulation.total_cost)
    assert simulation.total_cost == pytest.approx(result.details["objective"], rel=1e-6, abs=1e-6)
    assert simulation.peak <= result.details["model_peak"] + 1e-6 <= budget + 1e-6


@pytest.mark.parametrize(("formulation", "backend"), SOLVERS)
@pytest.mark.parametrize(("case", "transfer", "budget", "optimum"), C_CASES, ids=[c[0] for c in C_CASES])
def test_spec_c_cases_give_their_optima(formulation, backend, case, transfer, budget, optimum) -> None:
    graph = c1_graph()
    result = solve(graph, budget, formulation, backend, [Paging(transfer)])
    assert result.simulation.total_cost == pytest.approx(optimum)
    check_against_simulator(graph, budget, result, transfer)
    paged = any(isinstance(step, (Offload, Prefetch)) for step in result.schedule.steps)
    assert paged == (case == "C1-B9")  # paging where it is cheap, never where it is slow or finds no host room
    if case == "C1-B9":
        assert result.simulation.transfer_cost == 4 and result.simulation.peak == 9


@pytest.mark.parametrize(("formulation", "backend"), SOLVERS)
def test_paging_on_no_node_leaves_the_optimum_unchanged(formulation, backend) -> None:
    graph = c1_graph()
    base = solve(graph, 9, formulation, backend)
    none = solve(graph, 9, formulation, backend, [Paging(c1_transfer(), nodes=[])])
    big = solve(graph, 9, formulation, backend, [Paging(c1_transfer(), min_bytes=5)])
    assert base.simulation.total_cost == none.simulation.total_cost == big.simulation.total_cost == 23


def test_budget_below_the_lower_bound_stays_infeasible_with_paging() -> None:
    with pytest.raises(BudgetInfeasibleError):
        plan(c1_graph(), 8, formulation="checkmate", backend="highs", extensions=[Paging(c1_transfer())])


GRAPHS = {"tiny_unet": tiny_unet, "chain4": lambda: linear_chain(4), "layered8": lambda: random_layered(8, seed=2)}


@pytest.mark.parametrize(("formulation", "backend"), [("checkmate", "highs"), ("moccasin", "cpsat")])
@pytest.mark.parametrize("speed", [4.0, 0.25])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_small_graphs_decode_within_the_model(formulation, backend, speed, name) -> None:
    """Decoded paging schedules re-simulate to the model's numbers; paging never costs more than recomputing."""
    graph = GRAPHS[name]()
    bw = speed * float(graph.mem.mean()) / max(float(graph.cost.mean()), 1.0)
    transfer = TransferModel(out_bw=bw, in_bw=bw, in_latency=0.125)
    peak = simulate(graph, input_order_schedule(graph)).peak
    for fraction in (0.6, 0.7, 0.8, 0.9, 1.0):  # the tightest budget the base model can meet
        budget = int(max(graph.lower_bound, fraction * peak))
        base = plan(graph, budget, formulation=formulation, backend=backend, time_limit=30)
        if base.status is PlanStatus.WITHIN_BUDGET and not base.details.get("returned_warm_start"):
            break  # the model itself has a schedule here (not only the warm start, e.g. least-peak's)
    paged = solve(graph, budget, formulation, backend, [Paging(transfer)])
    check_against_simulator(graph, budget, paged, transfer)
    assert paged.simulation.total_cost <= base.simulation.total_cost + 1e-6  # paging only adds options
    if speed > 1 and name != "layered8":  # cheap transfers on graphs that recompute: paging is chosen and pays
        assert paged.simulation.prefetches > 0 and paged.simulation.total_cost < base.simulation.total_cost
    none = solve(graph, budget, formulation, backend, [Paging(transfer, nodes=[])])
    assert none.simulation.total_cost == pytest.approx(base.simulation.total_cost)


def test_paging_options_and_errors() -> None:
    paging = Paging(bw=2, latency=0.5, host="1KiB", min_bytes="2", nodes="a;b")
    assert paging.transfer == TransferModel(out_bw=2, in_bw=2, out_latency=0.5, in_latency=0.5, host_capacity=1024)
    assert paging.nodes == ("a", "b") and paging.min_bytes == 2
    assert paging.paged_nodes(c1_graph()).tolist() == [0, 1]
    assert Paging(c1_transfer()).paged_nodes(c1_graph()).tolist() == [0, 1, 2]  # the output d is never paged
    with pytest.raises(ConfigurationError, match="not both"):
        Paging(c1_transfer(), bw=2)
    with pytest.raises(ConfigurationError, match="serial transfers"):
        Paging(c1_transfer(mode="overlap"))
    with pytest.raises(ConfigurationError, match="unknown node 'zz'"):
        Paging(c1_transfer(), nodes=["zz"]).paged_nodes(c1_graph())


@pytest.mark.parametrize(("formulation", "backend"), SOLVERS)
def test_host_capacity_of_exactly_the_paged_value_still_pages(formulation, backend) -> None:
    transfer = c1_transfer(host_capacity=4)
    result = solve(c1_graph(), 9, formulation, backend, [Paging(transfer)])
    assert result.simulation.total_cost == 17 and result.simulation.host_peak == 4
    check_against_simulator(c1_graph(), 9, result, transfer)
