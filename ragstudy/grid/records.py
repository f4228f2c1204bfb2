"""The record types of the study's files and the strict CSV reader, at the bottom of the core: the modules that
match evidence, rank and score (ragstudy.scoring.evidence, ragstudy.lexical, ragstudy.scoring.budget_metrics) and
ragstudy.results, which names and writes the files, all read them from here."""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Sequence

from ragstudy.errors import StudyInputError
from ragstudy.io import read_user_text

logger = logging.getLogger(__name__)

_DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab"}  # the separators a header may use -> their names


def normalize_ws(text: str) -> str:
    """Collapse runs of whitespace: how question texts are compared across files."""
    return " ".join(str(text).split())


def short(text: str, limit: int = 80) -> str:
    text = normalize_ws(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class TextTable:
    """One column of a CSV: its cells and the 1-based file line each cell starts on (for messages)."""

    path: Path
    column: str
    values: tuple[str, ...]
    lines: tuple[int, ...]


# what a CSV that is not UTF-8 (almost always one saved by Excel in Windows-1252) should become
CSV_ENCODING_ADVICE = ("a file saved by Excel as Windows-1252? Save it as 'CSV UTF-8', or convert it: iconv -f "
                       "WINDOWS-1252 -t UTF-8 in.csv > out.csv")


def read_csv_text(path: Path) -> str:
    """The text of a user's CSV (ragstudy.io.decode_user_text), or an error that says how to convert it."""
    return read_user_text(path, CSV_ENCODING_ADVICE, "CSV file")


def _delimiter(header: str, path: Path) -> str:
    """The separator used by the header line: the one of `,` `;` tab it contains (outside quotes)."""
    unquoted = re.sub(r'"[^"]*(?:"|$)', "", header)  # a quoted span (to the next quote, or the end) is one cell
    found = [d for d in _DELIMITERS if d in unquoted]
    if len(found) > 1:
        raise StudyInputError(f"{path} line 1: the header mixes separators "
                              f"({', '.join(_DELIMITERS[d] for d in found)}); use one (comma, semicolon or tab)")
    if found and found[0] != ",":
        logger.info("%s: read as %s-separated (from its header)", path, _DELIMITERS[found[0]])
    return found[0] if found else ","


@dataclass(frozen=True)
class StrictCsv:
    """A CSV read strictly: its header, its rows (as many fields each) and the 1-based file line each starts on."""

    path: Path
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    lines: tuple[int, ...]

    def records(self) -> list[tuple[int, dict[str, str]]]:
        return [(line, dict(zip(self.header, row))) for row, line in zip(self.rows, self.lines)]


def _comma_hint(row: list[str], header: list[str], column: str, delimiter: str) -> str:
    """How to quote the cell that holds an unquoted separator: the cell only, never the whole row. The split
    cell is taken to be `column`'s (the other cells are short codes in this project's files)."""
    sep = _DELIMITERS[delimiter]
    extra = len(row) - len(header)
    position = header.index(column) if column in header else len(header) - 1
    cell = delimiter.join(row[position:position + extra + 1]).strip()
    example = '"' + short(cell, 60).replace('"', '""') + '"'
    if len(header) == 1:
        return f"A cell that contains a {sep} must be quoted, e.g. {example}"
    fixed = [*row[:position], example, *row[position + extra + 1:]]
    return (f"A cell that contains a {sep} must be quoted: quote that cell only, e.g. the '{column}' cell as "
            f"{example} (the line then reads {short(delimiter.join(fixed), 100)})")


def read_strict_csv(path: str | Path, columns: Sequence[str], what: str) -> StrictCsv:
    """A UTF-8 CSV with at least `columns`, strictly: every error names the file and line (a row whose number of
    fields differs from the header's shows the cell to quote); trailing blank lines are ignored."""
    path = Path(path)
    if not path.is_file():
        raise StudyInputError(f"{path}: file not found; expected {what}")
    text = read_csv_text(path)
    if not text.strip():
        need = (f"a header '{columns[0]}' and one value per row" if len(columns) == 1
                else f"a header ({', '.join(columns)}) and rows")
        raise StudyInputError(f"{path}: the file is empty; it needs {need}")
    delimiter = _delimiter(text.splitlines()[0], path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
        rows, lines = [], []
        start = reader.line_num + 1
        for row in reader:
            rows.append(row)
            lines.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise StudyInputError(f"{path} line {reader.line_num}: not valid CSV ({exc})") from None
    header = [h.strip() for h in header]
    for column in columns:
        if column not in header:
            hint = (" The header looks separated by another character; use commas, semicolons or tabs."
                    if len(header) == 1 and any(d in header[0] for d in _DELIMITERS if d != delimiter) else "")
            fix = (f"Rename the column holding the values to '{column}'." if len(columns) == 1
                   else f"Expected {what}.")
            raise StudyInputError(f"{path}: no '{column}' column (found: {', '.join(header)}). {fix}{hint}")
    if len(set(header)) != len(header):
        raise StudyInputError(f"{path} line 1: repeated column names {header}")
    while rows and not rows[-1]:  # trailing blank lines
        rows.pop()
        lines.pop()
    for row, line in zip(rows, lines):
        if not row:
            raise StudyInputError(f"{path} line {line}: blank line between rows; delete it (rows are matched by "
                                  "position to other files)")
        if len(row) != len(header):
            fix = (". " + _comma_hint(row, header, columns[-1], delimiter) if len(row) > len(header)
                   else "; fill in the missing cells (an empty cell still needs its separator)")
            raise StudyInputError(f"{path} line {line}: {len(row)} fields but the header has {len(header)} "
                                  f"({', '.join(header)}){fix}")
    return StrictCsv(path, tuple(header), tuple(tuple(r) for r in rows), tuple(lines))


def read_text_csv(path: str | Path, column: str, what: str = "") -> TextTable:
    """The cells of `column` of a UTF-8 CSV, strictly (`read_strict_csv`); an empty cell is an error too."""
    table = read_strict_csv(path, (column,), what or f"a CSV with a '{column}' column")
    position = table.header.index(column)
    values = tuple(row[position].strip() for row in table.rows)
    empty = next((line for value, line in zip(values, table.lines) if not value), None)
    if empty is not None:
        raise StudyInputError(f"{table.path} line {empty}: empty '{column}' cell; fill it in or delete the row")
    if not values:
        raise StudyInputError(f"{table.path}: no rows under the header '{column}'")
    return TextTable(table.path, column, values, table.lines)


# ------------------------------------------------------------------------------------------------ records

@dataclass(frozen=True)
class Source:
    doc_id: str | None
    path: str | None
    page_start: int | None
    page_end: int | None


@dataclass(frozen=True)
class DatasetRow:
    """One answered question. `sources` is None for the paper's files, which did not record them."""

    question_index: int
    question: str
    answer: str
    contexts: tuple[str, ...]
    sources: tuple[Source, ...] | None
    strategy: str

    def to_record(self) -> dict[str, Any]:
        return {**asdict(self), "contexts": list(self.contexts), "sources": [asdict(s) for s in self.sources or ()]}


@dataclass(frozen=True)
class AnsweringModel:
    """The model that wrote a run's answers (ragstudy.llms.answering_model makes it), as config.json and each Dataset
    file's record in run_identity.json keep it. `name`: for readers (the served model name, `--llm-server-model`, or
    the in-process model's own); `label`: its stable name for caches and run identities (models.model_label)."""

    name: str
    label: str
    engine: str
    servers: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (URL, the names its GET /v1/models listed), in order

    def served_by(self) -> str:
        """"served by http://h:1 (its GET /v1/models lists: m, n)"; "" for an in-process model."""
        if not self.servers:
            return ""
        return "served by " + "; ".join(
            f"{url} (its GET /v1/models lists: {', '.join(names)})" if names else url for url, names in self.servers)

    def describe(self) -> str:
        words = self.name + (f" ({self.label})" if self.label != self.name else "")
        return f"{words}, {self.served_by()}" if self.servers else words

    def to_record(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "engine": self.engine,
                "servers": {url: list(names) for url, names in self.servers}}

    @classmethod
    def from_record(cls, record: Any, where: str) -> "AnsweringModel":
        """Inverse of to_record; a StudyInputError naming `where` when the record is not one."""
        servers = record.get("servers", {}) if isinstance(record, dict) else None
        if not (isinstance(record, dict) and all(isinstance(record.get(k), str) for k in ("name", "label", "engine"))
                and isinstance(servers, dict)
                and all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in servers.values())):
            raise StudyInputError(f"{where}: answering_model {short(str(record), 120)!r} is not a record of the model "
                                  "that answered ({name, label, engine, servers}); re-run `ragstudy answer` into a "
                                  "fresh --output-dir, or restore the file")
        return cls(record["name"], record["label"], record["engine"],
                   tuple((str(url), tuple(names)) for url, names in servers.items()))


@dataclass(frozen=True)
class RetrievedParent:
    """One ranked parent of one question: `score` is its best child window's Chroma distance (lower is better);
    `in_k` says whether the chain's retriever (k child windows) returns it."""

    question_index: int
    rank: int
    doc_id: str
    path: str
    page_start: int
    page_end: int
    score: float
    in_k: bool
    contents: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "in_k": int(self.in_k)}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "RetrievedParent":
        return cls(**{f.name: _FROM_CELL[f.type](row[f.name]) for f in fields(cls)})  # f.type: the annotation's text


