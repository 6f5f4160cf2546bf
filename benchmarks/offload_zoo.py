"""Where offload pays: recompute-only vs keep/recompute/offload on the zoo graphs, PCIe-like and NVLink-like links.

Usage: python benchmarks/offload_zoo.py [--models bert,gpt2,llama,resnet,vit] [--fractions 0.5,0.25,0.1]
       [--extra bert:0.35,vit:0.15] [--time-limit 30] [--flops 400e12] [--out rows.jsonl] [--plot trade_off.png]
       python benchmarks/offload_zoo.py --attempts llama   # FastSA's attempts/s with and without fetch units

Costs in the zoo graphs are FLOPs, so a link of B bytes/s on a device of F FLOP/s moves B/F bytes per
cost unit (``remat solve --transfer bw=25GB/s,flops=400e12``). Per graph and budget (a fraction of the
input-order peak), each plan is ONE call with the time limit L, timed: *recompute only* is
``plan(graph, budget, "auto", time_limit=L)``; under each link (transfers overlapped with compute, one
copy stream per direction) *auto with offload* is ``plan(graph, budget, "auto", time_limit=L,
transfer=link)`` and *three-way* is ``plan(..., "three-way", time_limit=L, transfer=link)``. Every
schedule is simulated under the link's model. A row records its wall time against 1.1 L + 2 s, and an
offload row whether its overhead (TDI: compute + exposed transfers) is <= the recompute-only plan's
(or it fits where that one does not). Prints a markdown table (docs/offload.md) and draws TDI against
the budget with and without offload.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from remat_models.core.graph import Graph
from remat_models.core.schedule import (
    Compute,
    Offload,
    Prefetch,
    Schedule,
    SimulationResult,
    input_order_peak,
)
from remat_models.core.transfer import TransferModel
from remat_models.heuristics.fastsa import fastsa
from remat_models.io import read_graph
from remat_models.planning.plan import plan

ZOO = Path(__file__).resolve().parent / "zoo"
LINKS = {"PCIe-like 25 GB/s": (25e9, 1e-5), "NVLink-like 450 GB/s": (450e9, 5e-6)}  # bytes/s, seconds


def link_model(bandwidth: float, latency: float, flops: float) -> TransferModel:
    """The link in the graph's cost units (FLOPs): bytes per FLOP and FLOPs of latency, overlapped."""
    return TransferModel(out_bw=bandwidth / flops, in_bw=bandwidth / flops, out_latency=latency * flops,
                         in_latency=latency * flops, mode="overlap")  # fmt: skip


def moved_bytes(graph: Graph, schedule: Schedule) -> int:
    """Bytes copied in both directions."""
    return sum(int(graph.mem[step.node]) for step in schedule if isinstance(step, (Offload, Prefetch)))


def describe(graph: Graph, schedule: Schedule, sim: SimulationResult, budget: int, seconds: float) -> dict:
    """One plan's numbers: fit, TDI, transfers, bytes moved, exposed transfer time (% of compute)."""
    compute = float(graph.cost.sum())
    busy = float(sum(graph.cost[step.node] for step in schedule if isinstance(step, Compute)))
    return {
        "fits": sim.peak <= budget, "peak": sim.peak, "tdi": sim.tdi, "recomputations": sim.recomputations,
        "offloads": sim.offloads, "prefetches": sim.prefetches, "moved_bytes": moved_bytes(graph, schedule),
        "exposed_pct": 100 * (sim.total_cost - busy) / compute, "host_peak": sim.host_peak,
        "seconds": seconds, "total_cost": sim.total_cost,
    }  # fmt: skip


def timed(graph: Graph, budget: int, method: str, args: argparse.Namespace, **extra: object) -> dict:
    """One ``plan()`` call with the time limit: its numbers and its wall time (s), against the limit's bound."""
    started = time.perf_counter()
    result = plan(graph, budget, method, time_limit=args.time_limit, allow_over_budget=True, **extra)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    assert result.schedule is not None and result.simulation is not None
    row = describe(graph, result.schedule, result.simulation, budget, seconds)
    return {**row, "chosen": result.details.get("chosen"), "in_time": seconds <= 1.1 * args.time_limit + 2}


def no_costlier(row: dict, reference: dict) -> bool:
    """Whether ``row`` fits where ``reference`` does not, or fits as well at a TDI no higher."""
    if not row["fits"]:
        return not reference["fits"]
    return not reference["fits"] or row["tdi"] <= reference["tdi"] + 1e-9


