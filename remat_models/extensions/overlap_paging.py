"""The ``paging-overlap`` plug-in: exact offloading on Checkmate with transfers overlapped with compute.

``OverlapPaging`` takes a TransferModel in ``overlap`` mode (one copy stream per direction beside the
compute stream; the cost is the makespan, as ``simulate`` reports it). It adds the serial plug-in's
blocks and rows (``H``, ``OUT``, ``IN`` of ``formulations/checkmate/paging.py``: the same steps at the
same places, so the memory rows are unchanged: the simulator counts device memory alike in both modes),
drops Checkmate's compute-cost objective and bounds the simulator's clocks instead. Stage t runs its
prefix (the prefetches ``IN[t-1]``, then the offloads ``OUT[t]``), then its computes:

- ``M[t]``: the compute clock when stage t starts; ``M[t+1] >= M[t] + sum_k c_k R[t, k]``.
- ``EO[t]``, ``EI[t]``: when the stage's offloads, prefetches are done; each stream is serial and starts
  at ``M[t]`` at the earliest; a prefetch also waits for its value's host copy (``SAV``).
- ``SAV[t, v]`` / ``RDY[t, v]``: when v's host copy / prefetched device copy is complete (``EO`` / ``EI``
  of the stage that moved it; carried on).
- waits: a compute at cell k that reads u: ``M[t+1] >= RDY[t, u] + (costs of the stage from k on)``; a
  free after cell k (``FREE[t, v, k]``): ``M[t+1] >= SAV[t, v] + (costs after k)``; an offloaded value
  neither read in the stage nor kept is freed in the prefix: ``M[t+1] >= EO[t] + (all the stage's costs)``.
  All are big-M rows on the binaries that switch them on.
- objective: ``Z >= M[T], EO[T-1], EI[T-1]``.

So that those waits are all of the simulator's: on pageable values, a value resident at a stage's start
is read in it, kept to the next or offloaded in it; it is not recomputed while resident; nothing is
prefetched into a stage while it is resident or computed in the previous one (then the eager frees of
decoding are exactly the model's ``FREE`` cells or the prefix frees). Every simulator time is then at
most the model's (max-plus recurrences, by induction), so the simulated makespan is at most the
objective; it is below it where a stage's prefetches end at different times or a transfer could have
run later. With integer-only backends (CP-SAT) the clocks are integers in the cost unit and transfer
times are rounded up to it (the objective stays an upper bound).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from remat_models.core.schedule import TRANSFER_STEPS, Compute, Free, Offload, Prefetch, Schedule
from remat_models.core.stages import stages_from_schedule
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.extensions.paging import MAX_MODEL_UNITS, Paging
from remat_models.formulations import formulation_names, get_formulation
from remat_models.formulations.base import PagingPart
from remat_models.formulations.checkmate import paging as serial
from remat_models.formulations.checkmate.formulation import CHECKMATE, CheckmateModel
from remat_models.formulations.rows import Rows, index_of
from remat_models.formulations.scaling import scale_costs

log = logging.getLogger(__name__)

CLOCK_BLOCKS = ("M", "EO", "EI", "SAV", "RDY", "Z")


class OverlapPaging(Paging):
    """Offload and prefetch with copies overlapped with compute (``mode="overlap"``), on Checkmate.

    Arguments as :class:`Paging`: ``OverlapPaging(TransferModel(..., mode="overlap"))`` or the transfer
    model's keys (``OverlapPaging(bw=2)``; ``--with paging-overlap:bw=2e9,host=64GiB``).
    """

    name: ClassVar[str] = "paging-overlap"
    mode: ClassVar[str] = "overlap"

    @property
    def supports(self) -> frozenset[str]:  # type: ignore[override]
        """The formulations that declare ``overlap_paging`` (Checkmate: its stage structure carries the clocks)."""
        return frozenset(
            name for name in formulation_names() if get_formulation(name).overlap_paging
        )

    def _part(self, built: Any) -> type[PagingPart]:
        if built.formulation not in self.supports:
            raise ConfigurationError(
                f"{self.name} supports {', '.join(sorted(self.supports))}, not {built.formulation!r}"
            )
        return OverlapPagingPart


def apply(paging: Paging, built: Any) -> None:
    """Add the paging blocks and the clocks; the objective becomes the makespan."""
    if not isinstance(built, CheckmateModel):
        raise ConfigurationError(f"{paging.name} needs a Checkmate model, got {type(built).__name__}")
    state = serial.add_blocks(paging, built)
    _Clocks(paging, built, state).add()


def events(paging: Paging, built: Any, values: Mapping[str, np.ndarray], sequence: list[Any]) -> list[Any]:
    """Offloads at each stage's start, prefetches at its end (as the serial plug-in)."""
    return serial.events(paging, built, values, sequence)


