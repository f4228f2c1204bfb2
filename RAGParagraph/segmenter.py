"""Public API of the paragraph segmenter: `segment_pdf(source, config) -> list[Paragraph]`.

Two modes: `layout` (default) builds paragraphs from page layout and removes page furniture; `paper`
reproduces the heuristics of Mazzitelli & Zimeo (2025) faithfully, weaknesses included.
"""

from __future__ import annotations

import logging
import os
import time

import pymupdf

from RAGParagraph.layout import segment_layout
from RAGParagraph.paper_mode import segment_paper
from RAGParagraph.types import KINDS, MODES, Paragraph, SegmenterConfig

__all__ = ["KINDS", "MODES", "Paragraph", "SegmenterConfig", "segment_pdf"]

logger = logging.getLogger(__name__)
DEFAULT_CONFIG = SegmenterConfig()


def segment_pdf(
    source: str | os.PathLike | pymupdf.Document, config: SegmenterConfig = DEFAULT_CONFIG
) -> list[Paragraph]:
    """Cut a PDF into paragraphs with the configured mode. A Document passed in is left open."""
    own = not isinstance(source, pymupdf.Document)
    doc = pymupdf.open(os.fspath(source)) if own else source
    name = doc.name or "<memory>"
    try:
        start = time.perf_counter()
        paragraphs = segment_paper(doc, config) if config.mode == "paper" else segment_layout(doc, config)
        logger.info(
            "%s: %d pages -> %d paragraphs (%s mode, %.2f s)",
            name, doc.page_count, len(paragraphs), config.mode, time.perf_counter() - start,
        )
        return paragraphs
    finally:
        if own:
            doc.close()
