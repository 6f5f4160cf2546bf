"""Published numbers (``shared/reference/*.csv``): Moccasin Table 3, FastSA Table 1, Checkmate Table 2."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from remat_models.errors import ConfigurationError

MOCCASIN_CSV = "moccasin_table3.csv"
FASTSA_CSV = "fastsa_table1.csv"
CHECKMATE_CSV = "checkmate_table2_approx_ratios.csv"
# Checkmate Table 2 models that are among the shared graphs (file stem -> model row).
CHECKMATE_MODELS = {"vgg16_train": "VGG16"}
# Our method family -> column of Checkmate Table 2.
CHECKMATE_COLUMNS = {
    "ap_sqrtn": "ap_sqrtn",
    "ap_greedy": "ap_greedy",
    "griewank_logn": "griewank_logn",
    "checkmate_lp_rounding": "two_phase_lp_rounding",
}
_GIB = 2**30


@dataclass(frozen=True)
class Published:
    """One published result: a graph file, a budget, a method family, and what the paper printed."""

    graph: str  # the paper's name, e.g. "RL G1"
    file: str  # graph file stem
    n: int | None
    m: int | None
    budget_text: str  # as printed, e.g. "41687" / "11.3 GiB" / "90 %"
    budget_bytes: float | None  # Moccasin: bytes (or units); FastSA: None
    budget_percent: float | None  # FastSA: % of the input-order peak; Moccasin: None
    method: str  # family: checkmate_milp, checkmate_lp_rounding, moccasin, fastsa
    cost: float | None  # TDI / CI in %
    cost_text: str
    peak_text: str  # as printed (units, GiB or % of the input-order peak)
    peak_value: float | None  # in the unit of budget_bytes, or % for FastSA
    fits: bool  # a solution that meets the budget
    time_s: float | None


@dataclass(frozen=True)
class Reference:
    """All published rows found in a reference folder."""

    moccasin: tuple[Published, ...]
    fastsa: tuple[Published, ...]
    checkmate: dict[str, dict[str, float | None]]  # model -> column -> ratio


NO_REFERENCE = Reference(moccasin=(), fastsa=(), checkmate={})  # no published numbers at hand


def load_reference(folder: str | Path) -> Reference:
    """Read the three CSVs (a missing one gives an empty table; a malformed one raises ConfigurationError)."""
    base = Path(folder)
    if not base.is_dir():
        raise ConfigurationError(f"reference folder {base} does not exist")
    return Reference(
        moccasin=tuple(_moccasin(row) for row in _read(base / MOCCASIN_CSV)),
        fastsa=tuple(_fastsa(row) for row in _read(base / FASTSA_CSV)),
        checkmate={
            row["model"]: {k: _float(v) for k, v in row.items() if k != "model"} for row in _read(base / CHECKMATE_CSV)
        },
    )


def _read(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _float(text: str | None) -> float | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError as error:
        raise ConfigurationError(f"reference value {text!r} is not a number") from error


def _moccasin(row: dict[str, str]) -> Published:
    try:
        gib = row["budget_unit"].strip().lower() == "gib"
        scale = _GIB if gib else 1
        budget = float(row["budget"]) * scale
        peak = _float(row["peak_mem"])
        cost = _float(row["tdi_percent"])
        return Published(
            graph=row["graph"],
            file=Path(row["file"]).stem,
            n=int(row["n"]),
            m=int(row["m"]),
            budget_text=f"{row['budget']} GiB" if gib else f"{float(row['budget']):,.0f}",
            budget_bytes=budget,
            budget_percent=None,
            method=row["method"],
            cost=cost,
            cost_text=row["tdi_percent"],
            peak_text=(f"{row['peak_mem']} GiB" if gib else row["peak_mem"]) if peak is not None else "",
            peak_value=None if peak is None else peak * scale,
            fits=cost is not None and peak is not None and peak * scale <= budget * 1.005,  # printed precision
            time_s=_float(row["time_to_best_s"]),
        )
    except (KeyError, ValueError) as error:
        raise ConfigurationError(f"{MOCCASIN_CSV}: malformed row {row}: {error}") from error


def _fastsa(row: dict[str, str]) -> Published:
    try:
        cost = _float(row["cost_increase_percent"])
        return Published(
            graph=row["graph"],
            file=Path(row["file"]).stem,
            n=None,
            m=None,
            budget_text=f"{row['budget_percent']} %",
            budget_bytes=None,
            budget_percent=float(row["budget_percent"]),
            method=row["method"],
            cost=cost,
            cost_text=row["cost_increase_percent"],
            peak_text=row["mem_percent"],
            peak_value=_float(row["mem_percent"]),
            fits=cost is not None and row["budget_met"].strip() == "yes",
            time_s=_float(row["time_s"]),
        )
    except (KeyError, ValueError) as error:
        raise ConfigurationError(f"{FASTSA_CSV}: malformed row {row}: {error}") from error


def matches(published: Published, file: str, budget: int, reference_peak: int) -> bool:
    """Whether a published row is about graph ``file`` at ``budget`` bytes (1 % / 0.5 point tolerance)."""
    if published.file != file:
        return False
    if published.budget_bytes is not None:
        return abs(published.budget_bytes - budget) <= 0.01 * budget
    percent = 100 * budget / reference_peak if reference_peak else 0.0
    return published.budget_percent is not None and abs(published.budget_percent - percent) <= 0.5
