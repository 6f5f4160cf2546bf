"""Page idle values: offload a value when it is produced, prefetch it just before a read after a long gap.

A simple swapping heuristic (vDNN/Capuchin-like) over any compute sequence: wherever an instance of
a value sits unread for at least ``min_gap`` compute steps, it is dropped from the device after the
read before the gap (by eager frees) and prefetched right before the read after it. Each value is
offloaded once, at its first production that has such a gap; host copies persist.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Offload, Prefetch, Schedule, Step, eager_frees


def page_idle_values(
    graph: Graph,
    sequence: Sequence[int] | np.ndarray,
    *,
    min_gap: int = 1,
    min_bytes: int = 0,
    nodes: Iterable[int] | None = None,
) -> Schedule:
    """Eager-free schedule of ``sequence`` with Offload/Prefetch around every read gap of ``min_gap``+ steps.

    ``nodes`` (indices) and ``min_bytes`` restrict which values may be paged.
    """
    seq = [int(v) for v in sequence]
    pred_ptr, pred_idx = graph.pred_ptr.tolist(), graph.pred_idx.tolist()
    allowed = set(range(graph.n) if nodes is None else (int(v) for v in nodes))
    allowed = {v for v in allowed if graph.mem[v] >= min_bytes}
    produced_at = [-1] * graph.n  # position of the live instance's production
    last_read = [-1] * graph.n  # position of its latest read
    offloaded = [False] * graph.n
    offload_after: dict[int, list[int]] = {}
    prefetch_before: dict[int, list[int]] = {}
    for position, v in enumerate(seq):
        for u in pred_idx[pred_ptr[v] : pred_ptr[v + 1]]:
            previous = max(last_read[u], produced_at[u])
            if u in allowed and produced_at[u] >= 0 and position - previous - 1 >= min_gap:
                if not offloaded[u]:
                    offload_after.setdefault(produced_at[u], []).append(u)
                    offloaded[u] = True
                prefetch_before.setdefault(position, []).append(u)
            last_read[u] = position
        produced_at[v], last_read[v] = position, -1
    events: list[int | Step] = []
    for position, v in enumerate(seq):
        events.extend(Prefetch(u) for u in prefetch_before.get(position, ()))
        events.append(v)
        events.extend(Offload(u) for u in offload_after.get(position, ()))
    return eager_frees(graph, events)
