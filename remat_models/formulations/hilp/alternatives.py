"""Options of a cluster (rkgb ``OpSchedule``): a forward part and a backward part, measured by one eager-free run.

An option is stored in the local indices of its cluster's *representative* local graph, so it
translates to every identical cluster by index. Measured from the local run
``in-data sources, fwd, l_C, out-grad sources, bwd`` with eager frees:

- ``phantom`` p: bytes of V values that are not out-data, resident just after ``l_C``;
- ``m_fwd`` / ``m_bwd``: the largest *internal* memory of a step of the part (resident bytes
  during the step minus the interface copies the parent level accounts for: in-data and out-data
  during the forward part; depB values, out-grads and in-grads during the backward part), minus
  p for the forward part (the parent adds p when F_j runs);
- ``profile_*``: the correction rows of section 1.4 (m_i, inputs already read for the last time,
  outputs not computed yet), dominated rows dropped;
- ``dep``: interface values (sources or out-data) the backward part reads before recomputing them.

On a graph with operator implementations every step of a part has an implementation (``impl_fwd``,
``impl_bwd``; empty: the default everywhere), and the run measures its reads, in-place steps, workspace and cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.impls import step_impl
from remat_models.core.schedule import Compute, Schedule, eager_frees
from remat_models.formulations.hilp.layers import fixed_tails
from remat_models.formulations.hilp.local import LocalGraph

Profile = tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]  # (m_i, freed inputs, pending outputs)


@dataclass(frozen=True)
class ClusterOption:
    """One option of a cluster, in its representative's local indices."""

    fwd: tuple[int, ...]
    bwd: tuple[int, ...]
    phantom: int
    m_fwd: int
    m_bwd: int
    dep: tuple[int, ...]
    peak: int  # simulated peak of the whole local run (interfaces included)
    profile_fwd: Profile = ()
    profile_bwd: Profile = ()
    origin: str = "grid"  # "base" (autograd, recompute), "warm" (induced by a warm start) or "grid" (an ILP's)
    impl_fwd: tuple[int, ...] = ()  # implementation of each fwd step (empty: the default everywhere)
    impl_bwd: tuple[int, ...] = ()

    @property
    def kept(self) -> bool:
        """Whether selection and pruning always keep the option (base and warm-start options)."""
        return self.origin != "grid"


@dataclass(frozen=True)
class FastForward:
    """The ``ff`` part of a cluster: V in order keeping only the out-data."""

    seq: tuple[int, ...]
    m_fwd: int
    profile: Profile = ()


@dataclass
class _Step:
    phase: str
    node: int
    internal: int
    reads: list[int]


def local_run(lg: LocalGraph, fwd: Sequence[int], bwd: Sequence[int]) -> list[int]:
    """The local compute sequence of an option: in-data sources, fwd, ``l_C``, out-grad sources, bwd."""
    outgrads = list(range(lg.loss + 1, int(lg.backward[0]) if lg.backward.size else lg.graph.n))
    return [*range(lg.n_in), *fwd, lg.loss, *outgrads, *bwd]


def with_impls(nodes: Sequence[int], impls: Sequence[int]) -> list[tuple[int, int]]:
    """(node, implementation) steps of a part (``impls`` empty: the default everywhere)."""
    return list(zip(nodes, impls or [0] * len(nodes), strict=True))


def local_steps(
    lg: LocalGraph, fwd: Sequence[int], bwd: Sequence[int], impl_fwd: Sequence[int] = (), impl_bwd: Sequence[int] = ()
) -> list[tuple[int, int]]:
    """:func:`local_run` as (node, implementation) steps: the parts' implementations, the default elsewhere."""
    head = local_run(lg, (), ())
    return [
        *with_impls(head[: lg.n_in], ()),
        *with_impls(fwd, impl_fwd),
        *with_impls(head[lg.n_in :], ()),
        *with_impls(bwd, impl_bwd),
    ]


def steps_cost(graph: Graph, nodes: Sequence[int], impls: Sequence[int] = ()) -> float:
    """The summed cost of running ``nodes`` (ids of ``graph``) in order with ``impls`` (empty: the default ones).

    A node run again costs its implementation's ``recompute_cost`` (as in the simulator).
    """
    table = graph.impl_table
    if table is None:
        return float(graph.cost[list(nodes)].sum()) if len(nodes) else 0.0
    seen: set[int] = set()
    total = 0.0
    for v, i in with_impls(nodes, impls):
        total += table.impls[v][i].step_cost(v in seen)
        seen.add(v)
    return total


