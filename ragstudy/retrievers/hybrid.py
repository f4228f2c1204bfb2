"""hybrid: reciprocal rank fusion (lexical.reciprocal_rank_fusion) of exact dense and BM25 child-window rankings."""

from __future__ import annotations

from . import register_retriever
from .units import UnitRetriever


@register_retriever("hybrid", unit="children", vectors=True, lexical=True, order=4)
class Hybrid(UnitRetriever):
    """RRF of dense and BM25 over child windows"""

    def unit_ranking(self, question: str) -> list[tuple[int, float]]:
        from ..lexical import reciprocal_rank_fusion

        dense = self.dense_ranking(question)
        lexical = self.lexical.ranking(question)
        fused = reciprocal_rank_fusion([[str(u) for u, _ in dense], [str(u) for u, _ in lexical]])
        return [(int(u), score) for u, score in fused]
