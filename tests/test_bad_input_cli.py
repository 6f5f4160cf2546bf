"""Bad input on the command line: outputs onto inputs, kept plans, stdout errors, logging, option clashes."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from remat_models.cli import app as cli_app
from remat_models.core.batch import cost_cap
from remat_models.core.budget import parse_budget
from remat_models.errors import ConfigurationError
from remat_models.formulations.outcome import SolveOutcome
from remat_models.io import GENERATORS, linear_chain, read_graph, write_graph, write_schedule
from remat_models.io.generators import MAX_NODES
from remat_models.model import SolveStatus
from remat_models.planning.plan import PlanResult, plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "graphs"
OVER_BUDGET = ("-b", "80%", "-m", "checkpoint-all")  # checkpoint-all never recomputes: its peak is 100 %


def remat(*args: str | Path, stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """The real command in a fresh interpreter (its logging set up as a user gets it)."""
    return subprocess.run(
        [sys.executable, "-m", "remat_models.cli.app", *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={"COLUMNS": "200", "PATH": ""},
        check=False,
    )


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(cli_app.app, [str(arg) for arg in args])


def _one_error_line(stderr: str, message: str) -> None:
    assert stderr.splitlines() == [stderr.strip()], stderr
    assert stderr.startswith("error: ") and message in stderr, stderr


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    """A copy of the U-Net example, so that a command that overwrote it would be seen."""
    return Path(shutil.copy(EXAMPLES / "unet_train.json", tmp_path / "g.json"))


# --- 1: an output that is an input ----------------------------------------------------------------------


def test_solve_and_max_batch_refuse_to_write_over_their_input_graph(graph_file: Path, tmp_path: Path) -> None:
    before = graph_file.read_bytes()
    (tmp_path / "sub").mkdir()
    os.link(graph_file, tmp_path / "hard.json")
    for out in (graph_file, tmp_path / "sub" / ".." / "g.json", tmp_path / "hard.json"):
        run = remat("solve", graph_file, "-b", "80%", "-m", "chen-greedy", "-o", out)
        assert run.returncode == 1
        _one_error_line(run.stderr, f"output {out} is the input {graph_file}: refusing to overwrite it")
        assert run.stdout == ""  # refused before any work (not even the budget line)
    batch = ("-M", "8GB", "--file-batch", "1", "--heuristic", "chen-greedy")
    run = remat("max-batch", graph_file, *batch, "-o", graph_file)
    assert run.returncode == 1 and run.stdout == ""
    _one_error_line(run.stderr, "is the input")
    assert graph_file.read_bytes() == before


@pytest.mark.parametrize(
    "args",
    [
        ("graph", "convert", "{g}", "{g}", "--format", "node-link"),
        ("export", "{lp}", "-b", "80%", "-o", "{lp}"),
        ("bench", "plot", "timeline", "{g}", "{svg}", "-o", "{stem}"),
        ("bench", "report", "{g}", "-o", "{g}"),
        ("bench", "run", "-g", "{g}", "-b", "80%", "-m", "chen-greedy", "-o", "{g}"),
    ],
)
def test_every_command_with_an_output_refuses_its_input(graph_file: Path, args: tuple[str, ...]) -> None:
    lp = graph_file.with_suffix(".lp")
    svg = graph_file.with_name("plan.svg")
    for path in (lp, svg):
        shutil.copy(graph_file, path)
    names = {"g": graph_file, "lp": lp, "svg": svg, "stem": svg.with_suffix("")}
    result = invoke(*(arg.format(**names) for arg in args))
    assert result.exit_code == 1
    assert "is the input" in str(result.exception) and "refusing to overwrite it" in str(result.exception)
    assert lp.read_bytes() == svg.read_bytes() == graph_file.read_bytes() == (EXAMPLES / "unet_train.json").read_bytes()


# --- 2: over-budget and interrupted results keep an existing plan ---------------------------------------


def test_an_over_budget_result_keeps_an_existing_plan_unless_forced(graph_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    assert remat("solve", graph_file, "-b", "80%", "-m", "chen-greedy", "-o", out).returncode == 0
    good = out.read_bytes()
    run = remat("solve", graph_file, *OVER_BUDGET, "-o", out)
    assert run.returncode == 3 and "wrote" not in run.stdout
    first, second = run.stderr.splitlines()
    assert first.startswith("error: checkpoint-all found no schedule within")
    assert second == f"kept the old {out}: the new schedule is over budget (--force replaces it)"
    assert out.read_bytes() == good
    forced = remat("solve", graph_file, *OVER_BUDGET, "-o", out, "--force")
    assert forced.returncode == 3 and f"wrote {out}" in forced.stdout and "kept" not in forced.stderr
    assert b'"method": "checkpoint-all"' in out.read_bytes()


def test_an_over_budget_result_is_written_where_there_was_no_file(graph_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    run = remat("solve", graph_file, *OVER_BUDGET, "-o", out)
    assert run.returncode == 3 and f"wrote {out}" in run.stdout
    assert "kept" not in run.stderr and len(run.stderr.splitlines()) == 1
    assert out.is_file()


def test_an_interrupted_result_keeps_an_existing_plan_unless_forced(
    graph_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = read_graph(graph_file)
    fitting = plan(graph, parse_budget("80%", graph), "chen-greedy")
    stopped = SolveOutcome(formulation="checkmate", backend="highs", status=SolveStatus.INTERRUPTED)
    interrupted: PlanResult = dataclasses.replace(fitting, outcome=stopped, interrupted_by=signal.SIGINT)
    monkeypatch.setattr(cli_app, "plan", lambda *args, **kwargs: interrupted)
    out = tmp_path / "plan.json"
    out.write_text("the old plan")
    result = invoke("solve", graph_file, "-b", "80%", "-f", "checkmate", "-o", out)
    assert result.exit_code == 130, result.output
    assert f"kept the old {out}: the new schedule is from an interrupted run (--force replaces it)" in result.stderr
    assert out.read_text() == "the old plan"
    result = invoke("solve", graph_file, "-b", "80%", "-f", "checkmate", "-o", out, "--force")
    assert result.exit_code == 130 and f"wrote {out}" in result.stdout and "kept" not in result.stderr
    assert out.read_text() != "the old plan"


def test_max_batch_without_a_fitting_batch_keeps_an_existing_file(tmp_path: Path) -> None:
    chain = tmp_path / "chain.json"
    write_graph(linear_chain(4), chain)
    out = tmp_path / "plan.json"
    out.write_text("the old plan")
    run = remat("max-batch", chain, "-M", "2", "--file-batch", "1", "--heuristic", "chen-greedy", "-o", out)
    assert run.returncode == 3 and run.stderr.startswith("error: ")
    assert out.read_text() == "the old plan"


def test_write_schedule_without_replace_never_replaces_a_file(graph_file: Path, tmp_path: Path) -> None:
    graph = read_graph(graph_file)
    schedule = plan(graph, parse_budget("80%", graph), "chen-greedy").schedule
    assert schedule is not None
    out = tmp_path / "plan.json"
    assert write_schedule(out, schedule, graph, replace=False) is True
    written = out.read_bytes()
    out.write_text("the old plan")
    assert write_schedule(out, schedule, graph, replace=False) is False
    assert out.read_text() == "the old plan"
    assert write_schedule(out, schedule, graph) is True and out.read_bytes() == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "plan.json"]  # no temp file left


FULL_DISK = """
import resource, signal, sys
from remat_models.io import linear_chain, write_graph
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
write_graph(linear_chain(400), sys.argv[1])
"""


def test_a_failed_write_does_not_claim_to_keep_a_file_that_was_never_there(tmp_path: Path) -> None:
    target = tmp_path / "graph.json"
    command = [sys.executable, "-c", textwrap.dedent(FULL_DISK), str(target)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "write failed, nothing was written: File too large" in done.stderr
    assert "kept the old file" not in done.stderr
    assert list(tmp_path.iterdir()) == []


# --- 3: stdout that cannot be written -------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize(
    "args",
    [
        ("graph", "info", "{g}"),
        ("max-batch", "{g}", "-M", "8GB", "--file-batch", "1", "--heuristic", "chen-greedy", "--json"),
    ],
)
def test_a_full_stdout_is_one_error_line(graph_file: Path, args: tuple[str, ...]) -> None:
    with open("/dev/full", "w") as full:
        run = remat(*(arg.format(g=graph_file) for arg in args), stdout=full)
    assert run.returncode == 1
    _one_error_line(run.stderr, "cannot write to standard output: No space left on device")


def test_a_closed_stdout_pipe_ends_quietly(graph_file: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone, as after `| head -1`
    try:
        run = remat("graph", "info", graph_file, stdout=write_end)
    finally:
        os.close(write_end)
    assert run.returncode == 1 and run.stderr == ""


# --- 4: logging -----------------------------------------------------------------------------------------


def test_progress_messages_reach_stderr_only_with_verbose(graph_file: Path) -> None:
    quiet = remat("solve", graph_file, "-b", "80%", "-m", "chen-greedy")
    assert quiet.returncode == 0 and quiet.stderr == ""
    verbose = remat("-v", "solve", graph_file, "-b", "80%", "-m", "chen-greedy")
    assert verbose.returncode == 0 and "INFO" in verbose.stderr and "chen-greedy on" in verbose.stderr


def test_the_first_stderr_line_of_a_failing_solve_is_the_error(graph_file: Path) -> None:
    run = remat("solve", graph_file, *OVER_BUDGET)
    assert run.returncode == 3
    assert run.stderr.splitlines()[0].startswith("error: checkpoint-all found no schedule"), run.stderr
    assert "INFO" not in run.stderr


# --- 5: a shortcut flag and -O naming the same option ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-f", "moccasin", "-O", "C=3", "--C", "2"), "--C and -O C both set the option C; give one of them"),
        (("-f", "moccasin", "--order", "free", "-O", "order=input"), "--order and -O order both set the option order"),
        (("-f", "checkmate", "--unpartitioned", "-O", "staged=true"), "--unpartitioned and -O staged both set"),
    ],
)
def test_a_flag_and_an_option_pair_for_the_same_option_clash(args: tuple[str, ...], message: str) -> None:
    result = invoke("solve", EXAMPLES / "chain32_train.json", "-b", "80%", *args)
    assert result.exit_code == 1 and isinstance(result.exception, ConfigurationError)
    assert message in str(result.exception)
    assert "fits" not in result.output  # nothing was planned


# --- 6: cost-cap kinds ----------------------------------------------------------------------------------


def test_unknown_cap_kinds_name_the_kind_and_the_valid_ones(tmp_path: Path) -> None:
    chain = tmp_path / "chain.json"
    write_graph(linear_chain(4), chain)
    run = remat("max-batch", chain, "-M", "24", "--file-batch", "1", "--cap-kinds", "forward,bogus")
    assert run.returncode == 1
    valid = "valid kinds: forward, backward, loss, other"
    _one_error_line(run.stderr, f"unknown node kind 'bogus' in the cost cap; {valid}")


def test_cost_cap_checks_its_kinds() -> None:
    graph = linear_chain(3)
    with pytest.raises(ConfigurationError, match="unknown node kind 'Forward'"):
        cost_cap(graph, 2.0, ["Forward"])
    assert cost_cap(graph, 2.0, "forward") == cost_cap(graph, 2.0, ["forward"]) == graph.total_cost + 3


# --- 7: generator seeds and sizes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("chain", "--seed", "-1"), "seed must be an integer >= 0, got -1"),
        (("random-layered", "--seed", "-5"), "seed must be an integer >= 0, got -5"),
        (("transformer", "--size", "100000000"), "layers = 100,000,000 would build 2,400,000,007 nodes"),
        (("chain", "--size", "5000000"), "n = 5,000,000 would build 10,000,001 nodes, more than the maximum"),
        (("unet", "--size", str(10**18)), "depth = 1,000,000,000,000,000,000, width = 2 would build"),
    ],
)
def test_generate_refuses_negative_seeds_and_huge_sizes(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = invoke("graph", "generate", *args, "-o", tmp_path / "g.json")
    assert result.exit_code == 1 and isinstance(result.exception, ConfigurationError)
    assert message in str(result.exception)
    assert list(tmp_path.iterdir()) == []


def test_the_node_limit_is_checked_before_building() -> None:
    with pytest.raises(ConfigurationError, match=f"more than the maximum of {MAX_NODES:,}"):
        GENERATORS["random-layered"](size=MAX_NODES + 1)  # would take minutes and gigabytes if built
    assert GENERATORS["transformer"](size=1, seed=0).n == 24 + 7
