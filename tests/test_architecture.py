"""The layout of docs/architecture.md holds: no import cycle among the package's modules, the public paths work."""

from __future__ import annotations

import grimp
import networkx as nx


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("remat_models", exclude_type_checking_imports=True)
    imports = nx.DiGraph()
    for module in graph.modules:
        imports.add_node(module)
        imports.add_edges_from((module, target) for target in graph.find_modules_directly_imported_by(module))
    cycles = [sorted(component) for component in nx.strongly_connected_components(imports) if len(component) > 1]
    assert cycles == []


def test_the_layers_contract_is_enforced_on_this_package() -> None:
    graph = grimp.build_graph("remat_models", exclude_type_checking_imports=True)
    assert not graph.chain_exists(importer="remat_models.core", imported="remat_models.planning", as_packages=True)
    assert not graph.chain_exists(importer="remat_models.model", imported="remat_models.core", as_packages=True)
    assert graph.chain_exists(importer="remat_models.cli", imported="remat_models.core", as_packages=True)


def test_the_public_paths_the_readme_shows_still_import() -> None:
    from remat_models import Graph, eager_frees, simulate
    from remat_models.budget import parse_budget
    from remat_models.io import read_graph
    from remat_models.planner import PlanResult, plan

    assert all(callable(f) for f in (eager_frees, simulate, parse_budget, read_graph, plan))
    assert Graph.__module__ == "remat_models.core.graph" and PlanResult.__module__ == "remat_models.planning.result"


def test_a_new_heuristic_is_one_function_and_one_registration() -> None:
    from checkmate_graphs import budgets, tiny_unet

    from remat_models.core.schedule import eager_frees, simulate
    from remat_models.heuristics.registry import HEURISTICS, Heuristic, register_heuristic
    from remat_models.planner import method_names, parse_method_name, plan

    def input_order(graph, budget):  # a user's own heuristic: any function returning a schedule
        return eager_frees(graph, graph.order)

    register_heuristic("input-order", Heuristic(lambda graph, budget, **_: (input_order(graph, budget), {})))
    try:
        graph = tiny_unet()
        budget = max(budgets(graph))
        assert "input-order" in method_names() and parse_method_name("input-order").method == "input-order"
        result = plan(graph, budget, "input-order", allow_over_budget=True)
        assert result.method == "input-order"
        assert result.simulation.peak == simulate(graph, eager_frees(graph, graph.order)).peak
    finally:
        del HEURISTICS["input-order"]
