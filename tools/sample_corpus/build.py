"""Assemble the sample study: PDFs, ground truth JSON, Questions.csv, Oracle.csv and sample/evidence.json."""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from . import (
    doc_api_pagamenti,
    doc_conservazione,
    doc_fotovoltaico,
    doc_gestionale,
    doc_acquisti,
    doc_sicurezza,
)
from .engine import BlockRec, LaidOutDocument, lay_out, render
from .questions import QUESTIONS, UNANSWERABLE_ORACLE, Q

logger = logging.getLogger(__name__)

DOCUMENT_MODULES: tuple[ModuleType, ...] = (
    doc_gestionale,
    doc_acquisti,
    doc_sicurezza,
    doc_api_pagamenti,
    doc_conservazione,
    doc_fotovoltaico,
)
DROPPED = {"header", "footer", "toc"}


@dataclass(frozen=True)
class BuiltDocument:
    name: str
    layout: LaidOutDocument
    body_text: str
    body_offsets: dict[int, int]


def write_atomic(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(data, encoding="utf-8", newline="")
    os.replace(tmp, path)


def block_pages(rec: BlockRec) -> list[int]:
    pages = [p for _, p in rec.lines]
    return [min(pages) + 1, max(pages) + 1]


def groundtruth_json(name: str, layout: LaidOutDocument) -> str:
    blocks = [{"kind": b.kind, "pages": block_pages(b), "text": b.text} for b in layout.blocks]
    data = {"document": name, "page_count": len(layout.pages), "blocks": blocks}
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def build_document(module: ModuleType, out_root: Path) -> BuiltDocument:
    style = module.STYLE
    layout = lay_out(style, module.CONTENT)
    name = f"{style.stem}.pdf"
    docs_dir = out_root / "Documents"
    docs_dir.mkdir(parents=True, exist_ok=True)
    render(layout, docs_dir / name)
    write_atomic(out_root / "sample" / "groundtruth" / f"{style.stem}.json", groundtruth_json(name, layout))
    offsets: dict[int, int] = {}
    parts: list[str] = []
    pos = 0
    for i, b in enumerate(layout.blocks):
        if b.kind in DROPPED:
            continue
        offsets[i] = pos
        parts.append(b.text)
        pos += len(b.text) + 2
    logger.info("%s: %d pages, %d blocks", name, len(layout.pages), len(layout.blocks))
    return BuiltDocument(name, layout, "\n\n".join(parts), offsets)


def span_pages(rec: BlockRec, start: int, end: int) -> list[int]:
    """1-based pages on which the characters [start, end) of a block's text are rendered."""
    pages: list[int] = []
    for n, (off, page) in enumerate(rec.lines):
        nxt = rec.lines[n + 1][0] if n + 1 < len(rec.lines) else len(rec.text) + 1
        if off < end and nxt > start and page + 1 not in pages:
            pages.append(page + 1)
    return sorted(pages)


def evidence_record(i: int, q: Q, docs: dict[str, BuiltDocument]) -> dict:
    if q.document is None:
        return {"question_index": i, "question": q.question, "answerable": False, "document": None,
                "pages": [], "evidence": []}
    name = f"{q.document}.pdf"
    if name not in docs:
        raise ValueError(f"question {i}: unknown document {q.document!r}")
    doc = docs[name]
    spans = []
    kinds: set[str] = set()
    pages: set[int] = set()
    for ev in q.evidence:
        count = doc.body_text.count(ev)
        if count != 1:
            raise ValueError(f"question {i} ({q.question!r}): evidence {ev!r} occurs {count} times in the body "
                             f"text of {name}; make it exact and unique")
        start = doc.body_text.index(ev)
        block = max(k for k, off in doc.body_offsets.items() if off <= start)
        rec = doc.layout.blocks[block]
        rel = start - doc.body_offsets[block]
        if rel + len(ev) > len(rec.text):
            raise ValueError(f"question {i}: evidence {ev!r} crosses a block boundary in {name}; split it")
        ev_pages = span_pages(rec, rel, rel + len(ev))
        pages.update(ev_pages)
        kinds.add(rec.kind)
        spans.append({"block": block, "text": ev, "start": start, "end": start + len(ev)})
    if "table" in q.tags and "table" not in kinds:
        raise ValueError(f"question {i}: tagged table but none of its evidence is in a table block")
    if "list" in q.tags and "list_item" not in kinds:
        raise ValueError(f"question {i}: tagged list but none of its evidence is in a list item")
    if "page_break" in q.tags and len(pages) < 2:
        raise ValueError(f"question {i}: tagged page_break but its evidence lies on pages {sorted(pages)}; "
                         "the layout changed, pick evidence that crosses a page break")
    return {"question_index": i, "question": q.question, "answerable": True, "document": name,
            "pages": sorted(pages), "evidence": spans}


def csv_text(column: str, values: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([column])
    for v in values:
        writer.writerow([v])
    return buf.getvalue()


def build_all(out_root: Path) -> dict[str, BuiltDocument]:
    docs: dict[str, BuiltDocument] = {}
    for module in DOCUMENT_MODULES:
        built = build_document(module, out_root)
        docs[built.name] = built
    records = [evidence_record(i, q, docs) for i, q in enumerate(QUESTIONS)]
    write_atomic(out_root / "sample" / "evidence.json", json.dumps(records, ensure_ascii=False, indent=1) + "\n")
    write_atomic(out_root / "Questions.csv", csv_text("questions", [q.question for q in QUESTIONS]))
    oracles = [q.oracle if q.document is not None else UNANSWERABLE_ORACLE for q in QUESTIONS]
    write_atomic(out_root / "Oracle.csv", csv_text("oracle", oracles))
    return docs
