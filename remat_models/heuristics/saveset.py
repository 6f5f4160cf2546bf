"""Save-set planning: which forward values are saved for the backward pass (PyTorch's saved-tensors model).

A save-set plan keeps the chosen forward values (and the non-recomputable ones) from the forward pass to
the backward pass; every other forward value is freed after its last forward reader and recomputed, once,
when the backward pass first needs it (:func:`~remat_models.heuristics.recompute.saved_set_sequence`). This
is the plan space of ``torch.utils.checkpoint`` policies and of PyTorch's joint-graph partitioner
(``MUST_SAVE`` / ``MUST_RECOMPUTE``), so a plan found here can be handed to either.

The search drops the values cheapest to recompute per byte first: the smallest such prefix that fits
the budget (grid, then bisection); where none fits, it drops the saved values resident at the peak step,
cheapest per byte first, while the peak falls; then it re-saves dropped values, dearest first, while the
plan still fits and gets cheaper. Every candidate is scored by the compute-sequence kernels (peak and cost as the
simulator gives them), so the search costs a few hundred linear-time kernel calls.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Schedule, simulate
from remat_models.heuristics.recompute import Score, forward_mask, saved_set_sequence, sequence_schedule, sequence_score

GRID = 32  # prefix lengths scored before bisecting
NO_REGION = -1


@dataclass(frozen=True)
class SaveSet:
    """A save-set plan: the saved forward nodes (indices), and its peak and total cost."""

    saved: np.ndarray
    peak: int
    cost: float


@dataclass(frozen=True)
class Regions:
    """Checkpointed regions of a graph's forward pass (``torch.utils.checkpoint`` per block).

    ``label``: each node's region, or :data:`NO_REGION`. ``internal``: the region values read by no node
    outside their region but the backward (only those may be dropped: the rest leaves the region and stays
    alive). ``first_read[r]``: position, in the backward's order, of the first backward node reading a value
    of region ``r``, where ``checkpoint`` replays it (the backward's length if none does).
    """

    label: np.ndarray
    internal: np.ndarray
    first_read: np.ndarray

    @classmethod
    def of(cls, graph: Graph, label: np.ndarray) -> Regions:
        """The regions of ``label`` (one region index per node, :data:`NO_REGION` outside every region)."""
        label = np.asarray(label, dtype=np.int64)
        backward = graph.of_kind(NodeKind.BACKWARD)
        source, target = graph.edges[:, 0], graph.edges[:, 1]
        internal = forward_mask(graph) & (label != NO_REGION)
        internal[source[~backward[target] & (label[source] != label[target])]] = False
        internal[graph.outputs] = False
        tail = graph.order[backward[graph.order]]
        at = np.full(graph.n, tail.size, dtype=np.int64)
        at[tail] = np.arange(tail.size)
        reads = backward[target] & internal[source]
        first_read = np.full(int(label.max(initial=NO_REGION)) + 1, tail.size, dtype=np.int64)
        np.minimum.at(first_read, label[source[reads]], at[target[reads]])
        return cls(label, internal, first_read)


def replay_sequence(
    graph: Graph, saved: np.ndarray, forward: np.ndarray | None = None, regions: Regions | None = None
) -> np.ndarray:
    """Compute sequence of a save set under replay: unsaved forward values all recomputed as the backward starts.

    ``torch.utils.checkpoint`` re-runs its whole region, in order, at the backward's first unpack. With
    ``regions``, each region's unsaved internal values are recomputed just before the first backward node
    reading one of its values; other values are never recomputed.
    """
    forward = forward_mask(graph) if forward is None else forward
    backward = graph.of_kind(NodeKind.BACKWARD)
    dropped = forward & graph.recomputable
    dropped[saved] = False
    order = graph.order
    head, tail = order[~backward[order]], order[backward[order]]
    if regions is None:
        return np.concatenate([head, order[dropped[order]], tail])
    replayed = order[(dropped & regions.internal)[order]]
    nodes = np.concatenate([replayed, tail])
    at = np.concatenate([regions.first_read[regions.label[replayed]], np.arange(tail.size)])
    after = np.concatenate([np.zeros(replayed.size, dtype=np.int64), np.ones(tail.size, dtype=np.int64)])
    return np.concatenate([head, nodes[np.lexsort((after, at))]])  # stable: each region replays in forward order


class _Scorer:
    """Scores save sets of one graph: the droppable candidates ranked cheapest-per-byte first."""

    def __init__(self, graph: Graph, replay: bool = False, regions: Regions | None = None) -> None:
        self.graph = graph
        self.replay, self.regions = replay or regions is not None, regions
        self.forward = forward_mask(graph)
        droppable = self.forward & graph.recomputable & (graph.mem > 0)
        if regions is not None:
            droppable &= regions.internal
        nodes = np.flatnonzero(droppable)
        per_byte = graph.cost[nodes] / graph.mem[nodes]
        self.ranked = nodes[np.argsort(per_byte, kind="stable")]
        self.all_forward = np.flatnonzero(self.forward)

    def saved(self, dropped: np.ndarray) -> np.ndarray:
        """Forward nodes not in ``dropped`` (a boolean mask over the ranked candidates)."""
        keep = np.ones(self.graph.n, dtype=bool)
        keep[self.ranked[dropped]] = False
        return self.all_forward[keep[self.all_forward]]

    def sequence(self, dropped: np.ndarray) -> np.ndarray:
        """Compute sequence of the plan dropping the masked candidates."""
        if self.replay:
            return replay_sequence(self.graph, self.saved(dropped), self.forward, self.regions)
        return saved_set_sequence(self.graph, self.saved(dropped), self.forward)

    def score(self, dropped: np.ndarray) -> Score:
        """(peak, cost) of the plan dropping the masked candidates."""
        return sequence_score(self.graph, self.sequence(dropped))

    def resident_at_peak(self, dropped: np.ndarray) -> np.ndarray:
        """Mask of the nodes resident at the plan's peak step (the value it computes included)."""
        schedule = sequence_schedule(self.graph, self.sequence(dropped))
        resident = np.zeros(self.graph.n, dtype=bool)
        for step in itertools.islice(schedule, simulate(self.graph, schedule).peak_step + 1):
            resident[step.node] = not resident[step.node]  # a Compute makes a value resident, a Free ends it
        return resident

    def prefix(self, k: int) -> np.ndarray:
        """Mask dropping the ``k`` cheapest candidates."""
        mask = np.zeros(self.ranked.size, dtype=bool)
        mask[:k] = True
        return mask


def _prefix_sweep(scorer: _Scorer, budget: int) -> tuple[np.ndarray, Score]:
    """Smallest fitting prefix (grid, then bisection below the first fitting grid point), else the lowest peak."""
    size = scorer.ranked.size
    grid = np.unique(np.linspace(0, size, GRID + 1).astype(np.int64)).tolist()
    scores = {k: scorer.score(scorer.prefix(k)) for k in grid}
    fitting = [k for k in grid if scores[k][0] <= budget]
    if not fitting:
        best = min(grid, key=lambda k: scores[k])
        return scorer.prefix(best), scores[best]
    high = fitting[0]
    low = max((k for k in grid if k < high), default=-1)  # does not fit
    while high - low > 1:
        middle = (low + high) // 2
        scores[middle] = scorer.score(scorer.prefix(middle))
        low, high = (low, middle) if scores[middle][0] <= budget else (middle, high)
    return scorer.prefix(high), scores[high]


def past(deadline: float | None) -> bool:
    """Whether ``deadline`` (a ``time.perf_counter()`` instant; None: none) has passed."""
    return deadline is not None and time.perf_counter() >= deadline


def _resave(
    scorer: _Scorer, dropped: np.ndarray, score: Score, budget: int, deadline: float | None = None
) -> tuple[np.ndarray, Score]:
    """Re-save dropped candidates, dearest per byte first, while the plan fits and gets cheaper, until ``deadline``."""
    dropped = dropped.copy()
    for k in np.flatnonzero(dropped)[::-1].tolist():
        if past(deadline):
            break
        dropped[k] = False
        trial = scorer.score(dropped)
        if trial[0] <= budget and trial[1] < score[1]:
            score = trial
        else:
            dropped[k] = True
    return dropped, score


def _lower_peak(
    scorer: _Scorer, dropped: np.ndarray, score: Score, budget: int, deadline: float | None = None
) -> tuple[np.ndarray, Score]:
    """Drop saved candidates resident at the peak, cheapest per byte first, while over budget and the peak falls."""
    dropped, tried = dropped.copy(), np.zeros_like(dropped)
    while score[0] > budget and not past(deadline):
        options = np.flatnonzero(~dropped & ~tried & scorer.resident_at_peak(dropped)[scorer.ranked])
        if not options.size:
            break
        k = int(options[0])
        dropped[k] = True
        trial = scorer.score(dropped)
        if trial[0] <= score[0]:
            score = trial
        else:
            dropped[k], tried[k] = False, True
    return dropped, score


def saveset_search(
    graph: Graph,
    budget: int,
    *,
    replay: bool = False,
    regions: Regions | None = None,
    descend: bool = True,
    deadline: float | None = None,
) -> SaveSet:
    """The cheapest save-set plan found within ``budget`` bytes, else the lowest-peak one found.

    ``replay``: recomputation as ``torch.utils.checkpoint`` does it (:func:`replay_sequence`), over the
    whole forward or per region of ``regions`` (which implies ``replay``). ``descend`` False: where no prefix
    fits, the lowest-peak prefix as it is (no descent on the values resident at the peak). ``deadline`` (a
    ``time.perf_counter()`` instant): the descent and the re-saving stop there with the plan so far (the
    prefix sweep, a few dozen kernel calls, always runs).
    """
    scorer = _Scorer(graph, replay, regions)
    dropped, score = _prefix_sweep(scorer, budget)
    if score[0] > budget and descend:
        dropped, score = _lower_peak(scorer, dropped, score, budget, deadline)
    if score[0] <= budget:
        dropped, score = _resave(scorer, dropped, score, budget, deadline)
    return SaveSet(scorer.saved(dropped), score[0], score[1])


def saveset_range(graph: Graph, *, replay: bool = False, regions: Regions | None = None) -> tuple[int, int]:
    """(least peak the search reaches, peak saving every forward value): the span of save-set budgets."""
    scorer = _Scorer(graph, replay, regions)
    most = scorer.score(scorer.prefix(0))[0]
    return min(most, _lower_peak(scorer, *_prefix_sweep(scorer, -1), -1)[1][0]), most


def saveset_schedule(
    graph: Graph, saved: np.ndarray, *, replay: bool = False, regions: Regions | None = None
) -> Schedule:
    """The schedule of a save set: unsaved values recomputed when the backward needs them (``replay``: at its start)."""
    if replay or regions is not None:
        return sequence_schedule(graph, replay_sequence(graph, saved, regions=regions))
    return sequence_schedule(graph, saved_set_sequence(graph, saved))


def saveset(graph: Graph, budget: int, *, time_limit: float | None = None) -> Schedule:
    """The ``saveset`` heuristic: :func:`saveset_search`'s plan as a schedule, its search ending by ``time_limit`` s."""
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    return saveset_schedule(graph, saveset_search(graph, budget, deadline=deadline).saved)
