"""Page furniture: running headers/footers, page numbers and table-of-contents pages (one implementation, used by
the paragraph segmenter and by the clean text layer; the rules: docs/text-layer.md).

Headers and footers are found by repetition (a band line whose text, digits ignored, recurs on a share of the
pages) and by pattern, for running heads that change with the chapter ("CAPITOLO 1. INTRODUZIONE" on the left page,
"1.2 VALUTAZIONE 7" on the right): the outermost row of a page, set off by a gap, in the position and font that the
outermost rows of many pages share, most of which carry the page number or repeat their text. TOC pages are found
by their dotted leaders and page-number column, not by bookmarks.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, fields
from statistics import median

from collections.abc import Sequence

from ragstudy.text.cleaning.lines import Line, PageLines


@dataclass(frozen=True)
class FurnitureConfig:
    """The thresholds that find page furniture (the paragraph strategy exposes each as a parameter of its own)."""

    header_band: float = 0.15  # top share of the page height where running headers are looked for
    footer_band: float = 0.15  # bottom share of the page height where running footers are looked for
    repeat_min_frac: float = 0.25  # a band line repeating (digits ignored) on this share of pages is furniture
    toc_page_min_frac: float = 0.4  # a page whose lines are at least this share TOC entries is a TOC page
    # running heads/feet by pattern (the module doc):
    head_min_frac: float = 0.3  # share of pages whose outermost row shares the position and font
    head_evidence_frac: float = 0.5  # share of those rows that must carry the page number or repeat their text
    head_clash_frac: float = 0.25  # ... unless this many other pages (per head page) start their text there
    head_gap: float = 0.8  # gap (in font sizes) that sets the row off from the text below (above for feet)
    head_max_chars: int = 150  # a running-head row is shorter than this

    @classmethod
    def of(cls, settings: object) -> "FurnitureConfig":
        """The furniture thresholds of any settings record that has fields of these names (SegmenterConfig)."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})


_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
# A line that is only a page number: "12", "Pagina 3", "pag. 4 di 20", "7 - 53", "iii", "Page 2 of 9".
PAGE_NUMBER = re.compile(r"^(?:pag(?:ina|\.)?|page|p\.)?\s*(?:\d{1,4}|[ivxlc]{1,7})"
                         r"(?:\s*(?:di|of|/|-|–|de)\s*\d{1,4})?$", re.IGNORECASE)
# Dotted (or dashed/underscored) leaders, as in a TOC entry "Introduzione ........ 5", or a bare rule line.
LEADER = re.compile(r"(?:\.\s?){5,}|…{2,}|(?:_\s?){5,}|(?:-\s?){5,}|(?:·\s?){5,}")
_TOC_TITLE = re.compile(r"^(?:indice(?: generale| dei contenuti)?|sommario|contents|table of contents|index)$",
                        re.IGNORECASE)
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


def repeated_band_keys(pages: list[PageLines], header_band: float, footer_band: float, min_frac: float) -> set:
    """Keys of band lines that recur, in either band (journals print on page 1 at the top what later pages carry in
    the footer), on max(2, min_frac of the pages) pages, or are the outermost text of max(2, 10 %) of them."""
    if len(pages) < 2:
        return set()
    counts: Counter = Counter()
    edge_counts: Counter = Counter()
    for page in pages:
        seen, edge = set(), set()
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
    # a key needs some substance: a lone bullet or dash near the page edge repeats without being furniture
    return {key for key in keys if sum(c.isalnum() or c == "#" for c in key) >= 2}


def furniture_mask(pages: list[PageLines], header_band: float, footer_band: float, min_frac: float) -> list[list[bool]]:
    """Per page, per line: True where the line is a running header/footer or a page number (also a band line that
    starts with a repeated key of 8 characters or more: a running string extended on one page)."""
    keys = repeated_band_keys(pages, header_band, footer_band, min_frac)
    prefixes = tuple(k for k in keys if len(k) >= 8)

    def furniture(line: Line, page: PageLines) -> bool:
        if band_of(line, page, header_band, footer_band) is None:
            return False
        key = furniture_key(line.text)
        return key in keys or key.startswith(prefixes) or PAGE_NUMBER.match(line.text) is not None

    return [[furniture(line, page) for line in page.lines] for page in pages]


_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}
_FIRST_NUMBER = re.compile(r"\d{1,4}")
# A page number glued to the end of a running head by the text layer: "... SU PIÙ LINEE7".
_GLUED_NUMBER = re.compile(r"(?<=[^\W\d_])(\d{1,4})$")


def _roman_value(text: str) -> int | None:
    text = text.lower()
    if not text or any(c not in _ROMAN for c in text):
        return None
    values = [_ROMAN[c] for c in text]  # a value before a larger one is subtracted ("iv": 4)
    return sum(-value if value < after else value for value, after in zip(values, [*values[1:], 0]))


