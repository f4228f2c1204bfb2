"""What differs for the blank-line strategy: a splitter that cuts at blank lines and never merges or limits size."""

from __future__ import annotations

import re

from langchain_text_splitters import TextSplitter

from ragstudy.registry import ChunkerContext, register_strategy
from ragstudy.text.chunks import SplitterChunker

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


class BlankLineSplitter(TextSplitter):
    """Split at every blank line; pieces are stripped, empty ones dropped; no size limit, no merging."""

    def __init__(self) -> None:
        # chunk_size is unused (no size limit); TextSplitter requires a positive value.
        super().__init__(chunk_size=1, chunk_overlap=0)

    def split_text(self, text: str) -> list[str]:
        return [piece.strip() for piece in _BLANK_LINE.split(text) if piece.strip()]


def make_chunker(config: dict, context: ChunkerContext) -> SplitterChunker:
    return SplitterChunker(BlankLineSplitter())


# paper: parents at "\n\n" with no size limit (no parameters), child windows 200, k=4; colour Okabe–Ito bluish green
SPEC = register_strategy("newline", make_chunker, display_name="Blank-line", color="#009E73", order=2,
                         description="parents split at blank lines", paper=True)
