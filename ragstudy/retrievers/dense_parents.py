"""dense-parents: exact cosine between the question and whole parents, embedded by the study's embedding model."""

from __future__ import annotations

from ragstudy.retrievers import register_retriever
from ragstudy.retrievers.units import UnitRetriever


@register_retriever("dense-parents", unit="parents", vectors=True, order=1)
class DenseParents(UnitRetriever):
    """dense over whole parents (exact cosine, no Chroma)"""

    def unit_ranking(self, question: str) -> list[tuple[int, float]]:
        return self.dense_ranking(question)
