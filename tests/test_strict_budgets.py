"""Strict budgets: over-budget plans raise BudgetExceededError, and every command exits 3 for them (issue 17)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from remat_models.cli.app import app
from remat_models.core.schedule import eager_frees, input_order_peak, simulate
from remat_models.errors import BudgetExceededError, ConfigurationError, GraphError, OutputError
from remat_models.io import read_graph, write_schedule
from remat_models.planning.plan import PlanStatus, plan

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "graphs" / "unet_train.json"


def remat(*args: str | Path, columns: str | None = "200") -> subprocess.CompletedProcess[str]:
    env = {"PATH": ""} if columns is None else {"PATH": "", "COLUMNS": columns}
    command = [sys.executable, "-m", "remat_models.cli.app", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


def test_plan_raises_for_a_schedule_over_budget_unless_allowed() -> None:
    graph = read_graph(EXAMPLE)
    budget = graph.lower_bound  # checkpoint-all keeps everything: far above the lower bound
    with pytest.raises(BudgetExceededError, match=r"checkpoint-all on .* exceeds the budget") as info:
        plan(graph, budget, "checkpoint-all")
    error = info.value
    assert error.budget == budget and error.peak > budget
    assert error.result.status is PlanStatus.OVER_BUDGET  # type: ignore[attr-defined]
    assert error.result.simulation.peak == error.peak  # type: ignore[attr-defined]
    allowed = plan(graph, budget, "checkpoint-all", allow_over_budget=True)
    assert allowed.status is PlanStatus.OVER_BUDGET and allowed.simulation is not None
    assert allowed.simulation.peak == simulate(graph, allowed.schedule).peak > budget  # type: ignore[arg-type]
    fits = plan(graph, input_order_peak(graph), "checkpoint-all")
    assert fits.status is PlanStatus.WITHIN_BUDGET and fits.simulation is not None
    assert fits.simulation.peak <= input_order_peak(graph)


def test_simulate_with_a_budget_it_exceeds_exits_3(tmp_path: Path) -> None:
    graph = read_graph(EXAMPLE)
    schedule_path = tmp_path / "plan.json"
    write_schedule(schedule_path, eager_frees(graph, graph.order), graph)
    run = remat("simulate", EXAMPLE, schedule_path, "--budget", "80%")
    assert run.returncode == 3, run.stderr
    assert "exceeds the budget" in run.stderr and "Traceback" not in run.stderr
    assert remat("simulate", EXAMPLE, schedule_path, "--budget", "100%").returncode == 0


def test_tables_keep_every_digit_in_a_pipe_without_columns() -> None:
    graph = read_graph(EXAMPLE)
    run = remat("compare", EXAMPLE, "--budget", "80%", "--methods", "checkpoint-all,chen-greedy", columns=None)
    assert run.returncode == 0, run.stderr
    peak = simulate(graph, eager_frees(graph, graph.order)).peak
    assert f"{peak:,}" in run.stdout and "…" not in run.stdout


@pytest.mark.parametrize("methods", [",,", "", "chen-greedy,,fastsa"])
def test_compare_refuses_empty_method_names(methods: str) -> None:
    run = CliRunner().invoke(app, ["compare", str(EXAMPLE), "--budget", "80%", "--methods", methods])
    assert isinstance(run.exception, ConfigurationError) and "names an empty method" in str(run.exception)


def test_outputs_are_checked_before_solving(tmp_path: Path) -> None:
    (tmp_path / "folder.json").mkdir()
    for out, message in (
        (tmp_path / "missing" / "plan.json", "does not exist"),
        (tmp_path / "folder.json", "a folder, not a regular file"),
    ):
        args = ["solve", str(EXAMPLE), "--budget", "80%", "--method", "fastsa", "--time-limit", "600"]
        run = CliRunner().invoke(app, [*args, "--out", str(out)])
        assert isinstance(run.exception, OutputError) and message in str(run.exception)
        assert "budget:" not in run.output  # it stopped before reading the graph and solving
    lp = tmp_path / "missing" / "m.lp"
    export = CliRunner().invoke(app, ["export", str(EXAMPLE), "--budget", "80%", "--format", "lp", "-o", str(lp)])
    assert isinstance(export.exception, OutputError) and "does not exist" in str(export.exception)
    models = str(ROOT / "examples" / "models.py")
    traced = CliRunner().invoke(app, ["graph", "from-torch", f"{models}:mlp", "-o", str(tmp_path / "folder.json")])
    assert isinstance(traced.exception, OutputError) and "a folder" in str(traced.exception)


torch = pytest.importorskip("torch", reason="the PyTorch front end needs the torch extra")


def _mlp() -> tuple[object, object, object]:
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(32, 32), nn.Tanh())], nn.Linear(32, 10))
    return model, torch.randn(256, 32), torch.randint(0, 10, (256,))


def test_torch_plan_takes_targets_and_is_strict() -> None:
    import remat_models.torch as rt

    model, inputs, targets = _mlp()
    loss_fn = torch.nn.functional.cross_entropy
    with pytest.raises(GraphError, match=r"a loss that takes targets needs them"):
        rt.plan(model, inputs, loss_fn, budget="70%")
    with pytest.raises(BudgetExceededError, match="chen-sqrtn"):
        rt.plan(model, inputs, loss_fn, targets, budget="70%", method="chen-sqrtn")
    loose = rt.plan(model, inputs, loss_fn, targets, budget="70%", method="chen-sqrtn", allow_over_budget=True)
    assert loose.plan_result is not None and loose.plan_result.status is PlanStatus.OVER_BUDGET
    step = rt.plan(model, inputs, loss_fn, targets, budget="70%", method="chen-greedy")
    assert step.plan_result is not None and step.plan_result.status is PlanStatus.WITHIN_BUDGET
    loss = step(inputs, targets)
    reference = loss_fn(model(inputs), targets)
    assert torch.equal(loss, reference)


def test_validate_over_budget_is_budget_exceeded() -> None:  # main() maps it to exit 3 (see simulate above)
    args = ["validate", f"{ROOT / 'examples' / 'models.py'}:mlp", "--budget", "70%", "--method", "chen-sqrtn"]
    run = CliRunner().invoke(app, [*args, "--repeats", "1"])  # above the lower bound, below chen-sqrtn's peak
    assert isinstance(run.exception, BudgetExceededError) and "exceeds the budget" in str(run.exception)
    assert "bit-identical" not in run.output


def test_results_tables_wrap_on_a_narrow_terminal_instead_of_cutting_digits() -> None:
    from rich.console import Console

    from remat_models.cli.app import _results_table

    graph = read_graph(EXAMPLE)
    result = plan(graph, input_order_peak(graph), "checkpoint-all")
    narrow = Console(width=50, force_terminal=True, record=True, color_system=None)
    narrow.print(_results_table("narrow", [result]))
    text = narrow.export_text()
    assert "…" not in text
    body = [line.split("│") for line in text.splitlines() if line.startswith("│")]
    peak_cell = "".join(cells[3].strip() for cells in body)  # the peak column, wrapped over several lines
    assert peak_cell.replace(",", "") == str(result.simulation.peak)  # type: ignore[union-attr]
