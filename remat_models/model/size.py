"""Model size accounting (variables, constraints, nonzeros), for limits checked before building."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from remat_models.errors import ModelTooLargeError
from remat_models.model import constructs as C
from remat_models.model.blocks import IntervalTable

if TYPE_CHECKING:
    from remat_models.model.core import Model


@dataclass(frozen=True)
class SizeEstimate:
    """Counts of a model: a global construct counts as one constraint, its column references as nonzeros."""

    variables: int = 0
    integer_variables: int = 0
    constraints: int = 0
    nonzeros: int = 0

    def __add__(self, o: SizeEstimate) -> SizeEstimate:
        return SizeEstimate(*(a + b for a, b in zip(self.astuple(), o.astuple(), strict=True)))

    def __sub__(self, o: SizeEstimate) -> SizeEstimate:
        return SizeEstimate(*(a - b for a, b in zip(self.astuple(), o.astuple(), strict=True)))

    def astuple(self) -> tuple[int, int, int, int]:
        """(variables, integer_variables, constraints, nonzeros)."""
        return (self.variables, self.integer_variables, self.constraints, self.nonzeros)

    def as_dict(self) -> dict[str, int]:
        """Plain dict (as stored in ``ModelTooLargeError.estimate``)."""
        return asdict(self)

    def check(self, max_variables: int | None, max_nonzeros: int | None) -> None:
        """Raise ``ModelTooLargeError`` if a limit is exceeded."""
        over = (max_variables is not None and self.variables > max_variables) or (
            max_nonzeros is not None and self.nonzeros > max_nonzeros
        )
        if over:
            raise ModelTooLargeError(
                f"model too large: {self.variables} variables, {self.constraints} constraints, {self.nonzeros} nonzeros"
                f" (limits: {max_variables} variables, {max_nonzeros} nonzeros)",
                estimate=self.as_dict(),
            )


BYTES_PER_COLUMN = 3_000  # Checkmate, 836-node graph: 1.54 M columns, 3.2 GiB peak RSS on HiGHS, 4.6 GiB on CP-SAT


def check_fits_in_memory(what: str, columns: int, bytes_per_column: int = BYTES_PER_COLUMN) -> None:
    """Raise ``ModelTooLargeError`` before building a model of ``columns`` columns that would not fit in RAM.

    The estimate (``bytes_per_column``, model and solver copy together) is compared with 80 % of the
    machine's physical memory, so a hopeless build fails at once instead of being killed by the OOM killer.
    """
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    need = columns * bytes_per_column
    if need > 0.8 * physical:
        raise ModelTooLargeError(
            f"{what}: about {columns:,} columns would need ~{need / 2**30:,.0f} GiB to build and solve, this machine"
            f" has {physical / 2**30:,.0f} GiB; plan a graph this size with moccasin, hilp, fastsa or auto",
            estimate={"variables": columns},
        )


def model_size(m: Model) -> SizeEstimate:
    """Size of a model as it stands (globals counted natively)."""
    total = SizeEstimate(m.num_cols, int(m.col_integer.sum()), m.num_rows, m.num_nonzeros)
    iv = m.intervals
    total += SizeEstimate(0, 0, len(iv.start), interval_nnz(iv))
    for part in (
        *map(indicator, m.indicators),
        *map(product, m.products),
        *map(cumulative, m.cumulatives),
        *map(reservoir, m.reservoirs),
        *map(all_different, m.all_different),
    ):
        total += part
    return total


def interval_nnz(iv: IntervalTable) -> int:
    """Column references of interval linking (start, end, size and presence where they are columns)."""
    return int(2 * len(iv.start) + (iv.size_col >= 0).sum() + (iv.presence >= 0).sum())


def indicator(ind: C.IndicatorBatch) -> SizeEstimate:
    """Native size of an indicator batch."""
    return SizeEstimate(0, 0, ind.rows.num_rows, ind.rows.nnz + ind.rows.num_rows)


def product(p: C.ProductBatch) -> SizeEstimate:
    """Native size of a product batch."""
    return SizeEstimate(0, 0, len(p.z), 3 * len(p.z))


def cumulative(cu: C.Cumulative) -> SizeEstimate:
    """Native size of a cumulative."""
    return SizeEstimate(0, 0, 1, len(cu.interval_ids))


def reservoir(r: C.Reservoir) -> SizeEstimate:
    """Native size of a reservoir."""
    return SizeEstimate(0, 0, 1, len(r.times.cols) + int(np.sum(r.active_cols >= 0)))


def all_different(ad: C.AllDifferent) -> SizeEstimate:
    """Native size of an all-different."""
    return SizeEstimate(0, 0, 1, len(ad.exprs.cols))
