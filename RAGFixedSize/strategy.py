"""What differs for the fixed-size strategy: its parent splitter and parameters. Everything else is shared."""

from __future__ import annotations

from ragstudy.chunks import SplitterChunker
from ragstudy.knowledge_base import PaperKnowledgeBase
from ragstudy.registry import StrategyParams, StrategySpec, register


def make_chunker(params: StrategyParams) -> SplitterChunker:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    size, overlap = params.parent["chunk_size"], params.parent["chunk_overlap"]
    return SplitterChunker(RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap), overlap=overlap)


SPEC = register(StrategySpec(
    name="fixed-size",
    dataset_name="DatasetFixedSize",
    folder="RAGFixedSize",
    # paper: parents 800/50, child windows 200, k=4
    defaults=StrategyParams(parent={"chunk_size": 800, "chunk_overlap": 50}, child_chunk_size=200, k=4),
    make_chunker=make_chunker,
    description="RecursiveCharacterTextSplitter parents",
    display_name="Fixed-size",
))


class MyKnowledgeBase(PaperKnowledgeBase):
    """The paper's entry point: MyKnowledgeBase(path).initiate_document_injetion_pipeline(); .retriever"""

    strategy = SPEC.name
