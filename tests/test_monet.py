"""The MONeT formulation: spec section D cases A2, A3, A5, A6 (cm1), exhaustive cross-checks, hints."""

from __future__ import annotations

import pytest
from impl_graphs import A2_OPTIMA, A3_OPTIMA, a2_mask, a3_inplace_output, random_impl_training

from remat_models.backends import SolveLimits, available
from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph, Node, NodeKind
from remat_models.core.impls import Impl, with_impls
from remat_models.core.schedule import input_order_peak, input_order_schedule, simulate
from remat_models.errors import ConfigurationError
from remat_models.formulations.monet.formulation import MONET
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.io import read_graph
from remat_models.io.generators import linear_chain

LIMITS = SolveLimits(time_limit=30)


def solve(graph: Graph, budget: int, backend: str = "highs", **options):
    """Solve MONeT; check the simulated peak <= model peak <= budget and return the outcome."""
    out = solve_model(graph, budget, "monet", backend, options=options, limits=LIMITS)
    if out.schedule is not None:
        sim = simulate(graph, out.schedule)
        assert sim.peak <= out.model_peak + 1e-6 <= budget + 1e-6
    return out


def cost(out) -> float | None:
    return None if out.simulation is None else round(out.simulation.total_cost, 9)


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
@pytest.mark.parametrize(("make", "optima"), [(a2_mask, A2_OPTIMA), (a3_inplace_output, A3_OPTIMA)])
def test_spec_cases_a2_a3(make, optima: dict, backend: str) -> None:
    graph = make()
    for budget, expected in optima.items():
        assert cost(solve(graph, budget, backend)) == expected


def test_a2_chooses_the_mask_and_names_the_impls() -> None:
    graph = a2_mask()
    built = MONET.build(graph, 9)
    from remat_models.backends import get_backend

    result = get_backend("highs").solve(built.model, LIMITS)
    choice = built.impl_choice(result.values)
    assert choice[(0, "r")] == "mask" and choice[(2, "g_x")] == "mask"


A5 = {3: {3: 10, 4: 8, 5: 7}, 4: {3: 15, 4: 11, 5: 10, 6: 9}, 8: {3: 45, 4: 26, 5: 22, 6: 21, 10: 17}}
A5_PAPER = {(3, 3): 12, (4, 3): 17, (8, 3): 47, (8, 4): 28}


@pytest.mark.parametrize("n", [3, 4, 8])
def test_spec_case_a5_chains_exact_and_paper_rule(n: int) -> None:
    graph = linear_chain(n)
    for budget, expected in A5[n].items():
        assert cost(solve(graph, budget)) == expected
        assert cost(solve(graph, budget, dep_rule="paper")) == A5_PAPER.get((n, budget), expected)


def test_without_impls_equals_checkmate_on_a_training_chain() -> None:
    graph = linear_chain(5)
    for budget in (4, 6):
        checkmate = solve_model(graph, budget, "checkmate", "highs", limits=LIMITS)
        assert cost(solve(graph, budget)) == round(checkmate.simulation.total_cost, 9)


