"""MONeT vs Checkmate vs Checkmate-with-implementations at 90/80/70 % (the table of docs/monet.md).

Graphs: the shared Checkmate graphs (no implementations: MONeT must equal Checkmate) and the example
training graphs with a synthetic implementation table (``synthetic_impls``): an in-place variant
(cost x1.1) of every forward node that is the only reader of an equally sized forward input, and a
"fast algorithm" variant (cost x0.6, workspace = its output bytes) of the costlier half of the
forward nodes. Methods, all on HiGHS, all re-simulated: checkmate (default view),
checkmate + greedy implementations (MONeT's "Checkmate-O"), checkmate-impls, monet with every
implementation, monet without implementations (tags = {}).

    .venv/bin/python benchmarks/monet_table.py [--time-limit 300] [--graphs cm1,unet] > rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from remat_models.core.budget import parse_budget
from remat_models.core.graph import Graph, NodeKind
from remat_models.core.impls import Impl, with_impls
from remat_models.io import read_graph
from remat_models.planning.plan import plan

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "graphs"
GRAPHS = {
    "cm1": SHARED / "cm1_fcn8_vgg_train.json",
    "cm2": SHARED / "cm2_resnet50_train.json",
    "vgg16": SHARED / "vgg16_train.json",
    "chain32": ROOT / "examples/graphs/chain32_train.json",
    "unet": ROOT / "examples/graphs/unet_train.json",
    "transformer2": ROOT / "examples/graphs/transformer2_train.json",
}
SYNTHETIC = {"chain32", "unet", "transformer2"}
METHODS = {
    "checkmate": {"formulation": "checkmate", "impls": False},
    "checkmate+greedy": {"formulation": "checkmate", "impls": True},
    "checkmate-impls": {"formulation": "checkmate-impls"},
    "monet": {"formulation": "monet"},
    "monet-noimpl": {"formulation": "monet", "options": {"tags": []}},
}


def synthetic_impls(graph: Graph) -> Graph:
    """``graph`` with the synthetic implementation table described in the module docstring."""
    forward = [v for v in range(graph.n) if graph.kind[v] in (NodeKind.FORWARD, NodeKind.LOSS)]
    is_forward = np.zeros(graph.n, dtype=bool)
    is_forward[forward] = True
    threshold = float(np.median(graph.cost[forward]))
    impls: dict[int, list[Impl]] = {}
    for v in forward:
        cost = float(graph.cost[v])
        options = [Impl("default", cost, int(graph.workspace[v]))]
        preds = [int(u) for u in graph.preds(v) if is_forward[u]]
        if len(preds) == 1:
            u = preds[0]
            readers = [int(w) for w in graph.succs(u) if is_forward[w]]
            if readers == [v] and graph.mem[u] == graph.mem[v] and u not in set(graph.outputs.tolist()):
                options.append(Impl("inplace", cost * 1.1, int(graph.workspace[v]), inplace_of=u, tag="inplace"))
        if cost > threshold:
            options.append(Impl("fast", cost * 0.6, int(graph.workspace[v] + graph.mem[v]), tag="conv_algo"))
        if len(options) > 1:
            impls[v] = options
    return with_impls(graph, impls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--fractions", default="0.9,0.8,0.7")
    args = parser.parse_args()
    for key in args.graphs.split(","):
        graph = read_graph(GRAPHS[key])
        if key in SYNTHETIC:
            graph = synthetic_impls(graph)
        for fraction in args.fractions.split(","):
            budget = parse_budget(fraction, graph)
            for name in args.methods.split(","):
                spec = dict(METHODS[name])
                if name == "checkmate-impls" and graph.impl_table is None:
                    continue  # equals checkmate on a graph without implementations
                started = time.perf_counter()
                row = {"graph": key, "fraction": fraction, "budget": budget, "method": name}
                try:
                    result = plan(graph, budget, time_limit=args.time_limit, allow_over_budget=True, **spec)
                except Exception as error:  # a row per failure, the sweep goes on
                    row["error"] = f"{type(error).__name__}: {error}"[:300]
                else:
                    sim = result.simulation
                    row.update(
                        status=result.status.value,
                        solver_status=result.details.get("solver_status"),
                        total_cost=None if sim is None else sim.total_cost,
                        tdi=None if sim is None else round(sim.tdi, 4),
                        peak=None if sim is None else sim.peak,
                    )
                row["wall_s"] = round(time.perf_counter() - started, 2)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
