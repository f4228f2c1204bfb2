"""What differs for the fixed-size strategy: its parent splitter and parameters. Everything else is shared."""

from __future__ import annotations

from dataclasses import dataclass

from ragstudy.params import WindowParams
from ragstudy.registry import ChunkerContext, register_strategy
from ragstudy.text.chunks import SplitterChunker


@dataclass(frozen=True)
class FixedSizeParams(WindowParams):
    """RecursiveCharacterTextSplitter settings (paper: 800 characters, 50 overlap)."""

    chunk_size: int = 800
    chunk_overlap: int = 50


def make_chunker(config: FixedSizeParams, context: ChunkerContext) -> SplitterChunker:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=config.chunk_size, chunk_overlap=config.chunk_overlap)
    return SplitterChunker(splitter, overlap=config.chunk_overlap)


# paper: parents 800/50, child windows 200, k=4; colour Okabe–Ito orange
SPEC = register_strategy("fixed-size", make_chunker, FixedSizeParams, display_name="Fixed-size", color="#E69F00",
                         order=1, description="RecursiveCharacterTextSplitter parents", paper=True)
