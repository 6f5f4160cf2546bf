"""Planning graphs with operator implementations through the planner (default view, greedy implementations)."""

from __future__ import annotations

from impl_graphs import a2_mask, a4_conv

from remat_models.core.schedule import input_order_peak
from remat_models.planning.plan import PlanStatus, plan


def test_planner_runs_other_methods_on_the_default_view() -> None:
    graph = a4_conv()
    greedy = plan(graph, 8, "checkpoint-all")
    assert greedy.method == "checkpoint-all+greedy-impls" and greedy.simulation.total_cost == 2
    plain = plan(graph, 8, "checkpoint-all", impls=False)
    assert plain.method == "checkpoint-all" and plain.simulation.total_cost == 4
    checkmate = plan(a2_mask(), 12, formulation="checkmate")
    assert checkmate.status is PlanStatus.WITHIN_BUDGET and checkmate.graph_hash == a2_mask().content_hash
    monet = plan(a2_mask(), 9, formulation="monet", init="checkpoint-all")  # the start plans the default view
    assert monet.method == "monet/highs" and monet.simulation.total_cost == 5.5 and monet.details["warm_start"]
    assert input_order_peak(a2_mask()) == 12


def test_cli_solves_with_monet_and_writes_impl_names(tmp_path) -> None:
    import json
    import subprocess
    import sys

    from remat_models.core.schedule import simulate
    from remat_models.io import read_schedule
    from remat_models.io.files import write_json_atomic
    from remat_models.io.graph_json import graph_to_dict

    graph_path, plan_path = tmp_path / "a2.json", tmp_path / "plan.json"
    write_json_atomic(graph_path, graph_to_dict(a2_mask()))

    def remat(*args: object) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "remat_models.cli.app", *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, env={"COLUMNS": "200", "PATH": ""}, check=False)

    run = remat("solve", graph_path, "--budget", "9", "-f", "monet", "-O", "tags=intermediate", "--out", plan_path)
    assert run.returncode == 0, run.stderr
    assert ["compute", "r", "mask"] in json.loads(plan_path.read_text())["steps"]
    assert simulate(a2_mask(), read_schedule(plan_path, a2_mask())).total_cost == 5.5
    run = remat("solve", graph_path, "--budget", "9", "-m", "checkpoint-all", "--impls", "off")
    assert run.returncode == 1 and "below the lower bound 12 B" in run.stderr  # the default implementations
