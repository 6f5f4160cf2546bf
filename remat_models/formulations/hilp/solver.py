"""The hierarchical solver (HiREmate section 3.2.1): cluster options bottom-up, then H-ILP at the top.

Time limits: each option ILP gets ``level_time_limit``; with a total limit (``SolveLimits.time_limit``)
option ILPs stop after ``options_time_limit`` (default 60 % of the total; the base options always
exist) and the top ILP gets what is left (at least 1 s). Within the options time, each distinct cluster
(children first) gets an even share of what is left over the clusters left, so one hard ILP cannot
starve the rest: a cluster stops its grid of ILPs at the end of its share. Every phase checks the total
limit (issue 24): H-Partition between rounds, the top ILP never past the end; a solve that reaches the end
before its top level returns the warm start as "no schedule".

For every distinct cluster (by canonical key, ``identical="exact"`` or ``"shape"``), children
first: base options (autograd, recompute; no ILP), then H-ILP solves of the cluster's local graph
over a grid of (peak, save) budgets (leaf clusters: the ``leaf`` formulation's solves, ``leaves.py``),
each decoded, split at the virtual loss and measured. The top
level is one H-ILP over the graph with the top clusters as layers. Its compute sequence is freed
eagerly and re-simulated: the returned schedule's peak is the simulator's, never the model's.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from remat_models.backends import SolveLimits, SolveStatus
from remat_models.backends.interrupt import interrupted
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Schedule, SimulationResult, eager_frees, simulate
from remat_models.errors import BudgetInfeasibleError, ConfigurationError
from remat_models.formulations.base import SolveChain
from remat_models.formulations.hilp.alternatives import (
    ClusterOption,
    FastForward,
    Profile,
    base_options,
    fast_forward,
    inplace_ok,
    measure,
    once_ok,
    pareto,
    steps_cost,
    with_impls,
)
from remat_models.formulations.hilp.backward import backward_sets
from remat_models.formulations.hilp.graph import HGraph, LayerSpec, Part, build_hgraph
from remat_models.formulations.hilp.layers import fixed_tails, pair_layers
from remat_models.formulations.hilp.leaves import solve_leaf
from remat_models.formulations.hilp.level import HILP_LEVEL, HilpModel
from remat_models.formulations.hilp.local import LocalGraph, local_graph
from remat_models.formulations.hilp.options import HilpOptions
from remat_models.formulations.hilp.partition import (
    Cluster,
    Partition,
    PartitionOptions,
    PartitionTimeUp,
    h_partition,
)
from remat_models.formulations.hilp.refine import Move, refine
from remat_models.formulations.hilp.warm import Start, fitting_starts, halves, induced

log = logging.getLogger(__name__)


HierarchyOptions = HilpOptions  # the hierarchical solve takes the formulation's options
OPTIONS_SHARE = 0.6  # of a total time limit, what option ILPs may use (the top level gets the rest)
MIN_ILP_SECONDS = 0.5  # the least time an option ILP gets under a total limit
RELAX = (1.02, 1.05, 1.1)  # budget multiples the top is solved at again while its time lasts (kept if it fits)
REFINE_SHARE = 0.1  # of a total time limit, what the top ILP leaves to the refinement (which also gets its leftover)


def _partition_options(opts: HilpOptions) -> PartitionOptions:
    return PartitionOptions(max_leaf=opts.max_leaf, max_top=opts.max_top, alpha=opts.alpha)


@dataclass
class HierarchicalResult:
    """The top-level outcome, the simulated schedule, and every ILP solved (level, seconds, status)."""

    status: SolveStatus
    schedule: Schedule | None
    simulation: SimulationResult | None
    objective: float | None
    bound: float | None
    partition: Partition
    ilp_times: list[tuple[str, float, str]] = field(default_factory=list)
    top: HilpModel | None = None
    top_solve_time: float = 0.0
    model_peak: float | None = None
    top_status: str = ""
    top_cost: float | None = None  # simulated total cost of the top level's own schedule
    reason: str | None = None  # why there is no top-level schedule
    returned_warm_start: bool = False
    refined: int = 0  # refinement moves kept (each a cheaper option swapped into the incumbent)

    @property
    def ilps(self) -> int:
        """Number of ILPs solved (option ILPs and the top one)."""
        return len(self.ilp_times)

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers."""
        clusters = self.partition.clusters()
        return {
            "depth": self.partition.depth,
            "clusters": len(clusters),
            "top_nodes": len(self.partition.top),
            "ilps": self.ilps,
            "ilp_time_s": float(sum(t for _, t, _ in self.ilp_times)),
            "leaf_solves": sum(label.startswith("leaf@") for label, _, _ in self.ilp_times),
            "top_solve_time_s": self.top_solve_time,
            "top_status": self.top_status,
            "top_cost": self.top_cost,
            "returned_warm_start": self.returned_warm_start,
            "refined": self.refined,
            **({} if self.reason is None else {"reason": self.reason}),
        }


