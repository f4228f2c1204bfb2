"""dense: the paper's retriever. Child windows in the strategy's Chroma collection (knowledge_base.KnowledgeBase),
parents ranked by their best window; `in_k` from the chain's own ParentDocumentRetriever (k child windows)."""

from __future__ import annotations

import logging
from itertools import islice
from typing import Any

from ragstudy.retrievers import IndexReport, RetrievalInputs, register_retriever

logger = logging.getLogger(__name__)

INITIAL_DEPTH = 8  # parents ranked first; doubled until the largest budget is overfilled


@register_retriever("dense", unit="children", vectors=True, order=0, chain=True)
class ChromaDense:
    """dense over child windows in Chroma (the paper's design, the default)"""

    def __init__(self, inputs: RetrievalInputs) -> None:
        self.inputs = inputs
        self.kb: Any = None
        self.chain_retriever: Any = None

    def cache_key(self) -> str | None:
        return None

    def index(self) -> IndexReport:
        from ragstudy.stores.knowledge_base import KnowledgeBase

        self.kb = KnowledgeBase.of_stage(self.inputs.stage, self.inputs.embedding())
        self.chain_retriever, stats = self.kb.build(self.inputs.chunked)
        return IndexReport(stats.children, stats.embedded, stats.reused)

    def rank(self, question: str, question_index: int, largest: int, measure: Any) -> list[Any]:
        """Parents in rank order, deep enough that the largest budget is overfilled (or every parent is ranked)."""
        from ragstudy.grid.records import RetrievedParent

        kb = self.kb
        parents = kb.ranked_parents(kb.embedding.embed_query(question))  # lazy: the windows are searched once
        ranked: list[Any] = []
        depth = max(INITIAL_DEPTH, kb.params.k)
        while True:
            ranked.extend(islice(parents, depth - len(ranked)))
            total = sum(measure.length(r.document.page_content) for r in ranked)
            if total > largest or len(ranked) < depth:
                break
            depth *= 2
        in_k = {doc.id or doc.metadata.get("doc_id") for doc in self.chain_retriever.invoke(question)}
        rows = []
        for r in ranked:
            meta = r.document.metadata
            doc_id = str(r.document.id or meta["doc_id"])
            rows.append(RetrievedParent(question_index=question_index, rank=r.rank, doc_id=doc_id,
                                        path=str(meta["path"]), page_start=int(meta["page_start"]),
                                        page_end=int(meta["page_end"]), score=float(r.score), in_k=doc_id in in_k,
                                        contents=r.document.page_content))
        found = {row.doc_id for row in rows if row.in_k}
        if found != in_k:
            logger.warning("question %d: the retriever returned %d parent(s) outside the ranking", question_index,
                           len(in_k - found))
        return rows
