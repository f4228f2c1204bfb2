"""The bundled sample study is consistent: PDFs, ground truth, evidence, Questions.csv and Oracle.csv agree,
and every ground-truth block and evidence text can be found in the text PyMuPDF extracts from the PDFs."""

from __future__ import annotations

import csv
import hashlib
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pymupdf
import pytest

from ragstudy.scoring.groundtruth import (DROPPED_KINDS, UNANSWERABLE_ORACLE, GroundTruth, load_evidence,
                                          load_groundtruth_dir, fold_layout_text)

ROOT = Path(__file__).resolve().parents[1]

DOCS = ROOT / "Documents"
GT_DIR = ROOT / "sample" / "groundtruth"
EVIDENCE = ROOT / "sample" / "evidence.json"


def read_column(path: Path, column: str) -> list[str]:
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == [column], f"{path}: expected the single column {column!r}"
        return [row[column] for row in reader]


@pytest.fixture(scope="module")
def groundtruth() -> dict[str, GroundTruth]:
    return load_groundtruth_dir(GT_DIR)


@lru_cache(maxsize=None)
def page_texts(pdf_name: str) -> tuple[str, ...]:
    with pymupdf.open(DOCS / pdf_name) as doc:
        return tuple(fold_layout_text(page.get_text()) for page in doc)


def body_of_page(gt: GroundTruth, page: int) -> str:
    """Normalized text of a page without its running header (first in the stream) and footer (last)."""
    text = page_texts(gt.document)[page - 1]
    for b in gt.blocks:
        if b.pages[0] != page:
            continue
        norm = fold_layout_text(b.text)
        if b.kind == "header":
            assert text.startswith(norm), f"{gt.document} p.{page}: header {b.text!r} is not at the top"
            text = text[len(norm):]
        elif b.kind == "footer":
            assert text.endswith(norm), f"{gt.document} p.{page}: footer {b.text!r} is not at the bottom"
            text = text[: -len(norm)]
    return " ".join(text.split())


def text_of_pages(gt: GroundTruth, first: int, last: int) -> str:
    return " ".join(body_of_page(gt, p) for p in range(first, last + 1))


def test_documents_folder_holds_only_the_described_pdfs(groundtruth: dict[str, GroundTruth]) -> None:
    files = sorted(p.name for p in DOCS.iterdir())
    assert all(f.endswith(".pdf") and f == f.lower() and f.isascii() for f in files), files
    assert files == sorted(groundtruth), "every PDF needs a ground-truth JSON and vice versa"
    assert 5 <= len(files) <= 8
    pages = 0
    for name, gt in groundtruth.items():
        with pymupdf.open(DOCS / name) as doc:
            assert doc.page_count == gt.page_count, name
            pages += doc.page_count
    assert 40 <= pages <= 80, pages
    assert sum((DOCS / f).stat().st_size for f in files) < 3_000_000


def test_questions_oracle_and_evidence_line_up() -> None:
    questions = read_column(ROOT / "Questions.csv", "questions")
    oracles = read_column(ROOT / "Oracle.csv", "oracle")
    records = load_evidence(EVIDENCE)
    assert len(questions) == len(oracles) == len(records) >= 40
    assert [r.question for r in records] == questions
    unanswerable = [i for i, r in enumerate(records) if not r.answerable]
    assert 3 <= len(unanswerable) <= 5
    assert all(oracles[i] == UNANSWERABLE_ORACLE for i in unanswerable)
    assert all(o.strip() and o != UNANSWERABLE_ORACLE for i, o in enumerate(oracles) if i not in unanswerable)


def test_evidence_offsets_point_into_body_text(groundtruth: dict[str, GroundTruth]) -> None:
    records = load_evidence(EVIDENCE)
    covered = set()
    for r in records:
        if not r.answerable:
            continue
        gt = groundtruth[r.document]
        covered.add(r.document)
        offsets = gt.body_offsets()
        block_pages: set[int] = set()
        for span in r.evidence:
            assert gt.body_text[span.start:span.end] == span.text, (r.question_index, span)
            block = gt.blocks[span.block]
            assert block.kind not in DROPPED_KINDS
            assert block.text[span.start - offsets[span.block]:span.end - offsets[span.block]] == span.text
            spanned = set(range(block.pages[0], block.pages[1] + 1))
            assert spanned & set(r.pages), (r.question_index, "evidence block on none of the question's pages")
            block_pages |= spanned
        assert set(r.pages) <= block_pages, (r.question_index, "a listed page holds none of the evidence")
        assert all(1 <= p <= gt.page_count for p in r.pages)
    assert covered == set(groundtruth), "every document has questions"