@dataclass
class _Solved:
    """A representative cluster's local graph and options (local indices)."""

    local: LocalGraph
    options: list[ClusterOption]
    ff: FastForward


class HierarchicalSolver:
    """One hierarchical solve of a graph under a budget on a backend: every level ILP runs on H-ILP's solve chain."""

    def __init__(
        self,
        graph: Graph,
        budget: int,
        backend: str | SolveChain = "highs",
        options: HilpOptions | Mapping[str, Any] | None = None,
        limits: SolveLimits | None = None,
    ) -> None:
        self.graph, self.budget = graph, int(budget)
        self.opts = HilpOptions.of(options)
        if graph.impl_table is not None and graph.impl_table.n_aux:
            raise ConfigurationError(
                "hierarchical hilp takes operator implementations without aux values; plan() gives it the default view"
            )
        self.limits = limits or SolveLimits()
        self.chain = SolveChain.of(HILP_LEVEL, backend)
        self.solver = self.chain.backend  # the backend (tests solve a level on it directly)
        self.integral = self.chain.integral
        self.owner = pair_layers(graph)
        self.tails = fixed_tails(graph)  # non-recomputable forward nodes that reruns of their layer skip
        self.backward: dict[Cluster, np.ndarray] = {}  # W of every cluster, set by run()
        self.solved: dict[str, _Solved] = {}
        self.key_of: dict[Cluster, str] = {}
        self.locals: dict[Cluster, LocalGraph] = {}
        self.ilp_times: list[tuple[str, float, str]] = []
        self.deadline: float | None = None  # when option ILPs stop
        self.top_deadline: float | None = None  # when the top's ILPs end (the refinement has the rest)
        self.end: float | None = None  # when the whole solve ends (the total time limit)
        self.started = time.perf_counter()  # reset by run()
        self.unsolved: set[str] = set()  # keys of the clusters with a backward part whose options are not solved
        self.warm: dict[str, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}  # key -> options a start induces

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _past(when: float | None) -> bool:
        """Whether the deadline ``when`` (``time.perf_counter``; None: none) has passed, or a signal stopped it."""
        return (when is not None and time.perf_counter() > when) or interrupted() is not None

    def _local(self, cluster: Cluster) -> LocalGraph:
        if cluster not in self.locals:
            forward = np.array(cluster.nodes, dtype=np.int64)
            self.locals[cluster] = local_graph(self.graph, forward, self.backward[cluster])
        return self.locals[cluster]

    def _solve(self, built: HilpModel, time_limit: float | None, label: str) -> Any:
        limits = replace(self.limits, time_limit=time_limit, log=False)
        result = self.chain.run(built.model, limits)
        self.ilp_times.append((label, float(result.wall_time), result.status.value))
        return result

    def layer(self, cluster: Cluster, level_index: dict[int, int]) -> LayerSpec:
        """The layer of ``cluster`` at a level whose nodes are ``level_index`` (global id -> level index)."""
        solved = self.solved[self.key_of[cluster]]
        gid = self._local(cluster).gid

        def seq(local: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(level_index[int(gid[i])] for i in local)

        def total(local: tuple[int, ...], impls: tuple[int, ...] = ()) -> float:
            return steps_cost(self.graph, gid[list(local)].tolist(), impls)

        def profile(rows: Profile) -> Profile:
            return tuple((m, seq(freed), seq(pending)) for m, freed, pending in rows)

        picked = solved.options
        fwd = tuple(
            Part(seq(o.fwd), total(o.fwd, o.impl_fwd), o.m_fwd, o.phantom, (), profile(o.profile_fwd), o.impl_fwd)
            for o in picked
        )
        bwd = tuple(
            Part(
                seq(o.bwd),
                total(o.bwd, o.impl_bwd),
                o.m_bwd,
                -o.phantom,
                seq(o.dep),
                profile(o.profile_bwd),
                o.impl_bwd,
            )
            for o in picked
        )
        ff = Part(seq(solved.ff.seq), total(solved.ff.seq), solved.ff.m_fwd, 0, (), profile(solved.ff.profile))
        nodes = np.array(cluster.nodes, dtype=np.int64)
        return LayerSpec(
            forward=tuple(level_index[v] for v in cluster.nodes),
            backward=tuple(level_index[int(v)] for v in self.backward[cluster]),
            fwd=fwd,
            bwd=bwd if solved.local.backward.size else (),
            ff=ff,
            recomputable=bool((self.graph.recomputable[nodes] | self.tails[nodes]).all()),
            backward_recomputable=bool(self.graph.recomputable[self.backward[cluster]].all()),
        )

    # ------------------------------------------------------------------ options
    def solve_cluster(self, cluster: Cluster) -> None:
        """Options of ``cluster`` (its sub-clusters first), stored once per canonical key.

        Past the options deadline a cluster gets its base and warm-start options only (no ILP); past the top's
        deadline its sub-clusters get none (they only give the refinement its moves).
        """
        late = self._past(self.deadline)
        for member in cluster.members if not self._past(self.top_deadline) else ():
            if isinstance(member, Cluster):
                self.solve_cluster(member)
        lg = self._local(cluster)
        key = lg.key(self.opts.identical)
        self.key_of[cluster] = key
        if key in self.solved:
            return
        options = base_options(lg)
        seen = {(o.fwd, o.bwd, (), ()) for o in options}  # (fwd, bwd, their implementations)
        for fwd, bwd in self.warm.get(key, ()):
            if (fwd, bwd, (), ()) not in seen:
                seen.add((fwd, bwd, (), ()))
                options.append(measure(lg, list(fwd), list(bwd), "warm"))
        self.solved[key] = _Solved(lg, options, fast_forward(lg))
        if lg.backward.size == 0:
            return
        self.unsolved.discard(key)
        if not late:
            self._grid(cluster, lg, options, seen)
        self.solved[key].options = pareto(lg, options)

    def _grid(self, cluster: Cluster, lg: LocalGraph, options: list[ClusterOption], seen: set) -> None:
        """Options of ``lg`` from solves over a grid of (peak, save) budgets, appended to ``options``.

        H-ILP solves of the cluster's level, or for a leaf cluster with ``leaf`` other than "hilp" that formulation's.
        """
        cluster_deadline = self._cluster_deadline()
        subs = [m for m in cluster.members if isinstance(m, Cluster)]
        index = {int(g): i for i, g in enumerate(lg.gid.tolist()) if g >= 0}
        for sub in subs:  # the children's layers refer to this local graph by its own ids
            self.key_of.setdefault(sub, self._local(sub).key(self.opts.identical))
        by_level = bool(subs) or self.opts.leaf == "hilp"  # else a leaf cluster solved by the ``leaf`` formulation
        hg = build_hgraph(lg.graph, self._select(subs, index, budget=None), loss=lg.loss) if by_level else None
        for peak, saves in budget_grid(lg, options, self.opts.nb_peak, self.opts.nb_save):
            for save in saves:
                if cluster_deadline is not None and time.perf_counter() > cluster_deadline:  # never past the deadline
                    return
                if interrupted() is not None:  # SIGINT/SIGTERM: no more option ILPs (each would build, then stop)
                    return
                limit = self.opts.level_time_limit
                if cluster_deadline is not None:
                    limit = max(MIN_ILP_SECONDS, min(limit, cluster_deadline - time.perf_counter()))
                point = (peak, save, limit)
                sequence = self._leaf_point(lg, *point) if hg is None else self._level_point(hg, lg, *point)
                if sequence is None:
                    break
                fwd, bwd, impl_fwd, impl_bwd = _split(lg, sequence)
                if (fwd, bwd, impl_fwd, impl_bwd) not in seen and once_ok(lg, fwd, bwd) and inplace_ok(lg, sequence):
                    seen.add((fwd, bwd, impl_fwd, impl_bwd))
                    options.append(measure(lg, list(fwd), list(bwd), "grid", impl_fwd, impl_bwd))

    def _level_point(
        self, hg: HGraph, lg: LocalGraph, peak: int, save: int, limit: float
    ) -> list[tuple[int, int]] | None:
        """The local (node, implementation) steps of the H-ILP of ``hg`` at (peak, save), None without a solution."""
        correct = "all" if self.opts.correction == "all" else "off"
        opts = {"integral_memory": self.integral, "save": save, "correction": correct}
        built = HILP_LEVEL.build_level(hg, peak, opts)
        result = self._solve(built, limit, f"cluster@{lg.graph.name}")
        return built.steps(result.values) if result.has_solution else None

    def _leaf_point(self, lg: LocalGraph, peak: int, save: int, limit: float) -> list[tuple[int, int]] | None:
        """The local (node, implementation) steps the ``leaf`` formulation finds at (peak, save), None without any."""
        started = time.perf_counter()
        limits = replace(self.limits, time_limit=limit, log=False)
        sequence, status = solve_leaf(lg, peak, save, self.opts.leaf, limits)
        self.ilp_times.append((f"leaf@{lg.graph.name}", time.perf_counter() - started, status))
        return sequence

    def _cluster_deadline(self) -> float | None:
        """When this cluster's option ILPs stop: an even share of the options time left over the clusters left.

        Clusters whose ILPs finish early leave their time to the ones after them (parents, larger).
        """
        if self.deadline is None:
            return None
        now = time.perf_counter()
        return now + max(0.0, self.deadline - now) / (1 + len(self.unsolved))

    def _select(self, clusters: list[Cluster], index: dict[int, int], budget: int | None) -> list[LayerSpec]:
        """The layers of ``clusters`` at a level (``index``: global id -> level index), ``max_options`` options in all.

        The quota is split by |V|: the base and warm-start options, then farthest-point on the phantom from option 0.
        """
        layers = [self.layer(c, index) for c in clusters]
        sizes = np.array([len(layer.forward) for layer in layers], dtype=np.float64)
        if not layers:
            return layers
        quota = np.maximum(1, np.floor(self.opts.max_options * sizes / sizes.sum())).astype(int)
        picked = []
        for cluster, layer, cap in zip(clusters, layers, quota, strict=True):
            p = np.array([part.phantom for part in layer.fwd], dtype=np.float64)
            keep = [i for i in range(p.size) if budget is None or p[i] <= budget] or [0]
            kept = self.solved[self.key_of[cluster]].options
            chosen = [keep[0], *(i for i in keep[1:] if kept[i].kept)]
            while len(chosen) < min(cap, len(keep)):
                rest = [i for i in keep if i not in chosen]
                far = max(rest, key=lambda i: min(abs(p[i] - p[j]) for j in chosen))
                chosen.append(far)
            chosen.sort()
            fwd = tuple(layer.fwd[i] for i in chosen)
            bwd = tuple(layer.bwd[i] for i in chosen) if layer.bwd else ()
            picked.append(replace(layer, fwd=fwd, bwd=bwd))
        return picked

    # ---------------------------------------------------------------------- top
    def run(self, init: Schedule | None = None) -> HierarchicalResult:
        """Partition, warm start, options bottom-up, top-level H-ILP; the schedule is eagerly freed and simulated.

        The status is never a proof: FEASIBLE when the top level found a combination of options (``top_status``
        in the summary says whether it is optimal among them), NO_SOLUTION (with ``reason``) when it found none.
        The schedule is the cheapest of the top's and the warm starts' (``init`` if it fits, and FastSA's).
        """
        if self.budget < self.graph.lower_bound:
            raise BudgetInfeasibleError(
                f"budget {self.budget} B is below the lower bound {self.graph.lower_bound} B of {self.graph.name!r}",
                budget=self.budget,
                lower_bound=self.graph.lower_bound,
            )
        started = self.started = time.perf_counter()
        total = self.limits.time_limit
        self.end = None if total is None else started + total
        self.top_deadline = None if total is None else started + (1 - REFINE_SHARE) * total
        starts = fitting_starts(self.graph, self.budget, init, total, self.limits.seed, self.opts.warm)
        try:
            partition = h_partition(self.graph, _partition_options(self.opts), self.end)
        except PartitionTimeUp as error:
            log.info("%s", error)
            return self._result(Partition((), 0), None, None, None, starts, "the time limit passed in H-Partition")
        late = "the time limit passed before the top level"
        if self._past(self.end):  # past the end no phase starts: only the warm start is left to return
            return self._result(partition, None, None, None, starts, late)
        self.backward = backward_sets(self.graph, partition, self.owner)
        if self.opts.options_time_limit is not None:
            self.deadline = started + self.opts.options_time_limit
        elif total is not None:
            self.deadline = started + OPTIONS_SHARE * total
        if self.end is not None:
            self.deadline = min(self.end, self.deadline or self.end)
        clusters = partition.clusters()
        top = {m for m in partition.top if isinstance(m, Cluster)}
        for cluster in clusters:  # past the options deadline no option ILP runs: the shares need no count
            if self._past(self.deadline):
                break
            if self._local(cluster).backward.size:
                self.unsolved.add(self._local(cluster).key(self.opts.identical))
        for split in (halves(self.graph, start.schedule) for start in starts):
            for cluster in clusters if split is not None else ():
                if self._past(self.end):
                    break
                if cluster not in top and self._past(self.top_deadline):  # late: only the top clusters' options
                    continue
                option = induced(self._local(cluster), split)
                if option is not None:
                    self.warm.setdefault(self._local(cluster).key(self.opts.identical), []).append(option)
        for member in partition.top:
            if isinstance(member, Cluster) and not self._past(self.end):
                self.solve_cluster(member)
        if interrupted() is not None:
            return self._result(partition, None, None, None, starts, "interrupted before the top level")
        if self._past(self.end):
            return self._result(partition, None, None, None, starts, late)
        index = {v: v for v in range(self.graph.n)}
        layers = self._select([m for m in partition.top if isinstance(m, Cluster)], index, self.budget)
        loss = next((v for v in self.graph.order.tolist() if self.graph.kind[v] == NodeKind.LOSS), None)
        opts = {"integral_memory": self.integral, "correction": self.opts.correction}
        hgraph = build_hgraph(self.graph, layers, loss=loss)
        built = HILP_LEVEL.build_level(hgraph, self.budget, opts)
        end = self.top_deadline
        limit = None if end is None else min(max(1.0, end - time.perf_counter()), self.left())
        if limit is not None and limit <= 0:
            return self._result(partition, None, None, None, starts, late)
        result = self._solve(built, limit, "top")
        log.info("hilp top of %s: %s after %d ILPs", self.graph.name, result.status.value, len(self.ilp_times))
        found = self._found(built, result)
        for factor in RELAX:  # the top's accounting is conservative: a relaxed top's schedule may still fit
            left = None if end is None else end - time.perf_counter()
            if (left is not None and left < 1.0) or interrupted() is not None:
                break
            relaxed = HILP_LEVEL.build_level(hgraph, int(self.budget * factor), opts)
            attempt = self._found(relaxed, self._solve(relaxed, left, f"top@{factor}"))
            if attempt is None or not attempt.simulation.fits(self.budget):
                break
            if found is None or attempt.simulation.total_cost < found.simulation.total_cost:
                found = attempt
        return self._result(partition, built, result, found, starts)

    def left(self) -> float:
        """Seconds left until the end of the whole solve (infinite without a time limit)."""
        return math.inf if self.end is None else self.end - time.perf_counter()

    def _found(self, built: HilpModel, result: Any) -> _Found | None:
        """The eagerly freed, simulated schedule of a top solve (None without a solution)."""
        if not result.has_solution:
            return None
        schedule = eager_frees(self.graph, built.steps(result.values))
        return _Found(schedule, simulate(self.graph, schedule), built.peak_bound(result.values))

    def _result(
        self,
        partition: Partition,
        built: HilpModel | None,
        top: Any,
        found: _Found | None,
        starts: list[Start],
        reason: str | None = None,
    ) -> HierarchicalResult:
        """The honest outcome: the cheapest of the top's schedule and the warm starts, each refined; never a proof.

        FEASIBLE when the top level found a schedule or the refinement improved the warm start; NO_SOLUTION
        (with the reason) otherwise, returning the warm start when there is one. ``top`` is None (``reason``
        given) when the time limit passed before the top level was solved.
        """
        if top is not None and (found is None or not found.simulation.fits(self.budget)):
            reason = f"the top level found no combination of the cluster options within the budget ({top.status.value})"
            found = None
        top_cost = None if found is None else found.simulation.total_cost
        end = math.inf if self.end is None else self.end
        if interrupted() is not None:  # SIGINT/SIGTERM: no refinement, the best found so far
            end = time.perf_counter()
        moves = self._moves(partition)
        refined, warm = 0, False
        for incumbent, from_start in ((found, False), *((start, True) for start in starts)):  # cheapest refined kept
            if incumbent is None:
                continue
            schedule, simulation, kept = refine(
                self.graph, self.budget, incumbent.schedule, incumbent.simulation, moves, end
            )
            if found is None or simulation.total_cost < found.simulation.total_cost:
                model_peak = float(simulation.peak) if kept or from_start else incumbent.model_peak
                found, refined, warm = _Found(schedule, simulation, model_peak), kept, from_start and not kept
        return HierarchicalResult(
            status=SolveStatus.FEASIBLE if reason is None or refined else SolveStatus.NO_SOLUTION,
            schedule=None if found is None else found.schedule,
            simulation=None if found is None else found.simulation,
            objective=None if found is None else found.simulation.total_cost,
            bound=None if built is None else built.cost(top.bound),
            partition=partition,
            ilp_times=self.ilp_times,
            top=built,
            top_solve_time=0.0 if top is None else float(top.wall_time),
            model_peak=None if found is None else found.model_peak,
            top_status="not solved" if top is None else top.status.value,
            top_cost=top_cost,
            reason=reason,
            returned_warm_start=warm,
            refined=refined,
        )

    def _moves(self, partition: Partition) -> list[Move]:
        """A refinement move per cluster with a backward part: its options' backward parts in global ids."""
        moves = []
        for cluster in partition.clusters():
            backward = self.backward.get(cluster)
            if backward is None or not backward.size or cluster not in self.key_of:  # no options: past the deadline
                continue
            gid = self._local(cluster).gid
            options = self.solved[self.key_of[cluster]].options
            parts = {tuple((int(gid[i]), k) for i, k in with_impls(o.bwd, o.impl_bwd)) for o in options}
            ordered = sorted(parts, key=lambda part: steps_cost(self.graph, *zip(*part, strict=True)) if part else 0.0)
            members = frozenset([*cluster.nodes, *backward.tolist()])
            moves.append(Move(members, frozenset(backward.tolist()), tuple(ordered)))
        return moves


class _Found(NamedTuple):
    schedule: Schedule
    simulation: SimulationResult
    model_peak: float


def budget_grid(
    lg: LocalGraph, options: list[ClusterOption], nb_peak: int, nb_save: int
) -> list[tuple[int, list[int]]]:
    """A cluster's budget grid: [(peak, saves from the largest)], in the order the grid is solved.

    ``nb_peak`` peaks from max(lower bound, interface bytes) to the options' largest peak; per peak, ``nb_save``
    saves from the peak down to the interface bytes.
    """
    interface = int(lg.graph.mem[: lg.n_in].sum() + lg.graph.mem[lg.out_data].sum())
    low, high = max(lg.graph.lower_bound, interface), max(o.peak for o in options)
    return [
        (int(peak), np.unique(np.linspace(interface, peak, nb_save).astype(np.int64))[::-1].tolist())
        for peak in np.unique(np.linspace(low, high, nb_peak).astype(np.int64))
    ]


def _split(
    lg: LocalGraph, steps: list[tuple[int, int]]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Local (node, implementation) steps split at the virtual loss, sources and ``l_C`` dropped.

    (fwd, bwd, fwd implementations, bwd implementations); an implementation tuple is empty when all are the default.
    """
    cut = next(k for k, (v, _) in enumerate(steps) if v == lg.loss)
    own = ~lg.is_source
    own[lg.loss] = False
    fwd = [(v, i) for v, i in steps[:cut] if own[v]]
    bwd = [(v, i) for v, i in steps[cut + 1 :] if own[v]]

    def impls(part: list[tuple[int, int]]) -> tuple[int, ...]:
        return tuple(i for _, i in part) if any(i for _, i in part) else ()

    return tuple(v for v, _ in fwd), tuple(v for v, _ in bwd), impls(fwd), impls(bwd)


def solve_hierarchical(
    graph: Graph,
    budget: int,
    backend: str | SolveChain = "highs",
    options: HierarchyOptions | Mapping[str, Any] | None = None,
    limits: SolveLimits | None = None,
) -> HierarchicalResult:
    """Plan ``graph`` under ``budget`` bytes with HiREmate: H-Partition, cluster options, top-level H-ILP."""
    return HierarchicalSolver(graph, budget, backend, options, limits).run()


__all__ = ["HierarchicalResult", "HierarchicalSolver", "HierarchyOptions", "budget_grid", "solve_hierarchical"]
