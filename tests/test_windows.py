"""Windows of a schedule as graphs (planning/windows.py) and the window search (planning/lns.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from test_cli import remat

from remat_models.backends import SolveLimits
from remat_models.core.schedule import Compute, eager_frees, input_order_peak, simulate
from remat_models.errors import ConfigurationError
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.heuristics.registry import run_heuristic
from remat_models.io import read_schedule, write_graph
from remat_models.io.generators import linear_chain, random_layered, transformer, unet
from remat_models.planning.lns import improve_by_windows
from remat_models.planning.plan import plan
from remat_models.planning.result import PlanStatus
from remat_models.planning.windows import Lifetimes, window_of

GRAPHS = [transformer(3), unet(4), random_layered(60, seed=3)]


def _start(graph, fraction: float):
    budget = int(fraction * input_order_peak(graph))
    schedule = run_heuristic("chen-greedy", graph, budget)[0]
    simulation = simulate(graph, schedule)
    if not simulation.fits(budget):
        schedule = run_heuristic("checkpoint-all", graph, budget)[0]
        budget, simulation = max(budget, simulate(graph, schedule).peak), simulate(graph, schedule)
    return budget, schedule, simulation


def _windows(total: int, rng: np.random.Generator) -> list[list[tuple[int, int]]]:
    """One, two and three ranges at random (steps between the ranges)."""
    found = []
    for _ in range(12):
        cuts = sorted(rng.choice(np.arange(total + 1), 6, replace=False).tolist())
        three = list(zip(cuts[::2], cuts[1::2], strict=True))
        found += [[(cuts[0], cuts[5])], [(cuts[0], cuts[1]), (cuts[2], cuts[5])], three]
    return found


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.name)
def test_a_window_graph_holds_the_schedule_memory_exactly_or_above(graph) -> None:
    """One range: the window's own steps peak exactly as the whole schedule does there; two: never below."""
    _, schedule, simulation = _start(graph, 0.7)
    sequence = schedule.compute_sequence()
    at = [k for k, s in enumerate(schedule.steps) if isinstance(s, Compute)]
    lifetimes = Lifetimes.of(graph, sequence)
    checked = 0
    for ranges in _windows(len(sequence), np.random.default_rng(0)):
        window = window_of(graph, lifetimes, ranges)
        ranges = list(window.ranges)  # widened back where a value was read from two sources
        checked += 1
        local = simulate(window.graph, window.init)
        whole = int(max(simulation.timeline[at[ranges[0][0] : ranges[-1][1]]]))
        if len(ranges) == 1:
            assert local.peak == whole
        else:
            assert local.peak >= whole
        assert local.total_cost == pytest.approx(sum(graph.cost[sequence[a:b]].sum() for a, b in ranges))
        assert window.splice(lifetimes.sequence, window.init) == sequence  # the current steps splice back unchanged
    assert checked >= 12


# HiGHS returns Checkmate's warm start or better at any limit (three of the eight windows ran into 3 s); Moccasin
# on CP-SAT had no schedule at 0.2 s and one window ran into 3 s
@pytest.mark.parametrize(("formulation", "backend", "limit"), [("checkmate", "highs", 1.5), ("moccasin", "cpsat", 3)])
def test_every_window_solution_splices_into_a_fitting_schedule(formulation: str, backend: str, limit: float) -> None:
    graph = transformer(3)
    budget, schedule, simulation = _start(graph, 0.6)
    lifetimes = Lifetimes.of(graph, schedule.compute_sequence())
    for ranges in _windows(len(lifetimes.sequence), np.random.default_rng(1))[:8]:
        window = window_of(graph, lifetimes, ranges)
        outcome = solve_model(
            window.graph, budget, formulation, backend, limits=SolveLimits(time_limit=limit), init=window.init
        )
        assert outcome.schedule is not None
        assert outcome.simulation.total_cost <= simulate(window.graph, window.init).total_cost + 1e-6
        whole = simulate(graph, eager_frees(graph, window.splice(lifetimes.sequence, outcome.schedule)))
        # never above the window's own peak (nor the start's outside it): a formulation rounding bytes to its memory
        # unit may return a window schedule a few bytes over the budget, which the search's simulation then rejects
        assert whole.peak <= max(outcome.simulation.peak, simulation.peak)
        assert whole.total_cost <= simulation.total_cost + 1e-6


