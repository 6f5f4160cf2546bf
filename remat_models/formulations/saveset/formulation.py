"""The exact save-set choice: which forward values to save for the backward pass, on any backend.

A save-set plan (:mod:`remat_models.heuristics.saveset`, PyTorch's saved-tensors model) keeps the chosen
forward values for the backward pass and recomputes every other one, once, when the backward first needs
it (:func:`~remat_models.heuristics.recompute.saved_set_sequence`). Its schedules are Checkmate schedules in
the graph's input order (stage t computes node t after the unavailable ancestors it needs), so this model is
Checkmate's staged MILP (its memory rows give the peak at every step of that order) with the choice
narrowed to the save set:

- ``keep[u]`` (binary) for each recomputable forward value u; ``A[t, u]`` "u is available as stage t starts",
  for the stages after u's last forward reader (the loss included) L(u): ``A[L(u)+1, u] = keep[u]``,
  ``A[t+1, u] = A[t, u] + R[t, u]`` (so u is recomputed at most once, never if kept);
- no recomputation in the forward pass (``R[t, u] = 0`` for t <= L(u)) nor of any other node;
- ``R[t, u]`` is exactly the closure the sequence builder recomputes: ``R[t, u] >= R[t, w] - A[t, u]`` for each
  reader w of u, ``R[t, u] + A[t, u] <= 1`` and ``R[t, u] <= sum of R[t, w]`` over u's readers.

So every feasible ``keep`` gives the builder's schedule with its exact peak (Checkmate's memory rows with the
least residency, and more residency only costs memory), and the objective, the total compute cost, is the
forward pass plus the recomputation. Decoding runs the sequence builder on the kept set; the simulator checks it.
The heuristic's schedule warm-starts it (``plan(graph, budget, "saveset-exact", init="saveset")``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.schedule import Compute, Schedule
from remat_models.core.stages import stages_from_schedule
from remat_models.errors import ConfigurationError, InvalidScheduleError
from remat_models.formulations.base import BuiltModel, FormulationBase
from remat_models.formulations.checkmate.formulation import CHECKMATE, CheckmateModel, CheckmateOptions
from remat_models.formulations.rows import Rows, index_of
from remat_models.formulations.scaling import DEFAULT_PRECISION
from remat_models.heuristics.recompute import forward_mask, last_forward_use, saved_set_sequence, sequence_schedule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SaveSetOptions:
    """Options of the save-set model (``integral_memory`` None follows the backend, as Checkmate's)."""

    integral_memory: bool | None = None
    cost_precision: float = DEFAULT_PRECISION

    def validated(self) -> SaveSetOptions:
        """Self, after range checks."""
        if not 0.0 < self.cost_precision < 1.0:
            raise ConfigurationError(f"saveset cost_precision must lie in (0, 1), got {self.cost_precision}")
        return self


@dataclass
class SaveSetModel(CheckmateModel):
    """Checkmate's model in input order plus the save-set rows; ``candidates`` are the positions with a keep column."""

    candidates: np.ndarray
    a_mask: np.ndarray  # (stage, position) cells of A


class SaveSet(FormulationBase):
    """Exact save-set choice: Checkmate's memory rows on the one order the save-set sequence builder emits."""

    name: ClassVar[str] = "saveset-exact"  # "saveset" is the heuristic
    options_type: ClassVar[type] = SaveSetOptions
    default_backend: ClassVar[str] = "cpsat"  # HiGHS is numerically unsure where bytes span 4 B to 1 GiB (see docs)
    integral_option: ClassVar[str | None] = "integral_memory"
    chooses_save_sets: ClassVar[bool] = True

    def build(
        self, graph: Graph, budget: int, options: SaveSetOptions | Mapping[str, Any] | None = None
    ) -> SaveSetModel:
        """Build the model of ``graph`` under ``budget`` bytes."""
        base = CHECKMATE.build(graph, budget, _checkmate_options(self.options(options)))
        candidates, a_mask = _link(base)
        values = {f.name: getattr(base, f.name) for f in fields(base)} | {"formulation": self.name}
        log.info("saveset model of %s: %d keep columns, %d rows", graph.name, candidates.size, base.model.num_rows)
        return SaveSetModel(**values, candidates=candidates, a_mask=a_mask)

    def check_size(self, graph: Graph, budget: int, options: Any = None) -> None:
        """Checkmate's size check (the save-set rows add fewer columns than its FREE block)."""
        CHECKMATE.check_size(graph, budget, _checkmate_options(self.options(options)))

    def sequence(self, built: BuiltModel, values: Mapping[str, np.ndarray]) -> list[int | Any]:
        """The sequence builder's compute order for the kept values."""
        model = _saveset(built)
        model.require(values, "keep")
        kept = model.order[model.candidates[np.asarray(values["keep"]) > 0.5]]
        return saved_set_sequence(model.graph, kept).tolist()

    def _hints(self, built: BuiltModel, schedule: Schedule) -> dict[str, np.ndarray]:
        """Every block's values for a save-set schedule (a candidate computed once is kept)."""
        model = _saveset(built)
        graph = model.graph
        computed = np.array([step.node for step in schedule if isinstance(step, Compute)], dtype=np.int64)
        once = np.bincount(computed, minlength=graph.n)[model.order[model.candidates]] == 1
        sequence = saved_set_sequence(graph, model.order[model.candidates[once]])
        if not np.array_equal(sequence, computed):
            raise InvalidScheduleError("not a save-set schedule: it differs from the one its kept values give")
        R, S = stages_from_schedule(graph, model.order, sequence_schedule(graph, sequence), model.n_stages)
        values = model.assignment(R, S)
        values["keep"] = once.astype(np.float64)
        keep = np.zeros(graph.n)
        keep[model.candidates] = once
        recomputed = np.where(model.a_mask, R, False).astype(np.float64)  # R[t, u] for t past u's last reader
        available = keep[None, :] + np.cumsum(recomputed, axis=0) - recomputed  # keep + recomputes before t
        values["A"] = available[model.a_mask]
        return values


def _checkmate_options(opts: SaveSetOptions) -> CheckmateOptions:
    return CheckmateOptions(integral_memory=opts.integral_memory, cost_precision=opts.cost_precision)


def _saveset(built: BuiltModel) -> SaveSetModel:
    if not isinstance(built, SaveSetModel):
        raise ConfigurationError(f"expected a model built by the saveset formulation, got {type(built).__name__}")
    return built


def _link(built: CheckmateModel) -> tuple[np.ndarray, np.ndarray]:
    """Add keep, A and the rows making R the sequence builder's recomputation; returns (candidates, A's mask).

    Positions are in input order (Checkmate's default order).
    """
    graph, m, order, r_mask = built.graph, built.model, built.order, built.r_mask
    n = graph.n
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    forward = forward_mask(graph)
    droppable = (forward & graph.recomputable)[order]
    last = last_forward_use(graph, forward)[order]
    dropped_after = np.where(last >= 0, position[np.maximum(last, 0)], np.arange(n))  # stage ending availability
    stage = np.arange(n)[:, None]
    a_mask = droppable[None, :] & (stage > dropped_after[None, :])
    rid = index_of(r_mask, m.block("R").offset)
    free = r_mask & ((stage == np.arange(n)[None, :]) | a_mask)  # R cells left to the solver
    tt, pp = np.nonzero(r_mask & ~free)
    Rows(tt.size).term(rid[tt, pp], 1.0).add_to(m, ub=0.0, name="saveset_no_recompute")

    candidates = np.flatnonzero(droppable)
    keep_col = np.full(n, -1, dtype=np.int64)
    keep_col[candidates] = m.bool_block("keep", candidates.size).cols
    A = m.bool_block("A", int(a_mask.sum()))
    aid = index_of(a_mask, A.offset)
    at, ap = np.nonzero(a_mask)
    first = at == dropped_after[ap] + 1
    before = np.maximum(at - 1, 0)
    Rows(at.size).term(A.cols, 1.0).term(np.where(first, keep_col[ap], aid[before, ap]), -1.0).term(
        np.where(first, -1, rid[before, ap]), -1.0
    ).add_to(m, lb=0.0, ub=0.0, name="saveset_available")
    Rows(at.size).term(rid[at, ap], 1.0).term(A.cols, 1.0).add_to(m, ub=1.0, name="saveset_once")

    eu, ew = position[graph.edges[:, 0]], position[graph.edges[:, 1]]
    et, ee = np.nonzero(a_mask[:, eu] & free[:, ew])  # (stage, edge): the reader may run while u is droppable
    u, w = eu[ee], ew[ee]
    Rows(et.size).term(rid[et, u], 1.0).term(aid[et, u], 1.0).term(rid[et, w], -1.0).add_to(
        m, lb=0.0, name="saveset_needed"
    )
    Rows(at.size).term(rid[at, ap], 1.0).term(rid[et, w], -1.0, rows=aid[et, u] - A.offset).add_to(
        m, ub=0.0, name="saveset_only_needed"
    )
    return candidates, a_mask


SAVESET = SaveSet()

__all__ = ["SAVESET", "SaveSet", "SaveSetModel", "SaveSetOptions"]
