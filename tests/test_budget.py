import pytest

from remat_models import BudgetError, BudgetInfeasibleError, Graph, Node
from remat_models.core.budget import check_budget, parse_budget, parse_size
from remat_models.core.schedule import input_order_peak


@pytest.fixture
def graph() -> Graph:
    nodes = [Node("a", mem=400), Node("b", mem=600), Node("c", mem=1000)]
    return Graph(nodes, [("a", "b"), ("b", "c")])


def test_reference_peak(graph: Graph) -> None:
    assert input_order_peak(graph) == 1600


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1234", 1234),
        (5000, 5000),
        ("80%", 1280),
        ("0.8", 1280),
        ("1", 1600),
        ("12.5 %", 200),
        ("2KiB", 2048),
        ("11.3GiB", int(11.3 * 2**30)),
        ("1.5mb", 1_500_000),
        ("3e3", 3000),
    ],
)
def test_parse_budget(graph: Graph, text, expected) -> None:
    assert parse_budget(text, graph) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lots", "cannot read budget 'lots'"),
        ("3 parsecs", "unknown unit 'parsecs'"),
        ("-5", "cannot read"),
        ("2.5", "neither"),
    ],
)
def test_bad_budgets(graph: Graph, text, message) -> None:
    with pytest.raises(BudgetError, match=message):
        parse_budget(text, graph)


def test_budget_below_lower_bound(graph: Graph) -> None:
    assert graph.lower_bound == 1600
    check_budget(graph, 1600)
    with pytest.raises(BudgetInfeasibleError) as caught:
        check_budget(graph, 1599)
    assert caught.value.lower_bound == 1600
    assert "1,599" in str(caught.value) and "1,600" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"), [("8GiB", 8 * 2**30), ("1.5 GiB", 3 * 2**29), (4096, 4096), ("2e3", 2000)]
)
def test_parse_size(text, expected) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["80%", "lots", "3 parsecs"])
def test_parse_size_rejects(text) -> None:
    with pytest.raises(BudgetError, match="cannot read size"):
        parse_size(text)