def hints(paging: Paging, built: Any, schedule: Schedule) -> dict[str, np.ndarray]:
    """Every block of a warm start: without transfers as Checkmate recasts it, with them if they sit at stage starts.

    A schedule with Offload/Prefetch steps (the serial plug-in's, three-way's) must follow the model's stages
    and move values only between a stage's last compute and the next one's first (else InvalidScheduleError:
    the warm start is dropped). The clocks are the least values meeting the model's rows.
    """
    if any(isinstance(step, TRANSFER_STEPS) for step in schedule.steps):
        values = _paged(paging, built, schedule)
    else:  # Checkmate's own hints: CHECKMATE.hints would call this function again
        values = {**CHECKMATE._hints(built, schedule), **serial.hints(paging, built, schedule)}
    values.update(_least_clocks(built.model, values))
    return values


class OverlapPagingPart(PagingPart):
    """The overlapped paging's part of Checkmate's model: the serial blocks and the clocks."""

    apply = staticmethod(apply)
    events = staticmethod(events)
    hints = staticmethod(hints)


def _paged(paging: Paging, built: Any, schedule: Schedule) -> dict[str, np.ndarray]:
    """R, S (what is resident when a stage's computes start, or offloaded just before), H, OUT, IN of a schedule."""
    graph, order, T = built.graph, built.order, built.n_stages
    position = np.empty(graph.n, dtype=np.int64)
    position[order] = np.arange(graph.n)
    R, _ = stages_from_schedule(graph, order, schedule, T)
    S = np.zeros((T, graph.n), dtype=bool)
    moved = {Offload: np.zeros((T, graph.n), dtype=bool), Prefetch: np.zeros((T, graph.n), dtype=bool)}
    resident, seen = np.zeros(graph.n, dtype=bool), np.zeros(graph.n, dtype=bool)
    t, started = 0, False
    for k, step in enumerate(schedule.steps):
        v = step.node
        if isinstance(step, Compute):
            if not started:
                S[t], started = resident[order] | moved[Offload][t, order], True
            resident[v] = True
            if position[v] == t and not seen[v]:
                seen[v], t, started = True, t + 1, False
        elif isinstance(step, Free):
            resident[v] = False
        elif isinstance(step, (Offload, Prefetch)) and not started and 0 < t + isinstance(step, Offload) <= T:
            moved[type(step)][t - isinstance(step, Prefetch), v] = True
            resident[v] |= isinstance(step, Prefetch)
        else:
            raise InvalidScheduleError(f"no place for {step!r}: only offloads and prefetches between stages", step=k)
    state: serial.CheckmatePaging = built.extensions[paging.name]
    out, inn = moved[Offload], moved[Prefetch]
    if (out & (state.out < 0)).any() or (inn & (state.inn < 0)).any():
        raise InvalidScheduleError("the warm start moves a value the model cannot page there")
    host = np.cumsum(out, axis=0) - out
    values = built.assignment(R, S)
    for name, dense, ids in (("H", host, state.h), ("OUT", out, state.out), ("IN", inn, state.inn)):
        block, cells = built.model.block(name), ids >= 0
        values[name] = np.zeros(block.cols.size)
        values[name][ids[cells] - block.offset] = dense[cells]
    return values


