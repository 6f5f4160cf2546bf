"""Hierarchical H-ILP: options, identical clusters, flattening, accounting and guards (spec T3, T4, T6-T11, T13)."""

from __future__ import annotations

import numpy as np
import pytest
from checkmate_graphs import tiny_unet

from remat_models.backends import SolveStatus
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, eager_frees, input_order_peak, simulate
from remat_models.errors import BudgetInfeasibleError
from remat_models.formulations.hilp.alternatives import base_options
from remat_models.formulations.hilp.layers import layer_members, pair_layers
from remat_models.formulations.hilp.local import local_graph
from remat_models.formulations.hilp.partition import Cluster
from remat_models.formulations.hilp.solver import HierarchicalSolver, solve_hierarchical
from remat_models.heuristics.exhaustive import exhaustive_optimum
from remat_models.io import linear_chain, unet

CHAIN = {"max_leaf": 4, "max_top": 8, "nb_peak": 2, "nb_save": 2}


def check(graph: Graph, budget: int, result) -> None:
    """Every schedule is re-simulated: it fits, it costs the objective, within the model's bound."""
    assert result.schedule is not None
    sim = simulate(graph, result.schedule)
    assert sim.peak <= budget
    assert sim.peak == result.simulation.peak
    assert sim.total_cost == pytest.approx(result.objective)
    assert sim.peak <= result.model_peak + 1e-6 * budget


def test_loose_budget_is_free_at_any_depth() -> None:
    for graph, opts in [(linear_chain(12), CHAIN), (unet(3), {"max_leaf": 6, "max_top": 8, "nb_peak": 1})]:
        budget = input_order_peak(graph)
        result = solve_hierarchical(graph, budget, "highs", opts)
        assert result.partition.depth >= 2
        check(graph, budget, result)
        assert result.objective == pytest.approx(graph.total_cost)


def test_chain_hierarchy_is_valid_and_within_the_flat_and_free_optima() -> None:
    graph = linear_chain(12)
    measured = {}
    for budget in (6, 8, 10):
        result = solve_hierarchical(graph, budget, "highs", CHAIN)
        assert result.status == SolveStatus.FEASIBLE and result.top_status == "optimal"  # among its options only
        check(graph, budget, result)
        measured[budget] = result.objective
    # flat optima of chain(12) (Checkmate/flat H-ILP, HiGHS): 33, 31, 29 at budgets 6, 8, 10
    assert measured[6] >= 33 and measured[8] >= 31 and measured[10] >= 29
    assert measured == {6: 34.0, 8: 31.0, 10: 29.0}  # pinned (measured; 35 at 6 before warm-start options)
    small = linear_chain(5)
    for budget in (4, 5):
        result = solve_hierarchical(small, budget, "highs", {"max_leaf": 3, "max_top": 3, "nb_peak": 2, "nb_save": 2})
        if result.schedule is not None:
            check(small, budget, result)
            assert result.objective >= exhaustive_optimum(small, budget, "free").cost - 1e-9


def test_identical_clusters_are_solved_once() -> None:
    graph = linear_chain(12)
    solver = HierarchicalSolver(graph, 8, "highs", CHAIN)
    result = solver.run()
    clusters = result.partition.clusters()
    keys = [solver.key_of[c] for c in clusters]
    assert len(set(keys)) < len(clusters)  # the interior pairs share a key
    option_ilps = [label for label, _, _ in result.ilp_times if label != "top"]
    assert result.ilps == len(option_ilps) + 1
    assert len(set(keys)) == len(solver.solved)
    # members of one key get the same options (equal times, phantoms) translated to their own nodes
    by_key: dict[str, list[Cluster]] = {}
    for c in clusters:
        by_key.setdefault(solver.key_of[c], []).append(c)
    index = {v: v for v in range(graph.n)}
    for members in by_key.values():
        layers = [solver.layer(c, index) for c in members]
        signature = {tuple((p.cost, p.phantom) for p in layer.fwd + layer.bwd) for layer in layers}
        assert len(signature) == 1
        assert len({layer.forward for layer in layers}) == len(layers)
    # one interior node with another size: its clusters (and neighbours reading it) get new keys
    mem = graph.mem.copy()
    mem[graph.index["f5"]] = 2
    other = Graph.from_arrays(
        graph.names, graph.cost, mem, graph.edges, kind=graph.kind, order=graph.order, name="chain12_heavy_f5"
    )
    solver2 = HierarchicalSolver(other, 9, "highs", CHAIN)
    solver2.run()
    assert len(solver.solved) < len(solver2.solved) <= len(solver.solved) + 4


