"""Unit tests of the paragraph segmenter on small PDFs built here with PyMuPDF (fonts, sizes, positions known).

One test per heuristic of the paper's code (`mode="paper"`), then the layout mode's behaviours.
"""

from __future__ import annotations

import dataclasses
import json

import pymupdf
import pytest

from RAGParagraph.paper_mode import document_mode_size, is_bullet, is_title, page_body_font
from RAGParagraph.segmenter import Paragraph, SegmenterConfig, segment_pdf
from RAGParagraph.text import fold_ascii, join_lines, split_to_max
from ragstudy.text.cleaning.lines import clean_line, page_dict

PAPER = SegmenterConfig(mode="paper")
LAYOUT = SegmenterConfig()
FONTS = {
    "helv": pymupdf.Font("helv"), "hebo": pymupdf.Font("hebo"), "tiro": pymupdf.Font("tiro"), "cour": pymupdf.Font("cour"),
}
W, H = 595.0, 842.0

Item = tuple[float, float, str, float, str]  # x, baseline y, text, size, font


def build_pdf(pages: list[list[Item]], width: float = W, height: float = H) -> pymupdf.Document:
    """A PDF whose pages hold exactly the given text runs, in the given content-stream order."""
    doc = pymupdf.open()
    for items in pages:
        page = doc.new_page(width=width, height=height)
        for x, y, text, size, font in items:
            writer = pymupdf.TextWriter(page.rect)
            writer.append((x, y), text, font=FONTS[font], fontsize=size)
            writer.write_text(page)
    return pymupdf.open("pdf", doc.tobytes())


def lines_at(x: float, y: float, lines: list[str], size: float = 10.0, font: str = "helv", lead: float = 13.0) -> list[Item]:
    """Consecutive lines of one paragraph, `lead` points apart."""
    return [(x, y + i * lead, text, size, font) for i, text in enumerate(lines)]


def texts(paragraphs: list[Paragraph]) -> list[str]:
    return [p.text for p in paragraphs]


# ----------------------------------------------------------------------------- paper mode, one rule each


def test_paper_body_font_is_most_common_in_middle_band() -> None:
    # Outside 40-60 % of the height Times 14 dominates; inside it Helvetica 10 does: the band decides.
    items = [(72, 100 + 20 * i, f"fuori banda {i}", 14, "tiro") for i in range(10)]
    items += [(72, 0.45 * H + 14 * i, f"corpo {i}", 10, "helv") for i in range(5)]
    doc = build_pdf([items])
    data = page_dict(doc[0])
    fonts = {s["text"]: s["font"] for b in data["blocks"] for ln in b["lines"] for s in ln["spans"]}
    assert fonts["corpo 0"] != fonts["fuori banda 0"]
    assert page_body_font(data["blocks"], data["height"], 0.4, 0.6) == (10.0, fonts["corpo 0"])


def test_paper_drops_bottom_spans_not_in_body_font_and_keeps_body_font_ones() -> None:
    body = lines_at(72, 0.5 * H, ["Testo del corpo della pagina."])
    bottom = [(72, 0.95 * H, "Pagina 3", 8, "helv"), (300, 0.95 * H, "nota nel corpo", 10, "helv")]
    out = " ".join(texts(segment_pdf(build_pdf([body + bottom]), PAPER)))
    assert "Pagina 3" not in out
    assert "nota nel corpo" in out


def test_paper_title_rule_size_above_mode_plus_one_and_short() -> None:
    assert is_title("Introduzione", 12.1, 11.0, PAPER)
    assert not is_title("Introduzione", 12.0, 11.0, PAPER)  # not strictly above mode + 1
    assert not is_title("x" * 60, 16.0, 11.0, PAPER)  # 60 characters or more
    assert not is_title("• Introduzione", 16.0, 11.0, PAPER)  # a bullet is never a title


