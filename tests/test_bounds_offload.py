"""Cost bounds with a serial transfer model (offload + prefetch as a way back): never above the brute-force optimum
over every schedule of Compute, Free, Offload and Prefetch steps on tiny graphs."""

from __future__ import annotations

import heapq
import itertools

import numpy as np
import pytest
from checkmate_graphs import diamond, random_dag
from test_bounds import _mlp  # a cheap activation after a costly matmul: only the closure sees the matmul

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Free, Offload, Prefetch, Schedule, input_order_peak, simulate
from remat_models.core.transfer import TransferModel
from remat_models.errors import BudgetInfeasibleError
from remat_models.io import linear_chain, random_layered
from remat_models.planning.bounds import _PivotScan, cost_lower_bound

EPS = 1e-9


def _optimum(graph: Graph, budget: int, transfer: TransferModel) -> tuple[float, Schedule] | None:
    """The cheapest schedule within ``budget`` (Dijkstra over device, host and computed sets), None if none fits.

    Moves: compute (inputs resident, not resident itself, a non-recomputable node once), free, offload (resident,
    no host copy yet), prefetch (a host copy, not resident). Host copies are never dropped (no host capacity).
    """
    n, mem = graph.n, [int(b) for b in graph.mem]
    need = [int(graph.mem[v] + graph.workspace[v]) for v in range(n)]
    preds = [sum(1 << int(u) for u in graph.preds(v)) for v in range(n)]
    outputs = sum(1 << int(v) for v in graph.outputs)
    every = (1 << n) - 1
    out_time = [transfer.out_time(b) for b in mem]
    in_time = [transfer.in_time(b) for b in mem]
    start = (0, 0, 0)
    best = {start: 0.0}
    came: dict[tuple[int, int, int], tuple[tuple[int, int, int], object]] = {}
    tie = itertools.count()
    queue: list[tuple[float, int, tuple[int, int, int]]] = [(0.0, next(tie), start)]
    while queue:
        cost, _, state = heapq.heappop(queue)
        if cost > best[state]:
            continue
        resident, host, computed = state
        if computed == every and resident & outputs == outputs:
            steps = []
            while state in came:
                state, step = came[state]
                steps.append(step)
            return cost, Schedule.of(reversed(steps))
        in_use = graph.fixed_mem + sum(mem[v] for v in range(n) if resident >> v & 1)
        for v in range(n):
            bit = 1 << v
            moves = []
            if resident & bit:
                moves.append(((resident & ~bit, host, computed), 0.0, Free(v)))
                if not host & bit:
                    moves.append(((resident, host | bit, computed), out_time[v], Offload(v)))
            else:
                fresh = not computed & bit
                if (fresh or graph.recomputable[v]) and preds[v] & resident == preds[v] and in_use + need[v] <= budget:
                    moves.append(((resident | bit, host, computed | bit), float(graph.cost[v]), Compute(v)))
                if host & bit and in_use + mem[v] <= budget:
                    moves.append(((resident | bit, host, computed), in_time[v], Prefetch(v)))
            for target, price, step in moves:
                total = cost + price
                if total < best.get(target, np.inf):
                    best[target] = total
                    came[target] = (state, step)
                    heapq.heappush(queue, (total, next(tie), target))
    return None


def _graphs() -> list[Graph]:
    frozen = random_dag(6, 2, workspace=True)
    mask = np.ones(frozen.n, dtype=bool)
    mask[::3] = False
    return [
        linear_chain(2),
        linear_chain(3),
        diamond(),
        random_layered(6, seed=1),
        random_dag(6, 3, workspace=True),
        random_dag(6, 5, fixed=True),
        random_dag(7, 11),
        frozen.with_recomputable(mask),
        *(_mlp(2, seed) for seed in range(3)),
    ]


@pytest.mark.parametrize("graph", _graphs(), ids=lambda g: f"{g.name}_{int(g.recomputable.sum())}")
@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_serial_transfer_bounds_never_above_the_brute_force_optimum(graph: Graph, speed: float) -> None:
    """Every pivot's cut and closure LP and the returned bound, at every budget from the step bound to the
    input-order peak, with transfers priced ``speed`` times a value's bytes per cost unit of the average node."""
    bandwidth = speed * float(graph.mem.sum()) / max(float(graph.total_cost), 1.0)
    transfer = TransferModel(out_bw=bandwidth, in_bw=bandwidth, out_latency=0.1)
    scan = _PivotScan(graph, transfer)
    for budget in range(int(graph.lower_bound), input_order_peak(graph) + 1):
        found = _optimum(graph, budget, transfer)
        if found is None:
            with pytest.raises(BudgetInfeasibleError):  # either a bound proves it, or the bound is simply lower
                cost_lower_bound(graph, budget, transfer=transfer)
                raise BudgetInfeasibleError("no proof", budget=budget, lower_bound=0)
            continue
        cost, schedule = found
        sim = simulate(graph, schedule, transfer)  # the brute force agrees with the simulator
        assert sim.peak <= budget and sim.total_cost == pytest.approx(cost)
        extra = cost - graph.total_cost
        for p in scan.pivots():
            mip = scan.closure_extra(p, budget, 1.0, integral=True)
            for proved in (scan.closure_extra(p, budget, 1.0), mip, _cut(scan, p, budget)):
                assert proved <= extra * (1 + EPS) + EPS, (graph.name, budget, graph.names[p], proved, extra)
        bound = cost_lower_bound(graph, budget, transfer=transfer)
        assert bound.value <= cost * (1 + EPS) + EPS, (graph.name, budget, bound, cost)


def _cut(scan: _PivotScan, p: int, budget: int) -> float:
    """The knapsack cut's extra cost at ``p`` (0 where the budget is below its step: the brute force decides)."""
    try:
        return scan.extra_cost(p, budget)
    except BudgetInfeasibleError:
        return 0.0


def test_optima_offload_and_the_closure_with_transfers_proves_more_than_the_cut() -> None:
    """Not vacuous: some optima prefetch, and the closure LP with the prefetch column proves more than the knapsack
    cut (at times the optimum itself, above every-node-once)."""
    offloaded = stronger = exact = 0
    for graph in _graphs():
        bandwidth = 0.5 * float(graph.mem.sum()) / max(float(graph.total_cost), 1.0)
        transfer = TransferModel(out_bw=bandwidth, in_bw=bandwidth)
        for budget in range(int(graph.lower_bound), input_order_peak(graph) + 1):
            found = _optimum(graph, budget, transfer)
            if found is None:
                continue
            offloaded += simulate(graph, found[1], transfer).prefetches > 0
            bound = cost_lower_bound(graph, budget, transfer=transfer)
            stronger += bound.method.startswith("closure")
            exact += bound.method.startswith("closure") and bound.value >= found[0] * (1 - 1e-6) > graph.total_cost
    assert offloaded >= 3 and stronger >= 10 and exact >= 2, (offloaded, stronger, exact)
