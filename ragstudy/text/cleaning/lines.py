"""Line records of a PDF page and the per-line text rules: ligatures, odd spaces, symbol-font bullets, LaTeX accents.

One `get_text("dict")` call per page, reduced to line records with their box and dominant font: the paragraph
segmenter and the clean text layer read pages only through here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import groupby

import pymupdf

from ragstudy.text.textnorm import LIGATURES, compose_latex_accents

# What we need from MuPDF: text, fonts, boxes. No images (their bytes dominate "dict" time), ligatures expanded.
EXTRACT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_PRESERVE_LIGATURES
_BOLD_FLAG = 16
_MONO_FLAG = 8
_MONO_NAMES = ("mono", "courier", "consol", "cmtt", "sourcecode", "menlo")

# Characters dropped outright: soft hyphen, zero-width space/joiners, BOM.
_DROP = {"\u00ad": "", "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": ""}
# Spaces that should read as a plain space.
_SPACES = {"\u00a0": " ", "\u2002": " ", "\u2003": " ", "\u2009": " ", "\u202f": " ", "\t": " "}
_TRANSLATE = str.maketrans({**LIGATURES, **_DROP, **_SPACES})

# Glyphs that start a bulleted item. U+0001 is what Wingdings check marks extract as; U+F0xx are Symbol/
# Wingdings private-use code points (, , ,  ...).
BULLET_CHARS = frozenset("•-▪*‣◦‧–→●○■□◆◇►▶➢➤✓✔❖∙·—" + "\x01")
_PRIVATE_USE = re.compile(r"[\ue000-\uf8ff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ODD = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ue000-\uf8ff]")
_MULTISPACE = re.compile(r"[ ]{2,}")

# Enumerators that open a list item: 1.  1)  a)  a.  iv)  (a)  -- followed by a space.
ENUMERATOR = re.compile(r"^(?:\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{1,5})[\.\)]|\(\d{1,3}\)|\([a-zA-Z]\))(?:\s+|$)")


def clean_line(text: str) -> str:
    """Normalise one extracted line: ligatures, odd spaces, control/private-use glyphs, collapsed spaces."""
    text = text.translate(_TRANSLATE)
    if _ODD.search(text):
        stripped = text.lstrip()
        # A symbol-font glyph at the start of a line is a bullet; anywhere else it is noise.
        if stripped and (_PRIVATE_USE.match(stripped) or stripped[0] == "\x01"):
            text = "• " + stripped[1:]
        text = _PRIVATE_USE.sub("", text)
        text = _CONTROL.sub("", text)
    return _MULTISPACE.sub(" ", text).strip() if "  " in text else text.strip()


def is_bullet_glyph(text: str) -> bool:
    """True when the text is nothing but a bullet glyph (a detached bullet; Word's second level is 'o')."""
    return len(text) == 1 and (text in BULLET_CHARS or text in "o§")


def starts_item(text: str) -> bool:
    """True when a line opens a list item: a bullet glyph followed by a space, or an enumerator."""
    first, second = text[:1], text[1:2]
    if first in BULLET_CHARS and first != "·" and (second == " " or (not second and first not in "-*")):
        return True  # a bullet and a space, or a bullet alone that is not a hyphen or an asterisk
    return ENUMERATOR.match(text) is not None


def _is_mono(span: dict) -> bool:
    """A monospace span (code): its backquotes and carets are characters, never accents."""
    return bool(span["flags"] & _MONO_FLAG) or any(n in span["font"].lower() for n in _MONO_NAMES)


def _span_text(spans: list[dict]) -> str:
    """The spans' text joined, with LaTeX's separate accent glyphs composed outside monospace runs."""
    runs = (("".join(span["text"] for span in run), mono) for mono, run in groupby(spans, key=_is_mono))
    return "".join(text if mono else compose_latex_accents(text) for text, mono in runs)


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
    """The single MuPDF extraction call both the segmenter and the clean text layer use."""
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
                span = max(spans, key=lambda s: len(s["text"]))  # the span holding most characters: the line's font
                if spans[0]["text"].strip() == "o" and spans[1]["text"][:1].isspace():
                    raw = "•" + raw.lstrip()[1:]  # Word's second-level bullet: an 'o' in its own span
            text = clean_line(raw)
            if not text:
                continue
            bold = bool(span["flags"] & _BOLD_FLAG) or "bold" in span["font"].lower()
            out.append(Line(index, *line["bbox"], text, round(span["size"], 1), span["font"], bold, bno))
    return PageLines(index, data["width"], data["height"], out)


def extract_lines(doc: pymupdf.Document) -> list[PageLines]:
    """All pages of a document as line records, one MuPDF call per page."""
    return [lines_from_dict(i, page_dict(page)) for i, page in enumerate(doc)]
