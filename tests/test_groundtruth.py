"""Loaders of the ground-truth and evidence formats: body text, offsets, and errors that name file and record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragstudy.scoring.groundtruth import load_evidence, load_groundtruth, load_groundtruth_dir, fold_layout_text

ROOT = Path(__file__).resolve().parents[1]

GT = {
    "document": "doc.pdf",
    "page_count": 2,
    "blocks": [
        {"kind": "header", "pages": [1, 1], "text": "Manuale"},
        {"kind": "title", "pages": [1, 1], "text": "1 Scopo"},
        {"kind": "paragraph", "pages": [1, 2], "text": "Il file di configurazione è letto all'avvio."},
        {"kind": "footer", "pages": [1, 1], "text": "Pagina 1 di 2"},
        {"kind": "table", "pages": [2, 2], "text": "A | B\n1 | 2"},
    ],
}


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_body_text_skips_furniture_and_offsets_index_it(tmp_path: Path) -> None:
    gt = load_groundtruth(write(tmp_path / "doc.json", GT))
    assert gt.body_text == "1 Scopo\n\nIl file di configurazione è letto all'avvio.\n\nA | B\n1 | 2"
    assert [b.kind for b in gt.body_blocks] == ["title", "paragraph", "table"]
    offsets = gt.body_offsets()
    assert gt.body_text[offsets[2]:].startswith("Il file") and gt.body_text[offsets[4]:] == "A | B\n1 | 2"
    assert load_groundtruth_dir(tmp_path) == {"doc.pdf": gt}


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["blocks"][1].update(kind="heading"), "block 1: kind 'heading'"),
    (lambda d: d["blocks"][2].update(pages=[2, 3]), "block 2: pages [2, 3] outside 1..2"),
    (lambda d: d["blocks"][2].update(text=""), "block 2: text must be"),
    (lambda d: d.update(document="doc.docx"), "document: must be a PDF"),
])
def test_malformed_groundtruth_names_file_and_block(tmp_path: Path, mutate, message: str) -> None:
    data = json.loads(json.dumps(GT))
    mutate(data)
    path = write(tmp_path / "bad.json", data)
    with pytest.raises(ValueError, match="bad.json") as err:
        load_groundtruth(path)
    assert message in str(err.value)


def test_evidence_records_are_validated(tmp_path: Path) -> None:
    good = [
        {"question_index": 0, "question": "Quando?", "answerable": True, "document": "doc.pdf", "pages": [1],
         "evidence": [{"block": 2, "text": "file", "start": 12, "end": 16}]},
        {"question_index": 1, "question": "Chi?", "answerable": False, "document": None, "pages": [],
         "evidence": []},
    ]
    records = load_evidence(write(tmp_path / "ev.json", good))
    assert records[0].evidence[0].text == "file" and not records[1].answerable
    bad = json.loads(json.dumps(good))
    bad[1]["document"] = "doc.pdf"
    with pytest.raises(ValueError, match=r"ev2.json: record 1: an unanswerable question"):
        load_evidence(write(tmp_path / "ev2.json", bad))
    bad = json.loads(json.dumps(good))
    bad[0]["evidence"][0]["end"] = 20
    with pytest.raises(ValueError, match=r"record 0 evidence 0: start/end"):
        load_evidence(write(tmp_path / "ev3.json", bad))
    bad = json.loads(json.dumps(good))
    bad[1]["question_index"] = 5
    with pytest.raises(ValueError, match=r"record 1: question_index is 5, expected 1"):
        load_evidence(write(tmp_path / "ev4.json", bad))


def test_fold_layout_text_folds_what_pdf_text_layers_do() -> None:
    extracted = "Il \ufb01le di con\ufb01gura-\nzione\n• è   letto\n"
    assert fold_layout_text(extracted) == "Il file di configurazione • è letto"
    assert fold_layout_text("A | B\n1 | 2") == "A B 1 2"
    assert fold_layout_text("anno 2024-\n2025") == "anno 2024- 2025"  # only letter-hyphen-letter joins
