"""Ground truth of the bundled sample corpus: logical blocks of each PDF and the evidence of each question.

Both formats (written by `tools/make_sample_corpus.py`) are described in docs/running.md, "Ground-truth and evidence
formats"; the loaders here validate them and name the file, block or record at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from pathlib import Path
from typing import Any

from ragstudy.text.textnorm import LIGATURES, LINE_BREAK_HYPHEN

BLOCK_KINDS = frozenset({"title", "paragraph", "list_item", "table", "header", "footer", "toc"})
DROPPED_KINDS = frozenset({"header", "footer", "toc"})
UNANSWERABLE_ORACLE = "Il contesto fornito non contiene la risposta."
TABLE_CELL_SEP = " | "
BODY_BLOCK_SEP = "\n\n"


def fold_layout_text(text: str) -> str:
    """Fold ligatures, join line-break hyphens, drop table cell separators and collapse whitespace (not
    ragstudy.scoring.evidence.normalize_for_match, which keeps letters and digits only): to compare ground-truth text
    with text extracted from the PDFs (PyMuPDF `page.get_text()`)."""
    for lig, plain in LIGATURES.items():
        text = text.replace(lig, plain)
    text = LINE_BREAK_HYPHEN.sub("", text)
    text = text.replace(TABLE_CELL_SEP, " ")
    return " ".join(text.split())


@dataclass(frozen=True)
class GroundTruthBlock:
    kind: str
    pages: tuple[int, int]
    text: str


@dataclass(frozen=True)
class GroundTruth:
    document: str
    page_count: int
    blocks: tuple[GroundTruthBlock, ...]

    @property
    def body_blocks(self) -> tuple[GroundTruthBlock, ...]:
        return tuple(b for b in self.blocks if b.kind not in DROPPED_KINDS)

    @cached_property
    def body_text(self) -> str:
        return BODY_BLOCK_SEP.join(b.text for b in self.body_blocks)

    def body_offsets(self) -> dict[int, int]:
        """Start offset in `body_text` of every body block, keyed by its index in `blocks`."""
        body = [i for i, b in enumerate(self.blocks) if b.kind not in DROPPED_KINDS]
        return dict(zip(body, accumulate((len(self.blocks[i].text) + len(BODY_BLOCK_SEP) for i in body), initial=0)))


@dataclass(frozen=True)
class EvidenceSpan:
    block: int
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class EvidenceRecord:
    question_index: int
    question: str
    answerable: bool
    document: str | None
    pages: tuple[int, ...]
    evidence: tuple[EvidenceSpan, ...]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read JSON ({exc}); regenerate it with tools/make_sample_corpus.py") from exc


def _require(cond: bool, path: Path, where: str, what: str) -> None:
    if not cond:
        raise ValueError(f"{path}: {where}: {what}")


def _parse_block(raw: Any, path: Path, i: int, page_count: int) -> GroundTruthBlock:
    where = f"block {i}"
    _require(isinstance(raw, dict), path, where, "must be an object")
    kind, pages, text = raw.get("kind"), raw.get("pages"), raw.get("text")
    _require(kind in BLOCK_KINDS, path, where, f"kind {kind!r} is not one of {sorted(BLOCK_KINDS)}")
    _require(isinstance(pages, list) and len(pages) == 2 and all(isinstance(p, int) for p in pages), path, where,
             f"pages must be [first, last], got {pages!r}")
    _require(1 <= pages[0] <= pages[1] <= page_count, path, where,
             f"pages {pages} outside 1..{page_count} or reversed")
    _require(isinstance(text, str) and text != "", path, where, "text must be a non-empty string")
    return GroundTruthBlock(kind, (pages[0], pages[1]), text)


def load_groundtruth(path: str | Path) -> GroundTruth:
    """Load and validate one `sample/groundtruth/<stem>.json` file."""
    path = Path(path)
    raw = _read_json(path)
    _require(isinstance(raw, dict), path, "top level", "must be an object")
    document, page_count, blocks = raw.get("document"), raw.get("page_count"), raw.get("blocks")
    _require(isinstance(document, str) and document.lower().endswith(".pdf"), path, "document",
             f"must be a PDF file name, got {document!r}")
    _require(isinstance(page_count, int) and page_count > 0, path, "page_count", f"must be > 0, got {page_count!r}")
    _require(isinstance(blocks, list) and blocks, path, "blocks", "must be a non-empty list")
    return GroundTruth(document, page_count, tuple(_parse_block(b, path, i, page_count) for i, b in enumerate(blocks)))


def load_groundtruth_dir(folder: str | Path) -> dict[str, GroundTruth]:
    """Load every ground-truth JSON in `folder`, keyed by the PDF file name it describes."""
    folder = Path(folder)
    files = sorted(folder.glob("*.json"))
    if not files:
        raise ValueError(f"{folder}: no ground-truth *.json files; regenerate with tools/make_sample_corpus.py")
    result: dict[str, GroundTruth] = {}
    for f in files:
        gt = load_groundtruth(f)
        if gt.document in result:
            raise ValueError(f"{f}: document {gt.document} is described twice in {folder}")
        result[gt.document] = gt
    return result


def _parse_span(raw: Any, path: Path, where: str) -> EvidenceSpan:
    _require(isinstance(raw, dict), path, where, "evidence entries must be objects")
    block, text, start, end = raw.get("block"), raw.get("text"), raw.get("start"), raw.get("end")
    _require(isinstance(block, int) and block >= 0, path, where, f"block must be an index >= 0, got {block!r}")
    _require(isinstance(text, str) and text != "", path, where, "evidence text must be a non-empty string")
    _require(isinstance(start, int) and isinstance(end, int) and 0 <= start and end - start == len(text), path,
             where, f"start/end ({start!r}, {end!r}) must be offsets spanning the {len(text)}-character text")
    return EvidenceSpan(block, text, start, end)


def _parse_record(raw: Any, path: Path, i: int) -> EvidenceRecord:
    where = f"record {i}"
    _require(isinstance(raw, dict), path, where, "must be an object")
    _require(raw.get("question_index") == i, path, where,
             f"question_index is {raw.get('question_index')!r}, expected {i} (records follow Questions.csv rows)")
    question, answerable, document = raw.get("question"), raw.get("answerable"), raw.get("document")
    pages, evidence = raw.get("pages"), raw.get("evidence")
    _require(isinstance(question, str) and question.strip() != "", path, where, "question must be a non-empty string")
    _require(isinstance(answerable, bool), path, where, "answerable must be true or false")
    _require(isinstance(pages, list) and all(isinstance(p, int) and p >= 1 for p in pages), path, where,
             f"pages must be a list of 1-based page numbers, got {pages!r}")
    _require(isinstance(evidence, list), path, where, "evidence must be a list")
    if answerable:
        _require(isinstance(document, str) and document.lower().endswith(".pdf"), path, where,
                 f"an answerable question needs a document, got {document!r}")
        _require(len(evidence) > 0 and len(pages) > 0, path, where, "an answerable question needs evidence and pages")
    else:
        _require(document is None and not evidence and not pages, path, where,
                 "an unanswerable question must have document null, pages [] and evidence []")
    spans = tuple(_parse_span(e, path, f"{where} evidence {j}") for j, e in enumerate(evidence))
    return EvidenceRecord(i, question, answerable, document, tuple(pages), spans)


def load_evidence(path: str | Path) -> list[EvidenceRecord]:
    """Load and validate `sample/evidence.json` (one record per Questions.csv row)."""
    path = Path(path)
    raw = _read_json(path)
    _require(isinstance(raw, list), path, "top level", "must be a list of records")
    return [_parse_record(r, path, i) for i, r in enumerate(raw)]
