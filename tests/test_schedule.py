import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remat_models import Compute, Free, Graph, InvalidScheduleError, Node, Schedule, eager_frees, simulate
from remat_models.core.schedule import input_order_peak


def chain3(**kwargs) -> Graph:
    nodes = [Node("a", 1, 10, workspace=5), Node("b", 2, 20), Node("c", 3, 30, recomputable=False)]
    return Graph(nodes, [("a", "b"), ("b", "c")], **kwargs)


def test_simulate_counts_memory_during_and_after_steps() -> None:
    graph = chain3(fixed_mem=100)
    schedule = Schedule.of([Compute(0), Compute(1), Free(0), Compute(2), Free(1)])
    result = simulate(graph, schedule)
    assert result.timeline.tolist() == [115, 130, 120, 150, 130]
    assert result.peak == 150 and result.peak_step == 3
    assert result.total_cost == 6 and result.tdi == 0 and result.recomputations == 0


def test_recomputation_cost_and_tdi() -> None:
    graph = chain3()
    steps = [Compute(0), Compute(1), Free(0), Free(1), Compute(0), Compute(1), Free(0), Compute(2)]
    result = simulate(graph, steps)
    assert result.total_cost == 9
    assert result.tdi == pytest.approx(50.0)
    assert result.recomputations == 2
    assert result.computations == 5


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([Compute(1)], "step 0: computes 'b' but its input 'a' is not resident"),
        ([Compute(0), Free(1)], "step 1: frees 'b', which is not resident"),
        ([Compute(0), Compute(0)], "step 1: computes 'a' while its output is already resident"),
        ([Compute(0), Compute(1)], "node 'c' is never computed"),
        ([Compute(0), Compute(1), Compute(2), Free(2)], "graph output 'c' is not resident at the end"),
        ([Compute(0), Compute(1), Compute(2), Free(2), Compute(2)], "step 4: recomputes non-recomputable node 'c'"),
        ([Compute(7)], "step 0: Compute(node=7) refers to no node"),
    ],
)
def test_invalid_schedules_name_step_and_reason(steps, message) -> None:
    with pytest.raises(InvalidScheduleError) as caught:
        simulate(chain3(), steps)
    assert message in str(caught.value)


def test_eager_frees_frees_after_last_use_before_recompute() -> None:
    # a feeds b and c; c also reads b. The sequence recomputes a before c.
    graph = Graph([Node(x) for x in "abc"], [("a", "b"), ("a", "c"), ("b", "c")])
    schedule = eager_frees(graph, [0, 1, 0, 2])
    assert schedule.steps == (Compute(0), Compute(1), Free(0), Compute(0), Compute(2), Free(0), Free(1))
    assert simulate(graph, schedule).peak == 3


def test_eager_frees_keeps_final_outputs_and_drops_unused_values() -> None:
    graph = Graph([Node(x) for x in "abc"], [("a", "b")], outputs=["b"])
    schedule = eager_frees(graph, [0, 2, 1])
    assert schedule.steps == (Compute(0), Compute(2), Free(2), Compute(1), Free(0))
    assert Free(1) not in schedule.steps


def test_eager_frees_rejects_sequence_out_of_dependency_order() -> None:
    with pytest.raises(InvalidScheduleError, match="computes 'b' before its input 'a'"):
        eager_frees(chain3(), [1, 0, 2])


@st.composite
def graphs_and_sequences(draw):
    """A random DAG and a random valid compute sequence with recomputations."""
    n = draw(st.integers(1, 8))
    pairs = [(u, v) for v in range(n) for u in range(v)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2 * n)) if pairs else []
    mems = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    graph = Graph.from_arrays([f"v{i}" for i in range(n)], [1.0] * n, mems, edges)
    sequence: list[int] = []
    for v in range(n):
        # recompute a random prefix closure before some nodes
        extra = draw(st.lists(st.integers(0, max(v - 1, 0)), max_size=2)) if v else []
        for u in sorted(set(extra)):
            sequence.extend(w for w in range(u + 1) if graph.recomputable[w])
        sequence.append(v)
    return graph, sequence


@settings(max_examples=150, deadline=None)
@given(graphs_and_sequences())
def test_eager_frees_never_exceed_keeping_everything(case) -> None:
    graph, sequence = case
    eager = simulate(graph, eager_frees(graph, sequence))
    # Without frees a value cannot be recomputed while resident, so compare against the
    # same sequence where each recomputation first frees the previous copy only.
    steps: list[Compute | Free] = []
    resident: set[int] = set()
    for v in sequence:
        if v in resident:
            steps.append(Free(v))
        steps.append(Compute(v))
        resident.add(v)
    lazy = simulate(graph, steps)
    assert eager.peak <= lazy.peak
    assert eager.total_cost == lazy.total_cost


@settings(max_examples=100, deadline=None)
@given(graphs_and_sequences())
def test_timeline_matches_independent_recount(case) -> None:
    graph, sequence = case
    schedule = eager_frees(graph, sequence)
    result = simulate(graph, schedule)
    resident = np.zeros(graph.n, dtype=bool)
    expected = []
    for step in schedule:
        if isinstance(step, Compute):
            expected.append(graph.mem[resident].sum() + graph.mem[step.node] + graph.workspace[step.node])
            resident[step.node] = True
        else:
            resident[step.node] = False
            expected.append(graph.mem[resident].sum())
    assert result.timeline.tolist() == expected
    assert result.peak == max(e for e, s in zip(expected, schedule, strict=True) if isinstance(s, Compute))


def test_input_order_peak_of_a_chain() -> None:
    graph = Graph(
        [Node(x, mem=m) for x, m in zip("abcd", [1, 2, 4, 8], strict=True)], [("a", "b"), ("b", "c"), ("c", "d")]
    )
    assert input_order_peak(graph) == 12
