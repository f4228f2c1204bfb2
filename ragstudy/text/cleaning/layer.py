"""The clean text layer (`text_layer: clean`): the shared text layer with the paragraph strategy's cleaning applied,
so that a baseline chunked on it differs from paragraph chunking by the segmentation alone: line records (`lines`)
-> furniture removed (`furniture`) -> MuPDF blocks as running text, joined where a sentence runs on across a page
or column break, every character mapped to the page it was printed on. The rules: docs/text-layer.md.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from ragstudy.text.cleaning.furniture import FurnitureConfig, body_lines, trailing_notes
from ragstudy.text.cleaning.lines import Line, PageLines, extract_lines, is_bullet_glyph, starts_item
from ragstudy.text.textnorm import continues_sentence, ends_sentence, is_line_end_hyphen, join_lines

BLOCK_SEPARATOR = "\n\n"  # the raw layer's (ragstudy.text.textlayer.BLOCK_SEPARATOR)


@dataclass(frozen=True)
class CleanBlock:
    """One text block of the clean layer: its text, where it was printed (0-based page, box), its font size (the
    size holding most of its characters) and whether it is a footnote."""

    page: int
    text: str
    y0: float
    x0: float
    x1: float
    y1: float
    size: float = 0.0
    note: bool = False


def block_text(lines: list[Line]) -> str:
    """A block's lines as running text: wrapped lines joined (hyphenation undone), list items on their own line."""
    text = ""
    for line in lines:
        if not text:
            text = line.text
        elif is_bullet_glyph(text.rsplit("\n", 1)[-1]):
            text += " " + line.text  # a detached bullet glyph and its item's text
        elif starts_item(line.text):
            text += "\n" + line.text
        else:
            text = join_lines(text, line.text)
    return text


def _size(lines: list[Line]) -> float:
    """The font size (to half a point) holding most characters of `lines`."""
    sizes: Counter = Counter()
    for line in lines:
        sizes[round(line.size * 2) / 2] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def page_blocks(page: PageLines, lines: list[Line]) -> list[CleanBlock]:
    """A page's kept lines grouped by MuPDF block, blocks in the order their first line comes (content stream),
    the trailing footnotes flagged (furniture.trailing_notes, against the page's body size)."""
    groups: dict[int, list[Line]] = {}
    for line in lines:
        groups.setdefault(line.block, []).append(line)
    blocks = []
    for members in groups.values():
        text = block_text(members)
        if text:
            blocks.append(CleanBlock(page.index, text, min(ln.y0 for ln in members), min(ln.x0 for ln in members),
                                     max(ln.x1 for ln in members), max(ln.y1 for ln in members), _size(members)))
    first_note = trailing_notes(blocks, page.height, _size(lines))
    return [*blocks[:first_note], *(replace(b, note=True) for b in blocks[first_note:])]


def runs_on(before: CleanBlock, after: CleanBlock) -> bool:
    """Whether `after` continues the sentence `before` leaves open across a page or column break (it starts above
    where `before` ends, right of it): the segmenter's rule without its layout evidence; footnotes never run on."""
    if before.note or after.note:
        return False
    moved = after.page != before.page or (after.y0 < before.y1 and after.x0 >= before.x1 - 1.0)
    return moved and not ends_sentence(before.text) and continues_sentence(after.text)


def clean_pages(doc, config: FurnitureConfig | None = None) -> list[list[CleanBlock]]:
    """Every page's clean blocks (a pymupdf.Document in, page order kept; empty pages give [])."""
    pages = extract_lines(doc)
    bodies = body_lines(pages, config or FurnitureConfig())
    return [page_blocks(page, body) for page, body in zip(pages, bodies)]


def reading_order(pages: list[list[CleanBlock]]) -> list[list[CleanBlock]]:
    """Each page's blocks as printed, except that its footnotes come just before its last body block: the body
    text goes on to the next page without a footnote between, and every footnote stays on its own page."""
    out = []
    for blocks in pages:
        body = [b for b in blocks if not b.note]
        notes = [b for b in blocks if b.note]
        out.append([*body[:-1], *notes, body[-1]] if body and notes else list(blocks))
    return out


def clean_text(pages: list[list[CleanBlock]]) -> tuple[str, tuple[int, ...]]:
    """(text, page_starts) of the clean layer: blocks joined by blank lines, or like wrapped lines where a sentence
    runs on; page_starts[i] is the offset of page i+1's first character (the text's length at an empty page)."""
    parts: list[str] = []
    length = 0
    starts: list[int] = []
    last: CleanBlock | None = None
    for blocks in reading_order(pages):
        starts.append(length)
        for number, block in enumerate(blocks):
            piece = block.text
            if last is not None:
                separator = " " if runs_on(last, block) else BLOCK_SEPARATOR
                if separator == " " and is_line_end_hyphen(parts[-1], piece):
                    parts[-1] = parts[-1][:-1]  # "... conserva-" + "zione" -> "conservazione"
                    length -= 1
                    separator = ""
                parts.append(separator)
                length += len(separator)
            if number == 0:
                starts[-1] = length
            parts.append(piece)
            length += len(piece)
            last = block
    return "".join(parts), tuple(starts)
