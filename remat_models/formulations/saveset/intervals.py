"""The save-set choice on retention intervals: O(n) variables, for graphs of thousands of nodes.

``saveset-exact`` chooses the same plans (which forward values the backward pass gets saved, everything else
recomputed once when the backward first needs it, :func:`~remat_models.heuristics.recompute.saved_set_sequence`)
on Checkmate's staged rows, O(n^2) cells: too large above a few hundred nodes. Here time is the input order's
positions (events), and each recomputable forward value u with bytes (a *candidate*) has

- ``held`` (optional interval, presence = "u is saved"): from one past its last forward reader L(u) (the loss
  included) to ``end`` (exclusive) at least one past each backward reader and each recomputed forward reader;
- ``again`` (optional interval, presence = "u is recomputed"): from its *trigger* ``t[u]``, the first event at
  which the backward needs it, to one past its last reader (same rule). ``t[u]`` is the least of its first
  backward reader's event and the triggers of its recomputed forward readers: at most each (indicator rows) and
  at least the one chosen by a selector ``pick`` (a min as rows, so that the readers' ends are exact);
- rows of the sequence builder's closure: a value with a backward reader is saved or recomputed; a recomputed
  reader w of u needs u saved or recomputed (``keep[u] + again[u] >= again[w]``); not both.

Every other value lives from its event to one past its last reader (a variable end where a recomputed forward
value reads it), and each event's workspace is fixed memory; one cumulative holds them all within the budget.
The recomputations before a trigger event run with their inputs counted resident through that event and their
own workspace counted at it, so the model's memory at an event is at least the simulator's at it and at the
recomputations before it: every solution fits. It is not a proof of anything (the plan space is the save sets,
and the recomputations' memory is counted high): the status is at best ``feasible``, or ``optimal`` for the model.
Objective: the total compute cost (every node once plus the recomputations). Decoding runs the sequence builder.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from remat_models.core.graph import Graph, NodeKind
from remat_models.core.schedule import Compute, Schedule
from remat_models.errors import ConfigurationError, InvalidScheduleError, ModelTooLargeError
from remat_models.formulations.base import BuiltModel, FormulationBase
from remat_models.formulations.rows import Rows
from remat_models.formulations.scaling import DEFAULT_PRECISION, ScaledGraph, scale_graph
from remat_models.heuristics.recompute import forward_mask, last_forward_use, saved_set_sequence
from remat_models.model import Model

log = logging.getLogger(__name__)

MAX_NODES = 20_000  # beyond this the model (a few variables per node and edge) is refused as too large


@dataclass(frozen=True)
class SaveSetIntervalsOptions:
    """Cost rounding precision (costs become integers for CP-SAT)."""

    cost_precision: float = DEFAULT_PRECISION

    def validated(self) -> SaveSetIntervalsOptions:
        """Self, after range checks."""
        if not 0.0 < self.cost_precision < 1.0:
            raise ConfigurationError(
                f"saveset-intervals cost_precision must lie in (0, 1), got {self.cost_precision}"
            )
        return self


@dataclass(frozen=True)
class Events:
    """A graph's save-set data on the input order's events (positions); ``horizon`` is one past the last event."""

    horizon: int
    candidates: np.ndarray  # node ids with a keep/recompute choice, ascending
    dropped_after: np.ndarray  # per node: event of its last forward reader (its own event if none)
    first_backward: np.ndarray  # per node: event of its first backward reader (horizon if none)
    last_backward: np.ndarray  # per node: event of its last backward reader (-1 if none)
    last_read: np.ndarray  # per node: event of its last reader (-1 if none; horizon for graph outputs)
    readers: tuple[np.ndarray, np.ndarray]  # (value, reader) edges whose reader is a candidate

    @classmethod
    def of(cls, graph: Graph) -> Events:
        """The events of ``graph``'s input order."""
        n, position = graph.n, graph.position
        forward = forward_mask(graph)
        is_candidate = forward & graph.recomputable & (graph.mem > 0)
        is_candidate[graph.outputs] = False  # a graph output stays resident to the end
        last = last_forward_use(graph, forward)
        dropped_after = np.where(last >= 0, position[np.maximum(last, 0)], position)
        source, target = graph.edges[:, 0], graph.edges[:, 1]
        backward = ~(forward | graph.of_kind(NodeKind.LOSS))[target]
        first_backward = np.full(n, n, dtype=np.int64)
        last_backward = np.full(n, -1, dtype=np.int64)
        np.minimum.at(first_backward, source[backward], position[target[backward]])
        np.maximum.at(last_backward, source[backward], position[target[backward]])
        last_read = np.full(n, -1, dtype=np.int64)
        np.maximum.at(last_read, source, position[target])
        last_read[graph.outputs] = n
        by_candidate = is_candidate[target]
        return cls(
            n,
            np.flatnonzero(is_candidate),
            dropped_after,
            first_backward,
            last_backward,
            last_read,
            (source[by_candidate], target[by_candidate]),
        )