def run(graph: Graph, fraction: float, args: argparse.Namespace) -> list[dict]:
    """Rows for one graph and budget: recompute-only auto, then per link auto with offload and three-way."""
    reference = input_order_peak(graph)
    budget = int(fraction * reference)
    base = {"graph": graph.name, "fraction": fraction, "budget": budget, "lower_bound": graph.lower_bound}
    if budget < graph.lower_bound:
        return [{**base, "plan": "any", "status": "below lower bound"}]
    recompute = timed(graph, budget, "auto", args)
    rows = [{**base, "plan": "recompute only (auto)", **recompute}]
    for name, (bandwidth, latency) in LINKS.items():
        model = link_model(bandwidth, latency, args.flops)
        for label, method in (("auto with offload", "auto"), ("three-way", "three-way")):
            row = timed(graph, budget, method, args, transfer=model)
            rows.append({**base, "plan": f"{label}, {name}", **row, "no_costlier": no_costlier(row, recompute)})
    return rows


def table(rows: list[dict]) -> str:
    """Markdown table of the rows."""
    lines = [
        "| graph | budget | plan | fits | TDI % | exposed transfer % | offloads / prefetches | moved | host peak "
        "| s | <= 1.1 L + 2 s | <= recompute only |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        head = f"| {r['graph']} | {100 * r['fraction']:.0f}% | {r['plan']} |"
        if "status" in r:
            lines.append(f"{head} {r['status']} | - | - | - | - | - | - | - | - |")
            continue
        verdict = {True: "yes", False: "**no**", None: "-"}[r.get("no_costlier")]
        in_time = "yes" if r["in_time"] else "**no**"
        lines.append(
            f"{head} {'yes' if r['fits'] else 'no'} | {r['tdi']:.2f} | {r['exposed_pct']:.2f} | "
            f"{r['offloads']} / {r['prefetches']} | {r['moved_bytes'] / 2**30:.2f} GiB | "
            f"{r['host_peak'] / 2**30:.2f} GiB | {r['seconds']:.1f} | {in_time} | {verdict} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """TDI against the budget per graph, recompute-only and with offload per link (fitting plans only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graphs = sorted({r["graph"] for r in rows})
    fig, axes = plt.subplots(1, len(graphs), figsize=(4 * len(graphs), 3.6), squeeze=False)
    for ax, name in zip(axes[0], graphs, strict=True):
        for label, style in (("recompute only (auto)", "o-"), *((f"auto with offload, {k}", "s--") for k in LINKS)):
            points = sorted((100 * r["fraction"], r["tdi"]) for r in rows
                            if r["graph"] == name and r["plan"] == label and r.get("fits"))  # fmt: skip
            if points:
                ax.plot(*zip(*points, strict=True), style, label=label, alpha=0.8)
        ax.set_title(name)
        ax.set_xlabel("budget (% of input-order peak)")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.invert_xaxis()
    axes[0][0].set_ylabel("TDI % (compute + exposed transfers)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def attempt_rates(graph: Graph, args: argparse.Namespace, seeds: int = 3) -> None:
    """Print FastSA's stage-2 attempts per second (median of ``seeds`` runs of 2M) without and with fetch units."""
    budget = int(0.25 * input_order_peak(graph))
    link = link_model(*LINKS["NVLink-like 450 GB/s"], args.flops)
    for label, extra in (("recompute only", {}), ("with fetch units", {"transfer": link})):
        rates = []
        for seed in range(seeds):
            stage = fastsa(graph, budget, seed=seed, iterations=(0, 2_000_000), prune=False, **extra).stages[1]
            rates.append(stage.iterations / stage.wall_time)
        print(
            f"{graph.name} {label}: median {statistics.median(rates):.3g} attempts/s of {[f'{r:.3g}' for r in rates]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="bert,gpt2,llama,resnet,vit")
    parser.add_argument("--fractions", default="0.5,0.25,0.1")
    parser.add_argument("--extra", default="", help="more budgets per model, e.g. bert:0.35,vit:0.15")
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds, for each plan() call")
    parser.add_argument("--flops", type=float, default=400e12, help="device FLOP/s (the graphs' cost unit per s)")
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON lines")
    parser.add_argument("--plot", type=Path, default=None, help="draw the trade-off here (png, svg)")
    parser.add_argument("--attempts", default=None, help="only measure FastSA's attempts/s on this zoo model")
    args = parser.parse_args()
    if args.attempts is not None:
        attempt_rates(read_graph(ZOO / f"zoo_{args.attempts}.json"), args)
        return
    extra: dict[str, list[float]] = {}
    for item in filter(None, args.extra.split(",")):
        model, _, fraction = item.partition(":")
        extra.setdefault(model, []).append(float(fraction))
    rows: list[dict] = []
    for model in args.models.split(","):
        graph = read_graph(ZOO / f"zoo_{model}.json")
        fractions = sorted({*(float(f) for f in args.fractions.split(",")), *extra.get(model, [])}, reverse=True)
        for fraction in fractions:
            rows += run(graph, fraction, args)
            if args.out is not None:
                args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(table(rows))
    if args.plot is not None:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
