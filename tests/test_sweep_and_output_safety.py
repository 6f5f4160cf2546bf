"""Issue #34: a sweep file runs code only with --allow-code and writes only inside its output folder; `remat export`
keeps an existing companion (.dzn) unless --force and never writes over its input; `remat bench run -o` appends only
to a results file; non-UTF-8 results files are one typed error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from remat_models.bench.store import check_results_file, read_records
from remat_models.bench.sweep import load_sweep, sweep_from_mapping
from remat_models.errors import ConfigurationError, OutputError
from remat_models.io import linear_chain, write_graph

REMAT = [sys.executable, "-P", "-m", "remat_models.cli.app"]
EVIL = 'def f(*args, **kwargs):\n    open("RAN", "w").close()\n    raise SystemExit("ran")\n'


@pytest.fixture
def chain8(tmp_path: Path) -> Path:
    path = tmp_path / "chain8.json"
    write_graph(linear_chain(8), path)
    return path


def _remat(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REMAT, *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize(
    "methods",
    [
        '["evil.py:f"]',
        '["os:getcwd"]',
        '[{plugin = "evil.py:f"}]',
        '[{formulation = "checkmate", extensions = ["evil.py:f"]}]',
        '[{formulation = "checkmate", extensions = [{name = "evil.py:f"}]}]',
    ],
)
def test_a_sweep_file_names_code_only_with_allow_code(chain8: Path, tmp_path: Path, methods: str) -> None:
    (tmp_path / "evil.py").write_text(EVIL)
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'graphs = ["{chain8}"]\nbudgets = ["80%"]\nmethods = {methods}\n')
    with pytest.raises(ConfigurationError, match=r"names code to run .*--allow-code"):
        load_sweep(sweep)
    done = _remat(["bench", "run", str(sweep), "-o", "r.jsonl"], tmp_path)
    assert done.returncode == 1 and "--allow-code" in done.stderr
    assert not (tmp_path / "RAN").exists() and not (tmp_path / "r.jsonl").exists()


def test_allow_code_runs_a_sweep_plug_in(chain8: Path, tmp_path: Path) -> None:
    (tmp_path / "plug.py").write_text(
        "from remat_models.planning.plan import plan\n"
        "def run(graph, budget, **kwargs):\n    return plan(graph, budget, 'chen-greedy', allow_over_budget=True)\n"
    )
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'graphs = ["{chain8}"]\nbudgets = ["80%"]\nmethods = ["plug.py:run"]\n')
    assert load_sweep(sweep, allow_code=True).groups[0].methods[0].kind == "plugin"
    done = _remat(["bench", "run", str(sweep), "--allow-code", "-o", "r.jsonl"], tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = read_records(tmp_path / "r.jsonl")
    assert record["status"] == "within_budget"


def test_registered_extensions_need_no_opt_in(chain8: Path) -> None:
    data = {"graphs": [str(chain8)], "budgets": ["80%"]}
    methods = [{"formulation": "checkmate", "extensions": ["paging:bw=2"]}]
    assert sweep_from_mapping({**data, "methods": methods}).groups[0].methods[0].extensions == ("paging:bw=2",)


# remat bench run refuses a sweep name in load_sweep, before it writes anything: the same path for every name, so
# the CLI runs for a relative and an absolute escape only (a process each) and load_sweep checks every name
@pytest.mark.parametrize(
    ("name", "cli"),
    [("../../../x", True), ("/tmp/x", True), *((name, False) for name in ("a/b", "..", "", "~x", "a\\b"))],
)
def test_a_sweep_name_stays_inside_the_output_folder(chain8: Path, tmp_path: Path, name: str, cli: bool) -> None:
    sweep = tmp_path / "s.toml"
    body = f'graphs = ["{chain8}"]\nbudgets = ["80%"]\nmethods = ["chen-greedy"]\n'
    sweep.write_text(f"name = {json.dumps(name)}\n{body}")
    with pytest.raises(ConfigurationError, match="must be a plain file name"):
        load_sweep(sweep)
    if not cli:
        return
    (tmp_path / "run").mkdir()
    done = _remat(["bench", "run", str(sweep)], tmp_path / "run")
    assert done.returncode == 1 and "plain file name" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain8.json", "run", "s.toml"]
    assert list((tmp_path / "run").iterdir()) == []


def test_export_keeps_an_existing_companion_unless_forced(chain8: Path, tmp_path: Path) -> None:
    (tmp_path / "keep.dzn").write_text("mine")
    args = ["export", str(chain8), "-f", "checkmate", "-b", "80%", "--format", "mzn", "-o", "keep.mzn"]
    done = _remat(args, tmp_path)
    assert done.returncode == 1 and "keep.dzn exists" in done.stderr and "--force" in done.stderr
    assert (tmp_path / "keep.dzn").read_text() == "mine" and not (tmp_path / "keep.mzn").exists()
    done = _remat([*args, "--force"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "keep.dzn").read_text().startswith("n_cols") and (tmp_path / "keep.mzn").exists()
    done = _remat(["export", str(chain8), "-f", "checkmate", "-b", "80%", "-o", "new.mzn"], tmp_path)
    assert done.returncode == 0 and (tmp_path / "new.dzn").exists()  # no companion there: written


def test_export_never_writes_over_its_input_graph_through_a_companion(chain8: Path, tmp_path: Path) -> None:
    graph = tmp_path / "g.dzn"
    graph.write_bytes(chain8.read_bytes())
    for extra in ([], ["--force"]):
        done = _remat(["export", str(graph), "-f", "checkmate", "-b", "80%", "-o", "g.mzn", *extra], tmp_path)
        assert done.returncode == 1 and "is the input" in done.stderr
        assert graph.read_bytes() == chain8.read_bytes() and not (tmp_path / "g.mzn").exists()


def test_bench_run_refuses_an_output_that_is_not_a_results_file(chain8: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    done = _remat(["solve", str(chain8), "-b", "80%", "-m", "chen-greedy", "-o", str(plan)], tmp_path)
    assert done.returncode == 0
    before = plan.read_bytes()
    for target in (plan, chain8.with_name("copy.json")):
        if target != plan:
            target.write_bytes(json.dumps(json.loads(chain8.read_text())).encode())  # one line of JSON, no run_id
        kept = target.read_bytes()
        args = ["bench", "run", "-g", str(chain8), "-b", "80%", "-m", "chen-greedy", "-o", str(target)]
        done = _remat(args, tmp_path)
        assert done.returncode == 1 and "is not a results file" in done.stderr
        assert "skipping an incomplete record" not in done.stderr
        assert target.read_bytes() == kept
    assert plan.read_bytes() == before


def test_results_files_with_torn_lines_are_still_results_files(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    results.write_text('{"run_id":"a","status":"error"}\n{"run_id":"b","sta\n\n{"run_id": "c", "status": "x"}\n')
    check_results_file(results)
    check_results_file(tmp_path / "absent.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    check_results_file(tmp_path / "empty.jsonl")
    results.write_text('{"run_id":"a"}\n{"nodes": []}\n')
    with pytest.raises(OutputError, match="line 2 is not a run record"):
        check_results_file(results)


def test_a_results_file_that_is_not_utf8_is_one_typed_error(chain8: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"run_id": "\xff"}\n')
    with pytest.raises(ConfigurationError, match="not UTF-8"):
        read_records(bad)
    with pytest.raises(OutputError, match="not UTF-8"):
        check_results_file(bad)
    for args in (["bench", "report", str(bad)], ["bench", "plot", "tradeoff", str(bad), "-o", "p"]):
        done = _remat(args, tmp_path)
        assert done.returncode == 1 and "not UTF-8" in done.stderr and "Traceback" not in done.stderr
    done = _remat(["bench", "run", "-g", str(chain8), "-b", "80%", "-m", "chen-greedy", "-o", str(bad)], tmp_path)
    assert done.returncode == 1 and "not UTF-8" in done.stderr and "Traceback" not in done.stderr


def test_a_record_with_a_field_of_the_wrong_type_is_one_error_before_any_file(chain8: Path, tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    done = _remat(["bench", "run", "-g", str(chain8), "-b", "80%", "-m", "chen-greedy", "-o", str(results)], tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads(results.read_text())
    results.write_text(results.read_text() + json.dumps({**record, "run_id": "x2", "machine": [1, 2]}) + "\n")
    with pytest.raises(ConfigurationError, match=r"r.jsonl:2: record field 'machine' must be an object"):
        read_records(results)
    done = _remat(["bench", "report", str(results), "--no-plots"], tmp_path)
    assert done.returncode == 1 and "record field 'machine'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r_report").exists()  # nothing written
