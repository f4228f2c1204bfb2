"""The blinded review workbook and its answer key: ``output.xlsx`` (one row per question: the question, the oracle
answer and each strategy's answer as "Opzione 1..k" in a per-question order), ``answer_key.csv`` (which strategy is
behind each option; NOT for raters) and the empty raters' sheet ``interview_answers.xlsx``.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from Postprocessing import common
from Postprocessing.common import DataError
from ragstudy import registry
from ragstudy.io import atomic_save
from ragstudy.results import ANSWER_KEY, REVIEW_WORKBOOK, SURVEY_TEMPLATE, Dataset
from ragstudy.workbook import set_text, write_instructions

logger = logging.getLogger(__name__)

NONE_LABEL = "Nessuna delle precedenti"
KEY_NAME = ANSWER_KEY.name
WORKBOOK_NAME = REVIEW_WORKBOOK.name
TEMPLATE_NAME = SURVEY_TEMPLATE.name
RATER_HEADER = "Valutatore"
EXCEL_CELL_LIMIT = 32_767


def option_labels(n: int) -> list[str]:
    """``["Opzione 1", ..., "Opzione n"]``."""
    return [f"Opzione {i}" for i in range(1, n + 1)]


def question_id(question_index: int) -> str:
    """The label raters see: question_index 0 → ``Q1``."""
    return f"Q{question_index + 1}"


@dataclass(frozen=True)
class KeyRow:
    """Which strategy is behind each option of one question."""

    question_id: str
    question_index: int
    question: str
    order: tuple[str, ...]  # strategy names; order[k] is "Opzione k+1"


@dataclass(frozen=True)
class AnswerKey:
    rows: tuple[KeyRow, ...]
    seed: int | None
    scheme: str

    def by_id(self) -> dict[str, KeyRow]:
        return {row.question_id: row for row in self.rows}


def balanced_orders(n_questions: int, strategies: Sequence[str], seed: int) -> list[tuple[str, ...]]:
    """One option order per question: consecutive blocks each use every permutation once, in a seeded random
    order, so each strategy sits in each position equally often (position bias balanced, not just random)."""
    perms = list(itertools.permutations(strategies))
    rng = np.random.default_rng(seed)
    orders: list[tuple[str, ...]] = []
    while len(orders) < n_questions:
        orders.extend(perms[i] for i in rng.permutation(len(perms)))
    return orders[:n_questions]


def build_key(answers: Sequence[Dataset], indices: Sequence[int], seed: int | None) -> AnswerKey:
    """The answer key: balanced shuffle with ``seed``, or the paper's fixed order when ``seed`` is None."""
    names = [a.strategy for a in answers]
    if seed is None:
        paper = [n for n in common.PAPER_SURVEY_ORDER if n in names]
        orders = [tuple(paper)] * len(indices)
        scheme = "fixed (paper order)"
    else:
        orders = balanced_orders(len(indices), names, seed)
        scheme = "balanced permutation blocks"
    questions = answers[0].by_index()
    rows = tuple(KeyRow(question_id(i), i, questions[i].question, order) for i, order in zip(indices, orders))
    return AnswerKey(rows, seed, scheme)


def key_frame(key: AnswerKey) -> pd.DataFrame:
    n = len(key.rows[0].order)
    data = {"question_id": [r.question_id for r in key.rows], "question_index": [r.question_index for r in key.rows]}
    for k, label in enumerate(option_labels(n)):
        data[label] = [r.order[k] for r in key.rows]
    data["question"] = [r.question for r in key.rows]
    data["seed"] = ["" if key.seed is None else key.seed] * len(key.rows)
    data["scheme"] = [key.scheme] * len(key.rows)
    return pd.DataFrame(data)


def read_answer_key(path: Path) -> AnswerKey:
    """Read ``answer_key.csv``; every option must name a known strategy, once per question."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"answer key {path} not found")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    labels = [c for c in frame.columns if c.startswith("Opzione ")]
    missing = {"question_id", "question_index"} - set(frame.columns)
    if missing or not labels:
        raise DataError(f"{path}: not an answer key (needs question_id, question_index, Opzione 1..k columns)")
    rows = []
    known = registry.available()
    for i, rec in frame.iterrows():
        order = tuple(rec[label] for label in labels)
        unknown = [s for s in order if s not in known]
        if unknown or len(set(order)) != len(order):
            raise DataError(f"{common.csv_row(path, int(i))}: options {order} must be distinct strategies out of "
                            f"{known}")
        rows.append(KeyRow(rec["question_id"], int(rec["question_index"]), rec.get("question", ""), order))
    seeds = set(frame["seed"]) if "seed" in frame.columns else {""}
    seed = int(next(iter(seeds))) if len(seeds) == 1 and next(iter(seeds)) != "" else None
    scheme = frame["scheme"].iloc[0] if "scheme" in frame.columns and len(frame) else "unknown"
    return AnswerKey(tuple(rows), seed, scheme)


# ---------------------------------------------------------------------------------------------- xlsx writing

def safe_cell_text(text: str, where: str) -> str:
    """Text an xlsx cell can hold: illegal control characters dropped (logged), length within Excel's limit."""
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    cleaned = ILLEGAL_CHARACTERS_RE.sub("", text)
    if cleaned != text:
        logger.warning("%s: removed %d control characters an xlsx cannot hold", where, len(text) - len(cleaned))
    if len(cleaned) > EXCEL_CELL_LIMIT:
        raise DataError(f"{where}: {len(cleaned)} characters exceed the xlsx cell limit of {EXCEL_CELL_LIMIT}")
    return cleaned