def test_base_option_records_replay_in_the_simulator() -> None:
    graph = linear_chain(6)
    owner = pair_layers(graph)
    V = [graph.index["f2"], graph.index["f3"]]
    lg = local_graph(graph, np.array(V), layer_members(owner, V))
    autograd, recompute = base_options(lg)
    f2 = lg.local_of[graph.index["f2"]]
    assert autograd.phantom == int(lg.graph.mem[f2])  # b2 reads f2, an internal value
    assert recompute.phantom == 0
    for option in (autograd, recompute):
        seq = [*range(lg.n_in), *option.fwd, lg.loss, *range(lg.loss + 1, int(lg.backward[0])), *option.bwd]
        sim = simulate(lg.graph, eager_frees(lg.graph, seq))
        assert sim.total_cost == pytest.approx(lg.graph.cost[list(option.fwd) + list(option.bwd)].sum())
        assert sim.peak == option.peak
    assert set(autograd.dep) == {lg.local_of[graph.index["f3"]], lg.loss + 1}  # f3 (out-data) and the out-grad b4


def test_corrections_never_hurt_and_budget_guards() -> None:
    graph = linear_chain(12)
    on = solve_hierarchical(graph, 8, "highs", {**CHAIN, "correction": "top"})
    off = solve_hierarchical(graph, 8, "highs", {**CHAIN, "correction": "off"})
    check(graph, 8, on)
    check(graph, 8, off)
    assert on.objective <= off.objective
    with pytest.raises(BudgetInfeasibleError):
        solve_hierarchical(graph, graph.lower_bound - 1, "highs", CHAIN)
    # flat-feasible (cost 45), not with these options: no schedule (never "infeasible"), the warm start if any
    coarse = solve_hierarchical(graph, 4, "highs", {**CHAIN, "warm": False})
    assert coarse.status == SolveStatus.NO_SOLUTION and coarse.schedule is None
    assert coarse.top_status == "infeasible" and "no combination" in coarse.summary()["reason"]
    warm = solve_hierarchical(graph, 4, "highs", CHAIN)  # FastSA's warm start fits: it is returned
    assert warm.status == SolveStatus.NO_SOLUTION and warm.returned_warm_start
    check(graph, 4, warm)


def test_top_objective_is_non_increasing_in_the_budget_and_cpsat_agrees() -> None:
    graph = tiny_unet()
    values = []
    for budget in (15, 17, 20):
        result = solve_hierarchical(graph, budget, "highs", {"max_leaf": 3, "max_top": 4, "nb_peak": 2, "nb_save": 2})
        check(graph, budget, result)
        values.append(result.objective)
    assert values == sorted(values, reverse=True)
    cp = solve_hierarchical(graph, 17, "cpsat", {"max_leaf": 3, "max_top": 4, "nb_peak": 2, "nb_save": 2})
    check(graph, 17, cp)
    assert cp.objective == pytest.approx(values[1])


def test_a_non_recomputable_layer_runs_once() -> None:
    graph = linear_chain(8)
    recomputable = np.ones(graph.n, dtype=bool)
    recomputable[graph.index["f3"]] = False
    fixed = Graph.from_arrays(
        graph.names, graph.cost, graph.mem, graph.edges, kind=graph.kind, recomputable=recomputable, name="chain8_rng"
    )
    budget = 9
    result = solve_hierarchical(fixed, budget, "highs", {"max_leaf": 4, "max_top": 4, "nb_peak": 2, "nb_save": 2})
    check(fixed, budget, result)
    assert sum(isinstance(s, Compute) and s.node == fixed.index["f3"] for s in result.schedule.steps) == 1


