"""A graph sent to another process (``auto``'s workers get theirs pickled) keeps its arrays read-only.

Unpickled numpy arrays are writable, and numba compiles a kernel again for a writable array's type: each worker of a
fresh install compiled the kernels the warm-up had cached for read-only ones (20-90 s on two busy cores).
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np

from remat_models.io import transformer


def test_unpickled_graph_arrays_are_read_only_as_built() -> None:
    graph = transformer(2)
    assert graph.pred_ptr is not None  # a cached property travels too
    copy = pickle.loads(pickle.dumps(graph))
    arrays = {k: v for k, v in vars(graph).items() if isinstance(v, np.ndarray)}
    assert arrays and all(not vars(copy)[k].flags.writeable for k, v in arrays.items() if not v.flags.writeable)
    assert copy == graph and "_readonly_arrays" not in vars(copy)


SIGNATURES = """
import pickle, numba
from remat_models.heuristics import _sequence_kernels as kernels
from remat_models.heuristics.baselines import BASELINES
from remat_models.io import transformer
graph = transformer(2)
budget = graph.lower_bound * 2
names = ("chen-sqrtn", "chen-greedy", "knapsack")
def signatures():
    found = {n: d for n, d in vars(kernels).items() if isinstance(d, numba.core.registry.CPUDispatcher)}
    return {n: len(d.signatures) for n, d in found.items()}
first = [BASELINES[name](graph, budget).steps for name in names]
before = signatures()
copy = pickle.loads(pickle.dumps(graph))
again = [BASELINES[name](copy, budget).steps for name in names]
print(before == signatures(), first == again)
"""


def test_a_kernel_run_on_an_unpickled_graph_needs_no_new_signature() -> None:
    """In a fresh process: this suite's conftest warms the kernels on an unpickled graph too, hiding a regression."""
    done = subprocess.run([sys.executable, "-P", "-c", SIGNATURES], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]  # before: 5 kernels compiled a second, writable-array signature
