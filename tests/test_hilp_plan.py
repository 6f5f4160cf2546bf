"""H-ILP through the usual paths: plan(formulation="hilp"), its options, `remat solve -f hilp`."""

from __future__ import annotations

import pytest
from test_cli import remat

from remat_models.core.schedule import simulate
from remat_models.errors import ConfigurationError
from remat_models.io import read_schedule, write_graph
from remat_models.io.generators import linear_chain
from remat_models.planning.plan import plan

CHAIN_OPTIONS = {"partition": {"max_leaf": 4, "max_top": 8}, "nb_peak": 2, "nb_save": 2}


def test_plan_hierarchical_and_flat() -> None:
    graph = linear_chain(12)
    hier = plan(graph, 8, formulation="hilp", options=CHAIN_OPTIONS, time_limit=30)
    flat = plan(graph, 8, formulation="hilp", options={"partition": False}, time_limit=30)
    for result in (hier, flat):
        assert result.simulation is not None and result.simulation.peak <= 8
        assert simulate(graph, result.schedule).total_cost == result.simulation.total_cost
    assert flat.simulation.total_cost == 31.0  # the flat optimum (Checkmate's)
    assert hier.simulation.total_cost >= flat.simulation.total_cost
    assert hier.details["ilps"] >= 2 and hier.details["depth"] == 3
    assert flat.details["bound"] == pytest.approx(31.0)  # the flat model's bound is a lower bound on cost
    assert hier.details["bound"] is None and hier.details["top_bound"] is not None  # the top's is not


def test_plan_keeps_a_better_warm_start_and_rejects_bad_options() -> None:
    graph = linear_chain(12)
    result = plan(graph, 14, formulation="hilp", options=CHAIN_OPTIONS, init="checkpoint-all", time_limit=30)
    assert result.simulation.total_cost == graph.total_cost
    with pytest.raises(ConfigurationError, match="correction"):
        plan(graph, 8, formulation="hilp", options={"correction": "sometimes"})
    with pytest.raises(ConfigurationError, match="partition"):
        plan(graph, 8, formulation="hilp", options={"partition": {"depth": 3}})


def test_cli_solve_with_hilp(tmp_path) -> None:
    path = tmp_path / "chain.json"
    write_graph(linear_chain(12), path)
    out = tmp_path / "plan.json"
    options = ["-O", "max_leaf=4", "-O", "max_top=8", "-O", "nb_peak=2"]
    run = remat("solve", path, "-b", "8", "-f", "hilp", *options, "--time-limit", "30", "-o", out)
    assert run.returncode == 0, run.stderr
    assert "hilp/highs" in run.stdout
    graph = linear_chain(12)
    assert simulate(graph, read_schedule(out, graph)).peak <= 8


def test_export_needs_the_flat_model(tmp_path) -> None:
    path = tmp_path / "chain.json"
    write_graph(linear_chain(4), path)
    hierarchical = ["-O", "partition=true", "--format", "lp"]
    refused = remat("export", path, "-b", "4", "-f", "hilp", *hierarchical, "-o", tmp_path / "h.lp")
    assert refused.returncode != 0 and "partition=false" in refused.stdout + refused.stderr
    for options in (["-O", "partition=false"], []):  # partition=auto (the default) is flat on a small graph
        flat = remat("export", path, "-b", "4", "-f", "hilp", *options, "--format", "lp", "-o", tmp_path / "f.lp")
        assert flat.returncode == 0, flat.stderr
        assert (tmp_path / "f.lp").read_text().strip().lower().endswith("end")
