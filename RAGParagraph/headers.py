"""Page furniture: running headers/footers, page numbers and table-of-contents pages.

Headers and footers are found by repetition, not by font: a line in the top or bottom band whose text (digits
ignored) recurs on a share of the pages is furniture, wherever the content stream put it. TOC pages are found by
their dotted leaders and page-number column, not by bookmarks.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from RAGParagraph.extract import Line, PageLines

_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
# A line that is only a page number: "12", "Pagina 3", "pag. 4 di 20", "7 - 53", "iii", "Page 2 of 9".
PAGE_NUMBER = re.compile(
    r"^(?:pag(?:ina|\.)?|page|p\.)?\s*(?:\d{1,4}|[ivxlc]{1,7})(?:\s*(?:di|of|/|-|–|de)\s*\d{1,4})?$", re.IGNORECASE
)
# Dotted (or dashed/underscored) leaders, as in a TOC entry "Introduzione ........ 5", or a bare rule line.
LEADER = re.compile(r"(?:\.\s?){5,}|…{2,}|(?:_\s?){5,}|(?:-\s?){5,}|(?:·\s?){5,}")
_TOC_TITLE = re.compile(
    r"^(?:indice(?: generale| dei contenuti)?|sommario|contents|table of contents|index)$", re.IGNORECASE
)
_ENDS_WITH_PAGE = re.compile(r"\s(?:\d{1,4}|[ivxlc]{1,7})$", re.IGNORECASE)


def band_of(line: Line, page: PageLines, header_band: float, footer_band: float) -> str | None:
    """'top' or 'bottom' when the line's vertical centre lies in a furniture band, else None."""
    centre = (line.y0 + line.y1) / 2
    if centre <= page.height * header_band:
        return "top"
    if centre >= page.height * (1.0 - footer_band):
        return "bottom"
    return None


def furniture_key(text: str) -> str:
    """Text with digits and spacing normalised, so 'Pagina 3' and 'Pagina 14' share one key."""
    return _SPACES.sub(" ", _DIGITS.sub("#", text.lower())).strip()


def _substantial(key: str) -> bool:
    # A key needs some substance: a lone bullet or dash near the page edge repeats without being furniture.
    return sum(c.isalnum() or c == "#" for c in key) >= 2


def repeated_band_keys(pages: list[PageLines], header_band: float, footer_band: float, min_frac: float) -> set:
    """Keys of band lines that recur, in either band, on at least max(2, min_frac of the pages) pages, or
    that are the outermost text of at least max(2, 10 %) of the pages (a footer used on some pages only).

    Either band: journals print on page 1 at the top what later pages carry in the footer."""
    if len(pages) < 2:
        return set()
    counts: Counter = Counter()
    edge_counts: Counter = Counter()
    for page in pages:
        seen = set()
        edge = set()
        lines = [ln for ln in page.lines if PAGE_NUMBER.match(ln.text) is None]
        top = min((ln.y0 for ln in lines), default=0.0)
        bottom = max((ln.y1 for ln in lines), default=0.0)
        for line in lines:
            band = band_of(line, page, header_band, footer_band)
            if band is not None:
                key = furniture_key(line.text)
                seen.add(key)
                if line.y0 <= top + 3.0 or line.y1 >= bottom - 3.0:
                    edge.add(key)
        counts.update(seen)
        edge_counts.update(edge)
    need = max(2, math.ceil(min_frac * len(pages)))
    need_edge = max(2, math.ceil(0.1 * len(pages)))
    keys = {key for key, n in counts.items() if n >= need}
    keys |= {key for key, n in edge_counts.items() if n >= need_edge}
    return {key for key in keys if _substantial(key)}


def furniture_mask(pages: list[PageLines], header_band: float, footer_band: float, min_frac: float) -> list[list[bool]]:
    """Per page, per line: True where the line is a running header/footer or a page number.

    A band line also counts when it starts with a repeated key at least 8 characters long (a running string
    extended on one page).
    """
    keys = repeated_band_keys(pages, header_band, footer_band, min_frac)
    prefixes = tuple(k for k in keys if len(k) >= 8)
    masks: list[list[bool]] = []
    for page in pages:
        mask = []
        for line in page.lines:
            band = band_of(line, page, header_band, footer_band)
            if band is None:
                mask.append(False)
                continue
            key = furniture_key(line.text)
            mask.append(key in keys or key.startswith(prefixes) or PAGE_NUMBER.match(line.text) is not None)
        masks.append(mask)
    return masks


_LEADER_HINTS = ("..", ". .", "…", "__", "_ _", "--", "- -", "··", "· ·")


def is_toc_entry(text: str) -> bool:
    """A TOC entry line: dotted leaders (optionally followed by a page number)."""
    return any(h in text for h in _LEADER_HINTS) and LEADER.search(text) is not None


def toc_mask(lines: list[Line], min_frac: float) -> list[bool]:
    """On a TOC page, mark the TOC (title, entries, wrapped entry text); elsewhere mark only leader lines.

    A page is a TOC page when at least 3 of its lines, and `min_frac` of them, are entries (leaders, or text
    ending in a page number right-aligned with the leaders). Everything from the first to the last entry is
    dropped, so the entries' wrapped first lines go too; text above or below the TOC on that page is kept.
    """
    leaders = [is_toc_entry(line.text) for line in lines]
    n_leaders = sum(leaders)
    if n_leaders == 0:
        return leaders
    right = max(line.x1 for line, flag in zip(lines, leaders) if flag)
    entries = [
        flag
        or (
            abs(line.x1 - right) < 3.0
            and (_ENDS_WITH_PAGE.search(line.text) is not None or PAGE_NUMBER.match(line.text) is not None)
        )
        for line, flag in zip(lines, leaders)
    ]
    n_entries = sum(entries)
    if n_entries < 3 or n_entries < min_frac * len(lines):
        return leaders
    top = min(line.y0 for line, flag in zip(lines, entries) if flag)
    bottom = max(line.y1 for line, flag in zip(lines, entries) if flag)
    mask = []
    for line in lines:
        centre = (line.y0 + line.y1) / 2
        in_toc = top <= centre <= bottom or (centre < top and _TOC_TITLE.match(line.text.strip(" :.")) is not None)
        mask.append(in_toc)
    return mask
