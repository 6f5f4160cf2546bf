"""`remat solve --with paging:...` and `remat simulate --transfer ...` on spec case C1."""

from __future__ import annotations

from pathlib import Path

import pytest
from offload_cases import c1_graph
from typer.testing import CliRunner

from remat_models.cli.app import app
from remat_models.core.schedule import Offload, Prefetch, simulate
from remat_models.core.transfer import TransferModel
from remat_models.io import read_schedule, write_graph

SOLVERS = [("checkmate", "highs"), ("checkmate", "cpsat"), ("moccasin", "cpsat")]


@pytest.mark.parametrize(("formulation", "backend"), SOLVERS)
@pytest.mark.parametrize(("bw", "optimum"), [(2, 17.0), (0.5, 23.0)])
def test_solve_with_paging_gives_the_spec_optimum(tmp_path: Path, formulation, backend, bw, optimum) -> None:
    graph = c1_graph()
    path, out = tmp_path / "c1.json", tmp_path / "plan.json"
    write_graph(graph, path)
    args = ["solve", str(path), "--budget", "9", "--formulation", formulation, "--backend", backend]
    run = CliRunner().invoke(app, [*args, "--with", f"paging:bw={bw}", "--out", str(out)], env={"COLUMNS": "200"})
    assert run.exit_code == 0, run.output
    schedule = read_schedule(out, graph)
    simulation = simulate(graph, schedule, TransferModel(out_bw=bw, in_bw=bw))
    assert simulation.total_cost == optimum and simulation.peak <= 9
    assert any(isinstance(step, (Offload, Prefetch)) for step in schedule.steps) == (optimum == 17.0)
    run = CliRunner().invoke(app, ["simulate", str(path), str(out), "--budget", "9", "--transfer", f"bw={bw}"])
    assert run.exit_code == 0 and f"{optimum:g}" in run.output