_FROM_CELL = {"int": int, "float": float, "str": str, "bool": lambda cell: str(cell).strip().lower() in ("1", "true")}
NOT_APPLICABLE = "n/a"  # an axis a variant does not depend on (bm25 embeds nothing; paragraph reads no text layer)
VARIANT_KEYS = ("id", "strategy", "params")  # variants.csv: these, then one column per axis (ragstudy.grid.axes)


@dataclass(frozen=True)
class Variant:
    """One point of a run's grid: a strategy with its parameter overrides and one value per axis of the grid
    (ragstudy.grid.axes declares them, ragstudy.grid.variants expands them; `<out>/variants/<id>/` holds each one's run,
    `<out>/variants.csv` lists them). An axis the variant does not depend on is NOT_APPLICABLE."""

    strategy: str
    params: tuple[tuple[str, Any], ...] = ()  # the overrides of the strategy's parameters (a sweep's), sorted
    values: tuple[tuple[str, str], ...] = ()  # (axis, value) in the axes' order
    id: str = ""

    def value(self, axis: str) -> str:
        """Its value of `axis` (n/a for an axis it was made without, e.g. one declared after its run)."""
        return dict(self.values).get(axis, NOT_APPLICABLE)

    def context(self) -> tuple[str, ...]:
        """The values of every axis: what a group of compared variants shares."""
        return tuple(value for _, value in self.values)

    def params_json(self) -> str:
        return json.dumps(dict(self.params), sort_keys=True, ensure_ascii=False)

    def to_row(self) -> dict[str, str]:  # its row of variants.csv
        return {"id": self.id, "strategy": self.strategy, "params": self.params_json(), **dict(self.values)}

    @classmethod
    def from_row(cls, row: dict[str, Any], where: str) -> "Variant":
        """Inverse of to_row (every other column is an axis); a StudyInputError naming `where` for a bad cell."""
        missing = [key for key in VARIANT_KEYS if key not in row or row[key] is None]
        if missing:
            raise StudyInputError(f"{where}: no {', '.join(missing)}; re-run `ragstudy retrieve` into a fresh "
                                  "--output-dir")
        try:
            params = json.loads(row["params"] or "{}")
        except ValueError:
            params = None
        if not isinstance(params, dict):
            raise StudyInputError(f"{where}: params {row['params']!r} is not a JSON object; re-run `ragstudy "
                                  "retrieve` into a fresh --output-dir")
        values = tuple((str(key), str(value)) for key, value in row.items() if key not in VARIANT_KEYS)
        return cls(str(row["strategy"]), tuple(sorted(params.items())), values, str(row["id"]))
