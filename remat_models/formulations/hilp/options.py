"""Options of the ``hilp`` formulation: the model of one level and the hierarchical solve (docs/hilp.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from remat_models.backends.registry import names as backend_names
from remat_models.core.limits import check_time_limit
from remat_models.errors import ConfigurationError
from remat_models.formulations import leaf_formulations
from remat_models.formulations.base import check_option_types, options_of
from remat_models.formulations.scaling import DEFAULT_PRECISION

CORRECTIONS = ("top", "all", "off")
PARTITION_KEYS = ("max_leaf", "max_top", "alpha")


@dataclass(frozen=True)
class HilpOptions:
    """H-ILP options: one flat model, or H-Partition, cluster options bottom-up and H-ILP at the top.

    ``partition`` False/None: one flat model; True or a mapping of ``max_leaf``/``max_top``/``alpha``: the
    hierarchical solve; "auto" (default): flat up to ``flat_max_nodes`` nodes, hierarchical above.

    Defaults follow the spec's CPU profile (section 3.3): M^l = 12, M^t = 20, a 3 x 3 budget grid
    per distinct cluster, 30 s per option ILP. ``correction``: the corrected memory rows (10c) at
    the "top" level only (the paper), at "all" levels, or "off". ``integral_memory`` None follows
    the backend (integers where it takes no continuous columns). ``leaf``: the formulation solving the option
    grid of clusters without child clusters, "hilp" or "checkmate"/"moccasin"/"monet" (on its own backend, or
    "NAME/BACKEND"); clusters with children are always H-ILP.
    """

    integral_memory: bool | None = None
    cost_precision: float = DEFAULT_PRECISION
    loss_once: bool = True
    save: int | None = None  # bytes: cap on memory in the loss stage (cluster subproblems)
    correction: str = "top"
    partition: Any = "auto"
    flat_max_nodes: int = 100  # partition="auto": graphs of at most this many nodes are solved flat
    max_leaf: int = 12
    max_top: int = 20
    alpha: float = 0.5
    identical: str = "shape"  # clusters equal up to costs share options (costs re-summed per member); or "exact"
    nb_peak: int = 3
    nb_save: int = 3
    max_options: int = 100
    level_time_limit: float = 30.0
    options_time_limit: float | None = None  # all option ILPs together (None: a share of the total limit)
    warm: bool = True  # hierarchical: a FastSA warm start when the given one does not fit
    order: tuple[int, ...] | None = None  # flat model: its stage order (default the input order; a warm start's)
    leaf: str = "hilp"  # the formulation ("NAME[/BACKEND]") solving leaf clusters' option grids (leaves.py)

    def validated(self) -> HilpOptions:
        """Self with a ``partition`` mapping folded into the fields, after range checks."""
        value = self
        if isinstance(self.partition, Mapping):
            unknown = sorted(set(self.partition) - set(PARTITION_KEYS))
            if unknown:
                raise ConfigurationError(f"unknown hilp partition key(s) {unknown}; known: {list(PARTITION_KEYS)}")
            check_option_types(HilpOptions, self.partition, "hilp partition")
            value = replace(self, partition=True, **dict(self.partition))
        elif self.partition not in (True, False, None, "auto"):
            raise ConfigurationError(f"hilp partition must be true, false, auto or a mapping, got {self.partition!r}")
        if value.correction not in CORRECTIONS:
            choices = ", ".join(CORRECTIONS)
            raise ConfigurationError(f"hilp correction must be one of {choices}, got {value.correction!r}")
        if value.identical not in ("exact", "shape"):
            raise ConfigurationError(f"hilp identical must be 'exact' or 'shape', got {value.identical!r}")
        if (
            min(value.max_top, value.nb_peak, value.nb_save, value.max_options) < 1
            or value.max_leaf < 2
            or value.flat_max_nodes < 0
        ):
            raise ConfigurationError(
                "hilp needs max_leaf >= 2, max_top >= 1, nb_peak >= 1, nb_save >= 1, max_options >= 1, "
                "flat_max_nodes >= 0"
            )
        leaf_spec(value.leaf)
        if not 0.0 < value.cost_precision < 1.0:
            raise ConfigurationError(f"hilp cost_precision must lie in (0, 1), got {value.cost_precision}")
        check_time_limit(value.level_time_limit, "hilp level_time_limit")
        check_time_limit(value.options_time_limit, "hilp options_time_limit")
        return value

    def hierarchical(self, nodes: int) -> bool:
        """Whether the solve of a graph of ``nodes`` nodes partitions it (False: one flat model)."""
        return nodes > self.flat_max_nodes if self.partition == "auto" else bool(self.partition)

    @classmethod
    def of(cls, options: HilpOptions | Mapping[str, Any] | None) -> HilpOptions:
        """From an instance, a mapping of field names or None; unknown names are errors."""
        return options_of(cls, options, "hilp")


def leaf_spec(spec: object) -> tuple[str, str | None]:
    """(formulation, backend or None: the formulation's own) of a ``leaf`` option "NAME[/BACKEND]"."""
    name, _, backend = spec.partition("/") if isinstance(spec, str) else (None, "", "")
    bad_backend = bool(backend) and (name == "hilp" or backend.partition(":")[0] not in backend_names())
    if name not in leaf_formulations() or bad_backend:
        raise ConfigurationError(
            f"hilp leaf must be one of {', '.join(leaf_formulations())}, the others optionally /BACKEND "
            f"({', '.join(backend_names())}), got {spec!r}"
        )
    return name, backend or None


def option_names() -> list[str]:
    """Every hilp option name."""
    return [f.name for f in fields(HilpOptions)]
