"""What differs for the fixed-size strategy: its parent splitter and parameters. Everything else is shared."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ragstudy.chunks import SplitterChunker
from ragstudy.paper_api import PaperKnowledgeBase
from ragstudy.params import WindowParams
from ragstudy.registry import ChunkerContext, StrategyParams, StrategySpec, register


@dataclass(frozen=True)
class FixedSizeParams(WindowParams):
    """RecursiveCharacterTextSplitter settings (paper: 800 characters, 50 overlap)."""

    chunk_size: int = 800
    chunk_overlap: int = 50


def make_chunker(params: StrategyParams, context: ChunkerContext) -> SplitterChunker:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    config = SPEC.parent_config(params)
    return SplitterChunker(RecursiveCharacterTextSplitter(chunk_size=config.chunk_size,
                                                          chunk_overlap=config.chunk_overlap),
                           overlap=config.chunk_overlap)


SPEC = register(StrategySpec(
    name="fixed-size",
    dataset_name="DatasetFixedSize",
    folder="RAGFixedSize",
    # paper: parents 800/50, child windows 200, k=4
    defaults=StrategyParams(parent=asdict(FixedSizeParams()), child_chunk_size=200, k=4),
    make_chunker=make_chunker,
    display_name="Fixed-size",
    color="#E69F00",  # Okabe–Ito orange
    order=1,
    source_kind="text-layer",
    parent_type=FixedSizeParams,
    description="RecursiveCharacterTextSplitter parents",
))


class MyKnowledgeBase(PaperKnowledgeBase):
    """The paper's entry point: MyKnowledgeBase(path).initiate_document_injetion_pipeline(); .retriever"""

    strategy = SPEC.name