def test_windows_improve_a_start_and_never_go_below_the_optimum() -> None:
    """On a chain, windows of checkpoint-all's start at a tight budget: fits, cheaper, never below brute force."""
    graph = linear_chain(5)
    budget = int(0.75 * input_order_peak(graph))
    start = run_heuristic("chen-sqrtn", graph, budget)[0]
    first = simulate(graph, start)
    assert first.fits(budget)
    search = improve_by_windows(graph, budget, "checkmate", "highs", start, time_limit=8, seed=0)
    best = simulate(graph, search.schedule)
    assert best.peak <= budget and best.total_cost == search.simulation.total_cost
    assert best.total_cost <= first.total_cost
    optimum = exhaustive_optimum(graph, budget)
    assert optimum is not None and best.total_cost >= optimum.cost - 1e-6


def test_plan_solves_windows_above_window_nodes_and_keeps_its_time_limit() -> None:
    """Checkmate on a 400-node graph (above its window_nodes): a fitting schedule, "feasible", never optimal."""
    graph = transformer(16)
    assert graph.n > 360
    result = plan(graph, int(0.5 * input_order_peak(graph)), formulation="checkmate", backend="highs", time_limit=8)
    assert result.status is PlanStatus.WITHIN_BUDGET
    assert simulate(graph, result.schedule).peak <= result.budget
    assert result.details["solver_status"] == "feasible" and result.details["windows"] >= 1
    assert result.wall_time <= 1.1 * 8 + 2


def test_windows_on_request_through_plan_and_the_cli(tmp_path) -> None:
    """``windows=True`` / ``--windows`` on a small graph; refused for heuristics and approximations."""
    graph = transformer(3)
    budget = int(0.6 * input_order_peak(graph))
    result = plan(graph, budget, formulation="moccasin", windows=True, time_limit=4)
    assert result.status is PlanStatus.WITHIN_BUDGET and simulate(graph, result.schedule).peak <= budget
    assert result.details["solver_status"] == "feasible" and result.details["windows"] >= 1
    with pytest.raises(ConfigurationError, match="windows apply to formulations"):
        plan(graph, budget, "chen-greedy", windows=True)
    with pytest.raises(ConfigurationError, match="not the approximation"):
        plan(graph, budget, formulation="checkmate", approx="lp-rounding", windows=True)
    path, out = tmp_path / "t3.json", tmp_path / "plan.json"
    write_graph(graph, path)
    run = remat("solve", path, "-b", "60%", "-f", "checkmate", "--windows", "--time-limit", "3", "-o", out)
    assert run.returncode == 0, run.stderr
    assert simulate(graph, read_schedule(out, graph)).peak <= budget + 1
    refused = remat("solve", path, "-b", "60%", "-m", "chen-greedy", "--windows")
    assert refused.returncode == 1 and "--windows/--whole need --formulation" in refused.stderr


def test_sigterm_stops_a_window_search_with_its_best_schedule(tmp_path) -> None:
    """SIGTERM during the window solves: exit 143 within seconds, the best schedule so far written and fitting."""
    graph = transformer(12)
    path, out = tmp_path / "t12.json", tmp_path / "plan.json"
    write_graph(graph, path)
    command = [sys.executable, "-m", "remat_models.cli.app", "solve", str(path), "-b", "50%", "-f", "moccasin"]
    process = subprocess.Popen(
        [*command, "--windows", "--init", "chen-greedy", "--time-limit", "60", "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(6)  # imports and the warm start (chen-greedy: well under a second), then windows
    process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert time.monotonic() - sent < 15
    assert simulate(graph, read_schedule(out, graph)).peak <= int(0.5 * input_order_peak(graph)) + 1


def test_values_only_read_after_the_window_join_their_chunk() -> None:
    """A long middle whose values are read after the window only: a few chunks, not one per value; memory not below."""
    graph = transformer(6)
    schedule = run_heuristic("checkpoint-all", graph, 10**15)[0]
    sequence = schedule.compute_sequence()
    lifetimes = Lifetimes.of(graph, sequence)
    forward = len(sequence) // 2
    window = window_of(graph, lifetimes, [(0, 4), (forward - 4, forward)])
    middle = forward - 8
    assert window.graph.n < middle // 4
    at = [k for k, s in enumerate(schedule.steps) if isinstance(s, Compute)]
    whole = int(max(simulate(graph, schedule).timeline[at[: window.ranges[-1][1]]]))
    assert simulate(window.graph, window.init).peak >= whole
    assert window.splice(lifetimes.sequence, window.init) == sequence
