"""Benchmarks: sweeps of isolated runs (local pool or Dask), JSONL results, tables against published numbers, plots.

Sits on top of the library: nothing in ``remat_models`` imports this package.
"""

from remat_models.bench.methods import MethodSpec, method_from_mapping, parse_method
from remat_models.bench.pools import DaskPool, LocalPool, make_pool, run_sweep
from remat_models.bench.report import build_tables, write_report
from remat_models.bench.store import ResultStore, read_records
from remat_models.bench.sweep import RunSpec, Sweep, expand, load_sweep, sweep_from_mapping, sweep_from_options

__all__ = [
    "DaskPool",
    "LocalPool",
    "MethodSpec",
    "ResultStore",
    "RunSpec",
    "Sweep",
    "build_tables",
    "expand",
    "load_sweep",
    "make_pool",
    "method_from_mapping",
    "parse_method",
    "read_records",
    "run_sweep",
    "sweep_from_mapping",
    "sweep_from_options",
    "write_report",
]
