"""One `get_text("dict")` call per page, reduced to light line records (the only PDF pass either mode makes)."""

from __future__ import annotations

from dataclasses import dataclass

import pymupdf

from RAGParagraph.text import clean_line
from ragstudy.textnorm import compose_latex_accents

# What we need from MuPDF: text, fonts, boxes. No images (their bytes dominate "dict" time), ligatures expanded.
EXTRACT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_PRESERVE_LIGATURES
_BOLD_FLAG = 16
_MONO_FLAG = 8
_MONO_NAMES = ("mono", "courier", "consol", "cmtt", "sourcecode", "menlo")


def _is_mono(span: dict) -> bool:
    """A monospace span (code): its backquotes and carets are characters, never accents."""
    return bool(span["flags"] & _MONO_FLAG) or any(n in span["font"].lower() for n in _MONO_NAMES)


def _span_text(spans: list[dict]) -> str:
    """The spans' text joined, with LaTeX's separate accent glyphs composed outside monospace runs."""
    parts: list[str] = []
    run: list[str] = []
    for span in spans:
        if _is_mono(span):
            if run:
                parts.append(compose_latex_accents("".join(run)))
                run = []
            parts.append(span["text"])
        else:
            run.append(span["text"])
    if run:
        parts.append(compose_latex_accents("".join(run)))
    return "".join(parts)


@dataclass(slots=True)
class Line:
    """One horizontal text line of a page, as MuPDF reports it, with its dominant span's font."""

    page: int  # 0-based page index
    x0: float
    y0: float
    x1: float
    y1: float
    text: str  # cleaned (ligatures, odd spaces, symbol bullets), stripped, never empty
    size: float  # font size of the span holding most characters
    font: str
    bold: bool
    block: int  # MuPDF block number within the page


@dataclass(slots=True)
class PageLines:
    """The text lines of one page and the page's size."""

    index: int
    width: float
    height: float
    lines: list[Line]


def page_dict(page: pymupdf.Page) -> dict:
    """The single MuPDF extraction call both modes use."""
    return page.get_text("dict", flags=EXTRACT_FLAGS)


def lines_from_dict(index: int, data: dict) -> PageLines:
    """Reduce a page's dict to horizontal, non-empty lines (rotated text such as margin stamps is dropped)."""
    out: list[Line] = []
    for block in data["blocks"]:
        if block.get("type", 0) != 0:
            continue
        bno = block["number"]
        for line in block["lines"]:
            dx, dy = line["dir"]
            if dx < 0.98 or abs(dy) > 0.05:
                continue
            spans = line["spans"]
            if len(spans) == 1:
                span = spans[0]
                raw = span["text"] if _is_mono(span) else compose_latex_accents(span["text"])
            else:
                raw = _span_text(spans)
                span = spans[0]
                best = -1
                for s in spans:  # the span holding most characters gives the line's font
                    n = len(s["text"])
                    if n > best:
                        span, best = s, n
                if spans[0]["text"].strip() == "o" and spans[1]["text"][:1].isspace():
                    raw = "•" + raw.lstrip()[1:]  # Word's second-level bullet: an 'o' in its own span
            text = clean_line(raw)
            if not text:
                continue
            x0, y0, x1, y1 = line["bbox"]
            font = span["font"]
            bold = bool(span["flags"] & _BOLD_FLAG) or "bold" in font.lower()
            out.append(Line(index, x0, y0, x1, y1, text, round(span["size"], 1), font, bold, bno))
    return PageLines(index, data["width"], data["height"], out)


def extract_lines(doc: pymupdf.Document) -> list[PageLines]:
    """All pages of a document as line records, one MuPDF call per page."""
    return [lines_from_dict(i, page_dict(page)) for i, page in enumerate(doc)]
