"""The segmenter on real PDFs (../shared/pdfs): furniture removed, reading order, sizes, accents, no exception.

The PDFs are not part of the repository (see ../shared/pdfs/README.md); without them these tests skip.
../shared/pdfs/more-it/ holds Italian LaTeX manuals: running heads that change with the chapter, accents set as
separate glyphs, paragraphs running across pages.
"""

from __future__ import annotations

import re
import statistics
from functools import lru_cache
from pathlib import Path

import pymupdf
import pytest

from RAGParagraph.segmenter import Paragraph, SegmenterConfig, segment_pdf
from ragstudy.text.textnorm import compose_latex_accents

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
PDFS = SHARED / "pdfs"
pytestmark = pytest.mark.skipif(not PDFS.is_dir(), reason=f"real PDFs not available ({PDFS} is absent)")

MORE_IT = sorted(f"more-it/{p.name}" for p in (PDFS / "more-it").glob("*.pdf")) if PDFS.is_dir() else []
ITALIAN = sorted(p.name for p in PDFS.glob("it_*.pdf")) if PDFS.is_dir() else []
ALL = sorted(p.name for p in PDFS.glob("*.pdf")) if PDFS.is_dir() else []
LSHORT, AMSLDOC = "more-it/it_texlive_lshort-italian.pdf", "more-it/it_texlive_amsldoc-it.pdf"

# Running headers/footers as printed (checked by eye on the rendered pages; see ../shared/pdfs/README.md).
FURNITURE = {
    "it_agid_pat_manuale-operativo.pdf": [r"PAT - Manuale Operativo", r"Pagina \d+"],
    "it_agid_lg-doc-informatici_all2_formati-file-riversamento.pdf": [r"via Liszt, 21", r"Presidenza del Consiglio dei Ministri"],
    "it_agid_lg-doc-informatici_all5_metadati.pdf": [r"Allegato 5 – I metadati", r"Release Bozza in consultazione"],
    "it_agid_lg-doc-informatici_all6_comunicazione-aoo.pdf": [
        r"Allegato 6 - Comunicazione tra AOO di Documenti Amministrativi Protocollati", r"\b\d+ - 53\b",
    ],
    "it_gu-ue_eupl-v1.2_licenza.pdf": [r"Gazzetta ufficiale dell'Unione europea"],
    "it_ipzs_cie-middleware_manuale-uso.pdf": [r"POLIGRAFICO", r"E ZECCA"],
}
# Running heads that change with the chapter or section (seen on the pages rendered with `pdftoppm -r 50`):
# (pdf, head as printed, first page, last page). No paragraph starting on those pages may carry the head; the
# chapter or section title it repeats is kept where it opens its chapter or section, on an earlier page.
RUNNING_HEADS = [
    # book layout: "2   Cose che bisogna sapere" on left pages, "1.2 Fondamenti   3" on right pages
    (LSHORT, "Cose che bisogna sapere", 26, 40),
    (LSHORT, "Comporre il testo", 42, 70),
    (LSHORT, "Comporre matematica", 72, 102),
    (LSHORT, "Funzionalità speciali", 104, 120),
    (LSHORT, "Creare la grafica per la matematica", 122, 140),
    (LSHORT, "Personalizzare LATEX", 142, 159),
    (LSHORT, "Glossario", 16, 23),
    (LSHORT, "1.2 Fondamenti", 27, 27),
    (LSHORT, "2.11 Ambienti", 59, 65),
    (LSHORT, "3.12 Elenchi di simboli matematici", 95, 101),
    (LSHORT, "5.2 L’ambiente picture", 123, 135),
    (LSHORT, "INDICE ANALITICO", 173, 184),
    # small caps: "2   CAPITOLO 2. OPZIONI PER IL PACCHETTO AMSMATH", "3.6. GRUPPI DI EQUAZIONI ...   5",
    # and a page number glued on: "3.9. SPAZIATURA VERTICALE ... IN DISPLAY SU PIÙ LINEE7"
    (AMSLDOC, "CAPITOLO", 1, 39),
    (AMSLDOC, "EQUAZIONI IN DISPLAY", 1, 39),
    (AMSLDOC, "SU PIÙ LINEE", 1, 39),
    (AMSLDOC, "VARIE FUNZIONALITÀ MATEMATICHE", 1, 39),
    (AMSLDOC, "MESSAGGI DI ERRORE", 1, 39),
    (AMSLDOC, "INDICE", 1, 39),
]
# A paragraph that runs across a page break: (pdf, text across the break, first page, last page).
ACROSS_PAGES = [
    (AMSLDOC, "si può usare \\allowdisplaybreaks[1] nel preambolo del documento", 11, 12),  # under a running head
    (LSHORT, "le coordinate del vertice inferiore sinistro e di quelle del vertice superiore destro", 15, 16),
]
LEADER = re.compile(r"(?:\.\s?){5,}|…{2,}|(?:_\s?){5,}")
TOC_ENTRY = re.compile(r"(?:\.\s?){5,}\s*(?:\d{1,4}|[ivxlc]{1,7})\s*$", re.MULTILINE)
# An accent glyph left before its letter: "sar`a", "`e", "Poich´e" (a backquote in code is followed by more).
LATEX_ACCENT = re.compile(r"[`´¨ˆ˜˘˙˚˝ˇ][A-Za-zı](?![\w`])")
ACCENTED = re.compile(r"[àèéìíòóùúÀÈÉÌÍÒÓÙÚ]")

