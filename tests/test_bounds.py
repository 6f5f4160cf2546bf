"""Lower bounds on cost and peak (planning/bounds.py): never above what any schedule reaches."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from checkmate_graphs import budgets, diamond, random_dag, tiny_unet

from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import BudgetInfeasibleError
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.heuristics.registry import run_heuristic
from remat_models.io import linear_chain, random_layered, read_graph, transformer, unet
from remat_models.planning.bounds import cost_lower_bound, peak_lower_bound

SHARED = Path("/work/shared/graphs")
ZOO = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "graphs"
EPS = 1e-9


def _frozen(graph: Graph, every: int) -> Graph:
    """The graph with every ``every``-th node not recomputable."""
    mask = np.ones(graph.n, dtype=bool)
    mask[::every] = False
    return graph.with_recomputable(mask)


def _brute_graphs() -> list[Graph]:
    return [
        linear_chain(2),
        linear_chain(3),
        linear_chain(4),
        diamond(),
        tiny_unet(),
        random_layered(7, seed=1),
        random_layered(8, seed=4),
        random_dag(6, 3, workspace=True),
        random_dag(7, 5, workspace=True, fixed=True),
        random_dag(8, 11, fixed=True),
        _frozen(linear_chain(3), 3),
        _frozen(random_dag(7, 2, workspace=True), 4),
    ]


def _check(graph: Graph, budget: int, cost: float, peak: int) -> None:
    """The bounds at ``budget`` are at most a schedule's ``cost`` and ``peak``."""
    bound = cost_lower_bound(graph, budget)
    assert bound.value <= cost * (1 + EPS) + EPS, (graph.name, budget, bound, cost)
    assert peak_lower_bound(graph).value <= peak


@pytest.mark.parametrize("graph", _brute_graphs(), ids=lambda g: g.name)
def test_never_above_the_brute_force_optimum(graph: Graph) -> None:
    high = input_order_peak(graph)
    for budget in sorted({*budgets(graph, 6), graph.lower_bound, high}):
        found = exhaustive_optimum(graph, budget)
        if found is None:  # a bound may prove it (the cut raises, or the peak bound is above), or simply be lower
            with contextlib.suppress(BudgetInfeasibleError):
                cost_lower_bound(graph, budget)
            continue
        sim = simulate(graph, found.schedule)
        assert sim.peak <= budget
        _check(graph, budget, sim.total_cost, sim.peak)


def test_the_cut_proves_recomputation_on_tiny_graphs() -> None:
    """Not vacuous: on a chain at its least budget the bound is above every-node-once and equals the optimum."""
    graph = linear_chain(3)
    found = exhaustive_optimum(graph, graph.lower_bound)
    assert found is not None
    bound = cost_lower_bound(graph, graph.lower_bound)
    assert bound.method in ("loss-cut", "cut") and bound.tdi > 0
    assert bound.value <= found.cost + EPS
    proved = [
        cost_lower_bound(g, b).tdi > 0
        for g in _brute_graphs()
        for b in budgets(g, 6)
        if exhaustive_optimum(g, b) is not None
    ]
    assert sum(proved) >= 5


def _mlp(layers: int, seed: int) -> Graph:
    """x, then per layer a costly matmul m_i and a cheap activation a_i, the loss, and backward steps d_i that
    read a_{i-1} (not m_i): recomputing a cheap activation needs its costly input, which only the closure sees."""
    rng = np.random.default_rng(seed)
    names, cost, mem, edges, acts = ["x"], [1.0], [2], [], [0]
    for i in range(layers):
        size = int(rng.integers(1, 4)) * 2
        names += [f"m{i}", f"a{i}"]
        cost += [8.0, 1.0]
        mem += [size, size]
        edges += [(acts[-1], len(names) - 2), (len(names) - 2, len(names) - 1)]
        acts.append(len(names) - 1)
    names.append("loss")
    cost.append(1.0)
    mem.append(2)
    edges.append((acts[-1], len(names) - 1))
    for i in reversed(range(layers)):
        names.append(f"d{i}")
        cost.append(2.0)
        mem.append(2)
        edges += [(len(names) - 2, len(names) - 1), (acts[i], len(names) - 1)]
    return Graph.from_arrays(names, np.array(cost), np.array(mem), np.array(edges), name=f"mlp{layers}_s{seed}")


