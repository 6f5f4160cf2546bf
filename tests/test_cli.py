"""The real `remat` command, run as a subprocess."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from remat_models.core.schedule import input_order_peak, simulate
from remat_models.io import read_graph, read_schedule

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "graphs" / "unet_train.json"


def remat(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remat_models.cli.app", *map(str, args)],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": ""},
        check=False,
    )


def test_graph_info_prints_peak_and_bound() -> None:
    graph = read_graph(EXAMPLE)
    run = remat("graph", "info", EXAMPLE)
    assert run.returncode == 0, run.stderr
    assert f"{input_order_peak(graph):,} B" in run.stdout
    assert f"{graph.lower_bound:,} B" in run.stdout
    resnet = EXAMPLE.parents[2] / "benchmarks" / "zoo" / "zoo_resnet.json"
    run = remat("graph", "info", resnet)  # the bound plan() refuses below, with what proved it (its search is timed)
    assert run.returncode == 0, run.stderr
    assert "peak lower bound" in run.stdout and " B (lineage at" in run.stdout


def test_solve_writes_a_plan_that_simulates_within_budget(tmp_path: Path) -> None:
    graph = read_graph(EXAMPLE)
    budget = int(0.8 * input_order_peak(graph))
    out = tmp_path / "plan.json"
    run = remat("solve", EXAMPLE, "--budget", "80%", "--method", "chen-greedy", "--out", out)
    assert run.returncode == 0, run.stderr
    assert f"{budget:,}" in run.stdout  # the resolved bytes are printed
    result = simulate(graph, read_schedule(out, graph))
    assert result.peak <= budget
    assert json.loads(out.read_text())["metadata"]["method"] == "chen-greedy"
    check = remat("simulate", EXAMPLE, out, "--budget", "0.8")
    assert check.returncode == 0, check.stderr
    assert f"{result.peak:,} B" in check.stdout


def test_compare_lists_every_method() -> None:
    run = remat("compare", EXAMPLE, "--budget", "90%")
    assert run.returncode == 0, run.stderr
    for method in ("checkpoint-all", "chen-sqrtn", "chen-greedy", "linearized-greedy"):
        assert method in run.stdout


def test_compare_takes_formulation_backend_pairs() -> None:
    run = remat("compare", EXAMPLE, "--budget", "90%", "--methods", "chen-greedy,moccasin/cpsat", "--time-limit", "30")
    assert run.returncode == 0, run.stderr
    assert "moccasin/cpsat" in run.stdout and "chen-greedy" in run.stdout


def test_generate_and_convert_round_trip(tmp_path: Path) -> None:
    generated, converted, back = tmp_path / "g.json", tmp_path / "nl.json", tmp_path / "back.json"
    assert remat("graph", "generate", "transformer", "--size", "2", "--seed", "3", "-o", generated).returncode == 0
    assert remat("graph", "convert", generated, converted, "--format", "node-link").returncode == 0
    assert remat("graph", "convert", converted, back).returncode == 0
    assert read_graph(back) == read_graph(generated)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("graph", "info", "no/such/file.json"), "no/such/file.json"),
        (("solve", EXAMPLE, "--budget", "lots"), "cannot read budget 'lots'"),
        (("solve", EXAMPLE, "--budget", "10"), "below the lower bound"),
        (("solve", EXAMPLE, "--budget", "80%", "--method", "magic"), "unknown method 'magic'"),
        (("graph", "generate", "mystery", "-o", "x.json"), "unknown generator 'mystery'"),
    ],
)
def test_errors_are_one_line_and_non_zero(args, message) -> None:
    run = remat(*args)
    assert run.returncode == 1
    assert message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert "Traceback" not in run.stderr


def test_over_budget_exits_3() -> None:
    graph = read_graph(EXAMPLE)
    run = remat("solve", EXAMPLE, "--budget", str(graph.lower_bound), "--method", "checkpoint-all")
    assert run.returncode == 3
    assert "no schedule within" in run.stderr


def test_schedule_for_another_graph_is_rejected(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    assert remat("solve", EXAMPLE, "--budget", "1", "--method", "checkpoint-all", "--out", out).returncode == 0
    chain = Path(__file__).resolve().parents[1] / "examples" / "graphs" / "chain32_train.json"
    run = remat("simulate", chain, out)
    assert run.returncode == 1
    assert "hash" in run.stderr


def test_planning_status_line_follows_the_library_log() -> None:
    import io
    import logging

    from rich.console import Console

    from remat_models.cli.console import planning_status

    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, width=200)
    logger = logging.getLogger("remat_models.planning.plan")
    before = logging.getLogger("remat_models").level
    with planning_status(console, "planning g"):
        logger.info("building the model of g")
        logger.debug("not shown")
    assert "building the model of g" in sink.getvalue() and "not shown" not in sink.getvalue()
    assert logging.getLogger("remat_models").level == before  # restored


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("compare", EXAMPLE, "-b", "80%", "--methods", "chen-greedy,nosuch"), "unknown method 'nosuch'"),
        (("compare", EXAMPLE, "-b", "80%", "--methods", "checkmate/nosolver"), "unknown backend 'nosolver'"),
        (("solve", EXAMPLE, "-b", "80%", "-m", "auto", "--time-limit", "0"), "time limit must be"),
        (("solve", EXAMPLE, "-b", "80%", "-f", "hilp", "-O", "level_time_limit=-2"), "level_time_limit must be"),
        (("solve", EXAMPLE, "-b", "80%", "-m", "fastsa", "--seed", "-1"), "seed must be >= 0"),
    ],
)
def test_bad_method_names_and_time_limits_fail_before_anything_runs(args: tuple, message: str) -> None:
    run = remat(*args)
    assert run.returncode == 1 and message in run.stderr
    assert "│" not in run.stdout  # no results table: nothing ran


def test_methods_lists_every_method_with_the_options_of_its_dataclass() -> None:
    from dataclasses import fields

    from remat_models.formulations import get_formulation

    run = remat("methods")
    assert run.returncode == 0, run.stderr
    rows = {line.split("│")[1].strip(): line for line in run.stdout.splitlines() if line.count("│") > 3}
    assert {"chen-greedy", "fastsa", "auto", "checkmate/highs", "checkmate/lp-rounding", "moccasin/cpsat"} <= set(rows)
    assert "portfolio (default)" in rows["auto"] and "checkmate_nodes" in rows["auto"]
    assert all(f.name in rows["moccasin/cpsat"] for f in fields(get_formulation("moccasin").options_type))


def test_solve_defaults_to_auto_and_checks_its_options(tmp_path: Path) -> None:
    graph = read_graph(EXAMPLE)
    out = tmp_path / "plan.json"
    bad = remat("solve", EXAMPLE, "-b", "80%", "-O", "bogus=1")
    assert bad.returncode == 1 and "-O bogus is not an option of auto" in bad.stderr
    run = remat("solve", EXAMPLE, "-b", "80%", "--time-limit", "8", "-O", "checkmate_nodes=0", "-o", out)
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text())["metadata"]["method"] == "auto"
    assert simulate(graph, read_schedule(out, graph)).peak <= int(0.8 * input_order_peak(graph))


def _command_paths(command: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group of the click tree, as argument paths."""
    paths = [prefix]
    for name, sub in getattr(command, "commands", {}).items():
        paths += _command_paths(sub, (*prefix, name))
    return paths


def test_every_command_prints_its_help() -> None:
    """`--help` renders for every command (rich markup in a help text must not break it)."""
    import typer
    from typer.testing import CliRunner

    from remat_models.cli.app import app

    command = typer.main.get_command(app)
    paths = _command_paths(command)
    assert ("solve",) in paths and ("bench", "plot", "tradeoff") in paths
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output[-500:], result.exception)
        assert "Usage" in result.output, path
