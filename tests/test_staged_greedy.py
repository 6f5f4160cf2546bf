"""The staged greedy: its memory profile is the simulator's and Moccasin's, its plans fit the budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_moccasin import random_graph

from remat_models.core.schedule import eager_frees, input_order_peak, simulate
from remat_models.formulations.moccasin.layout import intervals_from_sequence
from remat_models.formulations.moccasin.model import MoccasinOptions, build_model
from remat_models.heuristics.staged_greedy import profile, staged_greedy, staged_greedy_sequence
from remat_models.io.generators import linear_chain


def _plan(graph, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The input order plus random recomputations (node, stage), at most one per node."""
    node, stage = list(graph.order), list(range(graph.n))
    for p in rng.permutation(graph.n - 1)[: graph.n // 2].tolist():
        node.append(int(graph.order[p]))
        stage.append(int(rng.integers(p + 1, graph.n)))
    return np.array(node), np.array(stage)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(3, 9), seed=st.integers(0, 10_000))
def test_profile_is_the_simulated_and_the_moccasin_memory(n: int, seed: int) -> None:
    graph = random_graph(n, seed, fixed_mem=seed % 3)
    prof = profile(graph, *_plan(graph, np.random.default_rng(seed)))
    sequence = prof.node.tolist()
    assert int(prof.level.max()) == simulate(graph, eager_frees(graph, sequence)).peak
    built = build_model(graph, input_order_peak(graph), MoccasinOptions(C=2))
    assert built.peak(intervals_from_sequence(built.layout, sequence)) == int(prof.level.max())  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(3, 10), seed=st.integers(0, 10_000), frac=st.floats(0.0, 1.0), copies=st.integers(1, 3))
def test_plans_keep_the_input_order_and_the_copies_and_fit_when_they_say_so(
    n: int, seed: int, frac: float, copies: int
) -> None:
    graph = random_graph(n, seed)
    budget = int(graph.lower_bound + frac * (input_order_peak(graph) - graph.lower_bound))
    sequence = staged_greedy_sequence(graph, budget, copies)
    assert list(dict.fromkeys(sequence)) == graph.order.tolist()  # first computations in input order
    assert np.bincount(sequence, minlength=n).max() <= copies
    sim = simulate(graph, staged_greedy(graph, budget, copies))
    assert sim.peak <= input_order_peak(graph)
    if copies == 1:
        assert sequence == graph.order.tolist()


def test_a_chain_fits_below_its_input_order_peak_with_one_recomputation_each() -> None:
    graph = linear_chain(4)
    peak = input_order_peak(graph)
    schedule = staged_greedy(graph, peak - 1, copies=2)
    assert simulate(graph, schedule).peak <= peak - 1


@pytest.mark.parametrize("fraction", [0.9, 0.8])
@pytest.mark.parametrize("stem", ["rl_g1_n100", "rl_g2_n250"])
def test_rl_graphs_fit_90_and_80_percent(shared_graphs_dir: Path, stem: str, fraction: float) -> None:
    from remat_models.io.files import read_graph

    graph = read_graph(shared_graphs_dir / f"{stem}.json")
    budget = int(fraction * input_order_peak(graph))
    sim = simulate(graph, staged_greedy(graph, budget))
    assert sim.peak <= budget and sim.tdi < 10