def _batch_norm_chain(n: int) -> Graph:
    """linear_chain(n) whose every f_i has a traced batch norm's running-statistics copy s_i.

    s_i (1 byte, not recomputable) reads f_i and is read by b_i and by a final buffer update ``copy_i`` (as in
    ``benchmarks/cnn/resnet.json``: ``clone_default``/``copy`` -> ``native_batch_norm_backward``, ``copy_``).
    """
    chain = linear_chain(n)
    names, kind = list(chain.names), list(chain.kind)
    cost, mem, recomputable = chain.cost.tolist(), chain.mem.tolist(), chain.recomputable.tolist()
    edges, outputs = chain.edges.tolist(), chain.outputs.tolist()
    for i in range(n):
        s, c = len(names), len(names) + 1
        names += [f"s{i}", f"copy_{i}"]
        kind += [NodeKind.FORWARD, NodeKind.OTHER]
        cost += [0.0, 0.0]
        mem += [1, 0]
        recomputable += [False, False]
        edges += [[chain.index[f"f{i}"], s], [s, chain.index[f"b{i}"]], [s, c]]
        outputs.append(c)
    index = {name: i for i, name in enumerate(names)}
    order = [index[x] for i in range(n) for x in (f"f{i}", f"s{i}")] + [index["loss"]]
    order += [index[f"b{i}"] for i in reversed(range(n))] + [index[f"copy_{i}"] for i in range(n)]
    return Graph.from_arrays(
        names,
        np.array(cost),
        np.array(mem),
        np.array(edges),
        kind=kind,
        recomputable=np.array(recomputable),
        outputs=outputs,
        order=np.array(order),
        name=f"batch_norm_chain{n}",
    )


def test_batch_norm_statistics_do_not_freeze_their_layers() -> None:
    """Non-recomputable tails (batch-norm statistics) inside clusters: the top stays feasible where a schedule fits.

    Before, every layer holding such a node was non-recomputable (no ``ff``, no recomputing option) and the top
    level was infeasible at every budget, the input-order peak included (the input order fits it by definition).
    """
    graph = _batch_norm_chain(8)
    opts = {"max_leaf": 4, "max_top": 4, "nb_peak": 2, "nb_save": 2, "warm": False}
    for budget in (input_order_peak(graph), input_order_peak(graph) - 2):
        result = solve_hierarchical(graph, budget, "highs", opts)
        assert result.partition.depth >= 2 and not result.returned_warm_start
        assert result.status == SolveStatus.FEASIBLE and result.top_status == "optimal"
        check(graph, budget, result)
        computed = [s.node for s in result.schedule.steps if isinstance(s, Compute)]
        assert all(computed.count(graph.index[f"s{i}"]) == 1 for i in range(8))
        assert computed.count(graph.index["f0"]) >= 1


def _random_training_graph(seed: int) -> Graph:
    """A training graph of 4 random forward ops (at most 9 nodes: brute force stays cheap)."""
    from remat_models.io._training import Op, training_graph

    rng = np.random.default_rng(seed)
    ops = []
    for i in range(4):
        inputs = tuple(f"o{j}" for j in sorted(rng.choice(i, size=min(i, int(rng.integers(1, 3))), replace=False)))
        ops.append(Op(f"o{i}", inputs, mem=int(rng.integers(1, 4)), cost=float(rng.integers(1, 4))))
    loss = Op("loss", ("o3",), mem=1, cost=1.0)
    return training_graph(ops, loss, name=f"random_training_s{seed}")


@pytest.mark.parametrize("seed", range(2))
def test_random_training_graphs_are_valid_and_never_beat_brute_force(seed) -> None:
    graph = _random_training_graph(seed)
    low, high = graph.lower_bound, input_order_peak(graph)
    for budget in sorted({(low + high) // 2, high}):
        result = solve_hierarchical(graph, budget, "highs", {"max_leaf": 2, "max_top": 2, "nb_peak": 2, "nb_save": 2})
        truth = exhaustive_optimum(graph, budget, "free")
        if result.schedule is None:
            continue
        check(graph, budget, result)
        assert truth is not None and result.objective >= truth.cost - 1e-9
