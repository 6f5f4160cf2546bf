"""Leaf clusters' option grids point by point: H-ILP's level against Checkmate, Moccasin and MONeT (docs/hilp.md).

Usage:
  python benchmarks/hilp_leaves_bench.py [--graphs example:unet_train,zoo:bert,...] [--limit 10]
                                         [--leaf hilp,checkmate,moccasin,monet] [--hilp-options max_leaf=12]

For each graph (specs as in ``hilp_bench.py``): H-Partition with the hilp options, then for every distinct
cluster without child clusters (by canonical key) its whole (peak, save) grid (``budget_grid`` over its base
options, no early stop) solved by each leaf formulation with ``--limit`` seconds per point, through the
solver's own ``_level_point`` / ``_leaf_point``. Each schedule is split at the virtual loss and measured
(``over``: its measured local peak is above the point's peak). Prints per graph and formulation: points,
optimal, with a schedule, seconds per point (median, total), points where its option costs more than the
cheapest formulation's at that point, and ``over`` points. Nothing is timed in the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

from hilp_bench import _value, build_graph

from remat_models.backends import SolveLimits
from remat_models.core.schedule import input_order_peak
from remat_models.formulations.hilp.alternatives import base_options, measure
from remat_models.formulations.hilp.backward import backward_sets
from remat_models.formulations.hilp.graph import build_hgraph
from remat_models.formulations.hilp.partition import Cluster, h_partition
from remat_models.formulations.hilp.solver import HierarchicalSolver, _partition_options, _split, budget_grid


def leaf_grids(spec: str, leaves: list[str], limit: float, options: dict) -> dict[str, list[tuple]]:
    """Per leaf formulation: (point, status, seconds, cost or None, over) over every distinct leaf cluster's grid."""
    graph = build_graph(spec)
    solvers = {
        leaf: HierarchicalSolver(graph, input_order_peak(graph), "highs", {**options, "leaf": leaf}, SolveLimits())
        for leaf in leaves
    }
    first = solvers[leaves[0]]
    partition = h_partition(graph, _partition_options(first.opts), None)
    backward = backward_sets(graph, partition, first.owner)
    seen, rows = set(), defaultdict(list)
    for cluster in partition.clusters():
        if not backward[cluster].size or any(isinstance(m, Cluster) for m in cluster.members):
            continue
        for solver in solvers.values():
            solver.backward = backward
        lg = first._local(cluster)
        key = lg.key(first.opts.identical)
        if key in seen:
            continue
        seen.add(key)
        hg = build_hgraph(lg.graph, [], loss=lg.loss)
        for peak, saves in budget_grid(lg, base_options(lg), first.opts.nb_peak, first.opts.nb_save):
            for save in saves:
                for leaf, solver in solvers.items():
                    started = time.perf_counter()
                    if leaf == "hilp":
                        sequence = solver._level_point(hg, lg, peak, save, limit)
                    else:
                        sequence = solver._leaf_point(lg, peak, save, limit)
                    seconds = time.perf_counter() - started
                    cost, over = None, False
                    if sequence is not None:
                        fwd, bwd = _split(lg, sequence)
                        over = measure(lg, list(fwd), list(bwd)).peak > peak
                        cost = float(lg.graph.cost[[*fwd, *bwd]].sum())
                    rows[leaf].append(((key, peak, save), solver.ilp_times[-1][2], seconds, cost, over))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default="example:unet_train,example:transformer2_train,cm1_fcn8_vgg_train")
    parser.add_argument("--leaf", default="hilp,checkmate,moccasin,monet")
    parser.add_argument("--limit", type=float, default=10.0, help="seconds per grid point")
    parser.add_argument("--hilp-options", default="", help="k=v,... for the partition (max_leaf=12, ...)")
    args = parser.parse_args(argv)
    options = {k: _value(v) for k, v in (kv.split("=", 1) for kv in args.hilp_options.split(",") if kv)}
    leaves = args.leaf.split(",")
    print("| graph | leaf | points | optimal | with a schedule | s per point (median) | s (total) | costlier | over |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for spec in args.graphs.split(","):
        rows = leaf_grids(spec, leaves, args.limit, options)
        best: dict[tuple, float] = {}
        for point, _, _, cost, _ in (r for leaf in leaves for r in rows[leaf]):
            if cost is not None:
                best[point] = min(cost, best.get(point, cost))
        for leaf in leaves:
            runs = rows[leaf]
            seconds = [r[2] for r in runs]
            costlier = sum(r[3] is not None and r[3] > best[r[0]] + 1e-9 for r in runs)
            print(
                f"| {spec} | {leaf} | {len(runs)} | {sum(r[1] in ('optimal', 'optimal_in_model') for r in runs)} | "
                f"{sum(r[3] is not None for r in runs)} | {statistics.median(seconds):.3f} | {sum(seconds):.1f} | "
                f"{costlier} | {sum(r[4] for r in runs)} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
