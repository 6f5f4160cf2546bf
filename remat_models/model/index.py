"""Named, indexed views of a block's cells: which column sits at which (axis, ...) coordinate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from remat_models.errors import ConfigurationError

MAX_DENSE_CELLS = 50_000_000  # ``ids`` of a larger index would not fit in memory comfortably: use ``lookup``


@dataclass(frozen=True, eq=False)
class IndexMap:
    """The cells of one block on named axes: ``coords[a][k]`` is cell k's coordinate on axis a, ``cols[k]`` its column.

    ``ids`` is the dense array of column ids (-1 where there is no cell); ``lookup`` finds columns without
    building it (for indexes too large to hold densely). ``labels[a]`` optionally names the coordinates of
    axis a (node names for node axes), used in exported column names.
    """

    block: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    coords: tuple[np.ndarray, ...]
    cols: np.ndarray
    labels: tuple[Sequence[str] | None, ...] = field(default=())

    def __post_init__(self) -> None:
        if not len(self.axes) == len(self.shape) == len(self.coords):
            raise ConfigurationError(f"index of {self.block!r}: axes, shape and coords differ in length")
        for axis, extent, coord in zip(self.axes, self.shape, self.coords, strict=True):
            if coord.shape != self.cols.shape:
                raise ConfigurationError(
                    f"index of {self.block!r}: axis {axis!r} has {coord.size} coords for {self.cols.size} cells"
                )
            if coord.size and (coord.min() < 0 or coord.max() >= extent):
                raise ConfigurationError(
                    f"index of {self.block!r}: a coordinate of axis {axis!r} is outside 0..{extent - 1}"
                )

    @classmethod
    def dense(
        cls, block: str, axes: Sequence[str], ids: np.ndarray, labels: Sequence[Sequence[str] | None] | None = None
    ) -> IndexMap:
        """From a dense id array (-1: no cell)."""
        ids = np.asarray(ids, dtype=np.int64)
        where = np.nonzero(ids >= 0)
        return cls(
            block,
            tuple(axes),
            ids.shape,
            tuple(w.astype(np.int64) for w in where),
            ids[where],
            _labels(labels, ids.ndim),
        )

    @classmethod
    def sparse(
        cls,
        block: str,
        axes: Sequence[str],
        shape: Sequence[int],
        coords: Sequence[np.ndarray],
        cols: np.ndarray,
        labels: Sequence[Sequence[str] | None] | None = None,
    ) -> IndexMap:
        """From coordinate arrays, one per axis, and the column of each cell."""
        return cls(
            block,
            tuple(axes),
            tuple(int(s) for s in shape),
            tuple(np.asarray(c, dtype=np.int64).ravel() for c in coords),
            np.asarray(cols, dtype=np.int64).ravel(),
            _labels(labels, len(shape)),
        )

    @cached_property
    def ids(self) -> np.ndarray:
        """Dense column ids shaped ``shape`` (-1 where a cell does not exist); read-only."""
        cells = int(np.prod(self.shape, dtype=np.int64))
        if cells > MAX_DENSE_CELLS:
            raise ConfigurationError(
                f"index of {self.block!r} has {cells:,} cells on axes {self.axes}: too many to hold; use lookup()"
            )
        ids = np.full(self.shape, -1, dtype=np.int64)
        ids[self.coords] = self.cols
        ids.setflags(write=False)
        return ids

    def lookup(self, *coords: np.ndarray | int) -> np.ndarray:
        """Column ids at the given coordinates (one array per axis, broadcast together); -1 where no cell."""
        if len(coords) != len(self.axes):
            raise ConfigurationError(f"index of {self.block!r} takes {len(self.axes)} coordinates {self.axes}")
        query = np.broadcast_arrays(*(np.asarray(c, dtype=np.int64) for c in coords))
        flat = tuple(q.ravel() for q in query)
        inside = np.ones(flat[0].shape, dtype=bool)
        for extent, coord in zip(self.shape, flat, strict=True):
            inside &= (coord >= 0) & (coord < extent)
        wanted = self._key(tuple(np.where(inside, c, 0) for c in flat))
        order = self._order
        keys = self._key(self.coords)[order]
        out = np.full(wanted.shape, -1, dtype=np.int64)
        if keys.size:
            pos = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
            hit = inside & (keys[pos] == wanted)
            out[hit] = self.cols[order][pos[hit]]
        return out.reshape(query[0].shape)

    @cached_property
    def _order(self) -> np.ndarray:
        return np.argsort(self._key(self.coords), kind="stable")

    def axis(self, name: str) -> int:
        """Position of the axis called ``name``."""
        try:
            return self.axes.index(name)
        except ValueError:
            raise ConfigurationError(f"index of {self.block!r} has no axis {name!r}; axes: {self.axes}") from None

    def cell_names(self) -> list[str]:
        """``block[c0,c1,...]`` for every cell (labels where the axis has them), in cell order."""
        parts = []
        for a, coord in enumerate(self.coords):
            names = self.labels[a] if a < len(self.labels) else None
            parts.append(
                [str(names[c]) for c in coord.tolist()] if names is not None else [str(c) for c in coord.tolist()]
            )
        return [f"{self.block}[{','.join(p)}]" for p in zip(*parts, strict=True)] if parts else []

    def _key(self, coords: tuple[np.ndarray, ...]) -> np.ndarray:
        key = np.zeros(coords[0].shape if coords else (0,), dtype=np.int64)
        for extent, coord in zip(self.shape, coords, strict=True):
            key = key * extent + coord
        return key


def _labels(labels: Sequence[Sequence[str] | None] | None, ndim: int) -> tuple[Sequence[str] | None, ...]:
    if labels is None:
        return (None,) * ndim
    if len(labels) != ndim:
        raise ConfigurationError(f"{len(labels)} label lists for {ndim} axes")
    return tuple(labels)
