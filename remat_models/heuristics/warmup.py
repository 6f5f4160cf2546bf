"""Compile every numba kernel into numba's on-disk cache: ``python -m remat_models.heuristics.warmup``.

``make setup`` runs it once, so a user's first FastSA or baseline call loads compiled kernels (about a
second) instead of compiling them (about 20 s on a 2-core machine). Later processes load the cache.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from remat_models.core.graph import Graph
from remat_models.heuristics import _sequence_kernels as kernels
from remat_models.heuristics.baselines import BASELINES
from remat_models.heuristics.fastsa import fastsa
from remat_models.heuristics.least_peak import least_peak
from remat_models.heuristics.rotor import rotor
from remat_models.io.generators import linear_chain, transformer

log = logging.getLogger(__name__)


def compile_kernels() -> float:
    """Compile (or load) the FastSA, baseline, least-peak and rotor kernels here; return the seconds it took.

    Runs them on a 6-node chain with skip edges at a tight budget, so every stage (and its signatures) runs.
    """
    started = time.perf_counter()
    edges = [(i, i + 1) for i in range(5)] + [(0, 5), (1, 4)]
    graph = Graph.from_arrays([f"v{i}" for i in range(6)], [1.0] * 6, [2] * 6, edges, name="warmup")
    for logaddexp in (False, True):
        fastsa(graph, 8, iterations=(256, 256), logaddexp=logaddexp)
    BASELINES["chen-sqrtn"](graph, 8)
    BASELINES["chen-greedy"](graph, 8)
    BASELINES["knapsack"](graph, 8)
    chain = linear_chain(4)  # Griewank's revolve kernels (a chain at a budget below storing every activation)
    BASELINES["griewank"](chain, int(chain.mem.sum()) // 2)
    least_peak(graph, 0, time_limit=None)  # no cut-off: under load 1 s stopped it before every kernel had run
    program = np.array([[0, 5], [1, 2], [0, 3]], dtype=np.int64)  # rotor's programmes: ensure, drop
    kernels.program_sequence(graph.order, graph.pred_ptr, graph.pred_idx, graph.position, graph.recomputable, program)
    blocks = transformer(1)  # rotor's table kernel (its graph needs a chain of blocks with a backward pass)
    rotor(blocks, int(blocks.mem.sum()))
    return time.perf_counter() - started


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO)
    log.info("numba kernels compiled or loaded in %.1f s", compile_kernels())
