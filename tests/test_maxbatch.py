"""Maximum batch size (remat_models/planning/maxbatch.py): spec D B1-B4, baselines; every result re-simulated."""

from __future__ import annotations

import numpy as np
import pytest

from remat_models.core.batch import BatchScaling, cost_cap, within_cap
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import simulate
from remat_models.errors import ConfigurationError
from remat_models.io import read_graph
from remat_models.io.generators import linear_chain
from remat_models.planning.maxbatch import MaxBatchResult, max_batch

M16 = 16 * 10**9
DEFAULT_KINDS = (NodeKind.FORWARD,)
FORWARD_AND_LOSS = (NodeKind.FORWARD, NodeKind.LOSS)


def chain(n: int, fixed: int = 0) -> Graph:
    """Checkmate's unit chain with 1 byte per sample per value (spec D B1-B3)."""
    graph = linear_chain(n)
    return BatchScaling.proportional(graph, 1, fixed=fixed).attach(graph)


def affine_chain() -> Graph:
    """Spec D B4: chain n=3, the loss a constant 6 bytes, every other value 1 byte per sample."""
    graph = linear_chain(3)
    slope = np.ones(graph.n, dtype=np.int64)
    slope[graph.index["loss"]] = 0
    zeros = np.zeros(graph.n, dtype=np.int64)
    return BatchScaling(slope, np.where(slope == 0, 6, 0), zeros, zeros).attach(graph)


def proven(result: MaxBatchResult) -> str:
    """The status of a batch proven largest: ``optimal`` only at the lower-bound limit (no schedule fits more);
    below it the bound is the solver's, for its model (the cap binds): ``optimal_in_model``."""
    return "optimal" if result.batch >= result.upper_limit else "optimal_in_model"


def checked(graph: Graph, result: MaxBatchResult) -> MaxBatchResult:
    """Re-simulate the result's schedule at its batch: peak <= memory and cost <= cap."""
    assert result.batch >= 1 and result.schedule is not None
    sim = simulate(graph.at_batch(result.batch), result.schedule)
    assert sim.peak == result.peak <= result.memory
    assert within_cap(sim.total_cost, result.cap) and sim.total_cost == result.total_cost
    if result.upper_bound is not None:
        assert result.batch <= result.upper_bound <= result.upper_limit
    assert result.lower_limit <= result.upper_limit
    return result


@pytest.mark.parametrize(
    ("n", "memory", "fixed", "cap", "expected", "checkpoint_all"),
    [
        (3, 30, 0, None, 10, 6),  # B1
        (4, 24, 0, None, 6, 4),  # B2: the cap binds
        (4, 24, 0, 1e9, 8, 4),  # B2 without cap
        (4, 31, 7, None, 6, 4),  # B2 with fixed_const 7
    ],
)
def test_checkmate_bisection_spec_cases(n, memory, fixed, cap, expected, checkpoint_all) -> None:
    graph = chain(n, fixed)
    found = max_batch(graph, memory, formulation="checkmate", backend="highs", method="bisection", cap=cap)
    result = checked(graph, found)
    assert (result.batch, result.upper_bound, result.status) == (expected, expected, proven(result))
    assert result.lower_limit == checkpoint_all
    assert result.per_sample_peak is not None and result.per_sample_peak * expected + fixed <= memory


@pytest.mark.parametrize(("memory", "expected"), [(20, 6), (21, 7), (24, 8)])
def test_affine_memory_by_bisection(memory, expected) -> None:
    """Spec D B4: 'auto' falls back to bisection when memory has a constant part."""
    graph = affine_chain()
    result = checked(graph, max_batch(graph, memory, formulation="checkmate"))
    assert result.method == "bisection"
    assert (result.batch, result.status) == (expected, proven(result))


def test_heuristic_baselines_are_bounded_by_the_exact_batch() -> None:
    graph = chain(4)
    exact = max_batch(graph, 24, formulation="checkmate", method="bisection").batch
    batches = {}
    for name in ("checkpoint-all", "chen-sqrtn", "chen-greedy", "griewank"):
        result = checked(graph, max_batch(graph, 24, heuristic=name))
        assert result.upper_bound is None and result.status == "feasible"
        batches[name] = result.batch
    assert batches["checkpoint-all"] == 4
    assert all(batches["checkpoint-all"] <= b <= exact for b in batches.values())
    assert batches["griewank"] == exact == 6


def test_fastsa_baseline_under_a_time_limit() -> None:
    graph = chain(4)
    result = checked(
        graph, max_batch(graph, 24, heuristic="fastsa", time_limit=3, options={"iterations": (2000, 200)})
    )
    assert 4 <= result.batch <= 6
    assert result.probes and all(p.wall_time >= 0 for p in result.probes)


def test_cap_convention_changes_the_answer_for_heuristics() -> None:
    """Spec D B3 with Griewank's revolve: 20 under cap 25 (the loss not counted as forward)."""
    graph = chain(8)
    assert cost_cap(graph) == 25
    result = checked(graph, max_batch(graph, 100, heuristic="griewank"))
    assert result.batch == 20
    loose = checked(graph, max_batch(graph, 100, heuristic="griewank", cap_kinds=(NodeKind.FORWARD, NodeKind.LOSS)))
    assert loose.batch >= 20


def test_bad_requests_are_typed_errors() -> None:
    graph = chain(3)
    with pytest.raises(ConfigurationError, match="no batch scaling"):
        max_batch(linear_chain(3), 30, heuristic="checkpoint-all")
    with pytest.raises(ConfigurationError, match="unknown max-batch method"):
        max_batch(graph, 30, method="guess")
    with pytest.raises(ConfigurationError, match="unknown heuristic"):
        max_batch(graph, 30, heuristic="nope")
    with pytest.raises(ConfigurationError, match="cap factor"):
        max_batch(graph, 30, heuristic="checkpoint-all", cap_factor=0.5)


