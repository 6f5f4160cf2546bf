"""The ``paging`` plug-in: offload values to the host and prefetch them back, priced by a TransferModel.

One ``Paging(transfer, nodes=None, min_bytes=0)`` object works on Checkmate (POET-style ``H``,
``IN``, ``OUT`` blocks, ``paging_checkmate``) and on Moccasin (fetch intervals,
``paging_moccasin``). Its ``events`` insert the Offload/Prefetch steps into the decoded compute
sequence; decoded schedules are simulated with ``transfer`` (serial mode: the objective is compute
plus transfer time, exactly the simulated total cost).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from remat_models.core.graph import Graph
from remat_models.core.limits import check_count
from remat_models.core.schedule import Schedule
from remat_models.core.transfer import TransferModel
from remat_models.errors import ConfigurationError, RematError
from remat_models.formulations import formulation_names, get_formulation
from remat_models.formulations.base import PagingPart

# the longest time, in cost units, a paging model may hold: past 2^53 doubles lose whole units (CP-SAT's
# integer clocks and the big-M rows then overflow or round); a transfer that long is a unit mistake
MAX_MODEL_UNITS = 2.0**53


class Paging:
    """Let the solver page values out to the host and back (serial transfers, POET semantics).

    ``Paging(TransferModel(...))``, or the transfer model's CLI keys directly: ``Paging(bw=2e9,
    latency=1e-5, host=2**36)`` (``out_bw``, ``in_bw``, ``out_latency``, ``in_latency``, ``host``; see
    ``TransferModel.from_options``), which is what ``--with paging:bw=2e9,host=64GiB`` calls.
    ``nodes`` (names or indices, one index, or one string ``"a;b"``; None: all) and ``min_bytes`` restrict which
    values may be paged; graph outputs never are. ``Paging(..., nodes=[])`` leaves the optimum unchanged.
    ``fetches`` is the number of fetch intervals per paged node on Moccasin.
    """

    name: ClassVar[str] = "paging"
    mode: ClassVar[str] = "serial"  # the TransferModel mode this plug-in models

    def __init__(
        self,
        transfer: TransferModel | None = None,
        nodes: Iterable[int | str] | str | None = None,
        min_bytes: int | str = 0,
        fetches: int = 1,
        **transfer_options: Any,
    ) -> None:
        from remat_models.core.units import parse_size

        if transfer is None:
            transfer = TransferModel.from_options({"mode": self.mode, **transfer_options})
        elif transfer_options:
            extra = sorted(transfer_options)
            raise ConfigurationError(f"Paging takes a TransferModel or its options, not both: {extra}")
        if not isinstance(transfer, TransferModel):
            raise ConfigurationError(f"Paging needs a TransferModel, got {transfer!r}")
        if transfer.mode != self.mode:
            other = "paging" if self.mode == "overlap" else "paging-overlap (Checkmate)"
            raise ConfigurationError(
                f"the {self.name} plug-in models {self.mode} transfers (mode={self.mode!r}) only; "
                f"use {other} for mode={transfer.mode!r}"
            )
        if isinstance(nodes, str):
            nodes = [name for name in nodes.replace(";", " ").split() if name]
        elif isinstance(nodes, int) and not isinstance(nodes, bool):
            nodes = [nodes]
        elif nodes is not None and not isinstance(nodes, Iterable):
            raise ConfigurationError(f"{self.name} nodes must be node names or indices, got {nodes!r}")
        self.transfer = transfer
        self.nodes: tuple[int | str, ...] | None = None if nodes is None else tuple(nodes)
        try:
            self.min_bytes = parse_size(min_bytes)
        except RematError as error:
            raise ConfigurationError(f"{self.name} min_bytes: {error}") from None
        self.fetches = check_count(fetches, f"{self.name} fetches", minimum=0)

    def __repr__(self) -> str:
        fields = f"nodes={self.nodes!r}, min_bytes={self.min_bytes}, fetches={self.fetches}"
        return f"{type(self).__name__}({self.transfer!r}, {fields})"

    def paged_nodes(self, graph: Graph) -> np.ndarray:
        """Sorted ids of the nodes whose values may be paged: listed, ``mem >= min_bytes``, not graph outputs."""
        allowed = np.zeros(graph.n, dtype=bool)
        if self.nodes is None:
            allowed[:] = True
        else:
            allowed[_node_ids(graph, self.nodes)] = True
        allowed &= graph.mem >= self.min_bytes
        allowed &= graph.mem > 0
        allowed[graph.outputs] = False
        return np.flatnonzero(allowed)

    @property
    def supports(self) -> frozenset[str]:  # type: ignore[override]
        """The formulations that declare a paging part (``paging_part``)."""
        return frozenset(name for name in formulation_names() if get_formulation(name).paging_part is not None)

    def _part(self, built: Any) -> type[PagingPart]:
        part = get_formulation(built.formulation).paging_part if built.formulation else None
        if part is None:
            raise ConfigurationError(f"paging supports {', '.join(sorted(self.supports))}, not {built.formulation!r}")
        return part

    def apply(self, built: Any) -> None:
        """Add the paging blocks, rows and objective terms to ``built`` (one paging plug-in per model)."""
        part = self._part(built)
        pagings = sorted({cls.name for cls in (Paging, *Paging.__subclasses__())} & set(built.extensions))
        if pagings:
            raise ConfigurationError(f"one paging extension per model: {self.name} after {', '.join(pagings)}")
        paged = built.graph.mem[self.paged_nodes(built.graph)].astype(np.float64)
        longest = max(self.transfer.out_time(paged.max(initial=0)), self.transfer.in_time(paged.max(initial=0)))
        if not longest / built.units.cost_unit <= MAX_MODEL_UNITS:
            raise ConfigurationError(
                f"{self.name}: a transfer takes {longest / built.units.cost_unit:.3g} model cost units "
                f"({self.transfer!r}), past the 2^53 a model holds; is the bandwidth or latency in the graph's units?"
            )
        part.apply(self, built)

    def events(self, built: Any, values: Mapping[str, np.ndarray], sequence: list[Any]) -> list[Any]:
        """Insert the chosen Offload/Prefetch steps into the decoded compute sequence."""
        return self._part(built).events(self, built, values, sequence)

    def peak_bound(self, built: Any, values: Mapping[str, np.ndarray]) -> float | None:
        """The model's peak with the paging intervals (Moccasin); None where the base rows already count them."""
        return self._part(built).peak_bound(self, built, values)

    def hints(self, built: Any, schedule: Schedule) -> dict[str, np.ndarray]:
        """No paging (all zeros): a valid warm start for every schedule of the base formulation."""
        return self._part(built).hints(self, built, schedule)


def _node_ids(graph: Graph, nodes: Iterable[int | str]) -> np.ndarray:
    ids = []
    for node in nodes:
        if isinstance(node, str):
            if node not in graph.index:
                raise ConfigurationError(f"paging: unknown node {node!r} in graph {graph.name!r}")
            ids.append(graph.index[node])
        else:
            if not 0 <= int(node) < graph.n:
                raise ConfigurationError(f"paging: node index {node} outside the {graph.n}-node graph")
            ids.append(int(node))
    return np.asarray(ids, dtype=np.int64)
