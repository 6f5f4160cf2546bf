"""A small table type rendered as Markdown (formatted) and CSV (raw numbers)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

MISSING = "–"


@dataclass(frozen=True)
class Column:
    """A header and the format spec of its numbers (e.g. ``".2f"``, ``",d"``)."""

    header: str
    fmt: str = ""


@dataclass(frozen=True)
class Table:
    """Rows of raw values under typed columns, with a title and notes."""

    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]
    notes: tuple[str, ...] = ()

    def markdown(self) -> str:
        """GitHub Markdown: title, table, notes."""
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(c.header for c in self.columns) + " |")
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        for cells in self.formatted_rows():
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        if not self.rows:
            lines.append("| " + " | ".join(["(no rows)"] + [""] * (len(self.columns) - 1)) + " |")
        lines.extend(["", *(f"{note}" for note in self.notes)] if self.notes else [])
        return "\n".join(lines) + "\n"

    def formatted_rows(self) -> list[list[str]]:
        """Every row as display strings (numbers formatted, missing values as a dash)."""
        return [[_format(v, c.fmt) for v, c in zip(row, self.columns, strict=True)] for row in self.rows]

    def csv_text(self) -> str:
        """CSV with one header line; numbers unformatted, missing values empty."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([c.header for c in self.columns])
        for row in self.rows:
            writer.writerow(["" if value is None else value for value in row])
        return buffer.getvalue()


def _format(value: Any, fmt: str) -> str:
    if value is None:
        return MISSING
    if isinstance(value, (int, float)) and not isinstance(value, bool) and fmt:
        if "d" in fmt:
            value = round(value)
        return format(value, fmt)
    return str(value)
