"""Issue #34, limits: huge or non-finite limits in `remat bench run` and sweeps, solver thread counts clamped."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from remat_models.backends.base import max_threads
from remat_models.bench.methods import method_from_mapping
from remat_models.bench.sweep import sweep_from_mapping, sweep_from_options
from remat_models.errors import ConfigurationError
from remat_models.io import linear_chain

REMAT = [sys.executable, "-P", "-m", "remat_models.cli.app"]


@pytest.mark.parametrize(("limit", "recorded"), [("3e6", 3e6), ("1e12", 1e9)])
def test_bench_run_takes_huge_time_limits(chain8: Path, tmp_path: Path, limit: str, recorded: float) -> None:
    out = tmp_path / "r.jsonl"
    command = [*REMAT, "bench", "run", "-g", str(chain8), "-b", "80%", "-m", "chen-greedy", "--time-limit", limit]
    done = subprocess.run([*command, "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "OverflowError" not in done.stderr
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["status"] == "within_budget" and record["time_limit"] == recorded


@pytest.mark.parametrize("args", [["--grace", "nan"], ["--time-limit", "inf"], ["--time-limit", "nan"]])
def test_bench_run_refuses_non_finite_limits_in_one_line(chain8: Path, tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "r.jsonl"
    command = [*REMAT, "bench", "run", "-g", str(chain8), "-b", "80%", "-m", "chen-greedy", *args, "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith("error: group 'cli': time_limit must be a finite number")
    assert "Traceback" not in done.stderr and not out.exists()


def test_sweeps_check_and_clamp_their_limits(chain8: Path) -> None:
    with pytest.raises(ConfigurationError, match="finite number"):
        sweep_from_options([str(chain8)], ["80%"], ["chen-greedy"], grace=math.nan)
    data = {"graphs": [str(chain8)], "budgets": ["80%"], "methods": ["chen-greedy"]}
    assert sweep_from_mapping({**data, "time_limit": 1e300}).groups[0].time_limit == 1e9
    for bad in ("x", True, [1]):
        with pytest.raises(ConfigurationError, match="seconds"):
            sweep_from_mapping({**data, "grace": bad})
    for bad in (math.nan, math.inf, -1, True):
        with pytest.raises(ConfigurationError, match="time_limit"):
            method_from_mapping({"name": "chen-greedy", "time_limit": bad})
    assert method_from_mapping({"name": "fastsa", "time_limit": 1e12}).time_limit == 1e9


def test_a_huge_solver_thread_count_is_clamped(chain8: Path) -> None:
    command = [*REMAT, "solve", str(chain8), "-b", "80%", "-f", "checkmate", "--backend", "highs"]
    done = subprocess.run([*command, "-S", "threads=1000000", "--time-limit", "5"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"threads=1000000 clamped to {max_threads()} threads" in " ".join(done.stderr.split())


def test_a_bench_run_of_auto_gets_the_sweeps_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without it auto ran to its own default limit (47 s in a 30 s sweep on a 185-node CNN)."""
    from remat_models.bench import child
    from remat_models.bench.methods import parse_method

    seen: dict[str, object] = {}
    monkeypatch.setattr(child, "plan", lambda *args, **kwargs: seen.update(kwargs))
    for method, expected in (("auto", 30.0), ("checkmate/highs", 30.0), ("chen-greedy", None), ("fastsa", None)):
        child.call_method(parse_method(method), linear_chain(4), 10, seed=0, time_limit=30.0)
        assert seen["time_limit"] == expected, method


def test_pyomo_and_cvxpy_children_are_killed_at_the_time_limit() -> None:
    """Their child builds the solver's model outside any limit: it is killed at the limit, not 1 s + 5 % after it."""
    from remat_models.backends import SolveLimits
    from remat_models.backends.deadline import hard_deadline, killed_at_the_limit

    for limit in (2.0, 10.0, 60.0, 1e6):
        cut = killed_at_the_limit(SolveLimits(time_limit=limit, workers=3))
        assert cut.time_limit is not None and cut.time_limit < limit and cut.workers == 3
        assert hard_deadline(cut.time_limit) == pytest.approx(limit)
    assert killed_at_the_limit(SolveLimits()).time_limit is None


def test_pyomo_and_cvxpy_are_not_imported_before_the_solve() -> None:
    """Their imports (0.4-1.5 s each) happen in the timed child, within the limit, not in the backends' constructors
    (Moccasin looks its backend up before its clock starts: 14-16 s under a 10 s limit)."""
    script = (
        "import json, sys\nfrom remat_models.backends import available, get_backend\n"
        "usable = [name for name in ('pyomo', 'cvxpy') if name in available()]\n"
        "for name in usable:\n    get_backend(name)\n"
        "print(json.dumps([usable, [name for name in ('pyomo', 'cvxpy') if name in sys.modules]]))\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, check=True)
    usable, imported = json.loads(done.stdout)
    if not usable:
        pytest.skip("neither pyomo nor cvxpy is installed")
    assert imported == [], done.stdout
