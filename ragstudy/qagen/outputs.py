"""What make-qa writes into its output folder, and reads back:

- `Questions.csv` (`questions`), `Oracle.csv` (`oracle`): the kept items, in the study's formats, same row order;
- `evidence.csv`: one row per question, the hand-written evidence format the study reads (question_index, question,
  pdf, page, boundary, evidence) plus `start_end_idx` (JSON [start, end] of the evidence in the PDF's shared text
  layer, `ragstudy.text.textlayer`; for a page-crossing item it covers the furniture between the two parts) and
  `passage_kind`;
- `make_qa.json` (SIDECAR): the generator's model, backend, prompt hash, seed and settings, the documents' sha256,
  the counts, the sha256 of the Questions.csv written, and after a review what the reviewer decided. Runs whose
  questions file has it beside them record it in config.json (`questions_generated`) and say so in their report;
- `candidates.jsonl`: every candidate (passage, raw generation, measures, reasons), for the review and the report;
- `qa_report.md`: sampling, every filter's count, the overlap distributions;
- `review.xlsx`: one row per parsed candidate: a person accepts (accetta), edits (modifica) or rejects (rifiuta)
  each; `read_review` writes the accepted set into the same files.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstudy import results
from ragstudy.errors import StudyInputError
from ragstudy.grid.records import normalize_ws
from ragstudy.io import atomic_save, atomic_write_json, atomic_write_text, sha256_file
from ragstudy.qagen.filters import locate_in_passage
from ragstudy.qagen.sampling import Passage
from ragstudy.workbook import set_text, write_instructions

logger = logging.getLogger(__name__)

# the file names and the evidence columns are declared with every other output (ragstudy.results, docs/outputs.md)
QUESTIONS, ORACLE, EVIDENCE = results.QA_QUESTIONS.name, results.QA_ORACLE.name, results.QA_EVIDENCE.name
SIDECAR, CANDIDATES = results.QA_SIDECAR.name, results.QA_CANDIDATES.name
REPORT, WORKBOOK = results.QA_REPORT.name, results.QA_WORKBOOK.name
SET_FILES = (QUESTIONS, ORACLE, EVIDENCE, SIDECAR)
EVIDENCE_COLUMNS = results.QA_EVIDENCE.columns
DECISIONS = ("accetta", "modifica", "rifiuta")
SHEET = "Revisione"
HEADERS = ("ID", "Decisione", "Domanda", "Risposta", "Evidenza", "PDF", "Pagina", "Confine", "Filtri", "Passaggio",
           "candidate")
WIDTHS = (6, 12, 40, 34, 52, 22, 7, 10, 26, 70, 10)


@dataclass(frozen=True)
class Item:
    """One question of a written set."""

    candidate: str  # the candidate's id (a hash) in candidates.jsonl
    question: str
    answer: str
    evidence: str
    pdf: str
    page: int
    boundary: str
    source_start: int
    source_end: int
    passage_kind: str


def _csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def write_set(out: Path, items: Sequence[Item]) -> None:
    """Questions.csv, Oracle.csv and evidence.csv of `items` (each atomically)."""
    atomic_write_text(out / QUESTIONS, _csv_text(["questions"], [[normalize_ws(i.question)] for i in items]),
                      "output file")
    atomic_write_text(out / ORACLE, _csv_text(["oracle"], [[normalize_ws(i.answer)] for i in items]), "output file")
    rows = [[n, normalize_ws(i.question), i.pdf, i.page, i.boundary, i.evidence,
             json.dumps([i.source_start, i.source_end]), i.passage_kind] for n, i in enumerate(items)]
    atomic_write_text(out / EVIDENCE, _csv_text(EVIDENCE_COLUMNS, rows), "output file")


def read_sidecar(folder: Path) -> dict | None:
    path = Path(folder) / SIDECAR
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StudyInputError(f"{path}: not a make-qa sidecar ({exc}); delete it or pass --overwrite") from None
    if not isinstance(value, dict) or value.get("tool") != "make-qa":
        raise StudyInputError(f"{path}: not a make-qa sidecar; delete it or pass --overwrite")
    return value


def generated_questions_info(questions: str | Path) -> dict | None:
    """What config.json records about a questions file that make-qa wrote (its sidecar beside it), else None."""
    path = Path(questions)
    try:
        sidecar = read_sidecar(path.parent)
    except StudyInputError as exc:
        logger.warning("%s", exc)
        return None
    if sidecar is None or not path.is_file():
        return None
    generator = sidecar.get("generator", {})
    return {"sidecar": str(path.parent / SIDECAR), "model": generator.get("model"),
            "prompt_hash": generator.get("prompt_hash"), "seed": generator.get("seed"),
            "reviewed": bool(sidecar.get("review")),
            "matches_questions_file": sidecar.get("questions_sha256") == sha256_file(path)}


def generated_note(run_config: dict) -> str | None:
    """A report line for a run whose questions were generated by make-qa (config.json's questions_generated)."""
    info = run_config.get("questions_generated")
    if not info:
        return None
    reviewed = "reviewed by a person" if info.get("reviewed") else "NOT reviewed by a person"
    stale = "" if info.get("matches_questions_file", True) else "; the questions file changed since make-qa wrote it"
    return (f"questions: GENERATED by make-qa with {info.get('model')} (prompt {info.get('prompt_hash')}, seed "
            f"{info.get('seed')}), {reviewed}{stale}; see {info.get('sidecar')}")


# ------------------------------------------------------------------------------------------------- candidates

def write_candidates(out: Path, records: Sequence[dict]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    atomic_write_text(out / CANDIDATES, text, "output file")


def read_candidates(out: Path) -> dict[str, dict]:
    path = Path(out) / CANDIDATES
    if not path.is_file():
        raise StudyInputError(f"{path}: not found; the review workbook is read back in the folder make-qa wrote "
                              "(pass --out DIR of that run)")
    records = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            raise StudyInputError(f"{path}:{number}: not a candidate record; re-run make-qa") from None
        records[record["id"]] = record
    return records


# ------------------------------------------------------------------------------------------------- workbook

def _set_clean_text(cell, text: str) -> None:
    """`text` without the characters xlsx cannot hold, cut at the cell limit, as a literal string."""
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    set_text(cell, ILLEGAL_CHARACTERS_RE.sub("", text)[:32_767])


def _filters_cell(record: dict) -> str:
    """The filters a candidate failed (or "superati"), and the round trip's reply where the model was asked."""
    cell = ", ".join(record["reasons"]) or "superati"
    reply = record.get("round_trip_reply")
    return cell if reply is None else f"{cell}\nRisposta del modello con la sola evidenza: «{reply.strip()}»"


def write_workbook(path: Path, records: Sequence[dict]) -> int:
    """review.xlsx: one row per parsed candidate, the filters' suggestion prefilled (accetta / rifiuta); returns
    the number of rows."""
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
    from openpyxl.worksheet.datavalidation import DataValidation

    wb = Workbook()
    ws = wb.active
    ws.title = SHEET
    wrap = Alignment(wrap_text=True, vertical="top")
    rule = Border(bottom=Side(style="thin", color="999999"))
    for col, (title, width) in enumerate(zip(HEADERS, WIDTHS), start=1):
        cell = ws.cell(row=1, column=col)
        _set_clean_text(cell, title)
        cell.font, cell.fill, cell.alignment = Font(bold=True), PatternFill("solid", fgColor="DDDDDD"), wrap
        ws.column_dimensions[cell.column_letter].width = width
    rows = [r for r in records if r.get("question") is not None]
    for r, record in enumerate(rows, start=2):
        values = [f"D{r - 1}", "accetta" if record["kept"] else "rifiuta", record["question"], record["answer"],
                  record.get("evidence_located") or record["evidence"], record["pdf"],
                  str(record.get("page") or ""), record.get("boundary") or "", _filters_cell(record),
                  record["passage"]["text"], record["id"]]
        for col, text in enumerate(values, start=1):
            cell = ws.cell(row=r, column=col)
            _set_clean_text(cell, str(text))
            cell.alignment, cell.border = wrap, rule
        lines = max(len(str(values[i])) // max(1, int(WIDTHS[i] * 1.1)) + 1 for i in (2, 4, 8, 9))
        ws.row_dimensions[r].height = min(409.0, 15.0 * lines + 4)
    ws.column_dimensions["K"].hidden = True
    if rows:
        validation = DataValidation(type="list", formula1='"' + ",".join(DECISIONS) + '"', allow_blank=False,
                                    showErrorMessage=True, errorTitle="Valore non valido",
                                    error="Scegliete accetta, modifica o rifiuta")
        validation.add(f"B2:B{len(rows) + 1}")
        ws.add_data_validation(validation)
    ws.freeze_panes = "C2"
    write_instructions(wb.create_sheet("Istruzioni"), [
        "Revisione delle domande generate",
        "",
        "Per ogni riga leggete il passaggio (colonna «Passaggio»), la domanda, la risposta e l'evidenza.",
        "Colonna «Decisione»: accetta (la domanda va bene così), modifica (avete corretto domanda, risposta o "
        "evidenza nelle loro celle), rifiuta (la domanda non entra nel set).",
        "L'evidenza deve restare una citazione esatta del passaggio (spazi, a capo e punteggiatura non contano).",
        "La decisione proposta viene dai filtri automatici (colonna «Filtri»); cambiatela dove non siete d'accordo.",
        "Poi: make-qa --read-review <questo file> scrive il set accettato nella stessa cartella.",
    ])
    atomic_save(path, wb.save, "review workbook")
    return len(rows)


@dataclass(frozen=True)
class Review:
    items: tuple[Item, ...]
    accepted: int
    edited: int
    rejected: int
    overridden: int  # accepted although the filters dropped it


def read_workbook(path: Path, candidates: dict[str, dict]) -> Review:
    """The reviewed workbook -> the accepted items, in workbook order. Errors name the workbook cell and the fix."""
    from ragstudy.workbook import open_workbook

    path = Path(path)
    if not path.is_file():
        raise StudyInputError(f"{path}: review workbook not found")
    wb = open_workbook(path, "review workbook", "ragstudy make-qa", read_only=True)
    if SHEET not in wb.sheetnames:
        raise StudyInputError(f"{path}: no sheet {SHEET!r}; read back the review.xlsx make-qa wrote")
    rows = list(wb[SHEET].iter_rows(values_only=True))
    wb.close()
    if not rows or tuple(str(c or "") for c in rows[0][:len(HEADERS)]) != HEADERS:
        raise StudyInputError(f"{path}: sheet {SHEET!r} does not have make-qa's columns ({', '.join(HEADERS)}); "
                              "do not move or rename columns")
    items, accepted, edited, rejected, overridden = [], 0, 0, 0, 0
    for number, row in enumerate(rows[1:], start=2):
        cells = {h: ("" if v is None else str(v)) for h, v in zip(HEADERS, row)}
        if not any(cells.values()):
            continue
        where = f"{path} row {number}"
        record = candidates.get(cells["candidate"])
        if record is None:
            raise StudyInputError(f"{where}: candidate {cells['candidate']!r} is not in {CANDIDATES} beside it; "
                                  "read the workbook back in the folder make-qa wrote it in")
        decision = cells["Decisione"].strip().casefold()
        if decision not in DECISIONS:
            raise StudyInputError(f"{where}: Decisione {cells['Decisione']!r} is not one of {', '.join(DECISIONS)}; "
                                  "fill it in")
        if decision == "rifiuta":
            rejected += 1
            continue
        question, answer = normalize_ws(cells["Domanda"]), normalize_ws(cells["Risposta"])
        if not question or not answer:
            raise StudyInputError(f"{where}: empty Domanda or Risposta; fill it in or set Decisione to rifiuta")
        passage = Passage.from_record(record["passage"])
        located = locate_in_passage(cells["Evidenza"], passage)
        if located is None:
            raise StudyInputError(f"{where}: the Evidenza is not a verbatim quote of the Passaggio (after "
                                  "normalisation); copy it from the passage or set Decisione to rifiuta")
        changed = (question != normalize_ws(record["question"]) or answer != normalize_ws(record["answer"])
                   or located.text != (record.get("evidence_located") or ""))
        accepted += 1
        edited += bool(changed or decision == "modifica")
        overridden += not record["kept"]
        items.append(Item(record["id"], question, answer, located.text, record["pdf"],
                          _page(passage, located.passage_start), located.boundary, located.source_start,
                          located.source_end, passage.kind))
    return Review(tuple(items), accepted, edited, rejected, overridden)


def _page(passage: Passage, position: int) -> int:
    """The 1-based page of a passage character: the first part's page, or the last page for the second part."""
    cut = passage.spans[0][1] - passage.spans[0][0]
    return passage.pages[-1] if len(passage.spans) == 2 and position > cut and passage.kind == "page" \
        else passage.pages[0]


def write_sidecar(out: Path, sidecar: dict) -> None:
    atomic_write_json(out / SIDECAR, sidecar, "output file")
