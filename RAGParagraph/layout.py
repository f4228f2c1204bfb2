"""Layout mode: paragraphs from page geometry (gaps, indentation, font changes), furniture removed.

Pipeline per document: one extraction pass and the furniture and TOC masks (ragstudy.text.cleaning, shared with the
clean text layer) -> per page,
reading order (columns, rows, table regions) -> a stream of visual lines and tables -> paragraph units
(title / paragraph / list item / table) -> titles attached, lists grouped with their lead-in, short paragraphs
merged within a section, long ones split at sentence boundaries.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from statistics import median

import numpy as np
import pymupdf

from RAGParagraph.sections import Heading, HeadingPath
from RAGParagraph.text import fold_ascii, join_lines, split_to_max
from RAGParagraph.types import Paragraph, SegmenterConfig
from ragstudy.text.cleaning.furniture import NOTE_MARK, FurnitureConfig, body_lines, trailing_notes
from ragstudy.text.cleaning.lines import ENUMERATOR, Line, PageLines, extract_lines, is_bullet_glyph, starts_item
from ragstudy.text.textnorm import continues_sentence, ends_sentence

logger = logging.getLogger(__name__)

_NUMBERED_HEADING_RE = re.compile(r"^\d{1,2}(?:\.\d{1,2})+\.?\s+\S")


@dataclass(slots=True)
class VLine:
    """A visual line: same-baseline fragments of a row merged, with the margins of its region."""

    page: int
    region: int  # region id, unique per (page, column band)
    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    size: float
    bold: bool
    left: float  # region's left text margin
    right: float  # region's right text margin
    note: bool = False  # a footnote at the foot of the page: read after the paragraph it interrupts


@dataclass(slots=True)
class Table:
    """Rows of cells detected as a table region (one chunk, rows on separate lines)."""

    page: int
    rows: list[list[str]]


@dataclass(slots=True)
class Unit:
    """A paragraph under construction."""

    kind: str  # "title" | "paragraph" | "item" | "table" | "list"
    text: str
    page_start: int
    page_end: int
    x0: float = 0.0
    size: float = 0.0
    last: VLine | None = field(default=None, repr=False)
    level: int = 0  # titles: 2 = section heading (larger or numbered), 1 = minor heading (bold/caps label)
    headed: int = 0  # level of the title this unit starts with: a section heading is never merged across
    lines: int = 1  # visual lines taken in so far
    path: tuple[str, ...] = ()  # heading path where the unit starts (its own titles included)


@dataclass(frozen=True)
class DocStats:
    """Typography: body size (document and per page), whether body text is bold, usual gap between lines."""

    body_size: float
    body_bold: bool
    line_gap: float
    page_body: tuple[float, ...] = ()  # per page: size holding most characters (tables can outweigh prose)


def doc_stats(pages: list[PageLines]) -> DocStats:
    """Body size = size holding most characters; line gap = median gap between lines of one block."""
    sizes: Counter = Counter()
    bold_chars = 0
    gaps: list[float] = []
    page_body: list[float] = []
    for page in pages:
        prev: Line | None = None
        local: Counter = Counter()
        for line in page.lines:
            local[round(line.size * 2) / 2] += len(line.text)
            if prev is not None and prev.block == line.block and abs(prev.size - line.size) < 0.6:
                gap = line.y0 - prev.y1
                if -line.size < gap < line.size:
                    gaps.append(gap)
            prev = line
        sizes.update(local)
        page_body.append(local.most_common(1)[0][0] if local else 0.0)
    if not sizes:
        return DocStats(10.0, False, 0.0, tuple(page_body))
    body = sizes.most_common(1)[0][0]
    for page in pages:
        for line in page.lines:
            if line.bold and abs(line.size - body) < 0.6:
                bold_chars += len(line.text)
    return DocStats(body, bold_chars > 0.5 * sizes[body], median(gaps) if gaps else 0.0, tuple(page_body))


# ----------------------------------------------------------------------------- reading order per page


def find_gutter(lines: list[Line], width: float, config: SegmenterConfig) -> tuple[float, float] | None:
    """The x-interval of a column gutter in the middle of the page, or None for a one-column page.

    Only lines narrower than 55 % of the page vote; each side needs `column_min_lines` lines at least 25 % of
    the page wide (prose columns, not table cells).
    """
    narrow = [line for line in lines if line.x1 - line.x0 < 0.55 * width]
    if len(narrow) < 2 * config.column_min_lines:
        return None
    step = 2.0
    cover = np.zeros(int(width / step) + 2, dtype=np.int32)
    for line in narrow:
        cover[int(line.x0 / step) : int(line.x1 / step) + 1] += 1
    lo, hi = int(0.3 * width / step), int(0.7 * width / step)
    tolerance = max(1, len(narrow) // 50)
    best: tuple[int, int] | None = None
    run_start = None
    for i in range(lo, hi + 1):
        if cover[i] <= tolerance:
            if run_start is None:
                run_start = i
        elif run_start is not None:
            if best is None or i - run_start > best[1] - best[0]:
                best = (run_start, i)
            run_start = None
    if run_start is not None and (best is None or hi + 1 - run_start > best[1] - best[0]):
        best = (run_start, hi + 1)
    if best is None:
        return None
    g0, g1 = best[0] * step, best[1] * step
    left = [ln for ln in narrow if ln.x1 <= g0 + step]
    right = [ln for ln in narrow if ln.x0 >= g1 - step]
    for side in (left, right):
        if sum(ln.x1 - ln.x0 >= 0.25 * width for ln in side) < config.column_min_lines:
            return None  # each column needs prose-width lines, not just table cells
    return g0, g1


def order_regions(page: PageLines, lines: list[Line], config: SegmenterConfig) -> list[list[Line]]:
    """Lines grouped into reading-order regions: full-width bands, and inside them left then right column."""
    if not lines:
        return []
    gutter = find_gutter(lines, page.width, config)
    by_y = sorted(lines, key=lambda ln: (ln.y0, ln.x0))
    if gutter is None:
        return [by_y]
    g0, g1 = gutter
    regions: list[list[Line]] = []
    left: list[Line] = []
    right: list[Line] = []
    for line in by_y:
        if line.x0 < g0 and line.x1 > g1:  # spans the gutter: a full-width band starts here
            regions.extend(r for r in (left, right) if r)
            left, right = [], []
            if regions and regions[-1] and regions[-1][-1].x0 < g0 and regions[-1][-1].x1 > g1:
                regions[-1].append(line)
            else:
                regions.append([line])
        elif (line.x0 + line.x1) / 2 < (g0 + g1) / 2:
            left.append(line)
        else:
            right.append(line)
    regions.extend(r for r in (left, right) if r)
    return regions


def group_rows(lines: list[Line]) -> list[list[Line]]:
    """Lines (sorted by top) grouped into rows of vertically overlapping lines, each row sorted by x."""
    rows: list[list[Line]] = []
    top = bottom = 0.0
    for line in lines:
        if rows:
            overlap = min(bottom, line.y1) - max(top, line.y0)
            if overlap > 0.5 * min(bottom - top, line.y1 - line.y0):
                rows[-1].append(line)
                bottom = max(bottom, line.y1)
                continue
        rows.append([line])
        top, bottom = line.y0, line.y1
    for row in rows:
        if len(row) > 1:
            row.sort(key=lambda ln: ln.x0)
    return rows


def row_cells(row: list[Line], cell_gap: float) -> list[list[Line]]:
    """Split a row into cells at horizontal gaps wider than `cell_gap` font sizes (bullets stick to their text)."""
    cells: list[list[Line]] = [[row[0]]]
    for line in row[1:]:
        prev = cells[-1][-1]
        gap = line.x0 - prev.x1
        lead = prev.text if len(cells[-1]) == 1 else ""
        if gap <= cell_gap * max(line.size, prev.size) or is_bullet_glyph(lead) or ENUMERATOR.fullmatch(lead + " "):
            cells[-1].append(line)
        else:
            cells.append([line])
    return cells


def merge_cell(cell: list[Line]) -> tuple[str, float, float, float, float, float, bool]:
    """Text and geometry of fragments on one baseline: (text, x0, y0, x1, y1, size, bold)."""
    if len(cell) == 1:
        ln = cell[0]
        return ln.text, ln.x0, ln.y0, ln.x1, ln.y1, ln.size, ln.bold
    main = max(cell, key=lambda ln: len(ln.text))
    first = cell[0].text
    text = " ".join(ln.text for ln in cell)
    if is_bullet_glyph(first) and first not in "-*":
        text = "• " + " ".join(ln.text for ln in cell[1:])  # a detached glyph ('o', '', U+0001) reads as a bullet
    return (
        text,
        cell[0].x0,
        min(ln.y0 for ln in cell),
        cell[-1].x1,
        max(ln.y1 for ln in cell),
        main.size,
        main.bold,
    )


def _aligned(a: list[list[Line]], b: list[list[Line]], tol: float = 4.0) -> bool:
    """Two multi-cell rows share a column grid: an inner cell edge of `b` lines up with one of `a`.

    Outer edges (the text margins) are ignored: prose split by an inline image shares them too.
    """
    starts = [c[0].x0 for c in a[1:]]
    ends = [c[-1].x1 for c in a[:-1]]
    return any(abs(c[0].x0 - x) <= tol for c in b[1:] for x in starts) or any(
        abs(c[-1].x1 - x) <= tol for c in b[:-1] for x in ends
    )


def table_spans(rows: list[list[list[Line]]], left: float) -> list[tuple[int, int]]:
    """Index ranges [start, end) of table regions: >= 2 multi-cell rows on a common column grid, close together.

    Single-cell rows between multi-cell rows (at most 4: wrapped cell text) belong to the table, as do
    indented single-cell rows right after it. Rows split by an inline image do not line up, so prose with
    icons is not mistaken for a table.
    """
    multi = [i for i, cells in enumerate(rows) if len(cells) >= 2]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(multi):
        j = i
        while j + 1 < len(multi) and multi[j + 1] - multi[j] <= 5 and _aligned(rows[multi[j]], rows[multi[j + 1]]):
            j += 1
        if j > i:
            start, end = multi[i], multi[j] + 1
            size = rows[start][0][0].size
            while end < len(rows) and len(rows[end]) == 1 and rows[end][0][0].x0 > left + 2 * size:
                end += 1
            spans.append((start, end))
        i = j + 1
    return spans


def page_stream(
    page: PageLines, lines: list[Line], config: SegmenterConfig, region_base: int
) -> list[VLine | Table]:
    """One page's content in reading order: visual lines and tables."""
    out: list[VLine | Table] = []
    for r, region in enumerate(order_regions(page, lines, config)):
        region_id = region_base + r
        left = min(ln.x0 for ln in region)
        right = max(ln.x1 for ln in region)
        rows = [row_cells(row, config.cell_gap) for row in group_rows(region)]
        table_end = dict(table_spans(rows, left))
        i = 0
        while i < len(rows):
            if i in table_end:
                end = table_end[i]
                out.append(Table(page.index, [[merge_cell(c)[0] for c in cells] for cells in rows[i:end]]))
                i = end
                continue
            merged = [merge_cell(c) for c in rows[i]]
            i += 1
            text, x0, y0, x1, y1, size, bold = merged[0]
            if len(merged) > 1:  # a lone row with gaps (text around an inline image): read left to right
                text = " ".join(m[0] for m in merged)
                x1 = merged[-1][3]
                y0, y1 = min(m[2] for m in merged), max(m[4] for m in merged)
            out.append(VLine(page.index, region_id, x0, y0, x1, y1, text, size, bold, left, right))
    return out