@pytest.mark.parametrize(("seed", "prefix"), [(seed, seed % 3 == 0) for seed in range(9)])
def test_exact_rule_equals_the_monet_structured_brute_force(seed: int, prefix: bool) -> None:
    graph = random_impl_training(seed)
    low, high = graph.lower_bound, input_order_peak(graph.default_view())
    for budget in sorted({low, (low + high) // 2, high}):
        found = exhaustive_optimum(graph, budget, "forward-once")
        exact = solve(graph, budget, prefix_vars=prefix)
        assert cost(exact) == (None if found is None else round(found.cost, 9))
        paper = solve(graph, budget, dep_rule="paper")
        assert cost(paper) is None or (cost(exact) is not None and cost(paper) >= cost(exact) - 1e-9)
        if found is not None:  # the brute force's schedule is a feasible warm start of the exact model
            built = MONET.build(graph, budget, {"prefix_vars": prefix})
            values = MONET.hints(built, found.schedule)
            assert built.model.check(values) == []
            assert built.cost(built.model.objective_value(values)) == pytest.approx(found.cost, rel=1e-5)


def test_ablations_nest_and_no_recompute() -> None:
    graph = random_impl_training(3)
    budget = graph.lower_bound + 1
    every = cost(solve(graph, budget))
    inplace_only = cost(solve(graph, budget, tags=["inplace"]))
    assert MONET.options({"tags": "inplace,conv_algo"}).tags == frozenset({"inplace", "conv_algo"})
    none = cost(solve(graph, budget, tags=[]))
    assert every is not None and every <= inplace_only <= none
    frozen = solve(graph, budget, no_recompute=True)
    if frozen.schedule is not None:
        assert frozen.simulation.recomputations == 0 and cost(frozen) >= every
    default_plan = input_order_schedule(graph.default_view())
    peak = simulate(graph.default_view(), default_plan).peak
    assert cost(solve(graph, peak, no_recompute=True, tags=[])) == graph.total_cost


def test_warm_start_is_used_and_never_worse() -> None:
    graph = random_impl_training(5)
    budget = graph.lower_bound + 2
    start = exhaustive_optimum(graph, budget, "forward-once")
    out = solve_model(graph, budget, "monet", "highs", limits=LIMITS, init=start.schedule)
    assert out.warm_start and cost(out) == round(start.cost, 9)


def test_stage_to_forward_edge_is_a_configuration_error() -> None:
    nodes = [Node("x", kind=NodeKind.FORWARD), Node("g", kind=NodeKind.BACKWARD), Node("y", kind=NodeKind.FORWARD)]
    graph = Graph(nodes, [("x", "g"), ("g", "y")])
    with pytest.raises(ConfigurationError, match="edge \\('g', 'y'\\) goes from a stage node to a forward node"):
        MONET.build(graph, 10)


def test_spec_case_a6_cm1(shared_graphs_dir) -> None:
    graph = read_graph(shared_graphs_dir / "cm1_fcn8_vgg_train.json")
    for fraction, tdi in (("0.9", 0.029), ("0.8", 0.136)):
        out = solve(graph, parse_budget(fraction, graph))
        assert out.simulation.tdi == pytest.approx(tdi, abs=5e-4)


def test_fixed_memory_is_counted() -> None:
    base = a2_mask()
    graph = Graph.from_arrays(
        base.names, base.cost, base.mem, base.edges, kind=base.kind, outputs=base.outputs, fixed_mem=3, impls=base.impls
    )
    assert cost(solve(graph, 11)) is None and cost(solve(graph, 12)) == 5.5


def test_stage_node_in_place_over_a_gradient() -> None:
    kinds = (NodeKind.FORWARD, NodeKind.LOSS, NodeKind.BACKWARD, NodeKind.BACKWARD, NodeKind.BACKWARD)
    sizes = (("x", 2), ("L", 1), ("g1", 4), ("g2", 4), ("g3", 1))
    nodes = [Node(name, 1.0, mem, kind=kind) for (name, mem), kind in zip(sizes, kinds, strict=True)]
    edges = [("x", "L"), ("L", "g1"), ("g1", "g2"), ("x", "g2"), ("g2", "g3")]
    graph = with_impls(
        Graph(nodes, edges, outputs=["g3"]),
        {"g2": [Impl("plain", 1.0), Impl("inplace", 1.5, inplace_of="g1", tag="inplace")]},
    )
    for budget in range(5, 11):
        found = exhaustive_optimum(graph, budget, "forward-once")
        assert cost(solve(graph, budget)) == (None if found is None else found.cost)


@pytest.mark.parametrize("backend", [b for b in available() if b not in ("highs", "cpsat")])
def test_a2_on_the_other_backends(backend: str) -> None:
    """The SIGMA products go native (MiniZinc) or through McCormick rows (Gurobi, Pyomo)."""
    graph = a2_mask()
    for budget in (8, 9, 12):
        assert cost(solve(graph, budget, backend)) == A2_OPTIMA[budget]


def test_monet_refuses_at_once_a_model_that_cannot_fit_in_memory() -> None:
    from remat_models.errors import ModelTooLargeError
    from remat_models.io.generators import transformer

    graph = transformer(400)  # 4,804 stages x 4,804 positions
    with pytest.raises(ModelTooLargeError, match=r"monet on .*4,804 stages x 4,804 positions"):
        MONET.check_size(graph, graph.lower_bound * 4)  # plan() re-solves windows instead