def _row_numbers(lines: list[Line]) -> list[int]:
    """Page-number candidates of a row (lines sorted by x): a number-only line at either end of the row, at
    least a font size away from the row's text (a section number sits next to its title, a page number at
    the outer edge), or digits glued to the end of the row's last text."""
    out = []
    for pos, inner in ((0, 1), (len(lines) - 1, len(lines) - 2)):
        line = lines[pos]
        if PAGE_NUMBER.match(line.text) is None:
            glued = _GLUED_NUMBER.search(line.text) if pos == len(lines) - 1 else None
            if glued:
                out.append(int(glued.group(1)))
            continue
        neighbour = lines[inner] if 0 <= inner < len(lines) and inner != pos else None
        gap = float("inf") if neighbour is None else max(neighbour.x0 - line.x1, line.x0 - neighbour.x1)
        found = _FIRST_NUMBER.search(line.text)
        value = int(found.group()) if found else _roman_value(line.text.split()[-1])
        if value is not None and gap >= line.size:
            out.append(value)
    return sorted(set(out))


@dataclass(slots=True)
class _EdgeRow:
    """The outermost row of text of one page in one band, and what it carries."""

    page: int
    lines: list[int]  # indices into page.lines
    numbers: list[int]  # page-number candidates


def _centre(line: Line) -> float:
    return (line.y0 + line.y1) / 2


def _edge_row(page: PageLines, keep: list[int], band: str, config: FurnitureConfig) -> _EdgeRow | None:
    """The outermost row (top or bottom) of the kept lines, if it lies in its band, is short, and a gap of at
    least `head_gap` font sizes sets it off from the text next to it."""
    if not keep:
        return None
    lines = page.lines
    top = band == "top"
    o = lines[min(keep, key=lambda i: lines[i].y0) if top else max(keep, key=lambda i: lines[i].y1)]
    row = [i for i in keep if o.y0 - 1.0 <= _centre(lines[i]) <= o.y1 + 1.0]
    if top and any(_centre(lines[i]) > page.height * config.header_band for i in row):
        return None
    if not top and any(_centre(lines[i]) < page.height * (1.0 - config.footer_band) for i in row):
        return None
    if sum(len(lines[i].text) for i in row) > config.head_max_chars:
        return None
    rest = [lines[i] for i in keep if i not in row]
    if top:
        below = [ln.y0 for ln in rest if _centre(ln) > _centre(o)]
        gap = min(below) - max(lines[i].y1 for i in row) if below else float("inf")
    else:
        above = [ln.y1 for ln in rest if _centre(ln) < _centre(o)]
        gap = min(lines[i].y0 for i in row) - max(above) if above else float("inf")
    if gap < config.head_gap * max(lines[i].size for i in row):
        return None
    row.sort(key=lambda i: lines[i].x0)
    return _EdgeRow(page.index, row, _row_numbers([lines[i] for i in row]))


def _pattern_rows(pages: list[PageLines], keeps: list[list[int]], band: str, config: FurnitureConfig) -> list[_EdgeRow]:
    """The edge rows that are running heads (or feet) by pattern; see the module docstring."""
    rows = [r for r in (_edge_row(p, k, band, config) for p, k in zip(pages, keeps)) if r is not None]
    if len(rows) < 3:
        return []
    # Page numbers: a candidate is one when its offset to the physical page recurs on >= 3 pages.
    offsets = Counter(offset for row in rows for offset in {n - (row.page + 1) for n in row.numbers})
    good = {off for off, n in offsets.items() if n >= 3}
    numbered = {row.page for row in rows if any(n - (row.page + 1) in good for n in row.numbers)}
    # Styles: (font, size) of the rows' text lines, at a position shared across pages.
    members: dict[tuple[str, float], list[tuple[_EdgeRow, float, str]]] = defaultdict(list)
    for row in rows:
        for line in (pages[row.page].lines[i] for i in row.lines):
            if PAGE_NUMBER.match(line.text) is None:
                members[(line.font, round(line.size * 2) / 2)].append((row, _centre(line), furniture_key(line.text)))
    need = max(3, math.ceil(config.head_min_frac * len(pages)))
    outermost = _outermost_centres(pages, keeps, band)
    heads: dict[int, _EdgeRow] = {}
    for (_font, size), found in members.items():
        centre = median(c for _, c, _ in found)
        tol = max(2.0, 0.5 * size)
        on = [(row, text) for row, c, text in found if abs(c - centre) <= tol]
        pages_on = {row.page for row, _ in on}
        if len(pages_on) < need:
            continue
        # Where other pages start their text at the same height, the rows are the text block's first lines
        # (a section opening each page), not heads set above the text block.
        clash = sum(abs(c - centre) <= tol for page, c in outermost.items() if page not in pages_on)
        if clash >= max(2.0, config.head_clash_frac * len(pages_on)):
            continue
        text_pages: dict[str, set] = defaultdict(set)
        for row, text in on:
            text_pages[text].add(row.page)
        repeated = {row.page for row, text in on if len(text_pages[text]) >= 2}
        evidence = len(pages_on & (numbered | repeated))
        if evidence >= config.head_evidence_frac * len(pages_on):
            heads.update({row.page: row for row, _ in on})
    return list(heads.values())


