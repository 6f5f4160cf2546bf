"""The exact per-block trade-off of rotor's options: HiGHS's kept sets against brute force, identical blocks."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from remat_models.backends.interrupt import Stopper, stop_on_signals
from remat_models.core.graph import Graph
from remat_models.heuristics.block_options import BlockProblem, block_problem, exact_kept_sets, optimal_kept
from remat_models.heuristics.recompute import forward_mask
from remat_models.heuristics.rotor import block_chain
from remat_models.io import read_graph
from remat_models.io.generators import linear_chain, transformer

ZOO = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo"

MAX_CANDIDATES = 12  # brute force over 2^12 kept sets per block


def _problems(graph: Graph) -> list[BlockProblem]:
    chain = block_chain(graph)
    assert chain is not None
    forward = forward_mask(graph)
    read_later = np.zeros(graph.n, dtype=bool)
    read_later[graph.edges[~forward[graph.edges[:, 1]], 0]] = True
    read_later[chain.entering[chain.entering >= 0]] = True
    leaving = [*chain.entering[1:].tolist(), -1]
    pairs = zip(chain.forward, leaving, strict=True)
    return [block_problem(graph, nodes, chain.pinned, read_later, v) for nodes, v in pairs]


def _cost(graph: Graph, problem: BlockProblem, kept: np.ndarray) -> float:
    """The recomputation ``kept`` (local mask) leaves: every unkept needed value and its unkept in-block inputs."""
    inputs: dict[int, list[int]] = {}
    for u, v in problem.edges.tolist():
        inputs.setdefault(v, []).append(u)
    again: set[int] = set()
    stack = [v for v in np.flatnonzero(problem.needed & ~kept).tolist()]
    while stack:
        v = stack.pop()
        if v in again:
            continue
        if not graph.recomputable[problem.nodes[v]]:
            return np.inf
        again.add(v)
        stack.extend(u for u in inputs.get(v, []) if not kept[u])
    return float(graph.cost[problem.nodes[sorted(again)]].sum())


def _brute_force(graph: Graph, problem: BlockProblem, limit: float) -> float:
    size, mem = problem.nodes.size, graph.mem[problem.nodes]
    best = np.inf
    for bits in itertools.product((False, True), repeat=size):
        kept = np.array(bits)
        if (problem.leaving >= 0 and not kept[problem.leaving]) or mem[kept].sum() > limit:
            continue
        best = min(best, _cost(graph, problem, kept))
    return best


@pytest.mark.parametrize("graph", [transformer(3), linear_chain(10)], ids=str)
def test_kept_sets_are_optimal_at_every_limit(graph: Graph) -> None:
    checked = 0
    for problem in _problems(graph):
        if problem.nodes.size > MAX_CANDIDATES:
            continue
        mem = graph.mem[problem.nodes]
        for limit in np.linspace(0, mem.sum(), 6).tolist():
            expected = _brute_force(graph, problem, limit)
            kept = optimal_kept(graph, problem, limit)
            if not np.isfinite(expected):
                assert kept is None
                continue
            assert kept is not None
            mask = np.isin(problem.nodes, kept)
            assert mem[mask].sum() <= limit
            assert _cost(graph, problem, mask) == pytest.approx(expected)
            checked += 1
    assert checked >= 10


def test_identical_blocks_share_one_key_and_one_trade_off() -> None:
    """GPT-2 (zoo): 28 blocks, 6 distinct problems; two blocks with one key get the same kept sets, position by
    position (rotor solves each key once)."""
    graph = read_graph(ZOO / "zoo_gpt2.json")
    problems = _problems(graph)
    keys = [problem.key(graph) for problem in problems]
    assert len(set(keys)) <= len(keys) // 4
    repeated = next(key for key in keys if keys.count(key) > 1)
    first, second = [problems[i] for i, key in enumerate(keys) if key == repeated][:2]
    sets = [
        sorted(np.searchsorted(problem.nodes, kept).tolist() for kept in exact_kept_sets(graph, problem))
        for problem in (first, second)
    ]
    assert sets[0] == sets[1] and len(sets[0]) >= 2


def test_a_stopped_phase_stops_the_block_solves() -> None:
    graph = read_graph(ZOO / "zoo_gpt2.json")
    problem = next(p for p in _problems(graph) if p.needed.sum() > 2)
    stopper = Stopper()
    stopper.stop(signal.SIGINT)
    with stop_on_signals(stopper):
        assert exact_kept_sets(graph, problem) == []
    assert exact_kept_sets(graph, problem)  # outside the stopped phase they solve again


def test_sigterm_during_the_block_solves_ends_the_process() -> None:
    """No enclosing phase listens (an auto worker): the signal a block solve caught goes on and ends the process."""
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_block_options import ZOO, _problems\n"
        "from remat_models.heuristics.block_options import exact_kept_sets\n"
        "from remat_models.io import read_graph\n"
        "graph = read_graph(ZOO / 'zoo_gpt2.json')\n"
        "problems = _problems(graph)\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    for problem in problems:\n"
        "        exact_kept_sets(graph, problem)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()