def _seeded(layers: int) -> Graph:
    """A value s that cannot be recomputed (a random draw) feeds a chain a_i -> c_i; the backward reads the a_i:
    an a_i dropped at the backward's first step is recomputed from s, so s or a_i must stay (the closure)."""
    names, cost, mem, edges, acts = ["s"], [1.0], [4], [], []
    for i in range(layers):
        names += [f"a{i}", f"c{i}"]
        cost += [2.0, 1.0]
        mem += [4, 2]
        edges += [(len(names) - 3, len(names) - 2), (len(names) - 2, len(names) - 1)]
        acts.append(len(names) - 2)
    names.append("loss")
    cost.append(1.0)
    mem.append(1)
    edges.append((len(names) - 2, len(names) - 1))
    for i in reversed(range(layers)):
        names.append(f"d{i}")
        cost.append(2.0)
        mem.append(2)
        edges += [(len(names) - 2, len(names) - 1), (acts[i], len(names) - 1)]
    graph = Graph.from_arrays(names, np.array(cost), np.array(mem), np.array(edges), name=f"seeded{layers}")
    return graph.with_recomputable(np.arange(graph.n) > 0)


def _closure_graphs() -> list[Graph]:
    """Random DAGs, chains and MLPs (workspace, fixed memory, values that cannot be recomputed) for the closure LP."""
    graphs = [random_dag(n, seed, workspace=seed % 2 == 0, fixed=seed % 3 == 0) for n in (6, 7, 8) for seed in range(6)]
    graphs += [random_layered(8, seed=seed) for seed in range(4)] + [linear_chain(3), linear_chain(4), tiny_unet()]
    graphs += [_mlp(layers, seed) for layers in (2, 3) for seed in range(3)] + [_seeded(2), _seeded(3)]
    return graphs + [_frozen(g, 3 + k % 3) for k, g in enumerate(graphs[::3])]


@pytest.mark.parametrize("graph", _closure_graphs(), ids=lambda g: f"{g.name}_{int(g.recomputable.sum())}")
def test_closure_lp_never_above_the_brute_force_optimum(graph: Graph) -> None:
    """Every pivot's closure LP (not only the best) at every budget: its extra cost never exceeds the optimum's."""
    from remat_models.planning.bounds import _PivotScan

    scan = _PivotScan(graph, None)
    for budget in range(graph.lower_bound, input_order_peak(graph) + 1):
        found = exhaustive_optimum(graph, budget)
        if found is None:
            continue
        extra = found.cost - graph.total_cost
        for p in scan.pivots():
            for integral in (False, True):
                proved = scan.closure_extra(p, budget, 1.0, integral=integral)
                assert proved <= extra * (1 + EPS) + EPS, (graph.name, budget, graph.names[p], integral, proved, extra)
        _check(graph, budget, found.cost, simulate(graph, found.schedule).peak)


def test_the_closure_lp_is_stronger_than_the_cut() -> None:
    """Not vacuous: on MLPs the closure LP proves more than the knapsack cut, at times the optimum itself."""
    stronger = exact = 0
    for graph in [_mlp(layers, seed) for layers in (2, 3) for seed in range(3)]:
        for budget in range(graph.lower_bound, input_order_peak(graph) + 1):
            found = exhaustive_optimum(graph, budget)
            if found is None:
                continue
            bound = cost_lower_bound(graph, budget)
            stronger += bound.method.startswith("closure")
            exact += bound.method.startswith("closure") and bound.value >= found.cost * (1 - 1e-6) > graph.total_cost
    assert stronger >= 15 and exact >= 3, (stronger, exact)


