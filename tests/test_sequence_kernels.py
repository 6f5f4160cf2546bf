"""The baselines' numba engine agrees with the simulator and eager_frees; revolve splits; long-chain griewank."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remat_models import simulate
from remat_models.core.schedule import eager_frees, input_order_peak
from remat_models.heuristics import _sequence_kernels as kernels
from remat_models.heuristics import griewank as griewank_module
from remat_models.heuristics.baselines import chen_greedy_sequences, chen_sqrtn_checkpoints, griewank_budget
from remat_models.heuristics.griewank import chain_of, griewank_sequence
from remat_models.heuristics.recompute import (
    checkpoint_sequence,
    forward_nodes,
    sequence_schedule,
    sequence_score,
)
from remat_models.io.generators import linear_chain, random_layered, transformer
from tests.test_baselines import any_graphs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_graphs, st.integers(0, 5))
def test_sequence_schedule_and_score_are_eager_frees_and_simulate(graph, stride) -> None:
    fwd = forward_nodes(graph)
    sequences = [checkpoint_sequence(graph, fwd[:: stride + 1] if stride else []), *chen_greedy_sequences(graph)]
    for sequence in sequences:
        schedule = sequence_schedule(graph, sequence)
        assert schedule == eager_frees(graph, sequence)
        result = simulate(graph, schedule)
        assert sequence_score(graph, sequence) == (result.peak, result.total_cost)


@pytest.mark.parametrize("graph", [random_layered(300, seed=3), transformer(3)], ids=["random", "transformer"])
def test_long_recomputing_sequences_score_like_the_simulator(graph) -> None:
    sequence = checkpoint_sequence(graph, chen_sqrtn_checkpoints(forward_nodes(graph)))
    assert sequence.size > graph.n  # it recomputes
    result = simulate(graph, sequence_schedule(graph, sequence))
    assert sequence_score(graph, sequence) == (result.peak, result.total_cost)


def smallest_optimal_splits(length: int) -> tuple[np.ndarray, np.ndarray]:
    """The dynamic program over C(l, s) with numpy's argmin (the smallest optimal j)."""
    cost = np.zeros((length + 1, length + 1), dtype=np.int64)
    split = np.ones((length + 1, length + 1), dtype=np.int64)
    cost[:, 0] = np.maximum(np.arange(length + 1) * (np.arange(length + 1) - 1) // 2, 0)
    for size in range(2, length + 1):
        j = np.arange(1, size)
        total = j[:, None] + cost[size - j, :-1] + cost[j, 1:]
        best = np.argmin(total, axis=0)
        cost[size, 1:] = total[best, np.arange(length)]
        split[size, 1:] = j[best]
    return cost, split


def test_closed_form_revolve_matches_the_dynamic_program() -> None:
    cost, split = smallest_optimal_splits(70)
    for steps in range(71):
        for slots in range(71):
            assert kernels.revolve_cost(steps, slots) == cost[steps, slots]
            if steps >= 2 and slots >= 1:
                assert kernels.revolve_split(steps, slots) == split[steps, slots], (steps, slots)


def test_long_chain_slot_search_finds_the_exhaustive_choice(monkeypatch) -> None:
    graph = linear_chain(60)
    chain = chain_of(graph)
    peak = input_order_peak(graph)
    exhaustive = [griewank_budget(graph, int(f * peak)) for f in (0.1, 0.2, 0.35, 0.6)]
    monkeypatch.setattr(griewank_module, "EXHAUSTIVE_WORK", 0)  # every chain counts as long
    monkeypatch.setattr(griewank_module, "SEARCH_WINDOW", 2)
    for fraction, expected in zip((0.1, 0.2, 0.35, 0.6), exhaustive, strict=True):
        budget = int(fraction * peak)
        found = simulate(graph, griewank_budget(graph, budget))
        assert found.fits(budget)
        assert found.total_cost == simulate(graph, expected).total_cost
    assert griewank_sequence(graph, 0, chain).size > graph.n