def mark_footnotes(items: list[VLine | Table], height: float, body: float) -> None:
    """Flag the page's trailing footnotes (ragstudy.text.cleaning.furniture.trailing_notes: small print low on the page,
    opening with a note mark) so that a paragraph running onto the next page is not cut."""
    for item in items[trailing_notes(items, height, body):]:
        item.note = True


# ----------------------------------------------------------------------------- paragraph assembly


def heading_level(line: VLine, stats: DocStats, config: SegmenterConfig) -> int:
    """2 for a section heading (larger than the body, or numbered '1.2 ...'), 1 for a minor heading (a short
    bold or upper-case label), 0 for body text. Text ending in . , ; : is never a heading."""
    text = line.text
    if len(text) > config.heading_max_chars or text[-1] in ".,;:" or not any(c.isalpha() for c in text):
        return 0
    body = max(stats.body_size, stats.page_body[line.page]) if stats.page_body else stats.body_size
    if line.size >= body + config.heading_size_delta:
        return 2
    if len(text) > 100:
        return 0
    if _NUMBERED_HEADING_RE.match(text):
        return 2
    if starts_item(text):
        # "8. GESTIONE DELLE EMERGENZE", "3. Ambito" in bold: numbered section headings, not list items
        label, _, rest = text.partition(" ")
        if label[:1].isdigit() and rest and (rest.isupper() or (line.bold and not stats.body_bold)):
            return 2
        return 0
    if line.bold and not stats.body_bold:
        return 1
    return 1 if text.isupper() and len(text) >= 4 and sum(c.isalpha() for c in text) >= 3 else 0


