"""Does every method hold ``--time-limit``? Wall time and peak RSS of ``remat solve`` per method and graph.

Usage:
  python benchmarks/time_limits.py [--graphs G1,G2] [--methods M1,M2] [--limit 30] [--budget 50%]

A graph is a JSON path or ``transformer:L`` (the generator's decoder, about 24 L nodes). A method is a
heuristic name (``fastsa``, ``auto`` ...), ``FORMULATION/BACKEND`` (``checkmate/highs``) or
``checkmate/lp-rounding``; ``all`` is every heuristic, ``auto``, every formulation family on every
registered backend and ``checkmate/lp-rounding``. The baselines take no time limit and run without one. Each run is one
``remat solve ... --time-limit LIMIT -o schedule.json`` process, timed from its start to its exit
(interpreter start, graph read, warm start, build, solve and decode included); its peak RSS comes
from ``wait4``. A run holds its limit when it exits within ``1.1 * LIMIT + 2`` seconds; one that has
not exited by ``3 * LIMIT + 60`` seconds is killed. The schedule written is simulated here (peak
against the budget, TDI); "status" is the plan's status, then the solver's (``within_budget/optimal``),
or ``exit N`` with the last stderr line; "method s" is ``wall_time_s`` of the file written: the plan's time
for a heuristic or ``auto``, the formulation solve's (build, solve, decode, no warm start) for a formulation
(its details overwrite the plan's); never the interpreter start or the graph read. Nothing is asserted; the
table is printed as Markdown.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ZOO = Path(__file__).parent / "zoo"
DEFAULT_GRAPHS = f"{ZOO / 'zoo_gpt2.json'},{ZOO / 'zoo_resnet.json'},transformer:400"
DEFAULT_METHODS = (
    "chen-greedy,ap-greedy,linearized-greedy,griewank,fastsa,auto,checkmate/highs,checkmate/cpsat,"
    "checkmate/lp-rounding,moccasin/cpsat,moccasin/highs,hilp/highs,monet/highs"
)


FAMILIES = ("checkmate", "moccasin", "hilp", "monet")


def expand_methods(spec: str) -> list[str]:
    """The methods named in ``spec`` (comma-separated; ``all``: see the module docstring)."""
    if spec != "all":
        return spec.split(",")
    from remat_models.backends.registry import names
    from remat_models.heuristics.registry import HEURISTICS

    solved = [f"{family}/{backend}" for family in FAMILIES for backend in names()]
    return [*HEURISTICS, "auto", *solved, "checkmate/lp-rounding"]


def graph_path(spec: str, workdir: Path) -> Path:
    """A JSON file for ``spec``: the path itself, or a generated transformer written to ``workdir``."""
    family, _, size = spec.partition(":")
    if family != "transformer":
        return Path(spec)
    from remat_models.io import write_graph
    from remat_models.io.generators import transformer

    path = workdir / f"transformer_{size}.json"
    if not path.exists():
        write_graph(transformer(int(size)), path)
    return path


def solve_args(method: str, limit: float) -> list[str]:
    """``remat solve`` flags selecting ``method`` (with the time limit where the method takes one)."""
    if method == "auto":
        return ["-m", method, "--time-limit", str(limit)]
    if "/" not in method:
        from remat_models.heuristics.registry import HEURISTICS

        timed = HEURISTICS[method].configurable  # the baselines take no time limit (they run in seconds)
        return ["-m", method, *(["--time-limit", str(limit)] if timed else [])]
    formulation, _, second = method.partition("/")
    flag = "--approx" if second == "lp-rounding" else "--backend"
    return ["-f", formulation, flag, second, "--time-limit", str(limit)]


def run(graph: Path, method: str, budget: str, limit: float, out: Path) -> tuple[float, int, int, str]:
    """(wall seconds, exit status, peak RSS KiB, last stderr line) of one ``remat solve`` (killed at 3 limit + 60 s)."""
    command = [sys.executable, "-m", "remat_models.cli.app", "solve", str(graph), "-b", budget]
    command += solve_args(method, limit)
    command += ["-o", str(out)]
    started = time.perf_counter()
    errors = out.with_suffix(".stderr")
    with errors.open("w") as sink:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sink, start_new_session=True)
    deadline = started + 3 * limit + 60
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            lines = errors.read_text().strip().splitlines() or [""]
            return time.perf_counter() - started, os.waitstatus_to_exitcode(status), usage.ru_maxrss, lines[-1].strip()
        if time.perf_counter() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
        time.sleep(0.05)


def outcome(graph: Path, schedule: Path, budget: str) -> tuple[str, str, str]:
    """(status, method seconds, ``fits, TDI x %`` / ``over budget`` / ``no schedule``) for the schedule written."""
    if not schedule.exists():
        return "no_schedule", "-", "no schedule"
    import json

    from remat_models.core.budget import parse_budget
    from remat_models.core.schedule import simulate
    from remat_models.io import read_graph, read_schedule

    metadata = json.loads(schedule.read_text()).get("metadata", {})
    status = "/".join(str(metadata[key]) for key in ("status", "solver_status") if key in metadata)
    seconds = f"{metadata['wall_time_s']:.1f}" if isinstance(metadata.get("wall_time_s"), float) else "-"
    g = read_graph(graph)
    result = simulate(g, read_schedule(schedule, g))
    if result.peak > parse_budget(budget, g):
        return status, seconds, f"OVER BUDGET ({result.peak:,} B)"
    return status, seconds, f"fits, TDI {100 * (result.total_cost / g.cost.sum() - 1):.2f} %"


def main() -> None:
    """Run every (graph, method) once and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS)
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--limit", type=float, default=30.0)
    parser.add_argument("--budget", default="50%")
    args = parser.parse_args()
    print(f"limit {args.limit:g} s, budget {args.budget}; allowed: 1.1 x limit + 2 s = {1.1 * args.limit + 2:.1f} s\n")
    print("| graph | n | method | wall s | holds | exit | peak RSS MiB | status | method s | result |")
    print("|---|---:|---|---:|---|---:|---:|---|---:|---|")
    from remat_models.io import read_graph

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for spec in args.graphs.split(","):
            path = graph_path(spec, workdir)
            n = read_graph(path).n
            for method in expand_methods(args.methods):
                out = workdir / "schedule.json"
                out.unlink(missing_ok=True)
                wall, code, rss, last_error = run(path, method, args.budget, args.limit, out)
                holds = "yes" if wall <= 1.1 * args.limit + 2 else "**no**"
                status, seconds, result = ("-", "-", f"exit {code}: {last_error[:80]}")
                if code == 0:
                    status, seconds, result = outcome(path, out, args.budget)
                row = [path.stem, f"{n:,}", method, f"{wall:.1f}", holds, str(code), f"{rss / 1024:,.0f}"]
                row += [status, seconds, result]
                print(f"| {' | '.join(row)} |")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
