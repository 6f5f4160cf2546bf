"""Rotor's table is filled by a numba kernel (#34: numpy per option and per checkpoint took 3.6 s of a 5 s limit on
the 9,607-node transformer under load): the same cells and choices as numpy's programme, reproduced here."""

from __future__ import annotations

import numpy as np
import pytest

from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph
from remat_models.heuristics import rotor
from remat_models.io.generators import transformer, unet


def numpy_table(options: rotor._Options, unit: int, size: int, transient: bool) -> tuple[np.ndarray, np.ndarray]:
    """The table as numpy filled it before: each option of block s, then each checkpoint s', strictly cheaper wins."""
    length = options.forward_cost.size
    cost, choice = np.full((length, length, size), np.inf), np.zeros((length, length, size), dtype=np.int32)
    entering = -(-options.entering_bytes // unit)
    prefix = np.concatenate([[0.0], np.cumsum(options.forward_cost)])
    for span in range(length):
        for s in range(length - span):
            t = s + span
            best, chosen = cost[s, t], choice[s, t]
            for o, (stored, extra) in enumerate(zip(options.stored[s], options.extra[s], strict=True)):
                need = -(-stored // unit)
                low = need + (-(-options.again[s][o] // unit) if transient else 0)
                if low >= size:
                    continue
                here = options.forward_cost[s] + options.backward_cost[s] + extra
                candidate = np.full(size, np.inf)
                candidate[low:] = here if s == t else here + cost[s + 1, t, low - need : size - need]
                better = candidate < best
                best[better], chosen[better] = candidate[better], -1 - o
            for split in range(s + 1, t + 1):
                need = int(entering[split])
                if need >= size:
                    continue
                candidate = np.full(size, np.inf)
                candidate[need:] = prefix[split] - prefix[s] + cost[split, t, : size - need]
                candidate += cost[s, split - 1]
                better = candidate < best
                best[better], chosen[better] = candidate[better], split
    return cost, choice


CASES = [(transformer(8, seed=1), "50%"), (unet(3), "40%"), (transformer(4), "80%")]


@pytest.mark.parametrize(("graph", "share"), CASES)
@pytest.mark.parametrize("transient", [False, True])
def test_the_kernel_fills_the_table_as_numpy_did(graph: Graph, share: str, transient: bool) -> None:
    budget = parse_budget(share, graph)
    chain = rotor.block_chain(graph)
    assert chain is not None
    options = rotor._options(graph, chain, [])
    unit = max(1, -(-budget // rotor.BUCKETS))
    size = 600
    table = rotor._Table(options, unit, size, transient)
    cost, choice = numpy_table(options, unit, size, transient)
    assert np.isfinite(table.cost).any()
    np.testing.assert_array_equal(table.cost, cost)
    np.testing.assert_array_equal(table.choice, choice)
