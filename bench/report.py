"""Tables the benchmark parts print (Markdown, so they paste into docs/performance.md) and the machine line."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([cell if isinstance(cell, str) else fmt(cell) for cell in cells])

    def render(self) -> str:
        widths = [max(len(self.columns[i]), *(len(r[i]) for r in self.rows)) if self.rows else len(self.columns[i])
                  for i in range(len(self.columns))]

        def line(cells: list[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        out = [f"### {self.title}", "", line(self.columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        out += [line(r) for r in self.rows]
        out += [""] + [f"- {n}" for n in self.notes] if self.notes else []
        return "\n".join(out) + "\n"


def fmt(value: object) -> str:
    if isinstance(value, float):
        if value != value:
            return "n/a"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model}), Linux {platform.release()}, "
            f"Python {sys.version.split()[0]}")


def print_tables(tables: list[Table], notes: Sequence[str] = ()) -> None:
    """Each table, then each note as a "- " line (the machine, how the run was made)."""
    for table in tables:
        print(table.render(), flush=True)
    for note in notes:
        print(f"- {note}", flush=True)
