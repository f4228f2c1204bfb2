"""The base of retrievers that score units exactly, in memory (no Chroma): child windows cut as the dense index
cuts them (knowledge_base.child_windows) or whole parents, with a BM25 index and/or unit vectors as the member's
registration asks. A member subclasses `UnitRetriever` and writes `unit_ranking`; parents are ranked by their best
unit (lexical.parents_by_best_unit) and kept deep enough to overfill the largest budget (lexical.fill_depth).
"""

from __future__ import annotations

from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.retrievers import IndexReport, RetrievalInputs, RetrieverSpec

EMBED_BATCH = 256  # units per embed_documents call (one progress step)


class UnitRetriever:
    """Units of one strategy's parents, their BM25 index (`lexical`) and vectors (`matrix`, after `index()`)."""

    spec: RetrieverSpec  # set by @register_retriever

    def __init__(self, inputs: RetrievalInputs) -> None:
        from ragstudy.lexical import LexicalIndex, ParentInfo, UnitCorpus
        from ragstudy.stores.knowledge_base import child_splitter, child_windows

        self.inputs = inputs
        documents = [chunk.to_document() for item in inputs.chunked for chunk in item.chunks]
        self.parents = {str(doc.id): ParentInfo(str(doc.metadata["path"]), int(doc.metadata["page_start"]),
                                                int(doc.metadata["page_end"]), doc.page_content)
                        for doc in documents}
        if self.spec.unit == "parents":
            units = [(str(doc.id), doc.page_content) for doc in documents]
        else:
            windows, _ = child_windows(documents, child_splitter(inputs.stage.params))
            units = [(str(window.metadata["doc_id"]), window.page_content) for window in windows]
        self.corpus = UnitCorpus([text for _, text in units], [parent for parent, _ in units])
        self.lexical = LexicalIndex(self.corpus.texts) if self.spec.lexical else None
        self.search: Any = None  # knowledge_base.ExactWindows over the units' vectors, after `index()`
        self.model: Any = None

    def cache_key(self) -> str | None:
        return self.lexical.key if self.lexical is not None else None

    def index(self) -> IndexReport:
        """The units' vectors (through the model's vector cache) for the members that score them densely."""
        from tqdm.auto import tqdm

        from ragstudy.stores.knowledge_base import ExactWindows

        units = len(self.corpus.texts)
        if not self.spec.vectors:
            return IndexReport(units)
        self.model = self.inputs.embedding()
        before = getattr(self.model, "texts_embedded", 0)
        rows: list[Any] = []
        # in batches, with a bar: whole parents of a few hundred pages take minutes to embed cold
        with tqdm(total=units, desc=f"Embedding {self.inputs.stage.strategy} {self.spec.unit}",
                  unit=self.spec.unit[:-1], disable=not units) as bar:
            for start in range(0, units, EMBED_BATCH):
                rows.extend(self.model.embed_documents(self.corpus.texts[start:start + EMBED_BATCH]))
                bar.update(min(EMBED_BATCH, units - start))
        self.search = ExactWindows.of([str(i) for i in range(units)], rows, tie_order=range(units))
        embedded = getattr(self.model, "texts_embedded", before + units) - before
        return IndexReport(units, embedded, units - embedded)

    def unit_ranking(self, question: str) -> list[tuple[int, float]]:
        """(unit position, score) of every unit for `question`, best first (higher is better)."""
        raise NotImplementedError

    def dense_ranking(self, question: str) -> list[tuple[int, float]]:
        """Every unit by the dense retriever's own exact search (knowledge_base.ExactWindows: Chroma's squared L2 in
        float64, ties to TIE_DECIMALS by unit position), as (position, negated distance): higher is better."""
        return [(row, -distance) for row, distance in self.search.nearest_rows(self.model.embed_query(question))]

    def rank(self, question: str, question_index: int, largest: int, measure: Any) -> list[Any]:
        """Parents ranked by their best unit, deep enough to overfill `largest`; `in_k` marks the parents of the k
        best units (the paper's k child windows; k whole parents for the -parents members). Scores are negated."""
        from ragstudy.lexical import fill_depth, paper_k_parents, parents_by_best_unit, to_retrieved

        units = checked_units(self.unit_ranking(question), len(self.corpus.texts), self.spec.name, question_index,
                              self.inputs.stage.strategy)
        ranked = parents_by_best_unit(units, self.corpus.parents)
        lengths = {pid: measure.length(info.contents) for pid, info in self.parents.items()}
        return to_retrieved(question_index, fill_depth(ranked, lengths, largest), self.parents,
                            paper_k_parents(units, self.corpus.parents, self.inputs.stage.params.k))


def checked_units(units: Any, count: int, retriever: str, question_index: int, strategy: str
                  ) -> list[tuple[int, float]]:
    """`unit_ranking`'s answer as (unit position, score) pairs, or a StudyInputError naming the retriever, the
    question and the fix: a position not one of the `count` units, or a score that is not finite (NaN cannot rank)."""
    import math

    where = f"retriever {retriever!r}, question {question_index} ({strategy})"
    fix = "fix its unit_ranking, or rank with another --retriever"
    checked = []
    for item in units:
        try:
            unit, score = item
            position, value = int(unit), float(score)
        except (TypeError, ValueError):
            raise StudyInputError(f"{where}: unit_ranking returned {item!r}, not a (unit position, score) pair; "
                                  f"{fix}") from None
        if position != unit or not 0 <= position < count:
            raise StudyInputError(f"{where}: unit_ranking returned unit {unit!r}, not one of the {count} units "
                                  f"(0..{count - 1}); {fix}")
        if not math.isfinite(value):
            raise StudyInputError(f"{where}: unit_ranking scored unit {position} {value}, not a finite number; {fix}")
        checked.append((position, value))
    return checked
