"""Checkmate with implementations (spec A.6): spec cases A1-A4, exhaustive cross-checks, warm starts."""

from __future__ import annotations

import pytest
from impl_graphs import (
    A1_OPTIMA,
    A2_OPTIMA,
    A3_OPTIMA,
    A4_OPTIMA,
    a1_inplace,
    a2_mask,
    a3_inplace_output,
    a4_conv,
    random_impl_training,
)

from remat_models.backends import SolveLimits, available
from remat_models.core.schedule import input_order_peak, simulate
from remat_models.formulations.checkmate.impls import CHECKMATE_IMPLS
from remat_models.formulations.solving import solve_model
from remat_models.heuristics.exhaustive import exhaustive_optimum

LIMITS = SolveLimits(time_limit=30)


def solved_cost(graph, budget: int, backend: str = "highs", init=None) -> float | None:
    out = solve_model(graph, budget, "checkmate-impls", backend, limits=LIMITS, init=init)
    if out.schedule is None:
        return None
    sim = simulate(graph, out.schedule)
    assert sim.peak <= out.model_peak + 1e-6 and out.model_peak <= budget + 1e-6
    assert out.objective == pytest.approx(sim.total_cost, rel=1e-6)
    return round(sim.total_cost, 9)


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
@pytest.mark.parametrize(
    ("make", "optima"),
    [(a1_inplace, A1_OPTIMA), (a2_mask, A2_OPTIMA), (a3_inplace_output, A3_OPTIMA), (a4_conv, A4_OPTIMA)],
)
def test_spec_cases(make, optima: dict, backend: str) -> None:
    graph = make()
    for budget, expected in optima.items():
        assert solved_cost(graph, budget, backend) == expected


@pytest.mark.parametrize(("seed", "masks"), [*((s, False) for s in range(6)), *((s, True) for s in range(6, 14))])
def test_equals_the_staged_brute_force_and_takes_its_schedule_as_a_warm_start(seed: int, masks: bool) -> None:
    graph = random_impl_training(seed, masks=masks)
    low, high = graph.lower_bound, input_order_peak(graph)
    for budget in sorted({low, (low + high) // 2, high}):
        found = exhaustive_optimum(graph, budget, "staged")
        assert solved_cost(graph, budget) == (None if found is None else round(found.cost, 9))
        if found is not None:
            built = CHECKMATE_IMPLS.build(graph, budget)
            values = CHECKMATE_IMPLS.hints(built, found.schedule)
            assert built.model.check(values) == []
            assert built.cost(built.model.objective_value(values)) == pytest.approx(found.cost, rel=1e-5)
            assert solved_cost(graph, budget, init=found.schedule) == round(found.cost, 9)


def test_aux_values_have_their_own_blocks_on_graph_node_ids() -> None:
    graph = a2_mask()
    built = CHECKMATE_IMPLS.build(graph, 9)
    assert built.n_stages == graph.n - 1  # the mask takes no stage
    m = graph.index["m"]
    aux_s = built.model.index("AUX_S")
    assert set(aux_s.coords[1].tolist()) == {m}
    assert aux_s.labels[1][m] == "m"
    r_nodes = set(built.model.index("R").coords[1].tolist())
    assert m not in r_nodes and r_nodes == set(range(graph.n)) - {m}


@pytest.mark.parametrize("backend", [b for b in available() if b not in ("highs", "cpsat")])
def test_a2_and_a4_on_the_other_backends(backend: str) -> None:
    graph = a4_conv()
    for budget in (3, 4, 6, 8):
        assert solved_cost(graph, budget, backend) == A4_OPTIMA[budget]
    graph = a2_mask()
    for budget in (8, 9, 12):
        assert solved_cost(graph, budget, backend) == A2_OPTIMA[budget]