def test_paper_document_mode_is_most_frequent_span_size() -> None:
    spans = [(0, 10.0, "f", "a"), (0, 10.0, "f", "b"), (0, 14.0, "f", "c"), (0, 9.0, "f", "d"), (0, 9.0, "f", "e")]
    assert document_mode_size(spans) == 9.0  # pandas mode: the smallest of the tied sizes


@pytest.mark.parametrize("text", ["• a", "- a", "▪ a", "* a", "‣ a", "◦ a", "‧ a", "– a", "→ a", "1. a", "12) a", "a) a", "B. a"])
def test_paper_bullets_and_numbered_items(text: str) -> None:
    assert is_bullet(text)


@pytest.mark.parametrize("text", ["Testo normale", "1.2 Titolo", "a-b", "(a) voce"])
def test_paper_non_bullets(text: str) -> None:
    assert not is_bullet(text)


def test_paper_skips_dotted_dashed_underscored_lines() -> None:
    items = lines_at(72, 400, ["Prima riga", "Introduzione ........ 3", "-----", "_______", "Ultima riga"])
    out = texts(segment_pdf(build_pdf([items]), PAPER))
    assert out == ["Prima riga Ultima riga"]


def test_paper_short_bullet_is_pended_and_joined_to_next_text() -> None:
    items = lines_at(72, 400, ["Elenco delle voci:"]) + [(72, 413, "•", 10, "helv"), (90, 426, "prima voce", 10, "helv")]
    out = texts(segment_pdf(build_pdf([items]), PAPER))
    assert out == ["Elenco delle voci:\n• prima voce"]


def test_paper_flush_rule_merges_title_into_short_paragraph() -> None:
    short = " ".join(["parola"] * 20)
    items = lines_at(72, 300, [short, short]) + [(72, 340, "Nuovo capitolo", 16, "helv")]
    items += lines_at(72, 360, [short, short, short])
    out = texts(segment_pdf(build_pdf([items]), PAPER))
    assert len(out) == 1  # 40 words < 100: the title does not end the paragraph
    assert "\nNuovo capitolo" in out[0]


def test_paper_flush_rule_starts_new_paragraph_after_100_words() -> None:
    long = " ".join(["parola"] * 20)
    items = lines_at(72, 200, [long] * 6) + [(72, 300, "Nuovo capitolo", 16, "helv")]
    items += lines_at(72, 320, ["testo del capitolo"])
    out = texts(segment_pdf(build_pdf([items]), PAPER))
    assert len(out) == 2
    assert out[1] == "Nuovo capitolo\n testo del capitolo"  # the paper's join: title, newline, space, text


def test_paper_ascii_folding_is_optional() -> None:
    doc = build_pdf([lines_at(72, 400, ["perché la città è più “grande”"])])
    assert texts(segment_pdf(doc, PAPER)) == ["perché la città è più “grande”"]
    folded = segment_pdf(doc, dataclasses.replace(PAPER, ascii_fold=True))
    assert texts(folded) == ['perche la citta e piu "grande"']


def test_paper_drop_bookmark_pages_reproduces_the_paper_bug() -> None:
    doc = build_pdf([lines_at(72, 400, ["Indice"]), lines_at(72, 400, ["Contenuto del capitolo uno"])])
    doc.set_toc([[1, "Capitolo uno", 2]])
    kept = " ".join(texts(segment_pdf(doc, PAPER)))
    dropped = " ".join(texts(segment_pdf(doc, dataclasses.replace(PAPER, paper_drop_bookmark_pages=True))))
    assert "Contenuto del capitolo uno" in kept
    assert "Contenuto del capitolo uno" not in dropped and "Indice" in dropped


def test_paper_paragraph_pages_are_tracked() -> None:
    long = " ".join(["parola"] * 30)
    doc = build_pdf([lines_at(72, 400, [long] * 4), lines_at(72, 400, [long])])
    (only,) = segment_pdf(doc, PAPER)
    assert (only.page_start, only.page_end) == (1, 2)


# ----------------------------------------------------------------------------- layout mode