def _new_unit(line: VLine, kind: str) -> Unit:
    return Unit(kind, line.text, line.page, line.page, line.x0, line.size, line)


def _continues(unit: Unit, line: VLine, heading: int, stats: DocStats, config: SegmenterConfig) -> bool:
    """Whether `line` continues `unit` (same paragraph / title / list item) or starts a new one."""
    prev = unit.last
    if prev is None or unit.kind == "table":
        return False
    if bool(heading) != (unit.kind == "title") or (heading and heading != unit.level):
        return False
    if starts_item(line.text) and not heading:
        return False
    size = max(line.size, prev.size)
    if abs(line.size - prev.size) > 1.0:
        return False
    if line.page != prev.page or line.region != prev.region:
        # Across a page or column break a paragraph goes on only if its last line did not end a sentence, and
        # the new line continues the sentence (lower case), or is not indented (a new paragraph) or is indented
        # like the paragraph's previous line (a hanging indent), and does not leave a list item by an outdent.
        if unit.kind not in ("paragraph", "item") or ends_sentence(prev.text):
            return False
        if continues_sentence(line.text):
            return True
        if unit.kind == "item":
            return line.x0 - line.left > unit.x0 - prev.left - 2.0
        offset = line.x0 - line.left
        # A line of the paragraph's body (not its first line) set as far in as the new line: a hanging or block
        # indent that goes on, not a new paragraph's first-line indent.
        same_indent = unit.lines > 1 and abs(offset - (prev.x0 - prev.left)) <= 2.0
        return offset <= config.indent * size or same_indent
    gap = line.y0 - prev.y1
    if gap > stats.line_gap + config.para_gap * size or gap < -size:
        return False
    if unit.kind == "title":
        return True
    if unit.kind == "item":
        return line.x0 > unit.x0 - 2.0  # an outdented line ends the item
    if line.x0 - prev.x0 > config.indent * size and line.x0 > line.left + config.indent * size:
        return False  # first-line indentation
    width = max(line.right - line.left, 1.0)
    if ends_sentence(prev.text) and prev.x1 < line.right - 0.15 * width:
        return False  # the previous line ended a sentence well before the margin
    return True