def test_the_closure_peak_bound_is_the_least_peak_where_a_draw_cannot_be_redone() -> None:
    from remat_models.planning.plan import plan

    for layers in (2, 3):
        graph = _seeded(layers)
        least = next(b for b in range(graph.lower_bound, input_order_peak(graph) + 1) if exhaustive_optimum(graph, b))
        bound = peak_lower_bound(graph)
        assert bound.method == "closure" and bound.value == least > graph.lower_bound, (bound, least)
        with pytest.raises(BudgetInfeasibleError, match="closure at"):
            plan(graph, least - 1, "chen-greedy", allow_over_budget=True)


def test_the_integral_closure_reaches_optima_the_lp_does_not() -> None:
    """Not vacuous: on the brute-forced graphs the MIP proves the optimum itself where the closure LP stays below."""
    closed = 0
    for graph in _closure_graphs():
        for budget in range(graph.lower_bound, input_order_peak(graph) + 1):
            found = exhaustive_optimum(graph, budget)
            if found is None or found.cost <= graph.total_cost:
                continue
            bound = cost_lower_bound(graph, budget)
            closed += bound.method == "closure-mip" and bound.value >= found.cost * (1 - 1e-6)
    assert closed >= 20, closed


def test_the_bound_is_checkmates_proven_optimum_on_the_example_unet() -> None:
    """docs/performance.md: Checkmate proves 11,940 at 80 % (3.772 % TDI); the integral closure proves it too."""
    graph = read_graph(EXAMPLES / "unet_train.json")
    budget = parse_budget("80%", graph)
    bound = cost_lower_bound(graph, budget, time_limit=5.0)
    assert bound.method == "closure-mip" and bound.value == pytest.approx(11_940, rel=1e-9), bound
    for sim in _heuristic_schedules(graph, budget, fastsa_seconds=0.5):
        _check(graph, budget, sim.total_cost, sim.peak)


def test_the_lineage_peak_bound_is_the_least_peak_on_tiny_graphs() -> None:
    """Never above the least peak any schedule reaches (brute force); above the step bound and equal to it on some."""
    proved = 0
    for graph in _closure_graphs() + _brute_graphs():
        least = next(b for b in range(graph.lower_bound, input_order_peak(graph) + 1) if exhaustive_optimum(graph, b))
        bound = peak_lower_bound(graph)
        assert bound.value <= least, (graph.name, bound, least)
        proved += bound.method == "lineage" and bound.value == least > graph.lower_bound
    assert proved >= 12, proved


def test_the_lineage_bound_on_the_zoo_resnet() -> None:
    """Within 10 % of the least peak found (docs/performance.md: 524.6 against 540.6 MB), never above a schedule."""
    graph = read_graph(ZOO / "zoo_resnet.json")
    bound = peak_lower_bound(graph, time_limit=5.0)
    assert bound.method == "lineage" and bound.value > 1.2 * graph.lower_bound, bound
    schedule, _ = run_heuristic("least-peak", graph, bound.value, time_limit=2.0)
    assert simulate(graph, schedule).peak >= bound.value


def test_non_recomputable_values_stay_resident_in_the_peak_bound() -> None:
    graph = linear_chain(4)
    frozen = graph.with_recomputable(np.array([kind.value != "forward" for kind in graph.kind]))
    bound = peak_lower_bound(frozen)
    assert bound.value > graph.lower_bound and bound.method == "cut"
    assert bound.value == input_order_peak(frozen)  # nothing forward may be recomputed: checkpoint-all is optimal
    found = exhaustive_optimum(frozen, bound.value)
    assert found is not None and exhaustive_optimum(frozen, bound.value - 1) is None


def _heuristic_schedules(graph: Graph, budget: int, fastsa_seconds: float = 0.0) -> list:
    """Fitting schedules of chen-greedy, knapsack (and FastSA when given time), each simulated."""
    found = []
    for name in ("chen-greedy", "knapsack"):
        schedule, _ = run_heuristic(name, graph, budget)
        found.append(schedule)
    if fastsa_seconds:
        found.append(run_heuristic("fastsa", graph, budget, time_limit=fastsa_seconds)[0])
    sims = [simulate(graph, schedule) for schedule in found]
    return [sim for sim in sims if sim.peak <= budget]


