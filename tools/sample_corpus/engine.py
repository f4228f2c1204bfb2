"""Lay out sample documents with PyMuPDF and record their ground truth while doing so.

The engine wraps text itself (greedy, optional Italian-style hyphenation), so it knows for every rendered line
which block it belongs to, the character offset of the line in the block's ground-truth text and the page it
lands on. Rendering happens after layout, when the page count ("Pagina N di M") and the heading pages (TOC) are
known. Nothing random is used: the same content always gives the same bytes.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from .elements import (
    BLACK,
    GRAY,
    PAGE_SIZES,
    TOC,
    Color,
    DocStyle,
    Element,
    H,
    Item,
    L,
    NewPage,
    P,
    Sep,
    Space,
    T,
)

logger = logging.getLogger(__name__)

TABLE_CELL_SEP = " | "
FIXED_PDF_DATE = "D:20250301090000+01'00'"
VOWELS = set("aeiouàèéìòóù")
# consonant pairs that start a syllable together (break before them): muta cum liquida, s + consonant, digraphs
ONSET_CLUSTERS = {
    "bl", "br", "cl", "cr", "dr", "fl", "fr", "gl", "gr", "pl", "pr", "tr", "vr",
    "ch", "gh", "gn", "sc", "sp", "st", "sm", "sb", "sd", "sf", "sg", "sl", "sn", "sv", "sq", "qu",
}
LIGATURES = (("ffi", "\ufb03"), ("ffl", "\ufb04"), ("fi", "\ufb01"), ("fl", "\ufb02"), ("ff", "\ufb00"))
WORD_RE = re.compile(r"^([^\W\d_]+)([.,;:)]*)$")


@dataclass
class TextOp:
    x: float
    y: float
    text: str
    font: str
    size: float
    color: Color = BLACK


@dataclass
class LineOp:
    p1: tuple[float, float]
    p2: tuple[float, float]
    width: float = 0.5
    color: Color = BLACK


@dataclass
class RectOp:
    rect: tuple[float, float, float, float]
    fill: Color


@dataclass
class Page:
    size: tuple[float, float]
    ncols: int
    ops: list = field(default_factory=list)
    has_body: bool = False


@dataclass
class BlockRec:
    """A block while it is being laid out: lines are (offset into text, 0-based page) pairs."""

    kind: str
    text: str
    lines: list[tuple[int, int]] = field(default_factory=list)
    page: int = -1  # furniture only


@dataclass(frozen=True)
class LaidOutDocument:
    style: DocStyle
    pages: tuple[Page, ...]
    blocks: tuple[BlockRec, ...]


def fold_ligatures(text: str) -> str:
    for plain, lig in LIGATURES:
        text = text.replace(lig, plain)
    return text


def hyphen_points(word: str) -> list[int]:
    """Positions where an Italian word may be split (simplified syllabification), at least 3 letters from each end."""
    w = word.lower()
    points: list[int] = []
    for i in range(3, len(w) - 2):
        a, b, c = w[i - 1], w[i], w[i + 1]
        if a in VOWELS and b not in VOWELS and c in VOWELS:
            points.append(i)  # vo-ca-le
        elif a not in VOWELS and b not in VOWELS and c in VOWELS and (a + b) not in ONSET_CLUSTERS and a != "s":
            points.append(i)  # par-te, con-to
        elif (a in VOWELS and b not in VOWELS and i + 2 < len(w) and c not in VOWELS
              and (b + c) in ONSET_CLUSTERS and w[i + 2] in VOWELS):
            points.append(i)  # ve-stito, a-pri
    return points


class Layout:
    """Stateful layout of one document: pages, columns, a y cursor and the block records."""

    def __init__(self, style: DocStyle) -> None:
        self.style = style
        self.fonts: dict[str, pymupdf.Font] = {}
        self.pages: list[Page] = []
        self.blocks: list[BlockRec] = []
        self.size = PAGE_SIZES[style.page_size]
        self.col = 0
        self.y = 0.0
        self.toc_entries: list[tuple[TextOp, BlockRec, int]] = []  # (number op, toc block, heading ordinal)
        self.heading_blocks: list[int] = []

    # ---- fonts and measures -------------------------------------------------------------------------------
    def font(self, name: str) -> pymupdf.Font:
        if name not in self.fonts:
            self.fonts[name] = pymupdf.Font(name)
        return self.fonts[name]

    def render_text(self, text: str, font: str) -> str:
        """Text as it goes into the PDF text layer: ligature code points where a typeset document has them."""
        if self.style.ligatures and font in {"tiro", "tibo", "tiit"}:
            for plain, lig in LIGATURES:
                text = text.replace(plain, lig)
        return text

    def width(self, text: str, font: str, size: float) -> float:
        return self.font(font).text_length(self.render_text(text, font), fontsize=size)

    # ---- page geometry -----------------------------------------------------------------------------------
    @property
    def page(self) -> Page:
        return self.pages[-1]

    def frame(self) -> tuple[float, float, float, float]:
        left, top, right, bottom = self.style.margins
        w, h = self.page.size
        return left, top, w - right, h - bottom

    def column_box(self) -> tuple[float, float]:
        x0, _, x1, _ = self.frame()
        n = self.page.ncols
        cw = (x1 - x0 - self.style.column_gap * (n - 1)) / n
        left = x0 + self.col * (cw + self.style.column_gap)
        return left, left + cw

    def new_page(self, size: tuple[float, float] | None = None, ncols: int | None = None) -> None:
        if size is not None:
            self.size = size
        n = ncols if ncols is not None else (self.style.columns if self.pages else 1)
        self.pages.append(Page(self.size, n))
        page_no = len(self.pages)
        if page_no >= self.style.furniture_from_page and self.style.header_lines:
            self.blocks.append(BlockRec("header", "", page=page_no - 1))
        self.col = 0
        self.y = self.frame()[1]

    def close_page(self) -> None:
        page_no = len(self.pages)
        if page_no >= self.style.furniture_from_page and self.style.footer_template:
            self.blocks.append(BlockRec("footer", "", page=page_no - 1))

    def advance(self) -> None:
        """Move to the next column, or to a new page when the last column is full."""
        if self.col + 1 < self.page.ncols:
            self.col += 1
            self.y = self.frame()[1]
        else:
            self.close_page()
            self.new_page()

    def at_top(self) -> bool:
        return abs(self.y - self.frame()[1]) < 0.01

    def ensure(self, height: float) -> None:
        if self.y + height > self.frame()[3] + 0.01 and not self.at_top():
            self.advance()

    def space(self, height: float) -> None:
        if not self.at_top():
            self.y += height

    # ---- text lines ---------------------------------------------------------------------------------------
    def wrap(self, text: str, font: str, size: float, first_width: float, width: float) -> list[tuple[int, str]]:
        """Greedy wrap; returns (offset of the line in `text`, rendered line) with line-end hyphens added."""
        words: list[tuple[int, str]] = []
        pos = 0
        for w in text.split(" "):
            words.append((pos, w))
            pos += len(w) + 1
        lines: list[tuple[int, str]] = []
        cur: list[str] = []
        cur_start = 0
        avail = first_width
        i = 0
        pending: tuple[int, str] | None = None
        while i < len(words) or pending is not None:
            off, w = pending if pending is not None else words[i]
            if pending is None:
                i += 1
            pending = None
            candidate = " ".join(cur + [w])
            if self.width(candidate, font, size) <= avail or not cur and self.width(w, font, size) > avail:
                if not cur:
                    cur_start = off
                cur.append(w)
                continue
            split = self.try_hyphenate(cur, w, font, size, avail)
            if split is not None:
                head, tail = split
                lines.append((cur_start, " ".join(cur + [head + "-"])))
                cur, avail = [], width
                pending = (off + len(head), tail)
                continue
            lines.append((cur_start, " ".join(cur)))
            cur, avail = [w], width
            cur_start = off
        if cur:
            lines.append((cur_start, " ".join(cur)))
        return lines

    def try_hyphenate(self, cur: list[str], word: str, font: str, size: float, avail: float) -> tuple[str, str] | None:
        if not self.style.hyphenate or not cur:
            return None
        used = self.width(" ".join(cur), font, size)
        if avail - used < 0.08 * avail:  # only hyphenate when the line would otherwise be visibly short
            return None
        m = WORD_RE.match(word)
        if not m or len(m.group(1)) < 8 or not m.group(1).islower():
            return None
        core = m.group(1)
        for p in reversed(hyphen_points(core)):
            head = core[:p]
            if self.width(" ".join(cur + [head + "-"]), font, size) <= avail:
                return head, word[p:]
        return None

    def place_text(self, block: BlockRec, text: str, font: str, size: float, x_first: float, x_rest: float,
                   color: Color = BLACK, align: str = "left", leading: float | None = None,
                   base_offset: int = 0) -> None:
        """Wrap and place `text` as lines of `block`, breaking columns/pages as needed."""
        lead = size * (leading or self.style.leading)
        _, col_right = self.column_box()
        lines = self.wrap(text, font, size, col_right - x_first, col_right - x_rest)
        for n, (off, line) in enumerate(lines):
            if self.y + lead > self.frame()[3] + 0.01:
                shift_first, shift_rest = x_first - self.column_box()[0], x_rest - self.column_box()[0]
                self.advance()
                x_first, x_rest = self.column_box()[0] + shift_first, self.column_box()[0] + shift_rest
            x = x_first if n == 0 else x_rest
            if align == "center":
                left, right = self.column_box()
                x = left + (right - left - self.width(line, font, size)) / 2
            self.page.ops.append(TextOp(x, self.y + size, self.render_text(line, font), font, size, color))
            self.page.has_body = True
            block.lines.append((base_offset + off, len(self.pages) - 1))
            self.y += lead

    # ---- elements -----------------------------------------------------------------------------------------
    def add_block(self, kind: str, text: str) -> BlockRec:
        rec = BlockRec(kind, text)
        self.blocks.append(rec)
        return rec

    def heading(self, el: H) -> None:
        st = self.style
        if el.level == 0:
            hs_font, hs_size, color, before, after = st.bold_font, 24.0, st.headings[0].color, 0.0, 14.0
        else:
            hs = st.headings[min(el.level, len(st.headings)) - 1]
            hs_font, hs_size, color, before, after = hs.font, hs.size, hs.color, hs.space_before, hs.space_after
            if el.level == 1 and st.chapter_new_page and self.page.has_body:
                self.close_page()
                self.new_page()
        self.space(before)
        # keep with next: the heading plus two body lines must fit
        self.ensure(hs_size * 1.3 + after + 2 * st.body_size * st.leading)
        rec = self.add_block("title", el.text)
        left, _ = self.column_box()
        self.place_text(rec, el.text, hs_font, hs_size, left, left, color=color, leading=1.25,
                        align="center" if el.level == 0 else "left")
        self.heading_blocks.append(len(self.blocks) - 1)
        self.y += after

    def paragraph(self, el: P) -> None:
        st = self.style
        left, _ = self.column_box()
        if el.style == "body":
            self.space(st.para_space)
            rec = self.add_block("paragraph", el.text)
            self.place_text(rec, el.text, st.body_font, st.body_size, left, left)
        elif el.style == "note":
            self.space(st.para_space)
            rec = self.add_block("paragraph", el.text)
            self.place_text(rec, el.text, st.italic_font, st.body_size - 0.5, left + 12, left + 12)
        elif el.style == "code":
            # code lines are separated by " / " in the source; each is one rendered line, the block joins them
            self.space(st.para_space)
            code_lines = el.text.split(" / ")
            rec = self.add_block("paragraph", " ".join(code_lines))
            off = 0
            for line in code_lines:
                self.place_text(rec, line, "cour", st.body_size - 1.5, left + 8, left + 8, leading=1.3,
                                base_offset=off)
                off += len(line) + 1
        elif el.style in {"cover_title", "cover_sub", "cover_info"}:
            size, font, gap = {"cover_title": (26.0, st.bold_font, 10.0), "cover_sub": (15.0, st.body_font, 8.0),
                               "cover_info": (11.0, st.body_font, 4.0)}[el.style]
            self.space(gap)
            rec = self.add_block("title" if el.style == "cover_title" else "paragraph", el.text)
            color = st.headings[0].color if el.style == "cover_title" else BLACK
            self.place_text(rec, el.text, font, size, left, left, color=color, align="center", leading=1.3)
        else:
            raise ValueError(f"{st.stem}: unknown paragraph style {el.style!r}")

    def list_items(self, el: L, items: tuple[Item, ...], depth: int) -> None:
        st = self.style
        size = st.body_size
        for n, item in enumerate(items):
            self.space(st.para_space * 0.5)
            left, _ = self.column_box()
            mx = left + 6 + st.list_indent * depth
            tx = mx + st.list_indent
            marker = el.marker
            if depth > 0 and marker in {"•", "detached"}:
                marker = "–"
            if marker == "1.":
                label = f"{n + 1}."
            elif marker == "a)":
                label = f"{chr(ord('a') + n)})"
            else:
                label = ""
            text = f"{label} {item.text}" if label else item.text
            rec = self.add_block("list_item", text)
            if self.y + size * st.leading > self.frame()[3]:
                self.advance()
                left, _ = self.column_box()
                mx = left + 6 + st.list_indent * depth
                tx = mx + st.list_indent
            glyph_y = self.y + size
            page_before = len(self.pages)
            if label:
                self.page.ops.append(TextOp(mx, glyph_y, label, st.body_font, size))
                self.place_text(rec, item.text, st.body_font, size, tx, tx, base_offset=len(label) + 1)
                rec.lines.insert(0, (0, page_before - 1))
            else:
                glyph_font = "symb" if marker == "detached" else st.body_font
                glyph = "•" if marker == "detached" else marker
                self.page.ops.append(TextOp(mx + (2 if marker == "detached" else 0), glyph_y, glyph, glyph_font, size))
                self.place_text(rec, item.text, st.body_font, size, tx, tx)
            if item.children:
                self.list_items(el, item.children, depth + 1)

    def table(self, el: T) -> None:
        st = self.style
        size = st.body_size - 1.0
        row_h = size * 1.9
        self.space(st.para_space * 2)
        self.ensure(row_h * len(el.rows) + 2)
        left, right = self.column_box()
        total = right - left
        xs = [left]
        for frac in el.widths:
            xs.append(xs[-1] + frac * total)
        xs[-1] = right
        text = "\n".join(TABLE_CELL_SEP.join(row) for row in el.rows)
        rec = self.add_block("table", text)
        off = 0
        top = self.y
        pg = self.page
        for r, row in enumerate(el.rows):
            if len(row) != len(el.widths):
                raise ValueError(f"{st.stem}: table row {r} has {len(row)} cells, expected {len(el.widths)}")
            y0 = self.y
            if r == 0:
                pg.ops.append(RectOp((left, y0, right, y0 + row_h), (0.86, 0.89, 0.94)))
            font = st.bold_font if r == 0 else st.body_font
            for c, cell in enumerate(row):
                cw = xs[c + 1] - xs[c] - 8
                if self.width(cell, font, size) > cw:
                    raise ValueError(f"{st.stem}: table cell {cell!r} is wider than its column ({cw:.0f} pt)")
                pg.ops.append(TextOp(xs[c] + 4, y0 + row_h * 0.5 + size * 0.35, self.render_text(cell, font),
                                     font, size))
            rec.lines.append((off, len(self.pages) - 1))
            off += len(TABLE_CELL_SEP.join(row)) + 1
            self.y += row_h
            pg.ops.append(LineOp((left, self.y), (right, self.y), 0.5))
        pg.ops.append(LineOp((left, top), (right, top), 0.8))
        for x in xs:
            pg.ops.append(LineOp((x, top), (x, self.y), 0.5))
        pg.has_body = True
        self.y += st.para_space

    def separator(self, el: Sep) -> None:
        st = self.style
        self.space(st.para_space)
        self.ensure(st.body_size * 2)
        left, right = self.column_box()
        unit = self.width(el.char, st.body_font, st.body_size)
        n = int((right - left) / unit)
        self.page.ops.append(TextOp(left, self.y + st.body_size, el.char * n, st.body_font, st.body_size, GRAY))
        self.y += st.body_size * st.leading + st.para_space

    def toc(self, el: TOC, content: tuple[Element, ...], start: int) -> None:
        st = self.style
        size = st.body_size
        left, right = self.column_box()
        title_rec = self.add_block("toc", el.title)
        self.place_text(title_rec, el.title, st.bold_font, size + 5, left, left, leading=1.3)
        self.y += 10
        ordinal = sum(1 for e in content[:start] if isinstance(e, H))
        for e in content[start:]:
            if not isinstance(e, H):
                continue
            ordinal += 1
            if e.level == 0 or e.level > el.levels:
                continue
            self.y += 4 if e.level == 1 else 1
            font = st.bold_font if e.level == 1 else st.body_font
            x = left + (e.level - 1) * 16
            numx = right - self.width("999", st.body_font, size)
            title_w = self.width(e.text, font, size)
            dots_x = x + title_w + self.width("  ", font, size)
            dot_w = self.width(".", st.body_font, size)
            ndots = int((numx - self.width("  ", font, size) - dots_x) / dot_w)
            rec = self.add_block("toc", "")
            rec.text = f"{e.text} {'.' * ndots} "  # page number appended when known
            pg = self.page
            pg.ops.append(TextOp(x, self.y + size, self.render_text(e.text, font), font, size))
            pg.ops.append(TextOp(dots_x, self.y + size, "." * ndots, st.body_font, size))
            num_op = TextOp(right, self.y + size, "", st.body_font, size)
            pg.ops.append(num_op)
            rec.lines.append((0, len(self.pages) - 1))
            self.toc_entries.append((num_op, rec, ordinal - 1))
            self.y += size * 1.5
            if self.y > self.frame()[3]:
                raise ValueError(f"{st.stem}: the table of contents does not fit on one page")
        pg = self.page
        pg.has_body = True

    def run(self, content: tuple[Element, ...]) -> None:
        self.new_page(ncols=1)
        for i, el in enumerate(content):
            if isinstance(el, H):
                self.heading(el)
            elif isinstance(el, P):
                self.paragraph(el)
            elif isinstance(el, L):
                self.list_items(el, el.items, 0)
            elif isinstance(el, T):
                self.table(el)
            elif isinstance(el, Sep):
                self.separator(el)
            elif isinstance(el, Space):
                self.y += el.height
            elif isinstance(el, NewPage):
                self.close_page()
                self.new_page(PAGE_SIZES[el.size] if el.size else None)
            elif isinstance(el, TOC):
                self.toc(el, content, i)
            else:
                raise TypeError(f"{self.style.stem}: unknown element {el!r}")
        self.close_page()
        self.finish_toc()
        self.finish_furniture()

    def finish_toc(self) -> None:
        for num_op, rec, ordinal in self.toc_entries:
            heading = self.blocks[self.heading_blocks[ordinal]]
            number = str(heading.lines[0][1] + 1)
            num_op.text = number
            num_op.x -= self.width(number, num_op.font, num_op.size)
            rec.text += number

    def finish_furniture(self) -> None:
        st = self.style
        total = len(self.pages)
        size = st.furniture_size
        for rec in self.blocks:
            if rec.kind not in {"header", "footer"}:
                continue
            pg = self.pages[rec.page]
            w, h = pg.size
            left, right = st.margins[0], w - st.margins[2]
            rec.lines.append((0, rec.page))
            if rec.kind == "header":
                lines = list(st.header_lines)
                rec.text = " ".join(lines)
                y = st.margins[1] - 14 - size * 1.25 * (len(lines) - 1)
                for n, line in enumerate(lines):
                    x = self.aligned_x(line, st.body_font, size, left, right, st.header_align)
                    pg.ops.insert(n, TextOp(x, y, self.render_text(line, st.body_font), st.body_font, size, GRAY))
                    y += size * 1.25
                if st.header_rule:
                    pg.ops.append(LineOp((left, st.margins[1] - 8), (right, st.margins[1] - 8), 0.6, GRAY))
            else:
                number = st.footer_template.format(n=rec.page + 1, m=total)
                y = h - st.margins[3] + 30
                parts = []
                if st.footer_left:
                    parts.append(st.footer_left)
                    pg.ops.append(TextOp(left, y, self.render_text(st.footer_left, st.body_font), st.body_font,
                                         size, GRAY))
                parts.append(number)
                rec.text = " ".join(parts)
                x = self.aligned_x(number, st.body_font, size, left, right, st.footer_align)
                pg.ops.append(TextOp(x, y, number, st.body_font, size, GRAY))

    def aligned_x(self, text: str, font: str, size: float, left: float, right: float, align: str) -> float:
        w = self.width(text, font, size)
        return {"left": left, "right": right - w, "center": left + (right - left - w) / 2}[align]


def lay_out(style: DocStyle, content: tuple[Element, ...]) -> LaidOutDocument:
    layout = Layout(style)
    layout.run(content)
    for rec in layout.blocks:
        if not rec.lines:
            raise ValueError(f"{style.stem}: block {rec.text[:40]!r} was never placed")
    return LaidOutDocument(style, tuple(layout.pages), tuple(layout.blocks))


def render(doc_layout: LaidOutDocument, path: Path) -> None:
    """Write the PDF deterministically: fixed dates, no new file id, compressed, fonts subset."""
    style = doc_layout.style
    fonts: dict[str, pymupdf.Font] = {}
    pdf = pymupdf.open()
    for pg in doc_layout.pages:
        page = pdf.new_page(width=pg.size[0], height=pg.size[1])
        for op in pg.ops:
            if isinstance(op, RectOp):
                page.draw_rect(pymupdf.Rect(op.rect), color=None, fill=op.fill, width=0)
        writer: pymupdf.TextWriter | None = None
        color: Color | None = None
        for op in pg.ops:
            if isinstance(op, TextOp):
                if writer is None or op.color != color:
                    if writer is not None:
                        writer.write_text(page, color=color)
                    writer, color = pymupdf.TextWriter(page.rect), op.color
                if op.font not in fonts:
                    fonts[op.font] = pymupdf.Font(op.font)
                writer.append((op.x, op.y), op.text, font=fonts[op.font], fontsize=op.size)
        if writer is not None:
            writer.write_text(page, color=color)
        for op in pg.ops:
            if isinstance(op, LineOp):
                page.draw_line(op.p1, op.p2, color=op.color, width=op.width)
    pdf.set_metadata({
        "title": style.title, "author": style.author, "subject": style.subject,
        "creator": "ragstudy tools/make_sample_corpus.py", "producer": "PyMuPDF",
        "creationDate": FIXED_PDF_DATE, "modDate": FIXED_PDF_DATE, "keywords": "", "trapped": "",
    })
    pdf.subset_fonts()
    tmp = path.with_suffix(".pdf.tmp")
    pdf.save(tmp, garbage=4, deflate=True, no_new_id=True)
    pdf.close()
    tmp.replace(path)