def _outermost_centres(pages: list[PageLines], keeps: list[list[int]], band: str) -> dict[int, float]:
    """Per page, the vertical centre of its outermost kept line that is not a page number."""
    out = {}
    for page, keep in zip(pages, keeps):
        lines = [page.lines[i] for i in keep if PAGE_NUMBER.match(page.lines[i].text) is None]
        if lines:
            line = min(lines, key=lambda ln: ln.y0) if band == "top" else max(lines, key=lambda ln: ln.y1)
            out[page.index] = _centre(line)
    return out


def running_head_mask(pages: list[PageLines], masks: list[list[bool]], config: FurnitureConfig) -> list[list[bool]]:
    """`masks` (repetition-based furniture) extended with the running heads and feet found by pattern, looked for
    among the lines not yet dropped (a head under a repeated logo is still seen) and the page numbers (evidence)."""
    out = [list(mask) for mask in masks]
    for band in ("top", "bottom"):
        keeps = [[i for i, (line, drop) in enumerate(zip(page.lines, mask)) if not drop or PAGE_NUMBER.match(line.text)]
                 for page, mask in zip(pages, out)]
        for row in _pattern_rows(pages, keeps, band, config):
            for i in row.lines:
                out[row.page][i] = True
    return out


_LEADER_HINTS = ("..", ". .", "…", "__", "_ _", "--", "- -", "··", "· ·")


def is_toc_entry(text: str) -> bool:
    """A TOC entry line: dotted leaders (optionally followed by a page number)."""
    return any(h in text for h in _LEADER_HINTS) and LEADER.search(text) is not None


def toc_mask(lines: list[Line], min_frac: float) -> list[bool]:
    """On a TOC page, mark the TOC (title, entries, wrapped entry text); elsewhere only leader lines. A TOC page has
    3 or more entries, `min_frac` of its lines (leaders, or text ending in a page number aligned with them). All from
    the first to the last entry goes, so wrapped entry lines too; text above or below the TOC is kept."""
    leaders = [is_toc_entry(line.text) for line in lines]
    n_leaders = sum(leaders)
    if n_leaders == 0:
        return leaders
    right = max(line.x1 for line, flag in zip(lines, leaders) if flag)
    # LaTeX sets the page number as its own text right of the leader: the number column is then the margin.
    rows = [(line.y0, line.y1) for line, flag in zip(lines, leaders) if flag]
    numbers = [line.x1 for line in lines if PAGE_NUMBER.match(line.text) is not None and line.x0 >= right
               and any(min(y1, line.y1) - max(y0, line.y0) > 0 for y0, y1 in rows)]
    edges = (right, median(numbers)) if numbers else (right,)
    entries = [flag or (any(abs(line.x1 - edge) < 3.0 for edge in edges)
                        and (_ENDS_WITH_PAGE.search(line.text) is not None or PAGE_NUMBER.match(line.text) is not None))
               for line, flag in zip(lines, leaders)]
    n_entries = sum(entries)
    if n_entries < 3 or n_entries < min_frac * len(lines):
        return leaders
    top = min(line.y0 for line, flag in zip(lines, entries) if flag)
    bottom = max(line.y1 for line, flag in zip(lines, entries) if flag)
    return [top <= c <= bottom or (c < top and _TOC_TITLE.match(line.text.strip(" :.")) is not None)
            for line, c in ((line, _centre(line)) for line in lines)]


def body_lines(pages: list[PageLines], config: FurnitureConfig) -> list[list[Line]]:
    """Per page, its lines without furniture: running heads and feet (by repetition and by pattern), page numbers,
    and the table of contents (TOC pages' entries; leader lines elsewhere)."""
    masks = furniture_mask(pages, config.header_band, config.footer_band, config.repeat_min_frac)
    masks = running_head_mask(pages, masks, config)
    out = []
    for page, mask in zip(pages, masks):
        body = [line for line, drop in zip(page.lines, mask) if not drop]
        toc = toc_mask(body, config.toc_page_min_frac)
        out.append([line for line, drop in zip(body, toc) if not drop])
    return out


# A footnote opens with its mark: "12 Vedi ...", "* Nota", "† ...", or a superscript digit.
NOTE_MARK = re.compile(r"^(?:\d{1,3}|[*†‡§¹²³⁴⁵⁶⁷⁸⁹⁰]+)\s*\S")


def trailing_notes(items: Sequence, height: float, body: float) -> int:
    """Index of the first footnote among a page's items in reading order (len(items): none). Footnotes are the
    page's trailing small print: items (`size`, `y0`, `text`; one without a size, a table, ends the search) a point
    or more below the body size, in the lower 40 % of the page, from the first that opens with a note mark."""
    start = len(items)
    while start > 0:
        item = items[start - 1]
        size = getattr(item, "size", None)
        if size is None or size > body - 1.0 or item.y0 < 0.6 * height:
            break
        start -= 1
    while start < len(items) and not NOTE_MARK.match(items[start].text):
        start += 1
    return start
