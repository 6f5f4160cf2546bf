"""``remat bench report``: Markdown and CSV tables (and plots) from a results file, beside published numbers."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from remat_models.bench.cells import Record
from remat_models.bench.files import write_text_atomic
from remat_models.bench.reference import NO_REFERENCE, Reference, load_reference
from remat_models.bench.table import Table
from remat_models.bench.tables import all_runs_table, approximation_table, fastsa_table, moccasin_table
from remat_models.errors import ConfigurationError

log = logging.getLogger(__name__)

TABLE_FILES = {
    "moccasin_table3": moccasin_table,
    "fastsa_table1": fastsa_table,
    "checkmate_table2": approximation_table,
}


def build_tables(records: list[Record], reference: Reference) -> dict[str, Table]:
    """Every table by file stem: the three paper layouts and all runs."""
    tables = {stem: build(records, reference) for stem, build in TABLE_FILES.items()}
    tables["all_runs"] = all_runs_table(records)
    return tables


def environment_summary(records: list[Record]) -> str:
    """Markdown lines: machines, versions and time limits the records came from, and status counts."""
    machines = Counter(
        f"{r['machine'].get('host')}: {r['machine'].get('cpu')}, {r['machine'].get('cpus')} CPUs, "
        f"{r['machine'].get('memory_gib')} GiB"
        for r in records
        if r.get("machine")
    )
    versions = Counter(", ".join(f"{k} {v}" for k, v in r.get("versions", {}).items()) for r in records)
    limits = sorted({r.get("time_limit") for r in records if r.get("time_limit") is not None})
    statuses = Counter(r.get("status") for r in records)
    lines = [f"- runs: {len(records)} ({', '.join(f'{s} {c}' for s, c in statuses.most_common())})"]
    lines += [f"- machine: {m} ({c} runs)" for m, c in machines.most_common()]
    lines += [f"- versions: {v}" for v, _ in versions.most_common(2)]
    lines.append(f"- time limits (s): {', '.join(f'{t:g}' for t in limits)}")
    return "\n".join(lines) + "\n"


def write_report(
    records: list[Record], out_dir: str | Path, reference_dir: str | Path | None, *, plots: bool = True, title: str = ""
) -> list[Path]:
    """Write ``report.md``, one CSV per table and (with ``plots``) progress and trade-off PNG/SVG; return paths.

    ``reference_dir`` None: no published numbers at hand; the tables say "no published row" and the
    report says why.
    """
    if not records:
        raise ConfigurationError("the results file holds no complete record")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = build_tables(records, NO_REFERENCE if reference_dir is None else load_reference(reference_dir))
    written = [write_text_atomic(out / f"{stem}.csv", table.csv_text()) for stem, table in tables.items()]
    figures: list[str] = []
    if plots:
        figures = _plots(records, out, written)
    parts = [f"# {title or 'Benchmark report'}\n", environment_summary(records)]
    if reference_dir is None:
        parts.append("Published numbers: none at hand (no reference folder), so no published row is shown.\n")
    parts += [table.markdown() for table in tables.values()]
    parts += [f"![{name}]({name}.png)\n" for name in figures]
    written.insert(0, write_text_atomic(out / "report.md", "\n".join(parts)))
    return written


def _plots(records: list[Record], out: Path, written: list[Path]) -> list[str]:
    from remat_models.bench.plots import plot_progress, plot_tradeoff, require_matplotlib

    require_matplotlib()
    names = []
    for name, plot in (("progress", plot_progress), ("tradeoff", plot_tradeoff)):
        try:
            written.extend(plot(records, out / name))
            names.append(name)
        except ConfigurationError as error:  # e.g. no trajectories: the other plot may still apply
            log.info("no %s plot: %s", name, error)
    return names
