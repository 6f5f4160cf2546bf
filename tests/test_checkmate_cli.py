"""`remat solve --formulation checkmate` and `remat export` as subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

import highspy
import pytest
from test_cli import EXAMPLE, remat

from remat_models.core.schedule import simulate
from remat_models.io import read_graph, read_schedule, write_graph
from remat_models.io.generators import linear_chain


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.json"
    write_graph(linear_chain(4), path)
    return path


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_solve_with_checkmate_writes_a_simulated_plan(chain, tmp_path, backend) -> None:
    out = tmp_path / "plan.json"
    run = remat(
        "solve",
        chain,
        "-b",
        "4",
        "--formulation",
        "checkmate",
        "--backend",
        backend,
        "--init",
        "checkpoint-all",
        "--time-limit",
        "30",
        "-o",
        out,
    )
    assert run.returncode == 0, run.stderr
    graph = read_graph(chain)
    sim = simulate(graph, read_schedule(out, graph))
    assert sim.peak <= 4 and sim.total_cost == 11
    meta = json.loads(out.read_text())["metadata"]
    assert meta["method"] == f"checkmate/{backend}" and meta["objective"] == 11
    assert meta["solver_status"] == "optimal_in_model"  # Checkmate's model: one order, stages


def test_solve_with_lp_rounding(chain) -> None:
    run = remat("solve", chain, "-b", "100%", "--formulation", "checkmate", "--approx", "lp-rounding")
    assert run.returncode == 0, run.stderr
    assert "LP bound" in run.stdout


def test_export_lp_reads_back(chain, tmp_path) -> None:
    out = tmp_path / "model.lp"
    run = remat("export", chain, "-b", "4", "--formulation", "checkmate", "--format", "lp", "-o", out)
    assert run.returncode == 0, run.stderr
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(out))
    h.run()
    assert h.getInfo().objective_function_value == pytest.approx(11)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("solve", EXAMPLE, "-b", "80%", "--formulation", "checkmat"), "unknown formulation 'checkmat'"),
        (("solve", EXAMPLE, "-b", "80%", "--backend", "cpsat"), "need --formulation"),
        (("solve", EXAMPLE, "-b", "80%", "-f", "checkmate", "--backend", "nope"), "unknown backend 'nope'"),
        (("solve", EXAMPLE, "-b", "80%", "-f", "checkmate", "--approx", "magic"), "unknown approximation 'magic'"),
        (("export", EXAMPLE, "-b", "80%", "--format", "docx", "-o", "x.docx"), "unknown export format 'docx'"),
        (("export", EXAMPLE, "-b", "10", "--format", "lp", "-o", "x.lp"), "below the lower bound"),
    ],
)
def test_errors_are_one_line(args, message, tmp_path) -> None:
    run = remat(*args)
    assert run.returncode == 1
    assert message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not Path("x.lp").exists() and not Path("x.docx").exists()


def test_infeasible_exits_3(tmp_path) -> None:
    from test_checkmate import infeasible_above_the_bounds

    graph, budget = infeasible_above_the_bounds()  # nothing fits its peak lower bound
    path = tmp_path / "g.json"
    write_graph(graph, path)
    out = tmp_path / "plan.json"
    # the model: milliseconds; the warm start's least-peak search (nothing fits) runs a share of the time limit
    limits = ("--backend", "cpsat", "--time-limit", "30")
    run = remat("solve", path, "-b", str(budget), "-f", "checkmate", *limits, "-o", out)
    assert run.returncode == 3
    assert "no_schedule_in_model" in run.stderr and "infeasible" not in run.stderr  # one order proves nothing
    assert not out.exists()


def test_moccasin_two_phase_matches_checkmate_optimum(chain, tmp_path) -> None:
    """Moccasin (input order, C=3) reaches Checkmate's staged optimum on the 4-layer chain at budget 4."""
    costs = {}
    for formulation, extra in (("checkmate", ()), ("moccasin", ("--C", "3"))):
        out = tmp_path / f"{formulation}.json"
        run = remat("solve", chain, "-b", "4", "-f", formulation, "--backend", "cpsat", *extra, "-o", out)
        assert run.returncode == 0, run.stderr
        graph = read_graph(chain)
        result = simulate(graph, read_schedule(out, graph))
        assert result.peak <= 4
        costs[formulation] = result.total_cost
    assert costs["moccasin"] == costs["checkmate"]


def test_formulation_options_are_checked_by_the_formulation(chain) -> None:
    run = remat("solve", chain, "-b", "4", "-f", "checkmate", "--C", "3")
    assert run.returncode == 1 and "--C is not an option of checkmate" in run.stderr
    run = remat("solve", chain, "-b", "4", "-f", "moccasin", "--backend", "cpsat", "--order", "sideways")
    assert run.returncode == 1 and "unknown Moccasin order 'sideways'" in run.stderr
