"""remat_models.bench: sweeps through the local pool and a Dask LocalCluster, resume, crashes, timeouts, report."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from remat_models.bench.isolate import stop_running
from remat_models.bench.methods import method_from_mapping, parse_method
from remat_models.bench.pools import DaskPool, LocalPool, run_sweep
from remat_models.bench.reference import load_reference
from remat_models.bench.report import build_tables, write_report
from remat_models.bench.store import ResultStore, finished_ids, read_records
from remat_models.bench.sweep import expand, load_sweep, sweep_from_options
from remat_models.cli.bench import bench_app
from remat_models.core.schedule import simulate
from remat_models.errors import ConfigurationError, GraphError, RematError
from remat_models.io import linear_chain, read_schedule, write_graph
from remat_models.planning.plan import PlanResult, plan

PLUGIN = f"{Path(__file__).resolve()}"


# Plug-in methods (loaded by path in the isolated child process).
def crash(graph: Any, budget: int, **_: Any) -> PlanResult:
    os.kill(os.getpid(), signal.SIGSEGV)
    raise AssertionError("unreachable")


def hang(graph: Any, budget: int, **_: Any) -> PlanResult:
    time.sleep(60)
    raise AssertionError("unreachable")


def fail(graph: Any, budget: int, **_: Any) -> PlanResult:
    raise ValueError("deliberate failure")


def greedy(graph: Any, budget: int, *, seed: int, time_limit: float, **_: Any) -> PlanResult:
    return plan(graph, budget, "chen-greedy", seed=seed)


METHODS = ["checkpoint-all", "checkmate/highs", f"{PLUGIN}:crash", f"{PLUGIN}:hang", f"{PLUGIN}:fail"]
EXPECTED = {
    "checkpoint-all": "over_budget",
    "checkmate/highs": "within_budget",
    "test_bench.py:crash": "crashed",
    "test_bench.py:hang": "timeout",
    "test_bench.py:fail": "error",
}


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graphs") / "chain.json"
    write_graph(linear_chain(4), path)
    return path


@pytest.fixture(scope="module")
def local_run(chain: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    results = tmp_path_factory.mktemp("local") / "results.jsonl"
    # grace 5 s: the run's imports alone take 2 s on a loaded 2-core machine (the crash must come before the kill)
    sweep = sweep_from_options([str(chain)], ["90%"], METHODS, time_limit=0.5, grace=5.0)
    records = run_sweep(expand(sweep), results, LocalPool(jobs=2))
    return results, records


def _by_method(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {record["method"]: record for record in records}


def test_method_strings_and_tables() -> None:
    assert parse_method("chen-greedy").kind == "heuristic"
    exact = parse_method("checkmate/pyomo:cbc")
    assert (exact.kind, exact.formulation, exact.backend, exact.paper) == (
        "exact",
        "checkmate",
        "pyomo:cbc",
        "checkmate_milp",
    )
    rounding = parse_method("checkmate/lp-rounding")
    assert (rounding.kind, rounding.paper) == ("approx", "checkmate_lp_rounding")
    assert parse_method("pkg.module:function").kind == "plugin"
    assert parse_method("dir/file.py:function").plugin == "dir/file.py:function"
    fastsa = method_from_mapping({"name": "fastsa", "seed": [0, 1, 2], "time_limit": 60})
    assert (fastsa.seeds, fastsa.time_limit, fastsa.paper) == ((0, 1, 2), 60.0, "fastsa")
    with pytest.raises(ConfigurationError, match="unknown method key"):
        method_from_mapping({"name": "fastsa", "sede": 1})
    with pytest.raises(ConfigurationError, match="exactly one of"):
        method_from_mapping({"name": "fastsa", "formulation": "checkmate"})


def test_sweep_files_toml_and_yaml_expand_alike(chain: Path, tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text(
        f"""name = "t"
seeds = [0]
time_limit = 5
[method.milp]
formulation = "checkmate"
backend = "highs"
[[groups]]
name = "a"
graphs = ["{chain.name}"]
budgets = ["90%", "0.8"]
methods = ["milp", "chen-greedy", {{ name = "fastsa", seeds = [1, 2], time_limit = 3 }}]
"""
    )
    yaml = tmp_path / "s.yaml"
    yaml.write_text(
        f"""name: t
seeds: [0]
time_limit: 5
method: {{milp: {{formulation: checkmate, backend: highs}}}}
groups:
  - {{name: a, graphs: [{chain.name}], budgets: ["90%", "0.8"],
      methods: [milp, chen-greedy, {{name: fastsa, seeds: [1, 2], time_limit: 3}}]}}
