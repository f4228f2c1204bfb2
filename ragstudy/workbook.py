"""Small openpyxl helpers shared by the workbooks people fill in (the blinded review, the make-qa review)."""

from __future__ import annotations

from collections.abc import Sequence


def set_text(cell, text: str) -> None:
    """`text` as a literal string: a value starting with "=" stays text, never a formula."""
    cell.value = text
    cell.data_type = "s"


def write_instructions(sheet, lines: Sequence[str], width: int = 110) -> None:
    """An instructions sheet: one wrapped line per row of column A, the first in bold as its title."""
    from openpyxl.styles import Alignment, Font

    sheet.column_dimensions["A"].width = width
    for row, text in enumerate(lines, start=1):
        cell = sheet.cell(row=row, column=1)
        set_text(cell, text)
        cell.alignment = Alignment(wrap_text=True, vertical="top")
    sheet["A1"].font = Font(bold=True, size=13)