def inplace_ok(lg: LocalGraph, steps: Sequence[tuple[int, int]]) -> bool:
    """Whether no step runs in place over an interface value of the cluster (the level above keeps those)."""
    return not any(step in lg.interface_inplace for step in steps)


def _walk(lg: LocalGraph, seq: list[tuple[int, int]], phases: list[str]) -> tuple[list[_Step], Schedule, int]:
    """Eager-free run of ``seq``: per compute step its phase and internal bytes; the schedule; the peak."""
    g: Graph = lg.graph
    schedule = eager_frees(g, seq)
    mem, ws = g.mem.tolist(), g.workspace.tolist()
    out_data = set(lg.out_data.tolist())
    in_grads = set(g.outputs.tolist()) & set(lg.backward.tolist())
    resident: dict[int, bool] = {}  # value -> its copy is an interface copy
    in_use = interface = peak = 0
    steps: list[_Step] = []
    for step in schedule.steps:
        v = step.node
        if not isinstance(step, Compute):
            interface -= mem[v] if resident.pop(v) else 0
            in_use -= mem[v]
            continue
        phase = phases[len(steps)]
        s = step_impl(g, v, step.impl, len(steps))
        reads = [u for u in s.reads if resident.get(u)]  # interface copies read
        flag = phase in ("pre", "og") or (phase == "fwd" and v in out_data) or (phase == "bwd" and v in in_grads)
        allocated = 0 if s.inplace >= 0 else mem[v]
        during = in_use + allocated + (ws[v] if s.impl is None else s.impl.workspace)
        peak = max(peak, during)
        steps.append(_Step(phase, v, during - interface - (mem[v] if flag else 0), reads))
        if s.inplace >= 0:  # the input's buffer becomes v's
            interface -= mem[s.inplace] if resident.pop(s.inplace) else 0
        resident[v] = flag
        in_use += allocated
        interface += mem[v] if flag else 0
    return steps, schedule, peak


def _profile(lg: LocalGraph, steps: list[_Step], inputs: set[int], outputs: set[int], shift: int) -> Profile:
    """Correction rows of a part (spec 1.4): per distinct (freed inputs, pending outputs), the largest m_i."""
    last_read: dict[int, int] = {}
    first_computed: dict[int, int] = {}
    for i, step in enumerate(steps):
        for u in step.reads:
            if u in inputs:
                last_read[u] = i
        if step.node in outputs:
            first_computed.setdefault(step.node, i)
    best: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    for i, step in enumerate(steps):
        freed = tuple(sorted(d for d in inputs if last_read.get(d, -1) < i))
        pending = tuple(sorted(d for d in outputs if first_computed.get(d, len(steps)) > i))
        key = (freed, pending)
        best[key] = max(best.get(key, step.internal - shift), step.internal - shift)
    rows = [(m, f, g) for (f, g), m in best.items()]
    kept = [
        r
        for r in rows
        if not any(o is not r and o[0] >= r[0] and set(o[1]) <= set(r[1]) and set(o[2]) <= set(r[2]) for o in rows)
    ]
    return tuple(sorted(kept))


def measure(
    lg: LocalGraph,
    fwd: list[int],
    bwd: list[int],
    origin: str = "grid",
    impl_fwd: tuple[int, ...] = (),
    impl_bwd: tuple[int, ...] = (),
) -> ClusterOption:
    """Measure the option (fwd, bwd) of ``lg`` (local indices) run with ``impl_fwd``/``impl_bwd``: one eager run."""
    seq = local_steps(lg, fwd, bwd, impl_fwd, impl_bwd)
    n_og = len(seq) - len(bwd) - lg.n_in - len(fwd) - 1
    phases = ["pre"] * lg.n_in + ["fwd"] * len(fwd) + ["loss"] + ["og"] * n_og + ["bwd"] * len(bwd)
    steps, schedule, peak = _walk(lg, seq, phases)
    is_v = np.zeros(lg.graph.n, dtype=bool)
    is_v[lg.forward] = True
    out_data = set(lg.out_data.tolist())
    phantom = _phantom(lg, schedule, len(fwd) + lg.n_in, is_v, out_data)
    fsteps = [s for s in steps if s.phase == "fwd"]
    bsteps = [s for s in steps if s.phase == "bwd"]
    dep = {u for s in bsteps for u in s.reads if lg.is_source[u] or u in out_data}
    in_grads = set(lg.graph.outputs.tolist()) & set(lg.backward.tolist())
    return ClusterOption(
        fwd=tuple(fwd),
        bwd=tuple(bwd),
        phantom=phantom,
        m_fwd=max(max((s.internal for s in fsteps), default=0) - phantom, 0),
        m_bwd=max((s.internal for s in bsteps), default=0),
        dep=tuple(sorted(dep)),
        peak=peak,
        profile_fwd=_profile(lg, fsteps, set(range(lg.n_in)), out_data, phantom),
        profile_bwd=_profile(lg, bsteps, dep, in_grads, 0),
        origin=origin,
        impl_fwd=impl_fwd if any(impl_fwd) else (),
        impl_bwd=impl_bwd if any(impl_bwd) else (),
    )