# (pdf, phrase near the end of the left column, phrase at the top of the right column) on one page.
TWO_COLUMNS = [
    ("en_texlive_tugboat-ltubguid_2col.pdf", "pressed in exactly the same way", "which will produce ‘section’ headings"),
    ("en_texlive_mnras-guide_2col.pdf", "Others are used in almost all papers", "The full title can be multiple lines"),
    ("en_docling_amt_handbook_sample_2col.pdf", "reused without impairing its efficiency", "The stainless steel self-locking nut"),
    ("ko_docling_normal_4pages_2col.pdf", "우연한 외래의 사고로 신체에 입은", "통상 질병보험금에 비해"),
]


@lru_cache(maxsize=None)
def layout(name: str) -> tuple[Paragraph, ...]:
    return tuple(segment_pdf(PDFS / name))


def joined(name: str) -> str:
    return "\n\n".join(p.text for p in layout(name))


@pytest.mark.parametrize("name", sorted(FURNITURE))
def test_no_running_header_or_footer_in_any_chunk(name: str) -> None:
    for pattern in FURNITURE[name]:
        leaked = [p for p in layout(name) if re.search(pattern, p.text)]
        assert not leaked, f"{name}: {pattern!r} leaked into page {leaked[0].page_start}: {leaked[0].text[:120]!r}"


@pytest.mark.parametrize("name", ALL)
def test_no_toc_leader_lines_in_any_chunk(name: str) -> None:
    leaked = [p for p in layout(name) if LEADER.search(p.text)]
    assert not leaked, f"{name}: leader line on page {leaked[0].page_start}: {leaked[0].text[:120]!r}"


@pytest.mark.parametrize("name", ITALIAN)
def test_italian_paragraph_sizes(name: str) -> None:
    lengths = [len(p.text) for p in layout(name)]
    assert 200 <= statistics.median(lengths) <= 1500
    assert max(lengths) <= SegmenterConfig().max_chars


@pytest.mark.parametrize("name", ITALIAN + MORE_IT)
def test_accents_are_kept(name: str) -> None:
    with pymupdf.open(PDFS / name) as doc:
        raw = sum(len(ACCENTED.findall(compose_latex_accents(page.get_text()))) for page in doc)
    kept = len(ACCENTED.findall(joined(name)))
    # Header/footer/TOC text is dropped on purpose, so a few accents may go with it.
    assert kept >= 0.9 * raw, f"{name}: {kept} accented letters kept of {raw}"


@pytest.mark.parametrize(("name", "head", "first", "last"), RUNNING_HEADS)
def test_no_chapter_running_head_in_any_paragraph(name: str, head: str, first: int, last: int) -> None:
    leaked = [p for p in layout(name) if first <= p.page_start <= last and head in p.text]
    assert not leaked, f"{name}: running head {head!r} on page {leaked[0].page_start}: {leaked[0].text[:160]!r}"


@pytest.mark.parametrize("name", MORE_IT)
def test_no_toc_entry_lines_in_latex_manuals(name: str) -> None:
    leaked = [p for p in layout(name) if TOC_ENTRY.search(p.text)]
    assert not leaked, f"{name}: TOC entry on page {leaked[0].page_start}: {leaked[0].text[:120]!r}"


@pytest.mark.parametrize("name", ALL + MORE_IT)
def test_no_latex_accent_glyph_left(name: str) -> None:
    left = [(p.page_start, m.group()) for p in layout(name) for m in LATEX_ACCENT.finditer(p.text)]
    assert not left, f"{name}: accents not composed: {left[:5]}"


@pytest.mark.parametrize(("name", "text", "first", "last"), ACROSS_PAGES)
def test_paragraph_running_across_a_page_break_is_one_paragraph(name: str, text: str, first: int, last: int) -> None:
    found = [p for p in layout(name) if text in re.sub(r"\s+", " ", p.text)]
    assert [(p.page_start, p.page_end) for p in found] == [(first, last)]


@pytest.mark.parametrize(("name", "left", "right"), TWO_COLUMNS)
def test_two_column_reading_order(name: str, left: str, right: str) -> None:
    text = re.sub(r"\s+", " ", joined(name))
    assert left in text and right in text
    assert text.index(left) < text.index(right)


def test_toc_pages_are_dropped_not_bookmark_targets() -> None:
    # PAT has no bookmarks and a 4-page dotted TOC; its first section must survive, the TOC must not.
    text = joined("it_agid_pat_manuale-operativo.pdf")
    assert "Login utente" in text and "pannello di accesso utente" in text
    assert "Modifica documento" not in text.split("Login utente")[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_both_modes_run_on_every_pdf(name: str) -> None:
    for mode in ("layout", "paper"):
        paragraphs = segment_pdf(PDFS / name, SegmenterConfig(mode=mode))
        assert paragraphs, f"{name}: no paragraph in {mode} mode"
        assert all(p.text and p.text == p.text.strip() and "\n\n" not in p.text for p in paragraphs)
        with pymupdf.open(PDFS / name) as doc:
            assert all(1 <= p.page_start <= p.page_end <= doc.page_count for p in paragraphs)


def test_paper_mode_reproduces_the_merged_sections() -> None:
    # The paper's flush rule: on PAT its longest "paragraph" is tens of thousands of characters.
    paragraphs = segment_pdf(PDFS / "it_agid_pat_manuale-operativo.pdf", SegmenterConfig(mode="paper"))
    assert max(len(p.text) for p in paragraphs) > 20_000
    assert len(paragraphs) < 30
