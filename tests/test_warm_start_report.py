"""``auto``'s exact worker reports the fast baselines' best at once, before its warm start's polish and FastSA."""

from __future__ import annotations

from remat_models.core.schedule import input_order_peak, simulate
from remat_models.io.generators import transformer
from remat_models.planning.warm_start import WarmStart, auto_init, fast_baselines


def test_the_cheapest_fitting_baseline_is_handed_over_before_the_polish() -> None:
    graph = transformer(24, seed=1)  # above INIT_POLISH_NODES and INIT_FASTSA_NODES: polish and FastSA run
    budget = int(0.5 * input_order_peak(graph))
    handed: list[WarmStart] = []
    final = auto_init(graph, budget, seed=0, time_limit=8, on_baseline=handed.append)
    assert len(handed) == 1 and final is not None
    early = handed[0]
    again = simulate(graph, early.schedule)
    assert (again.peak, again.total_cost) == (early.simulation.peak, early.simulation.total_cost)
    assert early.simulation.peak <= budget
    fitting = [simulate(graph, s) for s in fast_baselines(graph, budget).values()]
    # the baselines less the recomputations the budget does not need: 481,441 against 483,022 when measured
    assert early.simulation.total_cost < min(r.total_cost for r in fitting if r.peak <= budget)
    assert final.simulation.peak <= budget and final.simulation.total_cost <= early.simulation.total_cost