BODY = [
    "La conservazione dei documenti informatici è affidata al responsabile, che ne",
    "verifica l'integrità ogni sei mesi e redige un rapporto per l'amministrazione",
    "che lo archivia insieme ai fascicoli di riferimento.",
]


def furnished_pages(n: int, footer_first: bool) -> list[list[Item]]:
    pages = []
    for i in range(n):
        header = [(200, 40, "Manuale Operativo - Sistema di Gestione", 9, "helv")]
        footer = [(480, 810, f"Pagina {i + 1}", 9, "helv")]
        body = lines_at(72, 300, [f"Capitolo {i + 1}: " + BODY[0]] + BODY[1:], 11)
        body += lines_at(72, 380, BODY, 11)
        pages.append(footer + body + header if footer_first else header + body + footer)
    return pages


@pytest.mark.parametrize("footer_first", [False, True])
def test_layout_removes_running_header_footer_and_page_numbers(footer_first: bool) -> None:
    out = "\n".join(texts(segment_pdf(build_pdf(furnished_pages(4, footer_first)), LAYOUT)))
    assert "Manuale Operativo" not in out
    assert "Pagina" not in out
    assert out.count("La conservazione") == 8  # body kept, once per paragraph


def test_layout_drops_toc_page_but_keeps_content() -> None:
    toc = [(72, 80, "Indice", 16, "hebo")] + lines_at(
        72, 120, [f"{i}. Capitolo numero {i} .............................. {i * 3}" for i in range(1, 9)], 11
    )
    doc = build_pdf([toc, lines_at(72, 120, BODY, 11)])
    out = texts(segment_pdf(doc, LAYOUT))
    assert out == [" ".join(BODY)]


def test_layout_reads_left_column_before_right_column() -> None:
    left = [f"sinistra riga {i} del testo della colonna di sinistra" for i in range(12)]
    right = [f"destra riga {i} del testo della colonna di destra" for i in range(12)]
    items = lines_at(320, 100, right, 10, lead=12) + lines_at(50, 100, left, 10, lead=12)  # right first in stream
    out = "\n".join(texts(segment_pdf(build_pdf([items]), LAYOUT)))
    assert out.index("sinistra riga 11") < out.index("destra riga 0")
    assert out.index("sinistra riga 0") < out.index("sinistra riga 11")


def test_layout_dehyphenates_line_end_hyphens() -> None:
    items = lines_at(72, 300, ["Il responsabile avvia la proce-", "dura di conservazione entro il mese."], 11)
    assert texts(segment_pdf(build_pdf([items]), LAYOUT)) == [
        "Il responsabile avvia la procedura di conservazione entro il mese."
    ]


def test_layout_attaches_title_to_the_paragraph_it_heads_and_splits_sections() -> None:
    items = [(72, 100, "1. Conservazione", 16, "hebo")] + lines_at(72, 125, BODY, 11)
    items += [(72, 200, "2. Accesso", 16, "hebo")] + lines_at(72, 225, BODY, 11)
    out = segment_pdf(build_pdf([items]), LAYOUT)
    assert texts(out) == ["1. Conservazione\n" + " ".join(BODY), "2. Accesso\n" + " ".join(BODY)]


def test_layout_breaks_paragraphs_at_vertical_gaps_and_indentation() -> None:
    long = BODY[:2] + ["che lo archivia insieme ai fascicoli di riferimento e ne conserva una copia", "presso la sede."]
    items = lines_at(72, 100, long, 11) + lines_at(72, 200, long, 11)  # gap between them
    items += [(90, 290, long[0], 11, "helv")] + lines_at(72, 303, long[1:], 11)  # first-line indent, no gap
    out = texts(segment_pdf(build_pdf([items]), LAYOUT))
    assert len(out) == 3


