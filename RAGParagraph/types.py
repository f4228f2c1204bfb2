"""The segmenter's two record types: its settings (`SegmenterConfig`) and its output (`Paragraph`).

Kept apart from the dispatcher (segmenter.py) so that both modes import them without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragstudy.text.cleaning.furniture import FurnitureConfig

MODES = ("layout", "paper")
KINDS = ("paragraph", "list", "table", "title")
_FURNITURE = FurnitureConfig()  # the furniture thresholds' defaults, one place (ragstudy.text.cleaning.furniture)


@dataclass(frozen=True)
class SegmenterConfig:
    """Every threshold of both modes, with defaults; `dataclasses.asdict` is JSON-serialisable (cache keys)."""

    mode: str = "layout"  # "layout" (default, what real documents need) | "paper" (faithful to the paper)
    max_chars: int = 2000  # layout: hard maximum paragraph size; longer ones split at sentence boundaries
    ascii_fold: bool = False  # the paper applied unidecode; off by default (accents kept)
    # --- layout mode ---
    min_chars: int = 200  # layout: a paragraph shorter than this is merged with the next one of its section
    # layout: the page-furniture thresholds (running heads and feet, page numbers, TOC pages); what each means and
    # its default: ragstudy.text.cleaning.furniture.FurnitureConfig, shared with the clean text layer
    header_band: float = _FURNITURE.header_band
    footer_band: float = _FURNITURE.footer_band
    repeat_min_frac: float = _FURNITURE.repeat_min_frac
    toc_page_min_frac: float = _FURNITURE.toc_page_min_frac
    heading_size_delta: float = 1.0  # layout: a line this many points above the body size is a heading
    heading_max_chars: int = 120  # layout: headings are shorter than this
    para_gap: float = 0.5  # layout: vertical gap (in font sizes) beyond the usual line gap that ends a paragraph
    indent: float = 0.8  # layout: first-line indentation (in font sizes) that starts a paragraph
    cell_gap: float = 0.5  # layout: horizontal gap (in font sizes) between two cells of a table row
    column_min_lines: int = 5  # layout: lines each column needs before a page is read as two columns
    head_min_frac: float = _FURNITURE.head_min_frac
    head_evidence_frac: float = _FURNITURE.head_evidence_frac
    head_clash_frac: float = _FURNITURE.head_clash_frac
    head_gap: float = _FURNITURE.head_gap
    head_max_chars: int = _FURNITURE.head_max_chars
    # --- paper mode (values of the paper's code) ---
    paper_center_low: float = 0.4  # body font = most common (size, font) among spans centred in 40-60 % ...
    paper_center_high: float = 0.6  # ... of the page height
    paper_bottom: float = 0.85  # below this share of the height, spans not in the body font are dropped
    paper_title_size_delta: float = 1.0  # title iff size > document mode + 1 ...
    paper_title_max_chars: int = 60  # ... and text shorter than 60 characters
    paper_flush_words: int = 100  # a title ends the running paragraph only after 100 words
    paper_drop_bookmark_pages: bool = False  # the paper's code deleted the pages bookmarks point to

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"SegmenterConfig.mode must be one of {MODES}, got {self.mode!r}")
        if self.max_chars < 100:
            raise ValueError(f"SegmenterConfig.max_chars must be at least 100, got {self.max_chars}")
        if not 0 <= self.min_chars < self.max_chars:
            raise ValueError(
                f"SegmenterConfig.min_chars must be in [0, max_chars={self.max_chars}), got {self.min_chars}"
            )
        for name in ("header_band", "footer_band", "paper_center_low", "paper_center_high", "paper_bottom"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"SegmenterConfig.{name} is a share of the page height in [0, 1], got {value}")
        if self.header_band + self.footer_band >= 1.0:
            raise ValueError("SegmenterConfig.header_band + footer_band must leave room for the body (< 1)")
        if self.paper_center_low >= self.paper_center_high:
            raise ValueError("SegmenterConfig.paper_center_low must be below paper_center_high")
        for name in ("repeat_min_frac", "toc_page_min_frac", "head_min_frac", "head_evidence_frac",
                     "head_clash_frac"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"SegmenterConfig.{name} is a share of pages/lines in (0, 1], got {value}")
        for name in ("heading_size_delta", "para_gap", "indent", "cell_gap", "head_gap", "paper_title_size_delta"):
            if getattr(self, name) < 0:
                raise ValueError(f"SegmenterConfig.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("heading_max_chars", "column_min_lines", "head_max_chars", "paper_title_max_chars",
                     "paper_flush_words"):
            if getattr(self, name) < 1:
                raise ValueError(f"SegmenterConfig.{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Paragraph:
    """One segment as it will be indexed: non-empty stripped text and the 1-based pages it spans."""

    text: str  # the paragraph as it will be indexed (title attached to the paragraph it heads, etc.)
    page_start: int  # 1-based
    page_end: int  # 1-based, >= page_start
    kind: str  # "paragraph" | "list" | "table" | "title"
    heading_path: tuple[str, ...] = ()  # layout mode: the titles it sits under, outermost first (sections.py)

    def __post_init__(self) -> None:
        if not self.text or self.text != self.text.strip():
            raise ValueError(f"Paragraph.text must be non-empty and stripped, got {self.text[:40]!r}")
        if not 1 <= self.page_start <= self.page_end:
            raise ValueError(f"Paragraph pages must satisfy 1 <= page_start <= page_end, got "
                             f"{self.page_start}..{self.page_end}")
        if self.kind not in KINDS:
            raise ValueError(f"Paragraph.kind must be one of {KINDS}, got {self.kind!r}")
