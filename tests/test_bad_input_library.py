"""Bad input through the library's public calls: one typed error naming the option, file, node or key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from remat_models.cli.app import app
from remat_models.core.graph import Graph, Node
from remat_models.errors import ConfigurationError, GraphError, InputTypeError
from remat_models.extensions.registry import make_extension
from remat_models.formulations.base import BuiltModel, options_of
from remat_models.formulations.checkmate.formulation import CheckmateOptions
from remat_models.formulations.hilp.options import HilpOptions
from remat_models.formulations.moccasin.model import MoccasinOptions
from remat_models.formulations.monet.formulation import MonetOptions
from remat_models.io import linear_chain, read_graph, read_schedule, write_graph
from remat_models.io.node_link import from_node_link, to_node_link
from remat_models.planning.plan import plan
from remat_models.planning.portfolio import AutoOptions


@pytest.fixture(scope="module")
def chain() -> Graph:
    return linear_chain(4)


# --- 1. formulation options of the wrong type -------------------------------------------------------


def test_plan_with_a_formulation_option_of_the_wrong_type(chain: Graph) -> None:
    with pytest.raises(ConfigurationError, match=r"moccasin option C='abc': expected int, got str"):
        plan(chain, chain.lower_bound * 2, formulation="moccasin", options={"C": "abc"})


def test_cli_option_of_the_wrong_type_names_it(tmp_path: Path, chain: Graph) -> None:
    path = tmp_path / "chain.json"
    write_graph(chain, path)
    result = CliRunner().invoke(app, ["solve", str(path), "-b", "80%", "-f", "moccasin", "-O", "C=abc"])
    assert result.exit_code != 0 and isinstance(result.exception, ConfigurationError), result.output
    assert "moccasin option C='abc': expected int" in str(result.exception)


@pytest.mark.parametrize(
    ("options_type", "options", "named"),
    [
        (MoccasinOptions, {"C": True}, "option C=True: expected int, got bool"),
        (MoccasinOptions, {"C": 2.5}, "option C=2.5: expected int, got float"),
        (MoccasinOptions, {"C_nodes": {"f0": "x"}}, "expected a mapping of str to int or None"),
        (MoccasinOptions, {"order": 2}, "option order=2: expected str \\(one of 'input', 'free'\\), got int"),
        (MoccasinOptions, {"two_phase": 1}, "option two_phase=1: expected bool, got int"),
        (CheckmateOptions, {"order": [0, "one"]}, "expected a list of int or None"),
        (CheckmateOptions, {"allowance": "0.1"}, "option allowance='0.1': expected float, got str"),
        (CheckmateOptions, {"stages": 1.0}, "expected int or None"),
        (MonetOptions, {"tags": 3}, "expected a list of str \\(or a comma-separated string\\) or None"),
        (HilpOptions, {"max_leaf": "12"}, "option max_leaf='12': expected int, got str"),
        (AutoOptions, {"checkmate_share": True}, "option checkmate_share=True: expected float, got bool"),
        (MoccasinOptions, MoccasinOptions(C="abc"), "option C='abc': expected int"),  # type: ignore[arg-type]
    ],
)
def test_options_are_checked_against_their_annotations(options_type: type, options: object, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        options_of(options_type, options, "some")


def test_options_of_the_declared_types_are_taken() -> None:
    moccasin = options_of(MoccasinOptions, {"C": 3, "C_nodes": {"f0": 1}, "cost_precision": 1}, "moccasin")
    assert (moccasin.C, moccasin.C_nodes, moccasin.cost_precision) == (3, {"f0": 1}, 1)
    assert options_of(CheckmateOptions, {"order": [1, 0], "allowance": 0}, "checkmate").order == (1, 0)
    assert options_of(MonetOptions, {"tags": "inplace,intermediate"}, "monet").tags == {"inplace", "intermediate"}
    assert options_of(MonetOptions, {"tags": ["inplace"], "integral_memory": None}, "monet").tags == {"inplace"}
    assert options_of(HilpOptions, {"partition": {"max_leaf": 4}, "level_time_limit": 5}, "hilp").max_leaf == 4
    assert options_of(AutoOptions, {"wait_share": 1}, "auto").wait_share == 1


# --- 2. extensions that fail: syntax error, failing factory, failing apply ---------------------------


def test_extension_file_with_a_syntax_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def factory(:\n    pass\n")
    with pytest.raises(ConfigurationError, match=r"cannot import '.*broken\.py:factory': SyntaxError"):
        make_extension(f"{broken}:factory")


def test_extension_file_that_fails_when_it_is_executed(tmp_path: Path) -> None:
    failing = tmp_path / "failing.py"
    failing.write_text("RATE = 1 / 0\n\ndef factory():\n    pass\n")
    with pytest.raises(ConfigurationError, match=r"cannot import '.*failing\.py:factory': ZeroDivisionError"):
        make_extension(f"{failing}:factory")


def test_extension_factory_that_raises(tmp_path: Path) -> None:
    module = tmp_path / "raising_factory.py"
    module.write_text("def factory(cap=1):\n    raise RuntimeError(f'no cap {cap} today')\n")
    named = r"extension '.*raising_factory\.py:factory:cap=2': RuntimeError: no cap 2 today"
    with pytest.raises(ConfigurationError, match=named):
        make_extension(f"{module}:factory:cap=2")


class _FailingApply:
    """An extension whose ``apply`` breaks (user code with a bug)."""

    name = "failing-apply"
    supports = frozenset({"checkmate", "moccasin"})

    def apply(self, built: BuiltModel) -> None:
        raise KeyError("no such block")


def test_extension_whose_apply_raises(chain: Graph) -> None:
    with pytest.raises(ConfigurationError, match="extension 'failing-apply' failed to apply to 'checkmate': KeyError"):
        plan(chain, chain.lower_bound * 2, formulation="checkmate", extensions=[_FailingApply()])


# --- 3. node names that are not valid Unicode --------------------------------------------------------


def test_node_name_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(GraphError, match=r"node 1 has name '\\ud800', which is not valid Unicode"):
        Graph([Node("a"), Node("\ud800")], [("a", "\ud800")])
    with pytest.raises(GraphError, match="node 0 has name"):
        Graph.from_arrays(["x\udfff"], [1.0], [1], [])


def test_graph_file_with_a_lone_surrogate_in_a_name(tmp_path: Path, chain: Graph) -> None:
    data = to_node_link(chain)
    data["nodes"][2]["id"] = "\ud800"
    data["links"] = []
    data["graph"] = {"name": "surrogate"}  # no order or outputs naming the old node
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(data))  # ASCII escapes: "\ud800" is valid JSON text
    with pytest.raises(GraphError, match=r"surrogate\.json: node 2 has name '\\ud800'"):
        read_graph(path)


# --- 4. a path that is not a path ---------------------------------------------------------------------


@pytest.mark.parametrize("path", [5, 0, None, b"graph.json"])
def test_read_graph_takes_only_a_str_or_a_path(path: object) -> None:
    with pytest.raises(InputTypeError, match=f"a file path is a str or an os.PathLike, got {type(path).__name__}"):
        read_graph(path)  # type: ignore[arg-type]


def test_read_schedule_takes_only_a_str_or_a_path(chain: Graph) -> None:
    with pytest.raises(InputTypeError, match="got int 0"):
        read_schedule(0, chain)  # type: ignore[arg-type]


# --- 5. a total cost that overflows -------------------------------------------------------------------


def test_costs_whose_sum_overflows_are_refused() -> None:
    nodes = [Node("a", cost=1e308), Node("b", cost=1e308)]
    with pytest.raises(GraphError, match="the total cost of its nodes is inf: the sum of the costs overflows"):
        Graph(nodes, [("a", "b")], name="huge")
    assert Graph([Node("a", cost=1e308), Node("b", cost=0.0)], [("a", "b")]).total_cost == 1e308


# --- 6. node-link data that is ambiguous or undirected ------------------------------------------------


def test_node_link_with_both_links_and_edges(chain: Graph) -> None:
    data = to_node_link(chain)
    data["edges"] = data["links"][:1]
    with pytest.raises(GraphError, match="node-link data has both 'links' and 'edges'"):
        from_node_link(data)
    data.pop("links")
    assert from_node_link(data).m == 1


def test_undirected_node_link_is_refused(chain: Graph) -> None:
    data = to_node_link(chain)
    data["directed"] = False
    with pytest.raises(GraphError, match=r"node-link data is undirected \(\"directed\": false\)"):
        from_node_link(data)
    data["directed"] = "no"
    with pytest.raises(GraphError, match="node-link 'directed': expected true or false, got string"):
        from_node_link(data)


def test_a_path_with_a_nul_byte_or_a_huge_integer_is_a_graph_error(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match="null byte"):
        read_graph(str(tmp_path / "a\0b.json"))
    huge = tmp_path / "huge.json"
    huge.write_text('{"nodes": [], "edges": [], "fixed_mem": ' + "9" * 5000 + "}")
    with pytest.raises(GraphError, match="cannot read"):
        read_graph(huge)


def test_a_partition_mapping_of_the_wrong_type_names_the_key() -> None:
    graph = linear_chain(4)
    with pytest.raises(ConfigurationError, match="hilp partition option max_leaf='x': expected int"):
        plan(graph, 10**9, formulation="hilp", options={"partition": {"max_leaf": "x"}})