def test_layout_keeps_list_items_with_their_lead_in_and_joins_detached_bullets() -> None:
    items = lines_at(72, 100, ["Il sistema offre le seguenti funzioni principali:"], 11)
    for i, label in enumerate(["gestione degli utenti", "gestione dei profili", "notifiche"]):
        y = 113 + 13 * i
        items += [(80, y, "•", 11, "helv"), (100, y, label, 11, "helv")]  # glyph as its own text run
    out = segment_pdf(build_pdf([items]), LAYOUT)
    assert [p.kind for p in out] == ["list"]
    assert out[0].text == (
        "Il sistema offre le seguenti funzioni principali:\n• gestione degli utenti\n• gestione dei profili\n"
        "• notifiche"
    )


def test_layout_keeps_a_table_as_one_chunk() -> None:
    rows = [("Formato", "Estensione", "Tipo MIME"), ("PDF", ".pdf", "application/pdf"), ("XML", ".xml", "text/xml")]
    rows += [(f"Formato{i}", f".f{i}", f"application/x-formato-{i}") for i in range(8)]  # > min_chars: own chunk
    items = []
    for r, row in enumerate(rows):
        items += [(72 + 150 * c, 100 + 15 * r, cell, 10, "helv") for c, cell in enumerate(row)]
    items += lines_at(72, 300, BODY * 3, 11)
    out = segment_pdf(build_pdf([items]), LAYOUT)
    tables = [p for p in out if p.kind == "table"]
    assert len(tables) == 1
    assert tables[0].text.startswith("Formato | Estensione | Tipo MIME\nPDF | .pdf | application/pdf")


def test_layout_hard_maximum_splits_at_sentence_boundaries() -> None:
    sentence = "Il responsabile verifica l'integrità dei fascicoli ogni sei mesi."
    items = lines_at(72, 100, [sentence] * 30, 11, lead=12)
    config = SegmenterConfig(max_chars=500, min_chars=100)
    out = texts(segment_pdf(build_pdf([items]), config))
    assert len(out) > 1
    assert all(len(t) <= 500 for t in out)
    assert all(t.endswith("mesi.") for t in out)


def test_layout_keeps_accents_and_folds_only_on_request() -> None:
    items = lines_at(72, 300, ["Perché la città è più efficiente: la qualità è garantita."], 11)
    doc = build_pdf([items])
    assert texts(segment_pdf(doc, LAYOUT)) == ["Perché la città è più efficiente: la qualità è garantita."]
    folded = texts(segment_pdf(doc, SegmenterConfig(ascii_fold=True)))
    assert folded == ["Perche la citta e piu efficiente: la qualita e garantita."]


def test_layout_paragraph_continues_across_pages_until_sentence_end() -> None:
    doc = build_pdf([lines_at(72, 700, BODY[:2], 11), lines_at(72, 100, BODY[2:], 11)])
    (only,) = segment_pdf(doc, LAYOUT)
    assert only.text == " ".join(BODY)
    assert (only.page_start, only.page_end) == (1, 2)


WORDS = ["Anzitutto", "Inoltre", "Quindi", "Poi", "Infine", "Peraltro", "Dunque", "Invece", "Ancora", "Allora",
         "Tuttavia", "Comunque"]


def unique_body(page: int) -> list[str]:
    """Three body lines no other page repeats (a repeated line near the page edge would read as furniture)."""
    return [f"{WORDS[page % 12]} {WORDS[(page * 5 + 1) % 12].lower()}, " + BODY[0]] + BODY[1:]


def running_head_book(pages: int = 12) -> list[list[Item]]:
    """A book: left pages carry the page number and 'CAPITOLO k. TITOLO', right pages the section title and the
    page number at the outer edge; each head in a smaller font than the text and on one or two pages only."""
    chapters = ["INTRODUZIONE", "INSTALLAZIONE", "CONFIGURAZIONE", "MANUTENZIONE"]
    out = []
    for i in range(pages):
        number, chapter = i + 1, i // 3 + 1
        if number % 2 == 0:
            head = [(72, 50, str(number), 10, "helv"), (300, 50, f"CAPITOLO {chapter}. {chapters[chapter - 1]}", 8, "helv")]
        else:
            section = f"{chapter}.{number} {WORDS[i].upper()} SULLA {chapters[chapter - 1]}"
            head = [(72, 50, section, 8, "helv"), (520, 50, str(number), 10, "helv")]
        body = lines_at(72, 100, unique_body(i), 11) + lines_at(72, 160, BODY, 11)
        out.append(head + body + lines_at(72, 220, [f"Fine della pagina {number}."], 11))
    return out