def _least_clocks(m: Any, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The least clocks meeting every ``overlap_*`` row, given the other blocks' values (a longest-path pass)."""
    x = np.nan_to_num(m.flatten(dict(values)), nan=0.0)
    clocks = np.concatenate([m.block(name).cols for name in CLOCK_BLOCKS])
    x[clocks] = 0.0
    batches = [m.rows(name) for name in m.row_names if name.startswith("overlap_")]
    offsets = np.cumsum([0] + [b.num_rows for b in batches])
    rows = np.concatenate([b.rows + o for b, o in zip(batches, offsets, strict=False)])
    cols = np.concatenate([b.cols for b in batches])
    coefs = np.concatenate([b.coefs for b in batches])
    lb = np.concatenate([b.lb for b in batches])
    target = np.full(lb.size, -1, dtype=np.int64)  # the clock each row raises: its +1 clock term
    is_target = (coefs == 1.0) & np.isin(cols, clocks)
    target[rows[is_target]] = cols[is_target]
    active = (target >= 0) & np.isfinite(lb)
    for _ in range(clocks.size + 2):
        deficit = lb - np.bincount(rows, weights=coefs * x[cols], minlength=lb.size)
        late = active & (deficit > 1e-9)
        if not late.any():
            return {name: x[m.block(name).cols] for name in CLOCK_BLOCKS}
        raise_by = np.zeros(m.num_cols)
        np.maximum.at(raise_by, target[late], deficit[late])
        x += raise_by
    raise InvalidScheduleError("the warm start's clocks do not settle")


def _unit_costs(cm: CheckmateModel) -> np.ndarray:
    """Compute costs by position in Checkmate's cost unit (as its objective has them)."""
    return scale_costs(cm.graph.cost, cm.options.cost_precision)[0][cm.order].astype(np.float64)


class _Clocks:
    """One build of the clock blocks and rows, in position space (``order``) like Checkmate's own arrays."""

    def __init__(self, paging: Paging, cm: CheckmateModel, state: serial.CheckmatePaging) -> None:
        m, graph, order = cm.model, cm.graph, cm.order
        self.m, self.T, n = m, cm.n_stages, graph.n
        self.r = index_of(cm.r_mask, m.block("R").offset)  # (T, n) by position, -1: no cell
        self.s = index_of(cm.s_mask, m.block("S").offset)
        self.free = cm.free
        self.free_cols = m.block("FREE").cols
        self.out, self.inn = state.out[:, order], state.inn[:, order]
        self.pin = np.full_like(self.inn, -1)  # the prefetches of stage t's prefix: IN[t - 1]
        self.pin[1:] = self.inn[:-1]
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        self.pageable = np.zeros(n, dtype=bool)
        self.pageable[position[paging.paged_nodes(graph)]] = True
        self.users = np.zeros((n, n), dtype=bool)  # users[p, w]: w reads p
        self.users[position[graph.edges[:, 0]], position[graph.edges[:, 1]]] = True
        self.integral = bool(cm.options.integral_memory)
        self.cost = _unit_costs(cm)
        mem, unit = graph.mem[order].astype(np.float64), cm.units.cost_unit
        self.t_out = self._duration(paging.transfer.out_time(mem) / unit)
        self.t_in = self._duration(paging.transfer.in_time(mem) / unit)
        self.stage_cost = (self.cost * cm.r_mask).sum(axis=1)
        self.stage_in = (self.t_in * (self.pin >= 0)).sum(axis=1)
        self.total_out = float((self.t_out * (self.out >= 0)).sum())
        self.total_in = float(self.stage_in.sum())
        # big-M of each switch: what the switched-off side can exceed the other by, + 1 against tolerances
        self.big = float(np.ceil(self.stage_cost.sum() + self.total_out + self.total_in) + 1.0)  # any clock
        if not self.big <= MAX_MODEL_UNITS:
            raise ConfigurationError(
                f"{paging.name}: the clocks may reach {self.big:.3g} model cost units (all stages' computes and "
                f"transfers, {paging.transfer!r}), past the 2^53 a model holds; fewer nodes or a coarser cost unit"
            )

    def _duration(self, times: np.ndarray) -> np.ndarray:
        """Transfer times in cost units (rounded up to whole units for an integer backend)."""
        if not self.integral:
            return times
        rounded = np.ceil(times - 1e-9)
        if np.any(rounded - times > 1e-9):
            log.info("paging-overlap: transfer times rounded up to whole cost units for an integer backend")
        return rounded

    def _clocks(self, name: str, mask: np.ndarray) -> np.ndarray:
        """A block of clocks over ``mask``'s cells in ``[0, big]`` (dense ids, -1 elsewhere)."""
        size = int(mask.sum())
        if self.integral:
            block = self.m.int_block(name, size, lb=0, ub=self.big)
        else:
            block = self.m.cont_block(name, size, lb=0.0, ub=self.big)
        ids = np.full(mask.shape, -1, dtype=np.int64)
        ids[mask] = block.cols
        return ids

    def _computes(self, rows: Rows, stage: np.ndarray, weight: np.ndarray) -> Rows:
        """Add ``-c_k weight[row, k] R[stage[row], k]`` to each row (cells that exist)."""
        rr, kk = np.nonzero((self.r[stage] >= 0) & (weight != 0))
        return rows.term(self.r[stage[rr], kk], -self.cost[kk] * weight[rr, kk], rows=rr)

    def _after(self, stage: np.ndarray, cell: np.ndarray, strict: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per row, weights 1 on the positions after ``cell`` (from it on unless ``strict``) and their total cost."""
        positions = np.arange(self.r.shape[1])[None, :]
        after = (positions > cell[:, None]) if strict else (positions >= cell[:, None])
        return after, np.ceil(((after & (self.r[stage] >= 0)) * self.cost).sum(axis=1)) + 1.0

    def add(self) -> None:
        T, m = self.T, self.m
        every = np.ones(T, dtype=bool)
        M = self._clocks("M", np.ones(T + 1, dtype=bool))
        EO, EI = self._clocks("EO", every), self._clocks("EI", every)
        sav = self._clocks("SAV", np.logical_or.accumulate(self.out >= 0, axis=0) & self.pageable)
        rdy = self._clocks("RDY", np.logical_or.accumulate(self.pin >= 0, axis=0) & self.pageable)
        Z = self._clocks("Z", np.ones(1, dtype=bool))
        stage = np.arange(T)
        Rows(1).term(M[:1], 1.0).add_to(m, ub=0.0, name="overlap_start")
        rows = Rows(T).term(M[1:], 1.0).term(M[:-1], -1.0)
        self._computes(rows, stage, np.ones(self.r.shape)).add_to(m, lb=0.0, name="overlap_compute")
        self._streams(M, EO, EI, sav)
        self._moved(sav, EO, self.out, "overlap_saved")
        self._moved(rdy, EI, self.pin, "overlap_ready")
        self._waits(M, EO, sav, rdy)
        ends = np.array([M[T], EO[T - 1], EI[T - 1]])
        Rows(3).term(np.repeat(Z, 3), 1.0).term(ends, -1.0).add_to(m, lb=0.0, name="overlap_makespan")
        self._structure()
        keep = ~np.isin(m.obj_cols, m.block("R").cols)  # the makespan replaces Checkmate's compute cost
        m.set_objective(np.concatenate([m.obj_cols[keep], Z]), np.concatenate([m.obj_coefs[keep], [1.0]]))

    def _streams(self, M: np.ndarray, EO: np.ndarray, EI: np.ndarray, sav: np.ndarray) -> None:
        """Each copy stream: a stage's copies start at its clock and after the stream's previous copies."""
        T, m = self.T, self.m
        for end, cells, times, name in ((EO, self.out, self.t_out, "out"), (EI, self.pin, self.t_in, "in")):
            ct, cp = np.nonzero(cells >= 0)
            after_stream = np.concatenate([[-1], end[:-1]])
            for previous, which in ((M[:-1], "clock"), (after_stream, "stream")):
                rows = Rows(T).term(end, 1.0).term(previous, -1.0).term(cells[ct, cp], -times[cp], rows=ct)
                rows.add_to(m, lb=0.0, name=f"overlap_{name}_{which}")
        # a prefetch starts once its host copy is complete: EI[t] >= SAV[t-1, p] + the stage's prefetches
        ct, cp = np.nonzero(self.pin >= 0)
        big = np.ceil(self.total_out + self.stage_in[ct]) + 1.0
        rows = Rows(ct.size).term(EI[ct], 1.0).term(sav[np.maximum(ct - 1, 0), cp], -1.0).term(self.pin[ct, cp], -big)
        pt, pp = np.nonzero(self.pin[ct] >= 0)
        rows.term(self.pin[ct[pt], pp], -self.t_in[pp], rows=pt)
        rows.add_to(m, lb=-big, name="overlap_in_saved")

    def _moved(self, clock: np.ndarray, end: np.ndarray, cells: np.ndarray, name: str) -> None:
        """``clock[t, p]``: at least the stream end of the stage that moved p, and carried on."""
        ct, cp = np.nonzero(cells >= 0)
        rows = Rows(ct.size).term(clock[ct, cp], 1.0).term(end[ct], -1.0).term(cells[ct, cp], -self.big)
        rows.add_to(self.m, lb=-self.big, name=name)
        ct, cp = np.nonzero((clock[1:] >= 0) & (clock[:-1] >= 0))
        Rows(ct.size).term(clock[ct + 1, cp], 1.0).term(clock[ct, cp], -1.0).add_to(
            self.m, lb=0.0, name=f"{name}_carry"
        )

    def _waits(self, M: np.ndarray, EO: np.ndarray, sav: np.ndarray, rdy: np.ndarray) -> None:
        """Where the compute clock waits for a copy: reads of prefetched values, frees of offloaded ones."""
        m = self.m
        # a compute at cell k reading u waits for u's prefetch: M[t+1] >= RDY[t, u] + costs from k on
        eu, ek = np.nonzero(self.users & self.pageable[:, None])
        tt, ee = np.nonzero((self.r[:, ek] >= 0) & (rdy[:, eu] >= 0))
        u, k = eu[ee], ek[ee]
        after, big = self._after(tt, k, strict=False)
        big += np.ceil(self.total_in + self.total_out)
        rows = Rows(tt.size).term(M[tt + 1], 1.0).term(rdy[tt, u], -1.0).term(self.r[tt, k], -big)
        self._computes(rows, tt, after).add_to(m, lb=-big, name="overlap_read_wait")
        # a free after cell k waits for the value's host copy: M[t+1] >= SAV[t, i] + costs after k
        ft, fi, fk = self.free.T
        has = sav[ft, fi] >= 0
        ft, fi, fk, fcol = ft[has], fi[has], fk[has], self.free_cols[has]
        after, big = self._after(ft, fk, strict=True)
        big += np.ceil(self.total_out)
        rows = Rows(ft.size).term(M[ft + 1], 1.0).term(sav[ft, fi], -1.0).term(fcol, -big)
        self._computes(rows, ft, after).add_to(m, lb=-big, name="overlap_free_wait")
        # an offloaded value neither read in its stage nor kept is freed in the prefix: M[t+1] >= EO[t] + all costs
        ot, op = np.nonzero(self.out >= 0)
        s_next = np.where(ot + 1 < self.T, self.s[np.minimum(ot + 1, self.T - 1), op], -1)
        big = np.ceil(self.stage_cost[ot] + self.total_out) + 1.0
        rows = Rows(ot.size).term(M[ot + 1], 1.0).term(EO[ot], -1.0).term(self.out[ot, op], -big).term(s_next, big)
        rows = self._computes(rows, ot, np.ones((ot.size, self.r.shape[1])))
        rr, ww = np.nonzero(self.users[op] & (self.r[ot] >= 0))
        rows.term(self.r[ot[rr], ww], big[rr], rows=rr)
        rows.add_to(m, lb=-big, name="overlap_idle_offload")

    def _structure(self) -> None:
        """On pageable values: resident means read, kept or offloaded; no recompute or prefetch while resident."""
        m, T = self.m, self.T
        st, sp = np.nonzero((self.s >= 0) & self.pageable)
        s_next = np.where(st + 1 < T, self.s[np.minimum(st + 1, T - 1), sp], -1)
        rows = Rows(st.size).term(self.s[st, sp], -1.0).term(s_next, 1.0).term(self.out[st, sp], 1.0)
        rr, ww = np.nonzero(self.users[sp] & (self.r[st] >= 0))
        rows.term(self.r[st[rr], ww], 1.0, rows=rr).add_to(m, lb=0.0, name="overlap_read_or_keep")
        st, sp = np.nonzero((self.s >= 0) & (self.r >= 0) & self.pageable)
        Rows(st.size).term(self.s[st, sp], 1.0).term(self.r[st, sp], 1.0).add_to(m, ub=1.0, name="overlap_no_rerun")
        it, ip = np.nonzero(self.inn >= 0)
        rows = Rows(it.size).term(self.inn[it, ip], 1.0).term(self.s[it, ip], 1.0).term(self.r[it, ip], 1.0)
        rows.add_to(m, ub=1.0, name="overlap_prefetch_absent")
