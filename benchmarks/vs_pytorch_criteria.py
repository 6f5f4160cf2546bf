"""Issue 33's done-when over ``vs_pytorch.py``'s rows: each criterion with its count and every miss named.

The criteria: the compile route (``ours-schedule``) measures within 1 % or 1 MiB of its prediction; it peaks at
or below the executor route (``ours-executor``) + 2 %; its step time at b = 1 is within 1.05 x PyTorch's at
b = 1; every PyTorch point has one of ours below it in both peak and time; ``ours-sac`` at b = 1 is at or below
eager's peak and never rises as the budget falls.

Times: where the run measured head-to-head pairs (:mod:`vs_pytorch_pairs`), a pair's median per-step ratio,
ours / PyTorch's, steps interleaved; else the table's cells (each system's median as a multiple of eager's
median over steps interleaved with it), compared across systems measured minutes apart.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

MIB = 2**20
PREDICTION_SHARE = 0.01
EXECUTOR_SHARE = 1.02
TIME_SHARE = 1.05
CELL_MARGIN = 0.9  # a cell's time beats another's this far below it only: cells minutes apart drifted 5-10 %


def _time(row: Any) -> float:
    return row.seconds / row.eager_seconds


def criteria(rows: Sequence[Any], pairs: Sequence[Any] = ()) -> list[str]:
    """One line per criterion (``held/checked``) and one per miss; ``pairs`` replace the cells' times they cover."""
    eager = {r.model: r for r in rows if r.system == "eager"}
    at = {(r.model, r.system, r.budget): r for r in rows if r.system != "eager"}
    lines: list[str] = []

    def check(name: str, cases: list[tuple[str, bool]]) -> None:
        lines.append(f"{name}: {sum(ok for _, ok in cases)}/{len(cases)}")
        lines.extend(f"  miss: {case}" for case, ok in cases if not ok)

    schedule = [r for r in rows if r.system == "ours-schedule" and r.predicted]
    check(
        "compile route within 1 % or 1 MiB of its prediction",
        [
            (f"{r.model} b={r.budget}: {(r.peak - r.predicted) / MIB:+.2f} MiB",
             abs(r.peak - r.predicted) <= max(PREDICTION_SHARE * r.predicted, MIB))
            for r in schedule
        ],
    )  # fmt: skip
    paired = [(r, at.get((r.model, "ours-executor", r.budget))) for r in schedule]
    check(
        "compile route at or below the executor's peak + 2 %",
        [
            (f"{r.model} b={r.budget}: {r.peak / e.peak:.3f} x", r.peak <= EXECUTOR_SHARE * e.peak)
            for r, e in paired
            if e
        ],
    )
    speed_pairs = {(p.model, p.theirs_budget, p.ours_budget): p for p in pairs if p.ours_bytes is None}
    speed = []
    for model in eager:
        mine, theirs = at.get((model, "ours-schedule", 1.0)), at.get((model, "pytorch", 1.0))
        pair = speed_pairs.get((model, 1.0, 1.0))
        if pair is not None:
            speed.append((f"{model}: {pair.ratio:.3f} x (paired)", pair.ratio <= TIME_SHARE))
        elif mine and theirs:
            ratio = _time(mine) / _time(theirs)
            speed.append((f"{model}: {ratio:.3f} x", ratio <= TIME_SHARE))
    check("time at b = 1 within 1.05 x PyTorch's", speed)
    ours = [r for r in rows if r.system.startswith("ours")]
    dominated = []
    for p in (r for r in rows if r.system == "pytorch"):
        mine = [q for q in pairs if (q.model, q.theirs_budget) == (p.model, p.budget)]
        pair = next((q for q in mine if q.dominates()), mine[0] if mine else None)
        lower = [o for o in ours if o.model == p.model and o.peak < p.peak and _time(o) <= CELL_MARGIN * _time(p)]
        if pair is not None and (pair.dominates() or not lower):
            case = f"{p.model} b={p.budget}: ours within {pair.ours()}, {pair.ours_peak / pair.theirs_peak:.3f} x "
            dominated.append((case + f"its peak at {pair.ratio:.3f} x its time (paired)", pair.dominates()))
        else:
            case = f"{p.model} b={p.budget}: {p.peak / eager[p.model].peak:.3f} x peak at {_time(p):.3f} x time"
            for o in lower[:1]:
                case += f"; {o.system} b={o.budget}: {o.peak / eager[p.model].peak:.3f} x at {_time(o):.3f} x (cells)"
            dominated.append((case, bool(lower)))
    check("PyTorch points dominated in peak and time", dominated)
    sac = {
        m: sorted((r for r in rows if r.model == m and r.system == "ours-sac"), key=lambda r: -r.budget) for m in eager
    }
    check(
        "sac at or below eager at b = 1, never rising as the budget falls",
        [
            (m, s[0].peak <= eager[m].peak and all(a.peak >= b.peak for a, b in itertools.pairwise(s)))
            for m, s in sac.items()
            if s
        ],
    )
    return lines