@dataclass
class SaveSetIntervalsModel(BuiltModel):
    """The built model: its events, the integer graph data and each candidate's column slot."""

    events: Events | None = None
    scaled: ScaledGraph | None = None
    slot: np.ndarray | None = None  # node id -> index among the candidates (-1: none)


class SaveSetIntervals(FormulationBase):
    """The save-set choice with retention intervals on the input order's events (compact; CP-SAT by default)."""

    name: ClassVar[str] = "saveset-intervals"
    options_type: ClassVar[type] = SaveSetIntervalsOptions
    default_backend: ClassVar[str] = "cpsat"
    chooses_save_sets: ClassVar[bool] = True

    def check_size(self, graph: Graph, budget: int, options: Any = None) -> None:
        """Refuse graphs above ``MAX_NODES`` nodes."""
        if graph.n > MAX_NODES:
            raise ModelTooLargeError(f"saveset-intervals: {graph.n} nodes is above its limit of {MAX_NODES}")

    def build(
        self, graph: Graph, budget: int, options: SaveSetIntervalsOptions | Mapping[str, Any] | None = None
    ) -> SaveSetIntervalsModel:
        """Build the model of ``graph`` under ``budget`` bytes."""
        opts = self.options(options)
        self.check_size(graph, budget)
        if graph.impl_table is not None:
            raise ConfigurationError("saveset-intervals plans graphs without operator implementations")
        events = Events.of(graph)
        scaled = scale_graph(graph, opts.cost_precision)
        capacity = scaled.capacity(budget, graph.fixed_mem)
        if capacity < 0:
            raise ConfigurationError(f"budget {budget} is below the graph's fixed memory {graph.fixed_mem}")
        m = Model(f"saveset-intervals:{graph.name}")
        slot = np.full(graph.n, -1, dtype=np.int64)
        slot[events.candidates] = np.arange(events.candidates.size)
        _Builder(m, graph, events, scaled, slot).build(capacity)
        log.info(
            "saveset-intervals model of %s: %d candidates, %d rows, %d indicators",
            graph.name,
            events.candidates.size,
            m.num_rows,
            sum(len(batch.lit_cols) for batch in m.indicators),
        )
        return SaveSetIntervalsModel(
            m, graph, budget, scaled.units, formulation=self.name, events=events, scaled=scaled, slot=slot
        )

    def sequence(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> list[int | Any]:
        """The sequence builder's compute order for the saved values."""
        model = _model(built)
        model.require(values, "held.presence")
        return saved_set_sequence(model.graph, _saved(model, np.asarray(values["held.presence"]) > 0.5)).tolist()

    def _hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Every block's values for a save-set schedule (a candidate computed once is saved)."""
        model = _model(built)
        graph, events, slot = model.graph, model.events, model.slot
        assert events is not None and slot is not None
        computed = np.array([step.node for step in schedule if isinstance(step, Compute)], dtype=np.int64)
        keep = np.bincount(computed, minlength=graph.n)[events.candidates] == 1
        sequence = saved_set_sequence(graph, _saved(model, keep))
        if not np.array_equal(sequence, computed):
            raise InvalidScheduleError("not a save-set schedule: it differs from the one its saved values give")
        return _Hints(graph, events, slot, keep).values(sequence, model.model)


def _saved(model: SaveSetIntervalsModel, keep: np.ndarray) -> np.ndarray:
    """Forward nodes saved: every forward node but the candidates not kept."""
    assert model.events is not None
    forward = forward_mask(model.graph)
    forward[model.events.candidates[~keep]] = False
    return np.flatnonzero(forward)


def _model(built: BuiltModel) -> SaveSetIntervalsModel:
    if not isinstance(built, SaveSetIntervalsModel):
        raise ConfigurationError(f"expected a saveset-intervals model, got {type(built).__name__}")
    return built


class _Builder:
    """Adds the blocks, rows, indicators and the cumulative of the model."""

    def __init__(self, m: Model, graph: Graph, events: Events, scaled: ScaledGraph, slot: np.ndarray) -> None:
        self.m, self.graph, self.events, self.scaled, self.slot = m, graph, events, scaled, slot

    def build(self, capacity: int) -> None:
        """All of the model (see the module docstring)."""
        ev, m = self.events, self.m
        cand, H = ev.candidates, ev.horizon
        k = cand.size
        held_start = ev.dropped_after[cand] + 1
        self.held = m.interval_block(
            "held", k, start=(held_start, held_start), size=(0, H), end=(held_start, np.full(k, H)), optional=True
        )
        self.again = m.interval_block(
            "again", k, start=(held_start, np.full(k, H)), size=(0, H), end=(held_start, np.full(k, H)), optional=True
        )
        keep, again = self.held.presence.cols, self.again.presence.cols  # type: ignore[union-attr]
        self.trigger = self.again.start.cols
        Rows(k).term(keep, 1.0).term(again, 1.0).add_to(m, ub=1.0, name="saved_or_recomputed")
        needed = np.flatnonzero(ev.first_backward[cand] < H)
        Rows(needed.size).term(keep[needed], 1.0).term(again[needed], 1.0).add_to(m, lb=1.0, name="backward_reads")
        self.closure(keep, again)
        self.triggers(again)
        ids, demands = [self.held.ids, self.again.ids], [self.scaled.mem[cand], self.scaled.mem[cand]]
        self.ends(self.held.end.cols, cand, backward_floor=True)
        self.ends(self.again.end.cols, cand, backward_floor=True)
        ids_other, demand_other, base = self.others()
        ids.append(ids_other)
        demands.append(demand_other)
        ids_ws, demand_ws = self.recompute_workspace(again)
        ids.append(ids_ws)
        demands.append(demand_ws)
        ids_base, demand_base = self.base(base)
        ids.append(ids_base)
        demands.append(demand_base)
        m.add_cumulative(np.concatenate(ids), np.concatenate(demands), capacity, name="memory")
        cost = self.scaled.cost
        m.set_objective(again, cost[cand].astype(np.float64), offset=float(cost.sum()))

    def closure(self, keep: np.ndarray, again: np.ndarray) -> None:
        """A recomputed reader needs each candidate input saved or recomputed."""
        value, reader = self.events.readers
        inner = self.slot[value] >= 0
        u, w = self.slot[value[inner]], self.slot[reader[inner]]
        Rows(u.size).term(keep[u], 1.0).term(again[u], 1.0).term(again[w], -1.0).add_to(
            self.m, lb=0.0, name="recompute_inputs"
        )

    def triggers(self, again: np.ndarray) -> None:
        """``t[u]``: least of its first backward reader and recomputed readers' triggers (horizon: not recomputed)."""
        m, ev, t = self.m, self.events, self.trigger
        k, H = ev.candidates.size, ev.horizon
        value, reader = ev.readers
        inner = self.slot[value] >= 0
        u, w = self.slot[value[inner]], self.slot[reader[inner]]
        _indicators(m, again, t, None, H, H, negated=True)  # not recomputed: parked at the horizon
        _indicators(m, again, t, None, -np.inf, ev.first_backward[ev.candidates].astype(np.float64))
        _indicators(m, again[u], t[u], t[w], -np.inf, 0.0)  # at most each reader's trigger
        # at least one needer's: pick[j] chooses it (backward reader, or a recomputed candidate reader)
        has_backward = np.flatnonzero(ev.first_backward[ev.candidates] < H)
        pick = m.bool_block("pick", has_backward.size + u.size).cols
        pick_b, pick_r = pick[: has_backward.size], pick[has_backward.size :]
        rows = Rows(k).term(again, -1.0).term(pick_b, 1.0, rows=has_backward).term(pick_r, 1.0, rows=u)
        rows.add_to(m, lb=0.0, ub=0.0, name="trigger_pick")
        Rows(u.size).term(pick_r, 1.0).term(again[w], -1.0).add_to(m, ub=0.0)
        _indicators(m, pick_b, t[has_backward], None, ev.first_backward[ev.candidates[has_backward]], np.inf)
        _indicators(m, pick_r, t[u], t[w], 0.0, np.inf)

    def ends(self, end: np.ndarray, nodes: np.ndarray, backward_floor: bool) -> None:
        """``end[i]`` past each recomputed candidate reader's trigger (and past node i's last backward reader)."""
        m, ev = self.m, self.events
        if backward_floor:
            Rows(nodes.size).term(end, 1.0).add_to(m, lb=ev.last_backward[nodes] + 1.0)
        position = np.full(self.graph.n, -1, dtype=np.int64)
        position[nodes] = np.arange(nodes.size)
        value, reader = ev.readers
        mine = position[value] >= 0
        i, w = position[value[mine]], self.slot[reader[mine]]
        again = self.again.presence.cols  # type: ignore[union-attr]
        _indicators(m, again[w], end[i], self.trigger[w], 1.0, np.inf)

    def others(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Intervals of the non-candidates a candidate reads (variable end), and the fixed base profile."""
        graph, ev, scaled = self.graph, self.events, self.scaled
        n, H = graph.n, ev.horizon
        position = graph.position
        mem = scaled.mem
        is_candidate = self.slot >= 0
        read_by_candidate = np.zeros(n, dtype=bool)
        read_by_candidate[ev.readers[0]] = True
        outputs = np.zeros(n, dtype=bool)
        outputs[graph.outputs] = True
        variable = read_by_candidate & ~is_candidate & ~outputs & (mem > 0)
        nodes = np.flatnonzero(variable)
        own_last = np.maximum(ev.last_read[nodes], position[nodes]) + 1
        iv = self.m.interval_block(
            "resident",
            nodes.size,
            start=(position[nodes], position[nodes]),
            size=(0, H),
            end=(own_last, np.full(nodes.size, H)),
        )
        self.ends(iv.end.cols, nodes, backward_floor=False)
        diff = np.zeros(H + 2, dtype=np.int64)
        fixed = ~is_candidate & ~variable & (mem > 0)
        fixed_end = np.where(outputs, H, np.maximum(ev.last_read, position) + 1)
        np.add.at(diff, position[fixed], mem[fixed])
        np.add.at(diff, fixed_end[fixed], -mem[fixed])
        cand = ev.candidates
        np.add.at(diff, position[cand], mem[cand])  # the first copy, to its last forward reader
        np.add.at(diff, ev.dropped_after[cand] + 1, -mem[cand])
        base = np.cumsum(diff)[:H]
        base[position] += scaled.workspace
        return iv.ids, mem[nodes], base

    def recompute_workspace(self, again: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A recomputed candidate's workspace, counted at its trigger event."""
        cand = self.events.candidates
        ws = np.flatnonzero(self.scaled.workspace[cand] > 0)
        H = self.events.horizon
        iv = self.m.interval_block("again_workspace", ws.size, start=(0, H), size=1, optional=True)
        Rows(ws.size).term(iv.start.cols, 1.0).term(self.trigger[ws], -1.0).add_to(self.m, 0.0, 0.0)
        Rows(ws.size).term(iv.presence.cols, 1.0).term(again[ws], -1.0).add_to(self.m, 0.0, 0.0)  # type: ignore[union-attr]
        return iv.ids, self.scaled.workspace[cand[ws]]

    def base(self, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fixed intervals, one per run of equal base memory."""
        change = np.flatnonzero(np.diff(base)) + 1
        starts = np.concatenate([[0], change])
        ends = np.concatenate([change, [base.size]])
        nonzero = base[starts] > 0
        starts, ends = starts[nonzero], ends[nonzero]
        iv = self.m.interval_block("base", starts.size, start=(starts, starts), size=ends - starts)
        return iv.ids, base[starts]


def _indicators(
    m: Model,
    literal: np.ndarray,
    plus: np.ndarray,
    minus: np.ndarray | None,
    lb: float | np.ndarray,
    ub: float | np.ndarray,
    negated: bool = False,
) -> None:
    """``lb <= x[plus] - x[minus] <= ub`` (``minus`` None: ``x[plus]``) where ``literal`` is true (false if negated)."""
    count = literal.size
    if not count:
        return
    rows = np.arange(count)
    cols, coefs = [plus], [np.ones(count)]
    if minus is not None:
        cols.append(minus)
        coefs.append(-np.ones(count))
    m.add_indicators(
        literal,
        np.concatenate([rows] * len(cols)),
        np.concatenate(cols),
        np.concatenate(coefs),
        np.broadcast_to(np.asarray(lb, dtype=np.float64), (count,)),
        np.broadcast_to(np.asarray(ub, dtype=np.float64), (count,)),
        negated=np.full(count, negated),
    )


class _Hints:
    """The model's values for a save-set sequence: triggers from the sequence, ends from the rules."""

    def __init__(self, graph: Graph, events: Events, slot: np.ndarray, keep: np.ndarray) -> None:
        self.graph, self.events, self.slot, self.keep = graph, events, slot, keep

    def values(self, sequence: np.ndarray, m: Model) -> dict[str, np.ndarray]:
        """Values by block name."""
        ev, graph = self.events, self.graph
        cand, H = ev.candidates, ev.horizon
        trigger = np.full(graph.n, H, dtype=np.int64)
        seen = np.zeros(graph.n, dtype=bool)
        pending: list[int] = []
        for v in sequence.tolist():
            if seen[v]:
                pending.append(v)
                continue
            seen[v] = True
            trigger[pending] = graph.position[v]
            pending = []
        again = trigger[cand] < H
        value, reader = ev.readers
        read_at = np.where(trigger[reader] < H, trigger[reader] + 1, 0)
        end = np.maximum(ev.last_backward + 1, 0)
        np.maximum.at(end, value, read_at)
        held_start = ev.dropped_after[cand] + 1
        values = _interval("held", held_start, np.maximum(end[cand], held_start))  # rows bound absent ends too
        values["held.presence"] = self.keep.astype(np.float64)
        values |= _interval("again", np.where(again, trigger[cand], H), np.where(again, end[cand], H))
        values["again.presence"] = again.astype(np.float64)
        nodes = np.flatnonzero(self._resident())
        position = graph.position[nodes]
        values |= _interval("resident", position, np.maximum(np.maximum(ev.last_read[nodes], position) + 1, end[nodes]))
        ws = np.flatnonzero(graph.workspace[cand] > 0)
        values |= _interval("again_workspace", np.where(again[ws], trigger[cand[ws]], 0), None)
        values["again_workspace.presence"] = again[ws].astype(np.float64)
        for part in ("start", "end"):
            values[f"base.{part}"] = m.col_lb[m.block(f"base.{part}").cols]
        values["pick"] = self._pick_values(trigger, again)
        return {name: value for name, value in values.items() if name in m.blocks}  # fixed sizes have no block

    def _pick_values(self, trigger: np.ndarray, again: np.ndarray) -> np.ndarray:
        ev = self.events
        cand, H = ev.candidates, ev.horizon
        has_backward = np.flatnonzero(ev.first_backward[cand] < H)
        value, reader = ev.readers
        inner = self.slot[value] >= 0
        u, w = self.slot[value[inner]], self.slot[reader[inner]]
        pick_b = np.zeros(has_backward.size)
        pick_r = np.zeros(u.size)
        chosen = np.zeros(cand.size, dtype=bool)
        for j, i in enumerate(has_backward.tolist()):
            if again[i] and trigger[cand[i]] == ev.first_backward[cand[i]]:
                pick_b[j], chosen[i] = 1.0, True
        for j, (i, r) in enumerate(zip(u.tolist(), w.tolist(), strict=True)):
            if again[i] and not chosen[i] and again[r] and trigger[cand[r]] == trigger[cand[i]]:
                pick_r[j], chosen[i] = 1.0, True
        return np.concatenate([pick_b, pick_r])

    def _resident(self) -> np.ndarray:
        """Mask of the non-candidates with a variable end (as ``_Builder.others``)."""
        graph, ev = self.graph, self.events
        read_by_candidate = np.zeros(graph.n, dtype=bool)
        read_by_candidate[ev.readers[0]] = True
        outputs = np.zeros(graph.n, dtype=bool)
        outputs[graph.outputs] = True
        return read_by_candidate & (self.slot < 0) & ~outputs & (graph.mem > 0)


def _interval(name: str, start: np.ndarray, end: np.ndarray | None) -> dict[str, np.ndarray]:
    """Values of an interval block (``end`` None: unit size)."""
    end = start + 1 if end is None else end
    return {f"{name}.start": start.astype(np.float64), f"{name}.end": end.astype(np.float64)} | (
        {f"{name}.size": (end - start).astype(np.float64)}
    )


SAVESET_INTERVALS = SaveSetIntervals()

__all__ = ["SAVESET_INTERVALS", "SaveSetIntervals", "SaveSetIntervalsModel", "SaveSetIntervalsOptions"]
