"""What differs for the blank-line strategy: a splitter that cuts at blank lines and never merges or limits size."""

from __future__ import annotations

import re

from langchain_text_splitters import TextSplitter

from ragstudy.chunks import SplitterChunker
from ragstudy.paper_api import PaperKnowledgeBase
from ragstudy.registry import ChunkerContext, StrategyParams, StrategySpec, register

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


class BlankLineSplitter(TextSplitter):
    """Split at every blank line; pieces are stripped, empty ones dropped; no size limit, no merging."""

    def __init__(self) -> None:
        # chunk_size is unused (no size limit); TextSplitter requires a positive value.
        super().__init__(chunk_size=1, chunk_overlap=0)

    def split_text(self, text: str) -> list[str]:
        return [piece.strip() for piece in _BLANK_LINE.split(text) if piece.strip()]


def make_chunker(params: StrategyParams, context: ChunkerContext) -> SplitterChunker:
    return SplitterChunker(BlankLineSplitter())


SPEC = register(StrategySpec(
    name="newline",
    dataset_name="DatasetNewLine",
    folder="RAGNewLine",
    # paper: parents at "\n\n" with no size limit, child windows 200, k=4
    defaults=StrategyParams(parent={}, child_chunk_size=200, k=4),
    make_chunker=make_chunker,
    display_name="Blank-line",
    color="#009E73",  # Okabe–Ito bluish green
    order=2,
    source_kind="text-layer",
    description="parents split at blank lines",
))


class MyKnowledgeBase(PaperKnowledgeBase):
    """The paper's entry point: MyKnowledgeBase(path).initiate_document_injetion_pipeline(); .retriever"""

    strategy = SPEC.name