GENERATED = [
    random_layered(60, seed=3),
    unet(depth=2, width=1),
    transformer(layers=2, seq=128, hidden=128, heads=4, vocab=512),
    _frozen(random_layered(50, seed=8), 5),
]


@pytest.mark.parametrize("graph", GENERATED, ids=lambda g: g.name)
def test_never_above_heuristic_schedules_on_generated_graphs(graph: Graph) -> None:
    for fraction in ("90%", "60%", "40%"):
        budget = parse_budget(fraction, graph)
        if budget < peak_lower_bound(graph).value:
            continue
        for sim in _heuristic_schedules(graph, budget, fastsa_seconds=0.5):
            _check(graph, budget, sim.total_cost, sim.peak)


@pytest.mark.parametrize("name", ["vgg16_train", "cm1_fcn8_vgg_train", "rl_g1_n100", "cm2_resnet50_train"])
def test_never_above_heuristic_schedules_on_shared_graphs(name: str) -> None:
    path = SHARED / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    graph = read_graph(path)
    for fraction in ("80%", "60%"):
        budget = parse_budget(fraction, graph)
        if budget < peak_lower_bound(graph).value:
            continue
        for sim in _heuristic_schedules(graph, budget, fastsa_seconds=0.5 if graph.n <= 100 else 0.0):
            _check(graph, budget, sim.total_cost, sim.peak)


@pytest.mark.parametrize("name", ["zoo_llama", "zoo_vit"])
def test_zoo_transformers_at_a_quarter_prove_recomputation(name: str) -> None:
    graph = read_graph(ZOO / f"{name}.json")
    budget = parse_budget("25%", graph)
    bound = cost_lower_bound(graph, budget, time_limit=5.0)
    assert bound.tdi > 0 and bound.method in ("loss-cut", "cut", "closure", "closure-mip")
    for sim in _heuristic_schedules(graph, budget):
        _check(graph, budget, sim.total_cost, sim.peak)


@pytest.mark.parametrize("name", ["zoo_bert", "zoo_gpt2", "zoo_llama", "zoo_resnet", "zoo_vit"])
def test_zoo_closure_bound_never_above_the_best_plans(name: str) -> None:
    """The closure bound is close to the plans at 50 %: it must stay below the save-set search's and FastSA's."""
    graph = read_graph(ZOO / f"{name}.json")
    budget = parse_budget("50%", graph)
    bound = cost_lower_bound(graph, budget, time_limit=0.5)
    assert bound.method.startswith("closure") and bound.tdi > 0.5
    schedules = [run_heuristic("saveset", graph, budget)[0], run_heuristic("fastsa", graph, budget, time_limit=1.0)[0]]
    fitting = [sim for sim in (simulate(graph, schedule) for schedule in schedules) if sim.peak <= budget]
    assert fitting
    for sim in fitting:
        _check(graph, budget, sim.total_cost, sim.peak)


def test_below_the_peak_bound_the_cost_bound_refuses() -> None:
    graph = linear_chain(3).with_recomputable(np.zeros(7, dtype=bool))
    peak = peak_lower_bound(graph)
    with pytest.raises(BudgetInfeasibleError) as caught:
        cost_lower_bound(graph, peak.value - 1)
    assert caught.value.lower_bound == peak.value


def test_graphs_with_transfers_and_implementations_get_safe_bounds() -> None:
    graph = linear_chain(3)
    serial = TransferModel(out_bw=1.0, in_bw=1.0)
    plain = cost_lower_bound(graph, graph.lower_bound)
    paged = cost_lower_bound(graph, graph.lower_bound, transfer=serial)
    assert graph.total_cost <= paged.value <= plain.value
    overlap = cost_lower_bound(graph, graph.lower_bound, transfer=TransferModel(out_bw=1.0, in_bw=1.0, mode="overlap"))
    assert overlap.method == "trivial" and overlap.value == graph.total_cost


