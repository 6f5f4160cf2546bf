"""The staged memory model Checkmate and H-ILP share: U cells, the frees' hazard rows (7b)-(7c), the U recurrence.

A staged model runs its compute cells stage by stage; ``U[c]`` is the memory just after cell c, before the frees
that follow it. ``U[c] - U[c - 1] = step[c]`` within a stage (produced bytes, minus bytes freed after the previous
cell); a stage's first cell starts from the fixed memory plus the checkpoints kept into the stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from remat_models.formulations.rows import Rows
from remat_models.model import Model


@dataclass(frozen=True)
class StageCells:
    """The U cells in stage order: each cell's stage, whether it opens its stage, and each stage's first cell."""

    stage: np.ndarray  # stage of each cell
    first_flag: np.ndarray  # the cell is its stage's first
    first: np.ndarray  # per cell: its stage's first cell
    stage_first: np.ndarray  # per stage: its first cell (-1 for a stage without cells)

    @classmethod
    def of(cls, mask: np.ndarray) -> StageCells:
        """The cells of a (stages x positions) mask, row by row."""
        stage = np.nonzero(mask)[0]
        cell = np.arange(stage.size)
        first_flag = np.ones(stage.size, dtype=bool)
        first_flag[1:] = stage[1:] != stage[:-1]
        stage_first = np.full(mask.shape[0], -1, dtype=np.int64)
        stage_first[stage[first_flag]] = cell[first_flag]
        return cls(stage, first_flag, np.maximum.accumulate(np.where(first_flag, cell, 0)), stage_first)

    @property
    def count(self) -> int:
        """Number of cells."""
        return int(self.stage.size)


def add_free_rows(
    model: Model, hazard: Rows, kappa: np.ndarray, names: tuple[str | None, str | None] = (None, None)
) -> Any:
    """The FREE block and Checkmate's (7b)-(7c): FREE = 1 exactly when the hazard count (``hazard`` + 1) is 0."""
    block = model.bool_block("FREE", hazard.count)
    Rows(hazard.count).term(block.cols, 1.0).extend(hazard).add_to(model, lb=0.0, name=names[0])  # (7b)
    Rows(hazard.count).term(block.cols, kappa).extend(hazard).add_to(model, ub=kappa - 1.0, name=names[1])  # (7c)
    return block


def subtract_frees(
    step: Rows,
    cells: StageCells,
    free_cols: np.ndarray,
    free_stage: np.ndarray,
    free_cell: np.ndarray,
    size: np.ndarray,
) -> None:
    """A free after cell c releases ``size`` on cell c + 1 of the same stage (after a stage's last cell, nowhere)."""
    after = free_cell + 1
    same = after < cells.count
    same[same] = cells.stage[after[same]] == free_stage[same]
    step.term(free_cols[same], -size[same], rows=after[same])


def add_recurrence(
    model: Model, U: Any, step: Rows, cells: StageCells, fixed: float, name: str | None = None
) -> np.ndarray:
    """The rows ``U[c] - U[c - 1] - step[c] = const`` (``fixed`` memory on each stage's first cell); returns const."""
    const = np.where(cells.first_flag, fixed, 0.0)
    previous = np.where(cells.first_flag, -1, U.cols - 1)
    Rows(cells.count).term(U.cols, 1.0).term(previous, -1.0).extend(step, -1.0).add_to(
        model, lb=const, ub=const, name=name
    )
    return const


def recurrence_values(step: np.ndarray, first: np.ndarray) -> np.ndarray:
    """U of every cell from each cell's step (the constant included) and its stage's first cell."""
    total = np.cumsum(step)
    return total - (total[first] - step[first])


class StagedModel(Protocol):
    """What :func:`staged_assignment` reads off a built staged model."""

    model: Model
    hazard: Rows
    memory_step: Rows
    memory_const: np.ndarray
    first_cell: np.ndarray


def staged_assignment(built: StagedModel, decisions: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every block's values implied by the decision blocks (R and S or P): FREE from the hazard count, U from steps."""
    m = built.model
    x = np.zeros(m.num_cols)
    for name, values in decisions.items():
        x[m.block(name).cols] = values
    x[m.block("FREE").cols] = built.hazard.evaluate(x) == -1
    step = built.memory_step.evaluate(x) + built.memory_const
    x[m.block("U").cols] = recurrence_values(step, built.first_cell)
    return m.split(x)
