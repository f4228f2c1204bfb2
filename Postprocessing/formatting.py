"""How the Postprocessing scripts write numbers and tables: estimates with intervals, p-values, Markdown tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def format_estimate(mean: float, low: float, high: float, digits: int = 3, signed: bool = False) -> str:
    """``0.345 [0.301, 0.390]`` (or ``+0.031 [0.012, 0.049]`` when signed)."""
    sign = "+" if signed else ""
    return f"{mean:{sign}.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def format_p(p: float) -> str:
    """``p=0.002``, ``p<0.001``."""
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> str:
    """A GitHub-flavoured Markdown table; ``align`` is one char per column ('l' or 'r')."""
    align = align or "l" * len(headers)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "| " + " | ".join(sep) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"
