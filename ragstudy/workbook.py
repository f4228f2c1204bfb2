"""Small openpyxl helpers shared by the workbooks people fill in (the blinded review, the make-qa review)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError

XLSX_SUFFIXES = (".xlsx", ".xlsm")


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


def open_workbook(path: str | Path, what: str, made_by: str, **options: Any):
    """The openpyxl workbook at `path`, or one StudyInputError naming the file and the fix (never openpyxl's or
    zipfile's own error); `what` names the workbook ("review workbook"), `made_by` the command that writes it."""
    import zipfile

    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    path = Path(path)
    fix = (f"save it again as an Excel workbook (.xlsx) from the spreadsheet program (File > Save as > Excel "
           f"workbook), or start again from the one {made_by} wrote")
    if path.suffix.lower() not in XLSX_SUFFIXES:
        raise StudyInputError(f"{path}: a {path.suffix or 'suffix-less'} file, not an .xlsx {what}; {fix}")
    try:
        return load_workbook(path, **options)
    except (InvalidFileException, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise StudyInputError(f"{path}: not a readable .xlsx {what} (truncated, or another format saved under an "
                              f".xlsx name: {type(exc).__name__}: {exc}); {fix}") from None
    except (KeyError, ValueError, OSError) as exc:  # a zip without the workbook's parts, or damaged inside
        raise StudyInputError(f"{path}: a damaged .xlsx {what} ({type(exc).__name__}: {exc}); {fix}") from None