def build_units(stream: list[VLine | Table], stats: DocStats, config: SegmenterConfig) -> list[Unit]:
    """Walk the reading-order stream and cut it into title / paragraph / item / table units."""
    units: list[Unit] = []
    pending: VLine | None = None
    current: Unit | None = None
    notes: list[VLine] = []

    def flush_notes() -> None:
        for note in notes:
            if units and units[-1].kind == "note" and not NOTE_MARK.match(note.text):
                units[-1].text = join_lines(units[-1].text, note.text)
            else:
                units.append(Unit("note", note.text, note.page, note.page))
        notes.clear()

    for item in stream:
        if isinstance(item, VLine) and item.note:
            notes.append(item)
            continue
        if isinstance(item, Table):
            flush_notes()
            text = "\n".join(" | ".join(c for c in row if c) for row in item.rows)
            prev = units[-1] if units else None
            if (
                prev is not None
                and current is None
                and prev.kind == "table"
                and item.page - 1 <= prev.page_end <= item.page
            ):
                prev.text += "\n" + text  # the same table, cut by an unaligned row or by a page break
                prev.page_end = item.page
            else:
                units.append(Unit("table", text, item.page, item.page))
            current = None
            continue
        line = item
        if is_bullet_glyph(line.text):
            pending = line  # a detached bullet glyph: joined to the next line
            continue
        if pending is not None:
            line.text = "• " + line.text if pending.text not in "-*" else pending.text + " " + line.text
            line.x0 = min(line.x0, pending.x0)
            pending = None
        heading = heading_level(line, stats, config)
        if current is not None and _continues(current, line, heading, stats, config):
            current.text = join_lines(current.text, line.text) if current.kind != "title" else current.text + " " + line.text
            current.page_end = line.page
            current.last = line
            current.lines += 1
            continue
        kind = "title" if heading else ("item" if starts_item(line.text) else "paragraph")
        flush_notes()
        current = _new_unit(line, kind)
        current.level = heading
        units.append(current)
    flush_notes()
    for unit in units:
        if unit.kind == "note":
            unit.kind = "paragraph"
    return units


def assign_heading_paths(units: list[Unit]) -> list[Unit]:
    """Give every unit the heading path in effect where it starts (sections.py: numbers, then font sizes)."""
    headings = HeadingPath()
    for unit in units:
        if unit.kind == "title":
            unit.path = headings.enter(Heading.of(unit.text, unit.size, unit.level))
        else:
            unit.path = headings.path
    return units