def _remat(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remat_models.cli.app", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_remat_bound_prints_both_bounds_and_refuses_bad_input() -> None:
    graph = ZOO / "zoo_vit.json"
    run = _remat("bound", graph, "--budget", "25%")
    assert run.returncode == 0, run.stderr
    assert "TDI" in run.stdout and "of input order" in run.stdout and "closure at 'gelu_backward'" in run.stdout
    low = _remat("bound", graph, "--budget", "1%")
    assert low.returncode == 1 and low.stderr.count("\n") == 1 and "peak lower bound" in low.stderr
    for bad in (["--budget", "lots"], ["--budget", "50%", "--time-limit", "0"]):
        run = _remat("bound", graph, *bad)
        assert run.returncode != 0 and "Traceback" not in run.stderr


def test_plans_carry_the_bounds_and_the_solver_bound_stays() -> None:
    from remat_models.planning.plan import plan

    graph = read_graph(ZOO / "zoo_vit.json")
    budget = parse_budget("50%", graph)
    result = plan(graph, budget, "knapsack", allow_over_budget=True)
    assert result.peak_lower_bound is not None and result.peak_lower_bound.value <= result.simulation.peak
    details = result.metadata()
    assert details["peak_lower_bound"] == result.peak_lower_bound.value
    assert result.lower_bound is not None and result.lower_bound.method.startswith("closure")
    if result.simulation.peak <= budget:
        assert result.lower_bound.value <= result.simulation.total_cost * (1 + EPS)
        assert details["lower_bound"] == result.lower_bound.value and details["lower_bound_at"]
        assert 0 <= details["lower_bound_gap"] == result.lower_bound_gap < 1
        assert details["lower_bound_method"] == result.lower_bound.method
    small = tiny_unet()
    budget = small.lower_bound + 1
    solved = plan(small, budget, "checkmate/highs", time_limit=20)
    optimum = exhaustive_optimum(small, budget)
    assert optimum is not None and solved.lower_bound.value <= optimum.cost + EPS
    assert solved.metadata()["lower_bound"] <= optimum.cost + EPS
    assert solved.details["bound"] == solved.outcome.bound  # the model's own bound is untouched


def _frozen_chain() -> tuple[Graph, int]:
    """A chain whose forward values cannot be recomputed, and its peak bound (above the step bound)."""
    graph = linear_chain(4)
    frozen = graph.with_recomputable(np.array([kind.value != "forward" for kind in graph.kind]))
    peak = peak_lower_bound(frozen).value
    assert peak > frozen.lower_bound
    return frozen, peak


def test_plan_refuses_a_budget_below_the_peak_bound_at_once() -> None:
    from remat_models.planning.plan import plan

    graph, peak = _frozen_chain()
    for method in ("chen-greedy", "auto", "checkmate/highs"):
        with pytest.raises(BudgetInfeasibleError, match="peak lower bound") as caught:
            plan(graph, peak - 1, method, allow_over_budget=True, time_limit=30)
        assert caught.value.lower_bound == peak and "cut at" in str(caught.value)
    result = plan(graph, peak, "chen-greedy", allow_over_budget=True)
    assert result.peak_lower_bound.value == peak and result.lower_bound is not None


def test_remat_solve_prints_the_bounds_and_refuses_below_the_peak_bound(tmp_path: Path) -> None:
    from remat_models.io import write_graph

    graph, peak = _frozen_chain()
    path = tmp_path / "frozen.json"
    write_graph(graph, path)
    low = _remat("solve", path, "--budget", str(peak - 1), "--method", "chen-greedy")
    assert low.returncode == 1 and low.stderr.count("\n") == 1 and f"{peak:,} B" in low.stderr
    out = tmp_path / "plan.json"
    vit = _remat("solve", ZOO / "zoo_vit.json", "--budget", "50%", "--method", "saveset", "--out", out)
    assert vit.returncode == 0, vit.stderr
    assert "bound TDI %" in vit.stdout and re.search(r"closure(-mip)? at", vit.stdout)
    assert "lower bounds for every schedule" in vit.stdout
    written = json.loads(out.read_text())
    meta = written.get("metadata", written)
    assert meta["lower_bound_method"].startswith("closure") and meta["lower_bound_gap"] > 0
    assert meta["peak_lower_bound"] > 0


def test_auto_reports_the_bound_and_what_proved_it() -> None:
    from remat_models.planning.plan import plan

    graph = read_graph(ZOO / "zoo_vit.json")
    budget = parse_budget("50%", graph)
    result = plan(graph, budget, "auto", time_limit=6)
    assert result.lower_bound is not None and result.lower_bound.method.startswith("closure") and result.lower_bound.at
    assert result.lower_bound.value <= result.simulation.total_cost * (1 + EPS)
    assert result.wall_time < 6 * 1.1 + 3


def test_bench_records_carry_the_lower_bound() -> None:
    from remat_models.bench.record import OUTCOME_FIELDS, outcome_of
    from remat_models.planning.plan import plan

    graph = random_layered(60, seed=3)
    budget = max(parse_budget("40%", graph), peak_lower_bound(graph).value)
    record = outcome_of(plan(graph, budget, "chen-greedy", allow_over_budget=True), 0.0)
    assert {"lower_bound", "lower_bound_tdi", "lower_bound_method", "peak_lower_bound"} <= set(OUTCOME_FIELDS)
    assert record["lower_bound"] is not None and record["lower_bound_method"]
    assert record["peak_lower_bound"] <= record["peak"]


def test_lower_bounds_share_one_scan_and_agree() -> None:
    from remat_models.planning.bounds import lower_bounds

    graph = random_layered(60, seed=3)
    budget = max(parse_budget("40%", graph), peak_lower_bound(graph).value)
    peak, cost = lower_bounds(graph, budget)
    assert peak == peak_lower_bound(graph) and cost == cost_lower_bound(graph, budget)
    assert lower_bounds(graph, peak.value - 1) == (peak, None)


@pytest.mark.parametrize("graph", GENERATED[:3], ids=lambda g: g.name)
def test_serial_transfer_bound_never_above_offloading_plans(graph: Graph) -> None:
    from remat_models.planning.plan import plan

    peak = input_order_peak(graph)
    transfer = TransferModel(out_bw=peak / graph.total_cost * 20, in_bw=peak / graph.total_cost * 20)
    for fraction in ("70%", "50%"):
        budget = parse_budget(fraction, graph)
        if budget < graph.lower_bound:
            continue
        result = plan(graph, budget, "three-way", transfer=transfer, time_limit=1.0, allow_over_budget=True)
        sim = simulate(graph, result.schedule, transfer)
        if sim.peak > budget:
            continue
        bound = cost_lower_bound(graph, budget, transfer=transfer)
        assert bound.value <= sim.total_cost * (1 + EPS), (fraction, bound, sim.total_cost, sim.prefetches)
        assert result.lower_bound.value <= sim.total_cost * (1 + EPS)  # the plan's own search (its share of 1 s)
        assert result.lower_bound.method != "trivial" or bound.method == "trivial", (result.lower_bound, bound)


@pytest.mark.parametrize(("mem", "cost"), [(2**62 // 20, 1e300), (3, 1e307), (2**62 // 40, 1e-300)])
def test_extreme_values_give_valid_bounds_without_numpy_warnings(mem: int, cost: float) -> None:
    """Sizes near the 2**62 cap and costs near the float range: no overflow warning, never above a plan."""
    import warnings

    chain = linear_chain(8)
    graph = Graph.from_arrays(
        chain.names, np.full(chain.n, cost), np.full(chain.n, mem, dtype=np.int64), chain.edges, name="extreme"
    )
    for fraction in (0.9, 0.6):
        budget = max(int(input_order_peak(graph) * fraction), int(graph.lower_bound))
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            bound = cost_lower_bound(graph, budget)
            peak = peak_lower_bound(graph)
        schedule, _ = run_heuristic("chen-greedy", graph, budget)
        sim = simulate(graph, schedule)
        assert np.isfinite(bound.value) and peak.value <= sim.peak
        if sim.peak <= budget:
            assert bound.value <= sim.total_cost * (1 + EPS), (fraction, bound, sim.total_cost)
