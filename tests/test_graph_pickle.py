"""A graph sent to another process (``auto``'s workers get theirs pickled) keeps its arrays read-only.

Unpickled numpy arrays are writable, and numba compiles a kernel again for a writable array's type: each worker of a
fresh install compiled the kernels the warm-up had cached for read-only ones (20-90 s on two busy cores).
"""

from __future__ import annotations

import pickle

import numba
import numpy as np

from remat_models.core.schedule import simulate
from remat_models.heuristics import _sequence_kernels as kernels
from remat_models.heuristics.baselines import BASELINES
from remat_models.io import transformer


def test_unpickled_graph_arrays_are_read_only_as_built() -> None:
    graph = transformer(2)
    assert graph.pred_ptr is not None  # a cached property travels too
    copy = pickle.loads(pickle.dumps(graph))
    arrays = {k: v for k, v in vars(graph).items() if isinstance(v, np.ndarray)}
    assert arrays and all(not vars(copy)[k].flags.writeable for k, v in arrays.items() if not v.flags.writeable)
    assert copy == graph and "_readonly_arrays" not in vars(copy)


def _signatures() -> dict[str, int]:
    """How many compiled signatures each baseline kernel has in this process."""
    dispatchers = {name: d for name, d in vars(kernels).items() if isinstance(d, numba.core.registry.CPUDispatcher)}
    return {name: len(d.signatures) for name, d in dispatchers.items()}


def test_a_kernel_run_on_an_unpickled_graph_needs_no_new_signature() -> None:
    graph = transformer(2)
    budget = graph.lower_bound * 2
    names = ("chen-sqrtn", "chen-greedy", "knapsack")
    first = [BASELINES[name](graph, budget) for name in names]
    signatures = _signatures()
    copy = pickle.loads(pickle.dumps(graph))
    again = [BASELINES[name](copy, budget) for name in names]
    assert _signatures() == signatures  # before: 5 kernels compiled a second, writable-array signature
    for schedule, same in zip(first, again, strict=True):
        assert same.steps == schedule.steps and simulate(copy, same).peak == simulate(graph, schedule).peak
