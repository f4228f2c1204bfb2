"""bm25-parents: BM25 (ragstudy.lexical, Italian analyzer) over whole parents."""

from __future__ import annotations

from ragstudy.retrievers import register_retriever
from ragstudy.retrievers.units import UnitRetriever


@register_retriever("bm25-parents", unit="parents", lexical=True, order=3)
class BM25Parents(UnitRetriever):
    """BM25 over whole parents"""

    def unit_ranking(self, question: str) -> list[tuple[int, float]]:
        return self.lexical.ranking(question)