def test_layout_sentence_cut_by_a_page_break_under_a_running_head_is_one_paragraph() -> None:
    # The sentence breaks after "entro" at the foot of page 2; page 3 opens with its running head, then
    # "questo termine".
    first = ["La password temporanea dell'utente amministratore scade dopo ventiquattro ore: se non", "viene cambiata entro"]
    second = ["questo termine, l'account viene bloccato e occorre rigenerarla dal server di gestione."]
    pages = running_head_book(4)
    pages[1] += lines_at(72, 760, first, 11)
    pages[2] = [item for item in pages[2] if item[1] < 90] + lines_at(72, 100, second, 11) + lines_at(72, 160, BODY, 11)
    out = segment_pdf(build_pdf(pages), SegmenterConfig(min_chars=0))
    (joined,) = [p for p in out if "entro" in p.text]
    assert joined.text == " ".join(first + second)
    assert (joined.page_start, joined.page_end) == (2, 3)


def test_layout_indented_entry_continues_across_a_page_break() -> None:
    # A glossary: each entry's text indented under its term; one entry runs onto page 2, where it goes on with
    # a capital ("Unicode") at the same indentation.
    entry = ["La scatola che racchiude un oggetto, le cui dimensioni sono specificate", "con le coordinate del vertice inferiore sinistro e di quelle del vertice"]
    rest = ["Unicode permette di descriverle in modo portabile tra sistemi diversi e leggibile.", "Resta valido anche quando il documento viene stampato."]
    page1 = [(72, 714, "bounding box", 11, "hebo")] + lines_at(100, 727, entry, 11)
    page2 = lines_at(100, 100, rest, 11) + [(72, 140, "carattere", 11, "hebo")] + lines_at(100, 153, rest[1:], 11)
    out = segment_pdf(build_pdf([page1, page2]), SegmenterConfig(min_chars=0))
    (joined,) = [p for p in out if "Unicode" in p.text]
    assert joined.text.endswith(" ".join(entry + rest))
    assert (joined.page_start, joined.page_end) == (1, 2)


def test_layout_drops_running_heads_that_change_with_the_chapter_and_section() -> None:
    out = segment_pdf(build_pdf(running_head_book()), LAYOUT)
    text = "\n".join(texts(out))
    assert "CAPITOLO" not in text and "SULLA" not in text
    assert text.count("La conservazione") == 24 and text.count("Fine della pagina") == 12


def test_layout_keeps_section_headings_that_open_pages() -> None:
    # Sections that each open a page, numbered in step with the pages, at the top of the text block where
    # other pages start their text: headings, not running heads.
    titles = ["Introduzione", "Ruoli e responsabilità", "Oggetti conservati", "", "Sicurezza del sistema", ""]
    pages = []
    for i, title in enumerate(titles):
        if title:
            pages.append([(72, 100, str(i + 1), 14, "hebo"), (100, 100, title, 14, "hebo")]
                         + lines_at(72, 130, unique_body(i), 11))
        else:
            pages.append(lines_at(72, 100, unique_body(i) + unique_body(i + 6), 11))
    text = "\n".join(texts(segment_pdf(build_pdf(pages), LAYOUT)))
    for title in filter(None, titles):
        assert title in text


def test_layout_composes_latex_accents_outside_code() -> None:
    items = [(72, 100, "La configurazione sar`a pi`u semplice, poich´e `e automatica.", 11, "helv"),
             (72, 140, "set x=`e e poi `ls` e ``quoted''", 10, "cour")]
    out = texts(segment_pdf(build_pdf([items]), SegmenterConfig(min_chars=0)))
    assert out == ["La configurazione sarà più semplice, poiché è automatica.", "set x=`e e poi `ls` e ``quoted''"]


