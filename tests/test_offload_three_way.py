"""Keep, recompute or offload: the three-way planner, plan(transfer=), auto with a transfer model, --transfer."""

from __future__ import annotations

import pytest
from offload_cases import C_CASES, c1_graph, c1_transfer
from typer.testing import CliRunner

from remat_models.cli import app as cli_app
from remat_models.cli.options import transfer_model
from remat_models.core.graph import Graph
from remat_models.core.schedule import Offload, Prefetch, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import BudgetInfeasibleError, ConfigurationError
from remat_models.heuristics.three_way import three_way
from remat_models.io import linear_chain, read_schedule, write_graph
from remat_models.planning.plan import PlanStatus, plan


def check(graph: Graph, budget: int, schedule, transfer: TransferModel):
    """The simulator's verdict under the transfer model: valid (it raises otherwise) and within the budget."""
    result = simulate(graph, schedule, transfer)
    assert result.peak <= budget
    return result


def frozen_chain(n: int = 8) -> Graph:
    """A training chain whose forward values cannot be recomputed: only keeping or offloading them is left."""
    g = linear_chain(n)
    return Graph.from_arrays(
        g.names, g.cost, g.mem, g.edges, kind=g.kind, recomputable=[False] * g.n, outputs=g.outputs, order=g.order
    )


@pytest.mark.parametrize(("case", "transfer", "budget", "optimum"), C_CASES, ids=[c[0] for c in C_CASES])
def test_spec_c_cases_give_the_exact_optima(case, transfer, budget, optimum) -> None:
    graph = c1_graph()
    result = plan(graph, budget, "three-way", transfer=transfer, time_limit=10, options={"fastsa_share": 0.1})
    assert result.simulation.total_cost == pytest.approx(optimum)  # the paging formulations' optima (test_paging)
    check(graph, budget, result.schedule, transfer)
    paged = any(isinstance(step, (Offload, Prefetch)) for step in result.schedule)
    assert paged == (case == "C1-B9")


def test_a_formulation_given_transfer_pages_like_the_plugin() -> None:
    result = plan(c1_graph(), 9, formulation="checkmate", backend="highs", transfer=c1_transfer(), time_limit=30)
    assert result.simulation.total_cost == pytest.approx(17.0)  # 23 without paging
    check(c1_graph(), 9, result.schedule, c1_transfer())


def test_offload_fits_where_recompute_cannot() -> None:
    graph = frozen_chain()
    transfer = TransferModel(out_bw=4.0, in_bw=4.0, mode="overlap")
    with pytest.raises(BudgetInfeasibleError, match="peak lower bound"):  # without transfers: proven at once
        plan(graph, graph.lower_bound, "fastsa", time_limit=2, allow_over_budget=True)
    result = plan(graph, graph.lower_bound, "three-way", transfer=transfer, time_limit=2)
    assert result.status is PlanStatus.WITHIN_BUDGET
    simulated = check(graph, graph.lower_bound, result.schedule, transfer)
    assert simulated.offloads > 0 and result.details["offloads"] == simulated.offloads


def test_overlap_hides_transfers_behind_compute() -> None:
    graph = frozen_chain(12)
    budget = graph.lower_bound
    overlap = TransferModel(out_bw=4.0, in_bw=4.0, mode="overlap")
    found = three_way(graph, budget, overlap)
    result = check(graph, budget, found.schedule, overlap)
    serial = simulate(graph, found.schedule, TransferModel(out_bw=4.0, in_bw=4.0))
    compute = float(graph.cost.sum())
    assert result.transfer_cost > 0
    assert result.total_cost < serial.total_cost == pytest.approx(compute + result.transfer_cost)


def test_host_capacity_is_respected() -> None:
    graph = frozen_chain()
    transfer = TransferModel(out_bw=4.0, in_bw=4.0, host_capacity=int(graph.mem.max()))
    found = three_way(graph, graph.lower_bound, transfer)
    assert simulate(graph, found.schedule, transfer).host_peak <= transfer.host_capacity


def test_auto_considers_offload_when_given_a_transfer_model(c1_auto_offload) -> None:
    result = c1_auto_offload  # plan(c1_graph(), 9, "auto", transfer=c1_transfer(), time_limit=20): conftest
    assert result.simulation.total_cost == pytest.approx(17.0)
    assert result.details["chosen"] == "three-way"
    check(c1_graph(), 9, result.schedule, c1_transfer())


def test_bad_transfer_input_is_a_typed_error() -> None:
    with pytest.raises(ConfigurationError, match="transfer model"):
        plan(c1_graph(), 9, "three-way", time_limit=1)
    with pytest.raises(ConfigurationError, match="TransferModel"):
        plan(c1_graph(), 9, "three-way", transfer="bw=2")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="supports checkmate"):
        plan(c1_graph(), 9, formulation="moccasin", transfer=c1_transfer(mode="overlap"))
    with pytest.raises(ConfigurationError, match="bw="):
        transfer_model("bw=fast,flops=1e12")
    with pytest.raises(ConfigurationError, match="flops"):
        transfer_model("bw=25GB/s,flops=0")


def test_a_formulation_given_an_overlap_transfer_model_pages_with_overlap() -> None:
    transfer = c1_transfer(mode="overlap")
    serial = plan(c1_graph(), 9, formulation="checkmate", backend="highs", transfer=c1_transfer(), time_limit=30)
    result = plan(c1_graph(), 9, formulation="checkmate", backend="highs", transfer=transfer, time_limit=30)
    assert result.outcome is not None and result.outcome.status.value == "optimal_in_model"
    assert check(c1_graph(), 9, result.schedule, transfer).total_cost == pytest.approx(result.simulation.total_cost)
    assert result.simulation.total_cost <= serial.simulation.total_cost  # copies beside compute cost no more


def test_transfer_flag_takes_bytes_per_second_with_a_flop_rate() -> None:
    model = transfer_model("bw=25GB/s,latency=1e-5,flops=400e12,mode=overlap,host=64GiB")
    assert model.out_bw == model.in_bw == pytest.approx(25e9 / 400e12)
    assert model.out_latency == pytest.approx(1e-5 * 400e12)
    assert (model.mode, model.host_capacity) == ("overlap", 64 << 30)
    assert transfer_model("out_bw=2,in_bw=3") == TransferModel(out_bw=2, in_bw=3)  # remat simulate's keys


def test_remat_solve_transfer_writes_an_offload_plan(tmp_path) -> None:
    graph_path, out = tmp_path / "c1.json", tmp_path / "plan.json"
    write_graph(c1_graph(), graph_path)
    args = ["solve", graph_path, "-b", "9", "-m", "three-way", "--transfer", "bw=2", "--time-limit", "2", "-o", out]
    outcome = CliRunner().invoke(cli_app.app, [str(arg) for arg in args])
    assert outcome.exit_code == 0, outcome.output
    schedule = read_schedule(out, c1_graph())
    assert check(c1_graph(), 9, schedule, c1_transfer()).total_cost == pytest.approx(17.0)
