"""Maximum batch size per method and baseline (Checkmate Fig. 6 procedure) on the shared graphs and example models.

Usage: python benchmarks/maxbatch_table.py [--graphs cm1,vgg16,cm2] [--models mlp,resnet]
       [--memory 16GB] [--model-memory 256MB] [--time-limit 300] [--fastsa-time 60] [--only LABELS]
       > rows.jsonl
       python benchmarks/maxbatch_table.py --table rows.jsonl [more.jsonl]   # markdown, one column per graph

Shared graphs are read from $REMAT_SHARED/graphs (default ../shared/graphs) with their file batches
(cm1 32, cm2 / vgg16 256) and no fixed memory; example models come from examples/models.py through
``remat_models.torch.batch_scaling`` (extracted at batches 2 and 4, checked at 8). Each row is one
method; every schedule is re-simulated at its batch (peak <= memory, cost <= one extra forward pass).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from remat_models.core.batch import BatchScaling
from remat_models.core.budget import parse_size
from remat_models.core.graph import Graph
from remat_models.errors import RematError
from remat_models.io import read_graph
from remat_models.planning.maxbatch import max_batch

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("REMAT_SHARED", ROOT.parent / "shared"))
FILES = {
    "cm1": ("cm1_fcn8_vgg_train.json", 32),
    "cm2": ("cm2_resnet50_train.json", 256),
    "vgg16": ("vgg16_train.json", 256),
}
BASELINES = ("checkpoint-all", "chen-sqrtn", "chen-greedy", "griewank", "fastsa")
EXACT = (  # (label, formulation, backend, method, warm start)
    ("checkmate min-peak", "checkmate", "highs", "min-peak", None),
    ("checkmate product", "checkmate", "cpsat", "product", None),
    ("moccasin min-peak", "moccasin", "cpsat", "min-peak", None),
    ("checkmate bisection", "checkmate", "highs", "bisection", None),
    ("checkmate min-peak from chen-greedy", "checkmate", "highs", "min-peak", "chen-greedy"),
    ("checkmate bisection from chen-greedy", "checkmate", "highs", "bisection", "chen-greedy"),
)


def shared_graph(key: str) -> Graph:
    """A shared benchmark graph carrying its proportional batch scaling."""
    file, batch = FILES[key]
    raw = read_graph(SHARED / "graphs" / file)
    return BatchScaling.proportional(raw, batch).attach(raw)


def model_graph(name: str) -> Graph:
    """An example model's training graph carrying the affine scaling fitted on batches 2 and 4 (checked at 8)."""
    from remat_models.torch.maxbatch import batch_scaling

    spec = importlib.util.spec_from_file_location("remat_example_models", ROOT / "examples" / "models.py")
    assert spec is not None and spec.loader is not None
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    build = models.EXAMPLES[name]
    model, _, _, loss_fn = build(batch=2)

    def make_inputs(batch: int) -> tuple[Any, Any]:
        example = build(batch=batch)
        return example[1], example[2]

    return batch_scaling(model, make_inputs, loss_fn)


def rows_for(
    graph: Graph, label: str, memory: int, time_limit: float, fastsa_time: float, only: set[str]
) -> list[dict[str, Any]]:
    """One row per baseline and exact method (those named in ``only`` when it is not empty)."""
    runs: list[tuple[str, Callable[[], Any]]] = []
    for name in BASELINES:
        if only and name not in only:
            continue
        limit = fastsa_time if name == "fastsa" else None
        runs.append((name, lambda name=name, limit=limit: max_batch(graph, memory, heuristic=name, time_limit=limit)))
    for name, formulation, backend, method, init in EXACT:
        if only and name not in only:
            continue
        runs.append(
            (
                f"{name} ({backend})",
                lambda f=formulation, b=backend, m=method, i=init: max_batch(
                    graph, memory, formulation=f, backend=b, method=m, time_limit=time_limit, init=i
                ),
            )
        )
    rows = []
    for name, run in runs:
        started = time.perf_counter()
        try:
            result = run()
            summary = result.summary()
            row = {key: summary[key] for key in ("batch", "upper_bound", "status", "peak", "total_cost", "cap")}
            row.update(
                checkpoint_all=result.lower_limit, lower_bound_limit=result.upper_limit, probes=len(result.probes)
            )
        except RematError as error:
            row = {"error": f"{type(error).__name__}: {error}"}
        row.update(graph=label, method=name, memory=memory, wall_s=round(time.perf_counter() - started, 1))
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """One line per method, one column per graph: the batch, with the proven bound where it differs."""
    graphs = list(dict.fromkeys(row["graph"] for row in rows))
    methods = list(dict.fromkeys(row["method"] for row in rows))
    cell = {(row["graph"], row["method"]): row for row in rows}

    def show(row: dict[str, Any] | None) -> str:
        if row is None:
            return ""
        if "error" in row:
            return "n/a"
        bound = row["upper_bound"]
        text = f"{row['batch']:,}" + (f" (<= {bound:,})" if bound is not None and bound != row["batch"] else "")
        return f"{text} [{row['wall_s']:.0f} s]" if row["wall_s"] >= 1 else text

    lines = ["| method | " + " | ".join(graphs) + " |", "|---|" + "---|" * len(graphs)]
    for method in methods:
        lines.append(f"| {method} | " + " | ".join(show(cell.get((g, method))) for g in graphs) + " |")
    for label, key in (("checkpoint-all batch", "checkpoint_all"), ("lower-bound limit", "lower_bound_limit")):
        values = [next((f"{r[key]:,}" for r in rows if r["graph"] == g and key in r), "") for g in graphs]
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default="vgg16,cm1,cm2")
    parser.add_argument("--models", default="mlp,resnet,unet,gpt2")
    parser.add_argument("--memory", default="16GB")
    parser.add_argument("--model-memory", default="256MB")
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds per exact method")
    parser.add_argument("--fastsa-time", type=float, default=60.0, help="seconds for FastSA's whole bisection")
    parser.add_argument("--out", type=Path, default=None, help="append rows as JSON lines")
    parser.add_argument("--only", default="", help="comma-separated method labels to run (default: all)")
    parser.add_argument("--table", type=Path, nargs="*", help="print the markdown table of JSONL files; run nothing")
    args = parser.parse_args()
    if args.table:
        print(markdown([json.loads(line) for path in args.table for line in path.read_text().splitlines() if line]))
        return
    only = set(filter(None, args.only.split(",")))
    rows = []
    for key in filter(None, args.graphs.split(",")):
        memory = parse_size(args.memory)
        rows += rows_for(shared_graph(key), key, memory, args.time_limit, args.fastsa_time, only)
    for name in filter(None, args.models.split(",")):
        memory = parse_size(args.model_memory)
        rows += rows_for(model_graph(name), name, memory, args.time_limit, args.fastsa_time, only)
    if args.out is not None:
        with args.out.open("a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
