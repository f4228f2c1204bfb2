"""Content elements and document styles for the bundled sample corpus.

Content modules describe a document as a tuple of these elements; `engine.py` lays them out with PyMuPDF and
records the ground truth (kind, pages, exact text) of every logical block while doing so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

Color = tuple[float, float, float]
BLACK: Color = (0.0, 0.0, 0.0)
GRAY: Color = (0.35, 0.35, 0.35)

# Page sizes in points (portrait width, height); an "L" suffix means landscape.
PAGE_SIZES: dict[str, tuple[float, float]] = {
    "A4": (595.0, 842.0),
    "A4L": (842.0, 595.0),
    "A3L": (1191.0, 842.0),
    "A5": (420.0, 595.0),
}


def clean(text: str) -> str:
    """Collapse the whitespace of a source string (content modules use triple-quoted text)."""
    return " ".join(text.split())


@dataclass(frozen=True)
class H:
    """A heading; level 0 is the document title on the cover."""

    level: int
    text: str


@dataclass(frozen=True)
class P:
    """A paragraph. style: body, cover_title, cover_sub, cover_info, code, note."""

    text: str
    style: str = "body"


@dataclass(frozen=True)
class Item:
    text: str
    children: tuple["Item", ...] = ()


@dataclass(frozen=True)
class L:
    """A list. marker: "•", "–", "▪", "detached" (• as its own glyph line, Word style), "1." or "a)"."""

    marker: str
    items: tuple[Item, ...]


@dataclass(frozen=True)
class T:
    """A simple ruled table; widths are fractions of the text width; the first row is the header row."""

    rows: tuple[tuple[str, ...], ...]
    widths: tuple[float, ...]


@dataclass(frozen=True)
class Sep:
    """A separator line drawn as text made of one character (".", "-" or "_"): decoration, not a block."""

    char: str


@dataclass(frozen=True)
class NewPage:
    """Start a new page; size (a PAGE_SIZES key) changes the size of this and the following pages."""

    size: str | None = None


@dataclass(frozen=True)
class Space:
    height: float


@dataclass(frozen=True)
class TOC:
    """A table of contents listing the headings up to `levels` that follow it, with dotted leaders."""

    title: str = "Indice"
    levels: int = 2


Element = Union[H, P, L, T, Sep, NewPage, Space, TOC]


def ul(marker: str, *items: Union[str, tuple[str, list[str]]]) -> L:
    """Build a list: each item is a string or (text, [sub-item texts])."""
    built: list[Item] = []
    for it in items:
        if isinstance(it, tuple):
            text, subs = it
            built.append(Item(clean(text), tuple(Item(clean(s)) for s in subs)))
        else:
            built.append(Item(clean(it)))
    return L(marker, tuple(built))


def table(text: str, widths: tuple[float, ...]) -> T:
    """A table written as one line per row, cells separated by "|" (the first line is the header row)."""
    rows = tuple(tuple(cell.strip() for cell in line.split("|")) for line in text.strip().splitlines())
    for row in rows:
        if len(row) != len(widths):
            raise ValueError(f"table row {row!r} has {len(row)} cells for {len(widths)} column widths")
    return T(rows, widths)


@dataclass(frozen=True)
class HeadingStyle:
    font: str
    size: float
    color: Color = BLACK
    space_before: float = 12.0
    space_after: float = 6.0


@dataclass(frozen=True)
class DocStyle:
    """How one document looks: fonts, page geometry, running header/footer, hyphenation, ligatures."""

    stem: str
    title: str
    author: str
    subject: str
    page_size: str = "A4"
    margins: tuple[float, float, float, float] = (72.0, 72.0, 72.0, 72.0)  # left, top, right, bottom
    body_font: str = "helv"
    bold_font: str = "hebo"
    italic_font: str = "heit"
    body_size: float = 11.0
    leading: float = 1.4
    para_space: float = 6.0
    headings: tuple[HeadingStyle, ...] = ()  # index = level - 1
    chapter_new_page: bool = False
    columns: int = 1
    column_gap: float = 18.0
    hyphenate: bool = False
    ligatures: bool = False
    header_lines: tuple[str, ...] = ()
    header_align: str = "left"
    header_rule: bool = True
    footer_left: str = ""
    footer_template: str = "{n}"  # {n} this page, {m} page count
    footer_align: str = "center"
    furniture_size: float = 8.5
    furniture_from_page: int = 2
    list_indent: float = 18.0
    toc_font: str = "helv"
    extra: dict[str, str] = field(default_factory=dict)