def test_question_kinds_are_all_represented(groundtruth: dict[str, GroundTruth]) -> None:
    records = [r for r in load_evidence(EVIDENCE) if r.answerable]
    kinds = [{groundtruth[r.document].blocks[s.block].kind for s in r.evidence} for r in records]
    assert sum("table" in k for k in kinds) >= 3
    assert sum("list_item" in k and len(r.evidence) >= 3 for k, r in zip(kinds, records)) >= 5
    assert sum(len(r.pages) >= 2 for r in records) >= 3, "questions whose answer spans a page break"


def test_every_evidence_is_in_the_extracted_text_of_its_pages(groundtruth: dict[str, GroundTruth]) -> None:
    for r in load_evidence(EVIDENCE):
        if not r.answerable:
            continue
        gt = groundtruth[r.document]
        text = text_of_pages(gt, min(r.pages), max(r.pages))
        for span in r.evidence:
            assert fold_layout_text(span.text) in text, (r.question_index, span.text, r.pages)


def test_every_groundtruth_block_is_in_the_extracted_text(groundtruth: dict[str, GroundTruth]) -> None:
    for gt in groundtruth.values():
        for i, b in enumerate(gt.blocks):
            if b.kind in {"header", "footer"}:
                continue  # checked at the top / bottom of each page by body_of_page
            assert fold_layout_text(b.text) in text_of_pages(gt, *b.pages), (gt.document, i, b)


def test_layout_features_are_present(groundtruth: dict[str, GroundTruth]) -> None:
    kinds = {b.kind for gt in groundtruth.values() for b in gt.blocks}
    assert kinds == {"title", "paragraph", "list_item", "table", "header", "footer", "toc"}
    footers = [b.text for gt in groundtruth.values() for b in gt.blocks if b.kind == "footer"]
    assert any("Pagina 3 di" in f for f in footers)
    assert any(b.pages[0] < b.pages[1] for gt in groundtruth.values() for b in gt.body_blocks)
    raw = {name: "".join(pymupdf.open(DOCS / name)[p].get_text() for p in range(gt.page_count))
           for name, gt in groundtruth.items()}
    assert any("\ufb01" in t for t in raw.values()), "ligature code points in some text layer"
    assert any("-\n" in t for t in raw.values()), "hyphenated line ends"
    assert any("\n•\n" in t for t in raw.values()), "a bullet glyph detached from its item"
    assert any("▪" in t for t in raw.values()) and any("\n–" in t for t in raw.values())
    sizes = {name: {tuple(round(v) for v in page.rect[2:]) for page in pymupdf.open(DOCS / name)}
             for name in groundtruth}
    assert any(len(s) >= 2 for s in sizes.values()), "mixed page sizes in one document"
    assert any("." * 20 in b.text for gt in groundtruth.values() for b in gt.blocks if b.kind == "toc")


def test_generator_reproduces_the_committed_files_byte_for_byte(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "make_sample_corpus.py"), "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    committed = [*sorted(DOCS.glob("*.pdf")), *sorted(GT_DIR.glob("*.json")), EVIDENCE,
                 ROOT / "Questions.csv", ROOT / "Oracle.csv"]
    for path in committed:
        fresh = tmp_path / path.relative_to(ROOT)
        assert fresh.exists(), f"generator did not write {fresh}"
        assert hashlib.sha256(fresh.read_bytes()).hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest(), (
            f"{path.relative_to(ROOT)} differs from a fresh build: run python tools/make_sample_corpus.py")
    fresh_pdfs = sorted(p.name for p in (tmp_path / "Documents").iterdir())
    assert fresh_pdfs == sorted(p.name for p in DOCS.glob("*.pdf"))