def test_layout_footnote_does_not_cut_a_paragraph_running_onto_the_next_page() -> None:
    note = "1 Decreto legislativo 7 marzo 2005, n. 82, Codice dell'amministrazione digitale."
    page1 = lines_at(72, 600, BODY[:2], 11) + [(72, 780, note, 8, "helv")]
    doc = build_pdf([page1, lines_at(72, 100, BODY[2:], 11)])
    out = texts(segment_pdf(doc, SegmenterConfig(min_chars=0)))
    assert out == [" ".join(BODY), note]


def test_page_without_text_yields_nothing() -> None:
    doc = build_pdf([[], lines_at(72, 100, BODY, 11), []])
    for config in (LAYOUT, PAPER):
        out = segment_pdf(doc, config)
        assert [(p.page_start, p.page_end) for p in out] == [(2, 2)]
    assert segment_pdf(build_pdf([[]]), LAYOUT) == []


def test_paragraph_texts_are_stripped_and_never_contain_blank_lines() -> None:
    doc = build_pdf(furnished_pages(3, footer_first=True))
    for config in (LAYOUT, PAPER):
        for p in segment_pdf(doc, config):
            assert p.text == p.text.strip() and p.text
            assert "\n\n" not in p.text  # the core joins paragraphs with a blank line


def test_segment_pdf_accepts_a_path_and_leaves_a_document_open(tmp_path) -> None:
    doc = build_pdf([lines_at(72, 100, BODY, 11)])
    path = tmp_path / "doc.pdf"
    doc.save(path)
    assert segment_pdf(path) == segment_pdf(str(path)) == segment_pdf(doc)
    assert not doc.is_closed


# ----------------------------------------------------------------------------- config, records, text helpers


def test_config_is_json_serialisable_and_validated() -> None:
    json.dumps(dataclasses.asdict(SegmenterConfig()))
    with pytest.raises(ValueError, match="mode must be one of"):
        SegmenterConfig(mode="paragraphs")
    with pytest.raises(ValueError, match="min_chars"):
        SegmenterConfig(min_chars=3000)
    with pytest.raises(ValueError, match="header_band"):
        SegmenterConfig(header_band=1.5)
    with pytest.raises(ValueError, match="paper_center_low"):
        SegmenterConfig(paper_center_low=0.7)
    with pytest.raises(ValueError, match="head_min_frac"):
        SegmenterConfig(head_min_frac=0.0)
    with pytest.raises(ValueError, match="head_gap"):
        SegmenterConfig(head_gap=-1.0)


def test_paragraph_record_is_validated() -> None:
    with pytest.raises(ValueError, match="stripped"):
        Paragraph(" x", 1, 1, "paragraph")
    with pytest.raises(ValueError, match="page_start"):
        Paragraph("x", 2, 1, "paragraph")
    with pytest.raises(ValueError, match="kind"):
        Paragraph("x", 1, 1, "chapter")


def test_clean_line_normalises_ligatures_spaces_and_symbol_bullets() -> None:
    assert clean_line("ﬁne\u00a0dell’uﬃcio") == "fine dell’ufficio"
    assert clean_line("\x01 Url pagina") == "• Url pagina"  # Wingdings check mark
    assert clean_line("\uf0b7 voce") == "• voce"  # Symbol bullet in the private-use area
    assert clean_line("  a   b  ") == "a b"


def test_join_lines_dehyphenates_only_before_lowercase() -> None:
    assert join_lines("proce-", "dura") == "procedura"
    assert join_lines("Codice-", "Fiscale") == "Codice- Fiscale"
    assert join_lines("fine.", "Inizio") == "fine. Inizio"


def test_fold_ascii_and_split_to_max() -> None:
    assert fold_ascii("perché “così” – già") == 'perche "cosi" - gia'
    parts = split_to_max("Prima frase qui. Seconda frase qui. Terza frase qui.", 40)
    assert parts == ["Prima frase qui. Seconda frase qui.", "Terza frase qui."]