def estimated_row_height(texts: Sequence[str], widths: Sequence[float], line_points: float = 15.0) -> float:
    """Row height (points) that shows wrapped ``texts`` in columns of ``widths`` characters (Excel max 409)."""
    lines = 1
    for text, width in zip(texts, widths):
        chars = max(1, int(width * 1.1))  # ~1.1 characters of a proportional font per width unit
        n = sum(max(1, math.ceil(len(part) / chars)) for part in str(text).split("\n"))
        lines = max(lines, n)
    return min(409.0, lines * line_points + 4)


def write_review_workbook(path: Path, key: AnswerKey, oracle: Sequence[str],
                          answers: Sequence[Dataset]) -> None:
    """``output.xlsx`` for raters: instructions sheet + one row per question, no strategy names anywhere."""
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Border, Font, PatternFill, Side

    by_strategy = {a.strategy: a.by_index() for a in answers}
    labels = option_labels(len(key.rows[0].order))
    headers = ["ID", "Domanda", "Risposta attesa (oracolo)", *labels]
    widths = [6, 38, 48, *([52] * len(labels))]
    wb = Workbook()
    ws = wb.active
    ws.title = "Valutazione"
    header_font, header_fill = Font(bold=True), PatternFill("solid", fgColor="DDDDDD")
    wrap = Alignment(wrap_text=True, vertical="top")
    rule = Border(bottom=Side(style="thin", color="999999"))
    for col, (title, width) in enumerate(zip(headers, widths), start=1):
        cell = ws.cell(row=1, column=col)
        set_text(cell, title)
        cell.font, cell.fill, cell.alignment = header_font, header_fill, wrap
        ws.column_dimensions[cell.column_letter].width = width
    for r, row in enumerate(key.rows, start=2):
        texts = [row.question_id, row.question, oracle[row.question_index]]
        texts += [by_strategy[s][row.question_index].answer for s in row.order]
        for col, text in enumerate(texts, start=1):
            cell = ws.cell(row=r, column=col)
            set_text(cell, safe_cell_text(text, f"{path.name} {cell.coordinate} ({row.question_id})"))
            cell.alignment, cell.border = wrap, rule
        ws.row_dimensions[r].height = estimated_row_height(texts, widths)
    ws.freeze_panes = "C2"
    ws.page_setup.orientation = "landscape"
    ws.page_setup.fitToWidth, ws.page_setup.fitToHeight = 1, 0
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    ws.print_title_rows = "1:1"
    info = wb.create_sheet("Istruzioni")
    instructions = [
        "Istruzioni per la valutazione",
        "",
        "Per ogni domanda (foglio «Valutazione») leggete la domanda e la risposta attesa, poi le "
        f"{len(labels)} risposte proposte ({', '.join(labels)}).",
        "Scegliete l'opzione che risponde meglio alla domanda, tenendo conto della risposta attesa; se nessuna è "
        f"accettabile scegliete «{NONE_LABEL}».",
        f"Registrate le scelte nel file {TEMPLATE_NAME} (una riga per valutatore, una colonna per domanda).",
        "L'ordine delle opzioni cambia da una domanda all'altra: non cercate schemi.",
    ]
    write_instructions(info, instructions)
    atomic_save(path, wb.save)


def write_survey_template(path: Path, key: AnswerKey, n_raters: int) -> None:
    """``interview_answers.xlsx``: one column per question, one row per rater, cells limited to the options."""
    from openpyxl import Workbook
    from openpyxl.comments import Comment
    from openpyxl.styles import Alignment, Font, PatternFill
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.datavalidation import DataValidation

    choices = [*option_labels(len(key.rows[0].order)), NONE_LABEL]
    wb = Workbook()
    ws = wb.active
    ws.title = "Risposte"
    ws["A1"] = RATER_HEADER
    ws.column_dimensions["A"].width = 14
    for col, row in enumerate(key.rows, start=2):
        cell = ws.cell(row=1, column=col)
        set_text(cell, row.question_id)
        cell.comment = Comment(safe_cell_text(row.question, f"{path.name} {cell.coordinate}")[:500], "domanda")
        ws.column_dimensions[cell.column_letter].width = 24
    for cell in ws[1]:
        cell.font, cell.fill = Font(bold=True), PatternFill("solid", fgColor="DDDDDD")
        cell.alignment = Alignment(horizontal="center")
    for r in range(2, n_raters + 2):
        ws.cell(row=r, column=1, value=f"R{r - 1:02d}")
    last = f"{get_column_letter(len(key.rows) + 1)}{n_raters + 1}"
    validation = DataValidation(type="list", formula1='"' + ",".join(choices) + '"', allow_blank=True,
                                showErrorMessage=True, errorTitle="Valore non valido",
                                error="Scegliete una voce dall'elenco: " + ", ".join(choices))
    validation.add(f"B2:{last}")
    ws.add_data_validation(validation)
    ws.freeze_panes = "B2"
    atomic_save(path, wb.save)


def write_review_files(out_dir: Path, key: AnswerKey, oracle: Sequence[str], answers: Sequence[Dataset],
                       n_raters: int) -> list[Path]:
    """``output.xlsx``, ``answer_key.csv`` and ``interview_answers.xlsx`` in `out_dir`, each atomically."""
    out_dir = Path(out_dir)
    write_review_workbook(out_dir / WORKBOOK_NAME, key, oracle, answers)
    common.atomic_write_csv(out_dir / KEY_NAME, key_frame(key))
    write_survey_template(out_dir / TEMPLATE_NAME, key, n_raters)
    return [out_dir / WORKBOOK_NAME, out_dir / KEY_NAME, out_dir / TEMPLATE_NAME]
