"""H-ILP (hierarchical) against flat Checkmate, Moccasin and FastSA on generated transformers and benchmark graphs.

Usage:
  python benchmarks/hilp_bench.py [--graphs transformer:2,transformer:8,cm1_fcn8_vgg_train,...]
                                  [--methods hilp/highs,checkmate/highs,moccasin/cpsat,fastsa]
                                  [--budget 0.6] [--time-limit 120] [--flat-max-nodes 400]
                                  [--hilp-options partition=true] [--leaf hilp,checkmate,moccasin,monet]
                                  [--out results.jsonl]

A graph is ``transformer:L`` (the generator's decoder with L layers, seed 0), ``zoo:NAME`` (the traced
``benchmarks/zoo/zoo_NAME.json``), ``example:NAME`` (``examples/graphs/NAME.json``), ``cnn:NAME``
(``benchmarks/cnn/NAME.json``, from ``benchmarks/cnn_graphs.py``) or a benchmark graph
name (read from ``../shared/graphs``). ``--budget`` takes one or more fractions (comma-separated)
of the graph's input-order peak. Every run goes through ``planner.plan`` with the same time limit;
its schedule is re-simulated. Flat exact formulations are skipped (and said so) on graphs larger than
``--flat-max-nodes`` (their staged models grow as n^2 cells). One JSON line per run is appended to
``--out``; a markdown table is printed at the end. ``--leaf`` runs every hilp method once per leaf
formulation (the ``leaf`` option: who solves the leaf clusters' option grids). Nothing is timed in the
test suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import product
from pathlib import Path

from remat_models.core.schedule import input_order_peak
from remat_models.errors import RematError
from remat_models.heuristics.warmup import compile_kernels
from remat_models.io import read_graph
from remat_models.io.generators import transformer
from remat_models.planning.plan import plan

DEFAULT_GRAPHS = "transformer:2,transformer:4,transformer:8,transformer:24,transformer:48,cm1_fcn8_vgg_train"
DEFAULT_METHODS = "hilp/highs,checkmate/highs,moccasin/cpsat,fastsa"
TIMED = ("fastsa", "auto")  # the heuristic methods that take a time limit
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "graphs"


def build_graph(spec: str):
    """The graph named by ``spec`` (see the module docstring)."""
    family, _, size = spec.partition(":")
    if family == "transformer":
        return transformer(int(size))
    if family == "zoo":
        return read_graph(ROOT / "benchmarks" / "zoo" / f"zoo_{size}.json")
    if family == "example":
        return read_graph(ROOT / "examples" / "graphs" / f"{size}.json")
    if family == "cnn":  # benchmarks/cnn_graphs.py
        return read_graph(ROOT / "benchmarks" / "cnn" / f"{size}.json")
    return read_graph(SHARED / f"{spec}.json")


def run(graph, budget: int, method: str, time_limit: float, hilp_options: dict) -> dict:
    """One plan() call: status, cost, TDI, peak, wall time and hilp's ILP numbers."""
    formulation, _, backend = method.partition("/")
    started = time.perf_counter()
    try:
        if formulation in ("hilp", "checkmate", "moccasin"):
            options = hilp_options if formulation == "hilp" else None
            result = plan(
                graph,
                budget,
                formulation=formulation,
                backend=backend or None,
                options=options,
                time_limit=time_limit,
                allow_over_budget=True,
            )
        else:  # a heuristic: only the timed ones take the limit
            result = plan(
                graph, budget, method, time_limit=time_limit if method in TIMED else None, allow_over_budget=True
            )
    except RematError as error:
        return {"status": f"error: {type(error).__name__}: {error}", "wall_s": time.perf_counter() - started}
    if result.interrupted_by is not None:  # SIGINT/SIGTERM: stop the whole sweep, not just this run
        raise SystemExit(128 + result.interrupted_by)
    sim = result.simulation
    details = result.details or {}
    return {
        "status": result.status.value,
        "cost": None if sim is None else sim.total_cost,
        "tdi": None if sim is None else sim.tdi,
        "peak": None if sim is None else sim.peak,
        "fits": None if sim is None else bool(sim.peak <= budget),
        "wall_s": time.perf_counter() - started,
        "solver_status": details.get("solver_status"),
        "ilps": details.get("ilps"),
        "leaf_solves": details.get("leaf_solves"),
        "depth": details.get("depth"),
        "gap": details.get("gap"),
        "top_cost": details.get("top_cost"),
        "refined": details.get("refined"),
        "returned_warm_start": bool(details.get("returned_warm_start")),
        "reason": details.get("reason"),
    }


def _value(text: str):
    """A ``k=v`` value: JSON (``true``, ``30``) or else the string itself (``shape``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS)
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--budget", default="0.6", help="fractions of the input-order peak, comma-separated")
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--flat-max-nodes", type=int, default=400)
    parser.add_argument("--hilp-options", default="", help="k=v,... passed to hilp (JSON values: partition=true)")
    parser.add_argument("--leaf", default="", help="leaf formulations for hilp methods, comma-separated")
    parser.add_argument("--out", type=Path, default=Path("hilp_bench.jsonl"))
    args = parser.parse_args(argv)
    hilp_options = {k: _value(v) for k, v in (kv.split("=", 1) for kv in args.hilp_options.split(",") if kv)}
    leaves = [leaf for leaf in args.leaf.split(",") if leaf] or [""]
    compile_kernels()  # numba's kernels compiled or loaded before the first timed run (warm starts use them)
    rows = []
    for spec in args.graphs.split(","):
        graph = build_graph(spec)
        for fraction, method, leaf in product(args.budget.split(","), args.methods.split(","), leaves):
            if leaf and not method.startswith("hilp"):
                if leaf != leaves[0]:
                    continue
                leaf = ""
            budget = int(input_order_peak(graph) * float(fraction))
            flat = method.split("/")[0] in ("checkmate", "moccasin")
            if flat and graph.n > args.flat_max_nodes:
                record = {"status": f"not run (n = {graph.n} > {args.flat_max_nodes})"}
            else:
                options = {**hilp_options, "leaf": leaf} if leaf else hilp_options
                record = run(graph, budget, method, args.time_limit, options)
            record.update(
                graph=spec,
                n=graph.n,
                fraction=float(fraction),
                budget=budget,
                method=method + (f"[leaf={leaf}]" if leaf else ""),
                time_limit=args.time_limit,
            )
            rows.append(record)
            with args.out.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(json.dumps(record), file=sys.stderr, flush=True)
    print("| graph | n | budget | method | status | TDI % | fits | time (s) | ILPs | leaf solves |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tdi = "" if r.get("tdi") is None else f"{r['tdi']:.2f}"
        wall = "" if r.get("wall_s") is None else f"{r['wall_s']:.1f}"
        status = r["status"] + (f" ({r['solver_status']})" if r.get("solver_status") else "")
        print(
            f"| {r['graph']} | {r['n']} | {r['fraction']:.0%} | {r['method']} | {status} | {tdi} | "
            f"{r.get('fits', '')} | {wall} | "
            f"{r.get('ilps') or ''} | {r.get('leaf_solves') or ''} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
