"""The extension API: index maps, named rows and globals, the Extension protocol through plan/CLI, readable exports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from remat_models.backends import SolveLimits, available
from remat_models.core.schedule import simulate
from remat_models.errors import ConfigurationError, ModelTooLargeError, SolverError
from remat_models.extensions.registry import make_extension
from remat_models.formulations import get_formulation
from remat_models.formulations.solving import build_for_backend, solve_model
from remat_models.io import linear_chain, write_graph
from remat_models.model import Model
from remat_models.planning.plan import PlanStatus, parse_method_name, plan

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "compute_cap.py"
sys.path.insert(0, str(EXAMPLE.parent))
from compute_cap import ComputeCap  # noqa: E402

ALL_BACKENDS = ["cpsat", "highs", "gurobi", "minizinc", "pyomo"]


def _backend_or_skip(backend: str) -> str:
    if backend.split(":")[0] not in available():
        pytest.skip(f"backend {backend} is not installed here")
    return backend


def _computations(schedule, graph) -> Counter:
    return Counter(graph.names[v] for v in schedule.compute_sequence())


# ------------------------------------------------------------------ model layer


def test_named_rows_take_terms_and_objective_terms() -> None:
    m = Model()
    x = m.bool_block("x", 3)
    name = m.add_rows([0, 1], x.cols[:2], 1.0, ub=1.0, name="pairs")
    assert name == "pairs" and m.rows("pairs").num_rows == 2
    m.add_terms("pairs", [1], [x.cols[2]], [1.0])
    assert m.rows("pairs").nnz == 3
    m.set_objective(x.cols[:1], -1.0)
    m.add_objective_terms(x.cols[1:], -1.0)
    with pytest.raises(ConfigurationError, match="exists already"):
        m.add_rows([0], x.cols[:1], 1.0, ub=1.0, name="pairs")
    with pytest.raises(ConfigurationError, match="no row batch 'pair'"):
        m.add_terms("pair", [0], [0], [1.0])
    result = solve_backend("cpsat", m)
    assert result.objective == -2  # x0 + x1 <= 1 and x1 + x2 <= 1: x0 = x2 = 1


def solve_backend(name: str, model: Model):
    from remat_models.backends import get_backend

    return get_backend(name).solve(model)


def test_named_cumulative_and_reservoir_can_be_extended() -> None:
    m = Model()
    iv = m.interval_block("job", 3, start=(0, 10), size=2)
    m.add_cumulative(iv.ids[:2], [1, 1], 1, name="machine")
    m.extend_cumulative("machine", iv.ids[2:], [1])
    assert m.cumulatives[0].interval_ids.tolist() == [0, 1, 2]
    with pytest.raises(ConfigurationError, match="no cumulative 'mach'"):
        m.extend_cumulative("mach", iv.ids[:1], [1])
    t = m.int_block("t", 2, 0, 5)
    m.add_reservoir([t[0]], [1], min_level=0, max_level=1, name="tank")
    m.extend_reservoir("tank", [t[1]], [-1])
    assert m.reservoirs[0].changes.tolist() == [1, -1]
    m.minimize(m.block("job.end").sum())
    assert solve_backend("cpsat", m).objective == 2 + 4 + 6  # three jobs one after another


def test_index_map_dense_and_lookup_agree() -> None:
    graph = linear_chain(4)
    order = [0, 1, 2, 3, 4, 5, 6, 7, 8]
    built = get_formulation("checkmate").build(graph, 5, {"order": order})
    r = built.index("R")
    assert r.axes == ("stage", "node") and r.ids.shape == (graph.n, graph.n)
    stages, nodes = np.nonzero(r.ids >= 0)
    assert np.array_equal(r.lookup(stages, nodes), r.ids[stages, nodes])
    assert r.lookup(0, 5) == -1 and r.lookup(99, 0) == -1  # no cell / out of range
    free = built.index("FREE")
    assert free.axes == ("stage", "node", "consumer")
    assert np.array_equal(free.lookup(*free.coords), free.cols)


def test_node_axes_are_graph_node_ids_not_positions() -> None:
    graph = linear_chain(3)  # f0 f1 f2 loss b2 b1 b0: only one topological order; permute via Moccasin's nodes
    built = get_formulation("checkmate").build(graph, 6)
    r = built.index("R")
    cm = built
    for v in range(graph.n):  # the diagonal cell of node v sits at stage = its position in the model's order
        stage = int(np.flatnonzero(cm.order == v)[0])
        col = r.ids[stage, v]
        assert col >= 0 and built.model.col_names()[col] == f"R[{stage},{graph.names[v]}]"
    presence = get_formulation("moccasin").build(graph, 6, {"C": 2}).index("retain.presence")
    assert presence.axes == ("node", "copy") and presence.ids.shape == (graph.n, 2)


# ------------------------------------------------------------ formulation protocol


def test_options_are_typed_per_formulation() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown moccasin option\(s\) \['staged'\]"):
        get_formulation("moccasin").options({"staged": False})
    with pytest.raises(ConfigurationError, match=r"unknown checkmate option\(s\) \['C'\]"):
        get_formulation("checkmate").options({"C": 2})
    assert get_formulation("moccasin").default_backend == "cpsat"
    with pytest.raises(ConfigurationError, match=r"unknown lp-rounding option\(s\) \['C'\]"):
        plan(linear_chain(3), 5, formulation="checkmate", approx="lp-rounding", options={"C": 2})


def test_decode_without_a_solution_names_the_block() -> None:
    built = get_formulation("checkmate").build(linear_chain(3), 6)
    with pytest.raises(SolverError, match="no values for block 'R'"):
        get_formulation("checkmate").decode(built, {})


def test_one_parser_for_method_names() -> None:
    assert parse_method_name("checkmate/lp-rounding").approx == "lp-rounding"
    assert parse_method_name("moccasin/minizinc:gecode").backend == "minizinc:gecode"
    assert parse_method_name("chen-greedy").method == "chen-greedy"
    assert parse_method_name("moccasin").formulation == "moccasin"
    with pytest.raises(ConfigurationError, match="unknown backend 'hihgs'"):
        parse_method_name("checkmate/hihgs")
    with pytest.raises(ConfigurationError, match="unknown formulation"):
        parse_method_name("checkmat/highs")


GENERIC_MODULES = (
    "planning/plan.py",
    "planning/methods.py",
    "planning/solve.py",
    "planning/result.py",
    "planning/default_view.py",
    "formulations/solving.py",
    "extensions/paging.py",  # formulations declare their paging part; the extension names none
    "formulations/peak.py",  # ... and their peak model for exact max batch
    "cli/app.py",
)


@pytest.mark.parametrize("module", GENERIC_MODULES)
def test_generic_code_names_no_formulation(module: str) -> None:
    text = (ROOT / "remat_models" / module).read_text()
    assert not re.search(r'"(moccasin|checkmate|fastsa)"', text), module


# ------------------------------------------------------------------ extensions


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_compute_cap_on_checkmate_binds_and_agrees_across_backends(backend: str) -> None:
    graph, budget = linear_chain(6), 4
    free = plan(graph, budget, formulation="checkmate", backend=_backend_or_skip(backend), time_limit=60)
    capped = plan(
        graph, budget, formulation="checkmate", backend=backend, time_limit=60, extensions=[ComputeCap(1, ("f1",))]
    )
    assert free.status == capped.status == PlanStatus.WITHIN_BUDGET
    assert _computations(free.schedule, graph)["f1"] > 1  # every optimum recomputes f1 (else the capped cost is 18)
    assert _computations(capped.schedule, graph)["f1"] == 1
    assert (free.simulation.total_cost, capped.simulation.total_cost) == (18.0, 20.0)  # same on every backend
    assert capped.simulation.peak <= budget


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_compute_cap_on_moccasin_agrees_across_backends(backend: str) -> None:
    graph, budget = linear_chain(3), 6  # the input order fits: the start is the optimum on every backend
    _backend_or_skip(backend)
    options = {"C": 2}
    if backend == "gurobi":  # the lowered cumulative and reservoirs exceed pip gurobipy's size-limited licence
        with pytest.raises(ModelTooLargeError, match="size limit of the license"):
            plan(graph, budget, formulation="moccasin", backend=backend, options=options, extensions=[ComputeCap(1)])
        return
    cap = [ComputeCap(1)]
    capped = plan(graph, budget, formulation="moccasin", backend=backend, options=options, extensions=cap)
    assert capped.status == PlanStatus.WITHIN_BUDGET and capped.simulation.total_cost == graph.total_cost
    assert max(_computations(capped.schedule, graph).values()) == 1


def test_compute_cap_applies_in_both_moccasin_phases() -> None:
    graph, budget = linear_chain(4), 4  # the input order is over budget: phase 1 runs
    free = solve_model(graph, budget, "moccasin", options={"C": 3})
    capped = solve_model(graph, budget, "moccasin", options={"C": 3}, extensions=[ComputeCap(1, ("f0",))])
    assert "phase1" in capped.phases and capped.simulation.peak <= budget
    assert _computations(capped.schedule, graph)["f0"] == 1
    assert capped.total_cost == 12.0 >= free.total_cost == 11.0  # Checkmate's optimum with and without the cap


class FlagRecompute:
    """Adds a block of its own (z[v] >= each extra computation of v) and an objective term: decode must still work."""

    name = "flag"
    supports = frozenset({"checkmate"})

    def apply(self, built) -> None:
        r = built.index("R")
        node = r.coords[1]
        z = built.model.bool_block("z", built.graph.n)
        built.model.add_rows(np.arange(node.size), r.cols, 1.0, ub=0.0, name="flag_rows")  # R[t, v] <= z[v]
        built.model.add_terms("flag_rows", np.arange(node.size), z.cols[node], -1.0)
        built.model.add_objective_terms(z.cols, 0.5)
        built.extensions[self.name] = z

    def hints(self, built, schedule) -> dict[str, np.ndarray]:
        return {"z": np.ones(built.graph.n)}


def test_decode_hints_and_peak_bound_survive_added_blocks() -> None:
    graph, budget = linear_chain(4), 5
    start = plan(graph, budget, "checkpoint-all", allow_over_budget=True).schedule
    built = build_for_backend(graph, budget, "checkmate", "highs", extensions=[FlagRecompute()])
    form = get_formulation("checkmate")
    hints = form.hints(built, start)
    assert "z" in hints and "R" in hints
    outcome = form.solve(built, "highs", SolveLimits(), start)
    assert outcome.schedule is not None
    sim = simulate(graph, outcome.schedule)
    assert sim.peak <= outcome.model_peak <= budget
    assert outcome.objective == pytest.approx(sim.total_cost + 0.5 * graph.n)  # every z is forced to 1


def test_extension_must_support_the_formulation() -> None:
    with pytest.raises(ConfigurationError, match="does not support 'moccasin'"):
        plan(linear_chain(3), 6, formulation="moccasin", extensions=[FlagRecompute()])
    with pytest.raises(ConfigurationError, match="unknown extension 'nope'"):
        make_extension("nope:x=1")
    with pytest.raises(ConfigurationError, match="is not key=value"):
        make_extension(f"{EXAMPLE}:ComputeCap:cap")


def test_extension_specs_parse_values() -> None:
    cap = make_extension(f'{EXAMPLE}:ComputeCap:cap=2,nodes=["f0","f1"]')
    assert (cap.cap, list(cap.nodes)) == (2, ["f0", "f1"])
    assert make_extension({"name": f"{EXAMPLE}:ComputeCap", "cap": 3}).cap == 3


# ---------------------------------------------------------------------- CLI


def _remat(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "remat_models.cli.app", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_cli_with_extension_solve_and_readable_exports(tmp_path: Path) -> None:
    graph = tmp_path / "chain6.json"
    write_graph(linear_chain(6), graph)
    cap = f"{EXAMPLE}:ComputeCap:cap=1,nodes=[\"f1\"]"
    solved = _remat("solve", str(graph), "-b", "4", "-f", "checkmate", "--with", cap, "-o", "p.json", cwd=tmp_path)
    assert solved.returncode == 0, solved.stderr
    assert json.loads((tmp_path / "p.json").read_text())["metadata"]["total_cost"] == 20.0
    lp = _remat("export", str(graph), "-b", "4", "-o", "m.lp", "--with", cap, cwd=tmp_path)
    assert lp.returncode == 0, lp.stderr
    text = (tmp_path / "m.lp").read_text()
    assert "R(3,f1)" in text and "compute_cap(0):" in text and "memory(" in text and " c0 " not in text
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(tmp_path / "m.lp"))
    h.run()
    assert h.getInfo().objective_function_value == pytest.approx(20.0)  # re-solves to the capped optimum
    mzn = _remat("export", str(graph), "-b", "4", "-o", "m.mzn", cwd=tmp_path)
    assert mzn.returncode == 0, mzn.stderr
    assert "array[int] of var int: b_R = " in (tmp_path / "m.mzn").read_text()
    assert 'b_R_node_names = ["f0","f1",' in (tmp_path / "m.dzn").read_text()


def test_cli_formulation_options_are_checked_by_the_formulation(tmp_path: Path) -> None:
    graph = tmp_path / "chain3.json"
    write_graph(linear_chain(3), graph)
    bad = _remat("solve", str(graph), "-b", "6", "-f", "moccasin", "--unpartitioned", cwd=tmp_path)
    assert bad.returncode == 1 and "--unpartitioned is not an option of moccasin" in bad.stderr
    assert "Traceback" not in bad.stderr
    good = _remat("solve", str(graph), "-b", "6", "-f", "moccasin", "-O", "C=3", cwd=tmp_path)
    assert good.returncode == 0 and "moccasin/cpsat" in good.stdout  # CP-SAT is Moccasin's default backend
    compared = _remat("compare", str(graph), "-b", "6", "--methods", "checkmate/lp-rounding,chen-greedy", cwd=tmp_path)
    assert compared.returncode == 0 and "checkmate/lp-rounding" in compared.stdout, compared.stderr


def test_bench_methods_take_extensions_and_check_them_at_load() -> None:
    from remat_models.bench.methods import method_from_mapping, parse_method

    spec = method_from_mapping({"formulation": "checkmate", "extensions": [f"{EXAMPLE}:ComputeCap:cap=1"]})
    assert spec.backend is None and spec.label == f"checkmate/default+with={EXAMPLE}:ComputeCap:cap=1"
    assert parse_method("checkmate/lp-rounding").approx == "lp-rounding"
    with pytest.raises(ConfigurationError, match="unknown extension 'pagin'"):
        method_from_mapping({"formulation": "checkmate", "extensions": ["pagin:in_bw=1"]})
