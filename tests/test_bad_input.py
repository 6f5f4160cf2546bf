"""Bad input at the library's boundary gets one typed error naming the value (issue 17)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from remat_models.backends import SolveLimits
from remat_models.cli.app import app
from remat_models.core.budget import check_budget, parse_budget, parse_size
from remat_models.core.graph import Graph
from remat_models.core.limits import MAX_BYTES
from remat_models.core.schedule import Compute, simulate
from remat_models.errors import BudgetError, ConfigurationError, GraphError, InputTypeError, RematError
from remat_models.heuristics.fastsa import fastsa
from remat_models.io import graph_to_dict, linear_chain, read_graph
from remat_models.planning.plan import plan


@pytest.fixture(scope="module")
def chain() -> Graph:
    return linear_chain(4)


def test_budgets_are_read_exactly_above_two_to_the_53(chain: Graph) -> None:
    assert parse_budget("9007199254740993", chain) == 2**53 + 1  # a float would give 2**53
    assert parse_size("9007199254740993") == 2**53 + 1
    assert parse_budget(str(MAX_BYTES), chain) == MAX_BYTES
    assert parse_size("1.5KiB") == 1536


@pytest.mark.parametrize("text", ["1e400", str(2**63 + 1), str(MAX_BYTES + 1), "1e999999999999999999", "5e18B"])
def test_budgets_beyond_the_limit_are_one_budget_error_naming_them(chain: Graph, text: str) -> None:
    with pytest.raises(BudgetError, match=f"budget '{text}' is too large"):
        parse_budget(text, chain)


def test_sizes_beyond_the_limit_and_numbers_out_of_range_are_refused(chain: Graph) -> None:
    with pytest.raises(BudgetError, match="size '1e400' is too large"):
        parse_size("1e400")
    with pytest.raises(BudgetError, match="out of range"):
        parse_budget("1e-9999999999999999999%", chain)


@pytest.mark.parametrize(
    ("budget", "error", "named"),
    [
        ("80 %", InputTypeError, "'80 %'.*parse_budget"),
        (0.8, InputTypeError, "float 0.8"),
        (True, InputTypeError, "bool True"),
        (2**63, BudgetError, "9,223,372,036,854,775,808 B is out of range"),
        (-5, BudgetError, "-5 B is out of range"),
    ],
)
def test_plan_with_a_budget_of_the_wrong_type_or_range(
    chain: Graph, budget: object, error: type[RematError], named: str
) -> None:
    with pytest.raises(error, match=named):
        plan(chain, budget, "chen-greedy")  # type: ignore[arg-type]


def test_plan_and_simulate_with_wrong_types(chain: Graph) -> None:
    with pytest.raises(InputTypeError, match="expected a Graph, got str"):
        plan("graph.json", 100, "chen-greedy")  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="takes a Graph first, got dict"):
        simulate({"nodes": []}, [])  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="takes a Schedule or a list of steps, got int"):
        simulate(chain, 5)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="takes a Schedule or a list of steps, got str"):
        simulate(chain, "compute 0")  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="step 1 is 3, not a step"):
        simulate(chain, [Compute(0), 3])  # type: ignore[list-item]
    assert isinstance(InputTypeError("x"), TypeError)  # callers catching TypeError still do


def _arrays(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {"names": ["a", "b", "c"], "cost": [1.0, 1.0, 1.0], "mem": [1, 2, 3]}
    base["edges"] = [(0, 1), (1, 2)]
    return {**base, **changes}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kind": ["forward", "forward"]}, "kind has 2 entries for 3 nodes"),
        ({"recomputable": [True]}, "recomputable has 1 entries for 3 nodes"),
        ({"edges": [(0, 1.5), (1, 2)]}, "edge index 1.5 is not a whole number"),
        ({"edges": [(0, "b")]}, "edge indices must be whole numbers"),
        ({"order": [-1, 1, 2]}, "order names node index -1"),
        ({"order": [0, 1, 2.5]}, "order index 2.5 is not a whole number"),
        ({"mem": [1, 1e19, 1]}, r"invalid mem 1e\+19"),
        ({"mem": [1, 2**62, 1]}, f"invalid mem {2**62}"),
        ({"mem": [1, 2**61, 2**61]}, "all outputs \\+ the largest workspace is 4,611,686,018,427,387,905 B"),
        ({"mem": ["1", "2", "3"]}, "mem must hold numbers of bytes"),
    ],
)
def test_graph_from_arrays_refuses_bad_arrays(changes: dict[str, object], message: str) -> None:
    arrays = _arrays(**changes)
    names, cost, mem, edges = arrays.pop("names"), arrays.pop("cost"), arrays.pop("mem"), arrays.pop("edges")
    with pytest.raises(GraphError, match=message):
        Graph.from_arrays(names, cost, mem, edges, **arrays)  # type: ignore[arg-type]


def test_graph_file_with_a_size_near_the_int64_limit_is_one_line(tmp_path: Path) -> None:
    data = graph_to_dict(linear_chain(2))
    data["nodes"][1]["mem"] = 2**63 - 1
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data))
    with pytest.raises(GraphError, match=f"invalid mem {2**63 - 1}"):
        read_graph(path)
    result = CliRunner().invoke(app, ["graph", "info", str(path)])
    assert result.exit_code != 0 and isinstance(result.exception, GraphError)


def test_deeply_nested_json_is_a_graph_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(GraphError, match="nested too deeply"):
        read_graph(path)


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "10"])
def test_time_limits_must_be_finite_and_positive(value: object) -> None:
    with pytest.raises((ConfigurationError, InputTypeError), match="time limit must be"):
        SolveLimits(time_limit=value)  # type: ignore[arg-type]


def test_workers_and_gap_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="workers must be >= 1, got -3"):
        SolveLimits(workers=-3)
    with pytest.raises(ConfigurationError, match="mip_gap must be a finite number >= 0, got nan"):
        SolveLimits(mip_gap=math.nan)
    assert SolveLimits(time_limit=0.5, workers=2).time_limit == 0.5


def test_fastsa_refuses_a_nan_time_limit_before_compiling(chain: Graph) -> None:
    with pytest.raises(ConfigurationError, match="FastSA time limit must be a finite number of seconds > 0, got nan"):
        fastsa(chain, 10**6, time_limit=math.nan)


@pytest.mark.parametrize("args", [["--time-limit", "nan"], ["--time-limit", "inf"], ["--workers", "-3"]])
def test_cli_solve_options_fail_before_solving(args: list[str]) -> None:
    graph = str(Path(__file__).resolve().parents[1] / "examples" / "graphs" / "chain32_train.json")
    result = CliRunner().invoke(app, ["solve", graph, "-b", "80%", "-f", "checkmate", *args])
    assert result.exit_code != 0 and isinstance(result.exception, ConfigurationError), result.output
    assert "wrote" not in result.output and "fits" not in result.output


def test_cli_budgets_beyond_the_limit(tmp_path: Path) -> None:
    graph = str(Path(__file__).resolve().parents[1] / "examples" / "graphs" / "chain32_train.json")
    for command in (["solve", graph, "-b", "1e400"], ["solve", graph, "-b", str(2**63 + 5), "-f", "moccasin"]):
        result = CliRunner().invoke(app, [*command, "--backend", "cpsat"] if "moccasin" in command else command)
        assert isinstance(result.exception, BudgetError) and "too large" in str(result.exception), result.output


def test_check_budget_accepts_numpy_integers(chain: Graph) -> None:
    check_budget(chain, np.int64(chain.lower_bound))
