"""The paper's paragraph heuristics, reproduced faithfully (Mazzitelli & Zimeo 2025, public `knowledgebase.py`).

Kept as the `paper` mode so the study can compare against what the paper actually ran. Known weaknesses are
reproduced on purpose: the 100-word flush rule merges whole sections, running headers survive, and titles are
found only by size. Differences from the original: no pandas rows (same decisions, one pass over spans);
ASCII folding is optional (`ascii_fold`, done with unicodedata instead of unidecode); the original deleted the
pages that bookmarks point to (`paper_drop_bookmark_pages`, off by default because it deletes real content).
"""

from __future__ import annotations

import re
from collections import Counter

import pymupdf

from RAGParagraph.text import PAPER_BULLETS, PAPER_NUMBERED, PAPER_SEPARATOR, fold_ascii
from RAGParagraph.types import Paragraph, SegmenterConfig
from ragstudy.text.cleaning.lines import page_dict

Span = tuple[int, float, str, str]  # (page 0-based, size, font, text)
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")


def _text_spans(blocks: list[dict]):
    """The spans of a page's text blocks, in content-stream order."""
    for block in blocks:
        if block.get("type", 0) == 0:
            for line in block["lines"]:
                yield from line["spans"]


def _centre_y(span: dict) -> float:
    return (span["bbox"][1] + span["bbox"][3]) / 2


def page_body_font(blocks: list[dict], height: float, low: float, high: float) -> tuple[float, str] | None:
    """paper: body font = most common (size rounded to 0.1, font) among spans centred in [low, high] of height."""
    lo, hi = height * low, height * high
    fonts = [(round(span["size"], 1), span["font"]) for span in _text_spans(blocks)
             if lo <= _centre_y(span) <= hi]
    if not fonts:
        return None
    return Counter(fonts).most_common(1)[0][0]


def filter_page_spans(index: int, data: dict, config: SegmenterConfig) -> list[Span]:
    """paper: in the bottom band drop spans whose (size, font) differs from the page's body font."""
    blocks = data["blocks"]
    height = data["height"]
    body = page_body_font(blocks, height, config.paper_center_low, config.paper_center_high)
    bottom = height * config.paper_bottom
    spans: list[Span] = []
    for span in _text_spans(blocks):
        if body is not None and _centre_y(span) > bottom and (round(span["size"], 1), span["font"]) != body:
            continue
        spans.append((index, span["size"], span["font"], span["text"]))
    return spans


def bookmark_pages(doc: pymupdf.Document) -> set[int]:
    """paper: the pages its code deleted, i.e. the targets of the outline (bookmarks), 0-based."""
    return {entry[2] - 1 for entry in doc.get_toc() if entry[2] >= 1}


def document_spans(doc: pymupdf.Document, config: SegmenterConfig) -> list[Span]:
    """All kept spans of a document in content-stream order (the paper's DataFrame rows)."""
    skip = bookmark_pages(doc) if config.paper_drop_bookmark_pages else set()
    spans: list[Span] = []
    for index, page in enumerate(doc):
        if index not in skip:
            spans.extend(filter_page_spans(index, page_dict(page), config))
    return spans


def is_title(text: str, size: float, mode_size: float, config: SegmenterConfig) -> bool:
    """paper: title iff not a bullet, size > document mode + 1 and text shorter than 60 characters."""
    return (
        not is_bullet(text)
        and size > mode_size + config.paper_title_size_delta
        and len(text) < config.paper_title_max_chars
    )


def is_bullet(text: str) -> bool:
    """paper: bullet glyph at the start, or a numbered/lettered item such as '1.' or 'a)'."""
    return text.startswith(PAPER_BULLETS) or PAPER_NUMBERED.match(text) is not None


def document_mode_size(spans: list[Span]) -> float:
    """paper: `df['font_size'].mode().iloc[0]`: the most frequent span size (smallest on ties)."""
    counts = Counter(size for _, size, _, _ in spans)
    best = max(counts.values())
    return min(size for size, n in counts.items() if n == best)


def paper_paragraphs(spans: list[Span], config: SegmenterConfig) -> list[tuple[str, int, int]]:
    """The paper's `analyze_dataframes` loop over spans: (text, first page, last page), pages 0-based."""
    if not spans:
        return []
    mode_size = document_mode_size(spans)
    out: list[tuple[str, int, int]] = []
    paragraph = ""
    first = last = spans[0][0]
    pending: str | None = None

    def flush() -> None:
        if paragraph.strip():
            out.append((paragraph.strip(), first, last))

    for page, size, _font, raw in spans:
        text = fold_ascii(raw) if config.ascii_fold else raw
        stripped = text.strip()
        if PAPER_SEPARATOR.search(stripped):
            continue  # paper: lines of 5+ dots/dashes/underscores (TOC leaders, rules) are skipped
        if is_title(stripped, size, mode_size, config):
            if paragraph.strip():
                if len(paragraph.split()) < config.paper_flush_words:
                    # paper: a title after fewer than 100 words is appended to the running paragraph
                    paragraph += "\n" + stripped
                    last = page
                    continue
                flush()
            paragraph = stripped + "\n"
            first = last = page
            continue
        if not paragraph.strip():
            first = page
        if pending:
            # paper: a short bullet glyph is joined to whatever span comes next
            paragraph += "\n" + pending + " " + stripped
            pending = None
        elif is_bullet(stripped) and len(stripped) <= 2:
            pending = stripped
        elif is_bullet(stripped):
            paragraph += "\n" + stripped
        elif stripped:
            paragraph += " " + stripped
        last = page
    flush()
    return out


def segment_paper(doc: pymupdf.Document, config: SegmenterConfig) -> list[Paragraph]:
    """Paragraphs exactly as the paper's code cut them (no maximum size: that is the paper's behaviour)."""
    # Blank lines inside a paper paragraph (title + "\n" followed by "\n" + bullet) become one newline: the
    # core separates paragraphs with a blank line. Whitespace only; words and order are the paper's.
    return [
        Paragraph(text=_BLANK_LINES.sub("\n", text), page_start=first + 1, page_end=max(first, last) + 1, kind="paragraph")
        for text, first, last in paper_paragraphs(document_spans(doc, config), config)
    ]