def test_nothing_fits_is_reported_infeasible() -> None:
    graph = chain(3)
    result = max_batch(graph, 2, formulation="checkmate", method="bisection")  # lower bound at B=1 is 3 bytes
    assert (result.batch, result.status, result.schedule) == (0, "infeasible", None)


SPEC_CASES = [  # (n, memory, fixed, cap, expected batch, per-sample peak)
    (3, 30, 0, None, 10, 3),  # B1: P* = 3
    (4, 24, 0, None, 6, 4),  # B2: P* = 4 under the cap
    (4, 24, 0, 1e9, 8, 3),  # B2 without cap
    (4, 31, 7, None, 6, 4),  # B2 with fixed_const 7
]
EXACT_RUNS = [  # every case on Checkmate/HiGHS and CP-SAT, B1 and B2 on Moccasin/CP-SAT (C=4: enough recomputation)
    *[("checkmate", backend, None, *case) for backend in ("highs", "cpsat") for case in SPEC_CASES],
    *[("moccasin", "cpsat", {"C": 4}, *case) for case in SPEC_CASES[:2]],
]


@pytest.mark.parametrize("method", ["min-peak", "product"])
@pytest.mark.parametrize(
    ("base", "backend", "options", "n", "memory", "fixed", "cap", "expected", "per_sample"), EXACT_RUNS
)
def test_exact_methods_spec_cases(method, base, backend, options, n, memory, fixed, cap, expected, per_sample) -> None:
    graph = chain(n, fixed)
    found = max_batch(graph, memory, formulation=base, backend=backend, method=method, cap=cap, options=options)
    result = checked(graph, found)
    assert (result.batch, result.upper_bound, result.status) == (expected, expected, proven(result))
    assert result.per_sample_peak == per_sample and result.method == method


@pytest.mark.parametrize(
    ("method", "backend", "kinds", "expected"),
    [
        ("min-peak", "cpsat", DEFAULT_KINDS, 20),
        ("product", "highs", FORWARD_AND_LOSS, 25),
    ],
)
def test_cap_convention_spec_case(method, backend, kinds, expected) -> None:
    """Spec D B3: chain n=8, M=100: cap 25 (loss not forward) gives P*=5, B=20; cap 26 gives P*=4, B=25."""
    graph = chain(8)
    found = max_batch(graph, 100, formulation="checkmate", backend=backend, method=method, cap_kinds=kinds)
    result = checked(graph, found)
    assert (result.batch, result.status, result.lower_limit) == (expected, "optimal_in_model", 10)  # the cap binds
    assert result.per_sample_peak == 100 // expected


@pytest.mark.parametrize(("n", "memory", "cap"), [(3, 30, None), (4, 24, None), (4, 24, 1e9), (5, 40, None)])
def test_three_methods_agree_on_proportional_memory(n, memory, cap) -> None:
    graph = chain(n)
    batches = {
        method: checked(graph, max_batch(graph, memory, formulation="checkmate", method=method, cap=cap)).batch
        for method in ("min-peak", "product", "bisection")
    }
    assert len(set(batches.values())) == 1, batches
    assert max_batch(graph, memory, formulation="checkmate", cap=cap).method == "min-peak"  # auto


def test_exact_methods_refuse_affine_memory() -> None:
    graph = affine_chain()
    for method in ("min-peak", "product"):
        with pytest.raises(ConfigurationError, match="proportional"):
            max_batch(graph, 20, formulation="checkmate", method=method)


def test_vgg16_between_checkpoint_all_and_the_lower_bound_limit(shared_graphs_dir) -> None:
    """Spec D B5: on vgg16 at 16e9 bytes the exact batch lies in [258, 311] (min-peak, a one-second MILP)."""
    raw = read_graph(shared_graphs_dir / "vgg16_train.json")
    graph = BatchScaling.proportional(raw, 256).attach(raw)
    result = checked(graph, max_batch(graph, M16, formulation="checkmate", backend="highs", method="min-peak"))
    assert (result.lower_limit, result.upper_limit) == (258, 311)
    assert 258 < result.batch <= 311
    assert result.total_cost <= cost_cap(graph) == result.cap
    baseline = checked(graph, max_batch(graph, M16, heuristic="chen-sqrtn"))
    assert baseline.batch <= result.batch


@pytest.mark.bench
@pytest.mark.parametrize(
    ("file", "file_batch", "lower", "upper"),
    [("cm1_fcn8_vgg_train", 32, 37, 61), ("cm2_resnet50_train", 256, 107, 1107)],
)
def test_benchmark_graphs_between_the_limits(shared_graphs_dir, file, file_batch, lower, upper) -> None:
    """Spec D B5 on cm1 / cm2 (slow: the staged MILP on 73 / 353 nodes): checkpoint-all <= ours <= the limit."""
    raw = read_graph(shared_graphs_dir / f"{file}.json")
    graph = BatchScaling.proportional(raw, file_batch).attach(raw)
    result = checked(graph, max_batch(graph, M16, formulation="checkmate", method="min-peak", time_limit=300))
    assert (result.lower_limit, result.upper_limit) == (lower, upper)
    assert lower <= result.batch <= upper


@pytest.mark.parametrize("method", ["product", "bisection"])
def test_warm_start_from_a_heuristic_is_never_lost(method) -> None:
    """With ``init`` the search starts at the heuristic's batch: a solver with no time still returns it."""
    graph = chain(8)
    griewank = max_batch(graph, 100, heuristic="griewank").batch
    found = max_batch(graph, 100, formulation="checkmate", method=method, init="griewank", time_limit=1.0)
    result = checked(graph, found)
    assert result.batch >= griewank == 20
