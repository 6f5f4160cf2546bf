"""FastSA (Imanishi et al., NeurIPS 2023): simulated annealing over a slot sequence with a segment tree."""

from remat_models.heuristics.fastsa.solver import (
    OBJECTIVES,
    PAPER_ITERATIONS,
    FastSAOptions,
    FastSAResult,
    StageReport,
    TrajectoryPoint,
    fastsa,
    fastsa_schedule,
    warmup,
)

__all__ = [
    "OBJECTIVES",
    "PAPER_ITERATIONS",
    "FastSAOptions",
    "FastSAResult",
    "StageReport",
    "TrajectoryPoint",
    "fastsa",
    "fastsa_schedule",
    "warmup",
]