def _combine(a: Unit, b: Unit, kind: str, sep: str, path: tuple[str, ...] | None = None) -> Unit:
    """`a` and `b` as one unit; it keeps `a`'s heading path unless `path` is given."""
    return Unit(kind, a.text + sep + b.text, min(a.page_start, b.page_start), max(a.page_end, b.page_end),
                path=a.path if path is None else path)


def group_lists(units: list[Unit]) -> list[Unit]:
    """Consecutive list items become one list, together with a lead-in paragraph ending in ':'."""
    out: list[Unit] = []
    for unit in units:
        if unit.kind == "item":
            prev = out[-1] if out else None
            if prev is not None and prev.kind == "list":
                out[-1] = _combine(prev, unit, "list", "\n")
            elif prev is not None and prev.kind == "paragraph" and prev.text.endswith(":"):
                out[-1] = _combine(prev, unit, "list", "\n")
            else:
                out.append(Unit("list", unit.text, unit.page_start, unit.page_end, path=unit.path))
        else:
            out.append(unit)
    return out


def attach_titles(units: list[Unit]) -> list[Unit]:
    """Each title (or stack of titles) is prefixed to the unit it heads; a trailing title stays alone."""
    out: list[Unit] = []
    held: Unit | None = None
    for unit in units:
        if unit.kind == "title":
            if held is None:
                held = unit
            else:
                level = max(held.level, unit.level)
                held = _combine(held, unit, "title", "\n", unit.path)
                held.level = level
            continue
        if held is not None:
            unit = _combine(held, unit, unit.kind, "\n", unit.path)
            unit.headed = held.level
            held = None
        out.append(unit)
    if held is not None:
        out.append(held)
    return out


def _merge_kind(a: Unit, b: Unit) -> str:
    return a.kind if len(a.text) >= len(b.text) else b.kind


def _mergeable(prev: Unit, unit: Unit, max_chars: int) -> bool:
    """Two neighbours may merge: no lone title, no section heading between them, within max_chars."""
    return (
        prev.kind != "title"
        and unit.kind != "title"
        and unit.headed < 2
        and len(prev.text) + 1 + len(unit.text) <= max_chars
    )


def merge_short(units: list[Unit], min_chars: int, max_chars: int) -> list[Unit]:
    """Merge units shorter than `min_chars` with a neighbour of the same section (no title in between).

    Forward first (a short unit joins the one after it), then backward (a short unit still alone at the end
    of its section joins the one before), never past `max_chars` and never across a section heading; a minor
    heading (a bold label such as "Definizione") does not stop merging. A merged unit takes the kind of its
    longer part, so a short table and the definition under it become one chunk.
    """
    forward = _merge_pass(units, lambda prev, unit: len(prev.text) < min_chars, max_chars)
    return _merge_pass(forward, lambda prev, unit: len(unit.text) < min_chars, max_chars)


def _merge_pass(units: list[Unit], short, max_chars: int) -> list[Unit]:
    """One left-to-right pass joining a unit to the previous one when `short(prev, unit)` and they may merge."""
    out: list[Unit] = []
    for unit in units:
        prev = out[-1] if out else None
        if prev is not None and short(prev, unit) and _mergeable(prev, unit, max_chars):
            merged = _combine(prev, unit, _merge_kind(prev, unit), "\n")
            merged.headed = prev.headed
            out[-1] = merged
        else:
            out.append(unit)
    return out


def segment_layout(doc: pymupdf.Document, config: SegmenterConfig) -> list[Paragraph]:
    """Layout-mode paragraphs of a whole document."""
    pages = extract_lines(doc)
    stats = doc_stats(pages)
    stream: list[VLine | Table] = []
    for page, body in zip(pages, body_lines(pages, FurnitureConfig.of(config))):
        items = page_stream(page, body, config, region_base=page.index * 1000)
        mark_footnotes(items, page.height, stats.page_body[page.index] if stats.page_body else stats.body_size)
        stream.extend(items)
    units = assign_heading_paths(build_units(stream, stats, config))
    units = merge_short(attach_titles(group_lists(units)), config.min_chars, config.max_chars)
    paragraphs: list[Paragraph] = []
    for unit in units:
        kind = "paragraph" if unit.kind == "item" else unit.kind
        text = fold_ascii(unit.text) if config.ascii_fold else unit.text
        for piece in split_to_max(text.strip(), config.max_chars):
            paragraphs.append(Paragraph(piece, unit.page_start + 1, unit.page_end + 1, kind, unit.path))
    logger.debug("body size %.1f, line gap %.1f, %d units", stats.body_size, stats.line_gap, len(units))
    return paragraphs
