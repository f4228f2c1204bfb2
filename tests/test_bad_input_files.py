"""Bad input files are reported, never silently turned into a smaller corpus; outputs get the user's file mode."""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path

import pytest

from conftest import REPO_ROOT, write_test_pdf
from ragstudy.errors import StudyInputError
from ragstudy.text.textlayer import list_pdfs, load_documents, read_pdf


def _first_half(source: Path, target: Path) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


# ---- a truncated PDF: PyMuPDF repairs it on opening, and pages come out empty or missing --------------------------

def test_truncated_pdf_is_reported_as_damaged_with_its_empty_pages(tmp_path: Path, caplog) -> None:
    # the bundled sample's 11-page manual: its first half still has all 11 pages, 8 of them without text
    pdf = _first_half(REPO_ROOT / "Documents" / "manuale_software_gestionale.pdf", tmp_path / "troncato.pdf")
    with caplog.at_level(logging.WARNING, logger="ragstudy.text.textlayer"):
        doc = read_pdf(pdf)
    assert doc.page_count == 11
    messages = [r.getMessage() for r in caplog.records]
    damaged = [m for m in messages if "damaged" in m]
    assert len(damaged) == 1 and str(pdf) in damaged[0]
    assert "11 page(s) recovered, 3 of them with text" in damaged[0] and "may be missing" in damaged[0]
    assert any(m.startswith(f"{pdf}: 8 of 11 page(s) without text") and m.endswith(": 4, 5, 6, 7, 8, 9, 10, 11")
               for m in messages)


def test_truncated_pdf_with_many_empty_pages_says_how_many(shared_pdfs: Path, tmp_path: Path, caplog) -> None:
    pdf = _first_half(shared_pdfs / "en_docling_redp5110_sampled.pdf", tmp_path / "half.pdf")
    with caplog.at_level(logging.WARNING, logger="ragstudy.text.textlayer"):
        read_pdf(pdf)
    assert "damaged" in caplog.text
    # more than ten empty pages: the first ten are listed, and the total is given
    assert re.search(rf"{re.escape(str(pdf))}: 17 of 18 page\(s\) without text .*: 1, 2, 4, 5, 6, 7, 8, 9, 10, 11 "
                     r"… \(and 7 more\)", caplog.text)


def test_truncated_pdf_with_no_page_left_is_named_as_damaged(shared_pdfs: Path, tmp_path: Path) -> None:
    pdf = _first_half(shared_pdfs / "it_gu-ue_eupl-v1.2_licenza.pdf", tmp_path / "licenza.pdf")
    with pytest.raises(StudyInputError, match=rf"{re.escape(str(pdf))}: no page could be recovered: the file is "
                                              r"damaged .*complete copy"):
        read_pdf(pdf)


def test_an_intact_pdf_gets_no_damage_warning(pdf_dir: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ragstudy.text.textlayer"):
        read_pdf(pdf_dir / "manuale_a.pdf")
    assert not caplog.records


# ---- PDFs in subfolders of --documents are named, not read -------------------------------------------------------

def test_pdfs_in_subfolders_are_named_and_not_read(tmp_path: Path, caplog) -> None:
    write_test_pdf(tmp_path / "a.pdf", pages=1)
    (tmp_path / "archivio" / "2023").mkdir(parents=True)
    write_test_pdf(tmp_path / "archivio" / "vecchio.pdf", pages=1)
    write_test_pdf(tmp_path / "archivio" / "2023" / "piu_vecchio.PDF", pages=1)
    (tmp_path / "note").mkdir()
    (tmp_path / "note" / "leggimi.txt").write_text("nessun pdf")
    with caplog.at_level(logging.WARNING, logger="ragstudy.text.textlayer"):
        documents = load_documents(tmp_path)
    assert [Path(d.path).name for d in documents] == ["a.pdf"]
    assert "archivio/ (2 PDFs)" in caplog.text and "Only the PDFs directly in the documents folder" in caplog.text
    assert "note/" not in caplog.text  # a subfolder without PDFs is not worth a warning


def test_a_folder_whose_pdfs_are_all_in_subfolders_says_so(tmp_path: Path) -> None:
    (tmp_path / "lotto1").mkdir()
    write_test_pdf(tmp_path / "lotto1" / "a.pdf", pages=1)
    with pytest.raises(StudyInputError, match=r"no PDF files in the documents folder \(its subfolders hold some: "
                                              r"lotto1/ \(1 PDF\); subfolders are not read\)"):
        list_pdfs(tmp_path)


# ---- outputs are created with the mode the umask gives any file, not mkstemp's 0600 -------------------------------

@pytest.fixture()
def umask():
    """Set the process umask for one test, then restore it (tests run in one thread)."""
    previous = os.umask(0o022)
    os.umask(previous)

    def set_umask(value: int) -> None:
        os.umask(value)

    yield set_umask
    os.umask(previous)


def _writers(folder: Path):
    from Postprocessing import offline_data
    from ragstudy.io import atomic_save, atomic_write_json, atomic_write_text

    def save_via_name(name: str) -> None:
        Path(name).write_bytes(b"PK")  # what openpyxl/kaleido do with the file name they are given

    return {
        "atomic_write_text": lambda: atomic_write_text(folder / "answers.csv", "a,b\n"),
        "atomic_write_json": lambda: atomic_write_json(folder / "config.json", {"k": 1}),
        "atomic_save": lambda: atomic_save(folder / "review.xlsx", save_via_name),
        "offline_data": lambda: offline_data._atomic_write_text(folder / "nltk" / "italian", "e\nè\n"),
    }


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
@pytest.mark.parametrize("writer", ["atomic_write_text", "atomic_write_json", "atomic_save", "offline_data"])
def test_written_files_respect_the_umask(writer: str, mask: int, mode: int, tmp_path: Path, umask) -> None:
    umask(mask)
    _writers(tmp_path)[writer]()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) == 1 and not written[0].name.startswith(".")  # no temporary file left behind
    assert stat.S_IMODE(written[0].stat().st_mode) == mode
