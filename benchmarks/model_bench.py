"""Build a 0-1 model with 1M variables and 3M nonzeros and hand it to HiGHS and CP-SAT.

Each backend runs in its own subprocess so that peak RSS (ru_maxrss) is per backend.
Usage: python benchmarks/model_bench.py [--vars 1000000] [--nnz-per-row 3] [--solve 1.0]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from remat_models.backends.base import SolveLimits
from remat_models.model import Model


def build(n_vars: int, per_row: int, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    m = Model("bench")
    x = m.bool_block("x", n_vars)
    n_rows = n_vars
    rows = np.repeat(np.arange(n_rows), per_row)
    cols = rng.integers(0, n_vars, size=n_rows * per_row)
    m.add_rows(rows, cols, np.ones(len(cols)), -np.inf, per_row - 1)  # not all of a row's variables
    m.set_objective(x.cols.ravel(), rng.integers(1, 10, size=n_vars), sense="max")
    return m


def run_one(backend: str, n_vars: int, per_row: int, solve_s: float) -> dict:
    t0 = time.perf_counter()
    m = build(n_vars, per_row)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    if backend == "highs":
        from remat_models.backends.highs import HighsBackend
        from remat_models.backends.highs import build as highs_build

        handle = highs_build(HighsBackend().compile(m).model)
    else:
        from remat_models.backends.cpsat import CpSatBackend, _Builder

        handle = _Builder(CpSatBackend().compile(m).model)
    t_hand = time.perf_counter() - t0
    del handle
    out = {"backend": backend, "vars": m.num_cols, "nnz": m.num_nonzeros, "build_s": t_build, "handover_s": t_hand}
    if solve_s > 0:
        from remat_models.backends import get_backend

        t0 = time.perf_counter()
        res = get_backend(backend).solve(m, SolveLimits(time_limit=solve_s))
        out |= {"solve_total_s": time.perf_counter() - t0, "status": res.status.value, "objective": res.objective}
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vars", type=int, default=1_000_000)
    ap.add_argument("--nnz-per-row", type=int, default=3)
    ap.add_argument("--solve", type=float, default=0.0, help="also solve with this time limit (s)")
    ap.add_argument("--backend", help="internal: run one backend in this process")
    args = ap.parse_args()
    if args.backend:
        print(json.dumps(run_one(args.backend, args.vars, args.nnz_per_row, args.solve)))
        return
    for backend in ("highs", "cpsat"):
        cmd = [
            sys.executable,
            __file__,
            "--backend",
            backend,
            "--vars",
            str(args.vars),
            "--nnz-per-row",
            str(args.nnz_per_row),
            "--solve",
            str(args.solve),
        ]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        print(
            f"{r['backend']:6s} vars={r['vars']} nnz={r['nnz']} model build {r['build_s']:.2f}s"
            f" hand-over {r['handover_s']:.2f}s peak RSS {r['peak_rss_mib']:.0f} MiB"
            + (f" solve({args.solve}s limit) {r['solve_total_s']:.2f}s {r['status']}" if args.solve > 0 else "")
        )


if __name__ == "__main__":
    main()