"""
    )
    runs = expand(load_sweep(toml), graphs_dir=chain.parent)
    assert len(runs) == 2 * (1 + 1 + 2)
    assert {r.budget for r in runs} == {int(0.9 * 6), int(0.8 * 6)}  # the chain's input-order peak is 6
    assert {r.run_id for r in runs} == {r.run_id for r in expand(load_sweep(yaml), graphs_dir=chain.parent)}
    assert {r.time_limit for r in runs if r.method.name == "fastsa"} == {3.0}
    bad = tmp_path / "bad.toml"
    bad.write_text('graphs = ["x"]\nbudgets = ["90%"]\nmethods = ["chen-greedy"]\ntimelimit = 3\n')
    with pytest.raises(ConfigurationError, match=r"bad\.toml: unknown sweep key\(s\) timelimit"):
        load_sweep(bad)
    with pytest.raises(GraphError, match="graph 'missing' not found"):
        expand(sweep_from_options(["missing"], ["90%"], ["chen-greedy"]))


def test_local_sweep_records_every_outcome(local_run: tuple[Path, list[dict[str, Any]]]) -> None:
    results, records = local_run
    by_method = _by_method(records)
    assert {m: r["status"] for m, r in by_method.items()} == EXPECTED
    milp = by_method["checkmate/highs"]
    assert milp["solver_status"] == "optimal_in_model" and milp["objective"] == milp["total_cost"] == milp["bound"]
    assert milp["peak"] <= milp["budget"] and milp["peak_fraction"] <= milp["budget_fraction"]
    assert milp["trajectory"] and milp["time_to_best_s"] is not None and milp["tdi"] > 0
    assert milp["versions"]["remat_models"] and milp["machine"]["cpus"] >= 1
    assert by_method["test_bench.py:crash"]["signal"] == "SIGSEGV"
    assert by_method["test_bench.py:hang"]["elapsed_s"] < 10
    assert "deliberate failure" in by_method["test_bench.py:fail"]["error"]
    assert [r["run_id"] for r in read_records(results)] == [r["run_id"] for r in records]


def test_resume_skips_finished_runs_and_survives_a_torn_line(chain: Path, tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    sweep = sweep_from_options([str(chain)], ["90%"], ["checkpoint-all"])
    assert len(run_sweep(expand(sweep), results)) == 1
    assert run_sweep(expand(sweep), results) == []
    with open(results, "ab") as handle:  # a sweep killed in the middle of a write
        handle.write(b'{"run_id": "torn", "stat')
    assert len(read_records(results)) == 1
    bigger = sweep_from_options([str(chain)], ["90%"], ["checkpoint-all", f"{PLUGIN}:greedy"])
    new = run_sweep(expand(bigger), results)
    assert [r["method"] for r in new] == ["test_bench.py:greedy"] and new[0]["status"] == "within_budget"
    assert len(read_records(results)) == 2
    store_lines = results.read_text().splitlines()
    assert store_lines[-1].startswith("{") and json.loads(store_lines[-1])["method"] == "test_bench.py:greedy"
    failed = [{"run_id": "a", "status": "crashed"}, {"run_id": "b", "status": "within_budget"}]
    assert finished_ids(failed) == {"a", "b"} and finished_ids(failed, retry_failed=True) == {"b"}


def test_dask_executor_gives_the_same_rows(
    chain: Path, tmp_path: Path, local_run: tuple[Path, list[dict[str, Any]]]
) -> None:
    distributed = pytest.importorskip("distributed")
    methods = ["checkpoint-all", "checkmate/highs", f"{PLUGIN}:crash"]
    sweep = sweep_from_options([str(chain)], ["90%"], methods, time_limit=0.5, grace=1.5)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, protocol="tcp", dashboard_address=None
    ) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        records = run_sweep(expand(sweep), tmp_path / "dask.jsonl", DaskPool(cluster.scheduler_address))
    local = _by_method(local_run[1])
    for method, record in _by_method(records).items():
        assert record["status"] == EXPECTED[method]
        assert record["run_id"] == local[method]["run_id"]
        assert record["tdi"] == local[method]["tdi"]
    with pytest.raises(ConfigurationError, match="cannot reach the Dask scheduler"):
        run_sweep(expand(sweep), tmp_path / "none.jsonl", DaskPool("tcp://127.0.0.1:9", connect_timeout=1))
    assert not (tmp_path / "none.jsonl").exists()


def test_report_tables_and_plots(
    shared_graphs_dir: Path, shared_reference_dir: Path, tmp_path: Path, local_run: tuple[Path, list[dict[str, Any]]]
) -> None:
    sweep = sweep_from_options(["rl_g1_n100"], ["90%", "80%"], ["checkpoint-all", "chen-greedy"])
    records = run_sweep(expand(sweep, graphs_dir=shared_graphs_dir), tmp_path / "rl.jsonl", LocalPool(jobs=2))
    records += local_run[1]
    reference = load_reference(shared_reference_dir)
    tables = build_tables(records, reference)
    moccasin = tables["moccasin_table3"]
    rl_rows = [row for row in moccasin.rows if row[0] == "RL G1"]
    assert {row[3] for row in rl_rows} >= {"checkpoint-all", "chen-greedy", "checkmate_milp", "moccasin"}
    assert {row[4] for row in rl_rows if row[3] == "moccasin"} == {"not run"}
    assert {row[11] for row in rl_rows if row[3] == "chen-greedy"} == {"no published row"}
    fastsa_rows = [row for row in tables["fastsa_table1"].rows if row[0] == "RL 1" and row[3] == "checkpoint-all"]
    assert [row[2] for row in fastsa_rows] == ["90 %", "80 %"]
    ratios = {row[1]: row for row in tables["checkmate_table2"].rows if row[0] == "chain"}
    assert ratios["checkpoint-all"][3] == "0/1"  # checkpoint-all does not fit 90 % of the chain
    written = write_report(records, tmp_path / "report", shared_reference_dir)
    text = (tmp_path / "report" / "report.md").read_text()
    assert "### Moccasin Table 3 layout" in text and "| RL G1 | (100, 236) | 41,687 |" in text
    header = next(csv.reader(io.StringIO((tmp_path / "report" / "fastsa_table1.csv").read_text())))
    assert header[0] == "graph"
    assert {p.name for p in written} >= {"progress.png", "progress.svg", "tradeoff.png", "tradeoff.svg"}
    assert (tmp_path / "report" / "tradeoff.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_run_report_timeline_and_errors(chain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMAT_SHARED", str(tmp_path / "no-shared"))  # a fresh clone: nothing beside it
    app = typer.Typer()
    app.add_typer(bench_app, name="bench")
    runner = CliRunner()
    results, schedules = tmp_path / "cli.jsonl", tmp_path / "schedules"
    options = ["-b", "0.9", "-m", "checkmate/highs", "-o", str(results), "--schedules", str(schedules)]
    run = runner.invoke(app, ["bench", "run", "-g", str(chain), *options, "--time-limit", "20"])
    assert run.exit_code == 0, run.output
    (record,) = read_records(results)
    saved = schedules / f"{record['run_id']}.json"
    graph_peak = simulate_peak(chain, saved)
    assert graph_peak == record["peak"]
    report = runner.invoke(app, ["bench", "report", str(results), "-o", str(tmp_path / "rep"), "--no-plots"])
    assert report.exit_code == 0, report.output
    assert "Published numbers: none at hand" in (tmp_path / "rep" / "report.md").read_text()
    assert not (tmp_path / "rep" / "progress.png").exists()
    absent = runner.invoke(app, ["bench", "report", str(results), "--reference", str(tmp_path / "nothing")])
    assert isinstance(absent.exception, ConfigurationError) and "does not exist" in str(absent.exception)
    timeline = runner.invoke(
        app, ["bench", "plot", "timeline", str(chain), str(saved), "-b", "0.9", "-o", str(tmp_path / "tl")]
    )
    assert timeline.exit_code == 0, timeline.output
    assert (tmp_path / "tl.png").is_file() and (tmp_path / "tl.svg").is_file()
    bad = runner.invoke(app, ["bench", "run", "-g", "nowhere.json", "-b", "0.9", "-m", "x", "-o", str(tmp_path / "b")])
    assert bad.exit_code != 0 and isinstance(bad.exception, RematError) and not (tmp_path / "b").exists()
    missing = runner.invoke(app, ["bench", "report", str(tmp_path / "none.jsonl")])
    assert isinstance(missing.exception, ConfigurationError) and "does not exist" in str(missing.exception)


def simulate_peak(graph_path: Path, schedule_path: Path) -> int:
    from remat_models.io import read_graph

    graph = read_graph(graph_path)
    return simulate(graph, read_schedule(schedule_path, graph)).peak


def test_store_appends_whole_lines(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "deep" / "r.jsonl")
    store.append({"run_id": "x", "value": float("nan"), "nested": [float("inf")]})
    (record,) = store.read()
    assert record == {"run_id": "x", "value": None, "nested": [None]}


def hog(graph: Any, budget: int, **_: Any) -> PlanResult:
    bytearray(6 * 2**30)  # fails at once under the 3 GiB address-space limit
    raise AssertionError("unreachable")


def test_memory_limit_gives_oom_and_stop_running_stops_children(chain: Path, tmp_path: Path) -> None:
    sweep_file = tmp_path / "oom.toml"
    sweep_file.write_text(
        f'graphs = ["{chain}"]\nbudgets = ["90%"]\nmethods = ["{PLUGIN}:hog"]\nmemory_limit = "3GiB"\ntime_limit = 5\n'
    )
    (record,) = run_sweep(expand(load_sweep(sweep_file, allow_code=True)), tmp_path / "oom.jsonl")
    assert record["status"] == "oom"
    hang_sweep = sweep_from_options([str(chain)], ["90%"], [f"{PLUGIN}:hang"], time_limit=30, grace=30)
    killer = threading.Timer(2.0, stop_running)
    killer.start()
    started = time.perf_counter()
    (killed,) = run_sweep(expand(hang_sweep), tmp_path / "killed.jsonl")
    assert killed["status"] == "interrupted" and time.perf_counter() - started < 20  # killed by the sweep
