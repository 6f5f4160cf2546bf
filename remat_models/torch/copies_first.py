"""Kept copies computed right after their op: the Graph then frees a multi-output op's large outputs as eager does.

A planner may compute a kept copy (a multi-output op's small output copied into its own node, such as batch
norm's statistics: :mod:`remat_models.torch.split`) long after its op. In the Graph the op's node, its large
outputs included, then lives until the copy has read it, while the generated code drops each output after its
last reader: the zoo ResNet's plan measured 1.4 MB below its prediction that way. :func:`copies_first` moves
each kept copy to just after its op's computation and frees every value at its last use.
"""

from __future__ import annotations

from remat_models.core.schedule import Compute, Schedule, eager_frees, simulate
from remat_models.torch.compiled_step import supports
from remat_models.torch.mapping import TorchGraph
from remat_models.torch.split import is_kept_copy


def copies_first(torch_graph: TorchGraph, schedule: Schedule) -> Schedule:
    """``schedule`` with kept copies right after their op and frees at last use, where that peaks no higher.

    The same computations (so the same cost), each copy reading the same computation of its op. Schedules
    with transfers or implementations are returned as they are.
    """
    graph = torch_graph.graph
    kept = {v for v, node in enumerate(torch_graph.fx_nodes) if is_kept_copy(node)}
    if not kept or not supports(schedule):
        return schedule
    slots: list[list[int]] = []
    latest: dict[int, list[int]] = {}  # node -> the slot of its latest computation
    for step in schedule.steps:
        if not isinstance(step, Compute):
            continue
        sources = graph.preds(step.node)
        if step.node in kept and len(sources) == 1 and int(sources[0]) in latest:
            latest[int(sources[0])].append(step.node)
            continue
        slots.append([step.node])
        latest[step.node] = slots[-1]
    moved = eager_frees(graph, [v for slot in slots for v in slot])
    return moved if simulate(graph, moved).peak <= simulate(graph, schedule).peak else schedule
