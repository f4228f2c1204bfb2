"""bm25: BM25 (ragstudy.lexical, Italian analyzer) over the knowledge base's own child windows."""

from __future__ import annotations

from ragstudy.retrievers import register_retriever
from ragstudy.retrievers.units import UnitRetriever


@register_retriever("bm25", unit="children", lexical=True, order=2)
class BM25Children(UnitRetriever):
    """BM25 over child windows; parents by their best window"""

    def unit_ranking(self, question: str) -> list[tuple[int, float]]:
        return self.lexical.ranking(question)