def _phantom(lg: LocalGraph, schedule: Schedule, loss_index: int, is_v: np.ndarray, out_data: set[int]) -> int:
    """Bytes of internal V values resident right after the loss step (compute number ``loss_index``) and its frees."""
    resident: set[int] = set()
    computes = -1
    for step in schedule.steps:
        if isinstance(step, Compute):
            computes += 1
            if computes > loss_index:
                break
            resident.discard(step_impl(lg.graph, step.node, step.impl, computes).inplace)
            resident.add(step.node)
        else:
            resident.discard(step.node)
    return int(sum(int(lg.graph.mem[v]) for v in resident if is_v[v] and v not in out_data))


def fast_forward(lg: LocalGraph) -> FastForward:
    """The ff part: V in order, internal values freed as soon as V no longer reads them."""
    V = lg.forward.tolist()
    seq = with_impls([*range(lg.n_in), *V, lg.loss], ())
    steps, _, _ = _walk(lg, seq, ["pre"] * lg.n_in + ["fwd"] * len(V) + ["loss"])
    fsteps = [s for s in steps if s.phase == "fwd"]
    profile = _profile(lg, fsteps, set(range(lg.n_in)), set(lg.out_data.tolist()), 0)
    return FastForward(tuple(V), max((s.internal for s in fsteps), default=0), profile)


def base_options(lg: LocalGraph) -> list[ClusterOption]:
    """Option 0 "autograd" (fwd V, bwd W) and option 1 "recompute" (fwd V, bwd V + W) when V is recomputable.

    The recomputation skips V's non-recomputable tails (``layers.fixed_tails``): their first values are kept.
    """
    V, W = lg.forward.tolist(), lg.backward.tolist()
    options = [measure(lg, V, W, "base")]
    again = ~fixed_tails(lg.graph)[lg.forward]
    if W and lg.graph.recomputable[lg.forward[again]].all():
        options.append(measure(lg, V, lg.forward[again].tolist() + W, "base"))
    return options


def once_ok(lg: LocalGraph, fwd: Sequence[int], bwd: Sequence[int]) -> bool:
    """Whether every non-recomputable node of the cluster is computed exactly once."""
    counts = np.bincount(np.array([*fwd, *bwd], dtype=np.int64), minlength=lg.graph.n)
    fixed = ~lg.graph.recomputable & ~lg.is_source
    fixed[lg.loss] = False
    return bool((counts[fixed] == 1).all())


def pareto(lg: LocalGraph, options: list[ClusterOption]) -> list[ClusterOption]:
    """``options`` without those another one dominates; the base options are always kept.

    One dominates another with no more cost, phantom, overheads, peak or depB values, and less of one of them.
    """

    def metrics(o: ClusterOption) -> tuple[float, ...]:
        cost = steps_cost(lg.graph, o.fwd, o.impl_fwd) + steps_cost(lg.graph, o.bwd, o.impl_bwd)
        return (cost, o.phantom, o.m_fwd, o.m_bwd, o.peak)

    measured = [(o, metrics(o), set(o.dep)) for o in options]

    def dominated(o: ClusterOption, m: tuple[float, ...], dep: set[int]) -> bool:
        return any(
            other is not o
            and dep2 <= dep
            and all(a <= b for a, b in zip(m2, m, strict=True))
            and (m2, dep2) != (m, dep)
            for other, m2, dep2 in measured
        )

    return [o for o, m, dep in measured if o.origin == "base" or not dominated(o, m, dep)]
