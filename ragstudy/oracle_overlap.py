"""A retrieval score that needs no hand-written evidence: how much of the oracle answer the packed context contains.

oracle overlap = |terms(answer) ∩ terms(context)| / |terms(answer)|, where terms are the distinct index terms of
`ragstudy.lexical.ItalianAnalyzer` (folded, \\w+ tokens, Italian stopwords removed, Snowball-stemmed). It is
computed per question and budget on the context `ragstudy.retrieval.pack_all` fills. Questions whose oracle is
the paper's unanswerable phrase ("Il contesto fornito non contiene la risposta.") are left out, as are oracles
without a single content term; both are counted. The score rewards contexts that mention the answer's words, not
contexts that state the answer: short answers made of common words overlap by chance, so check its agreement with
an evidence-based hit before trusting it (benchmarks/oracle_agreement.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import StudyInputError
from .groundtruth import UNANSWERABLE_ORACLE
from .lexical import ItalianAnalyzer, fold
from .budget_eval import CHARS, Measure, pack_all
from .results import RetrievedParent

logger = logging.getLogger(__name__)

OVERLAP_COLUMNS = ("strategy", "budget", "question_index", "oracle_overlap", "answer_terms")


def is_unanswerable(oracle: str) -> bool:
    """The paper's 'no answer in the context' oracle, ignoring case, accents, punctuation and spacing."""
    return _words(oracle) == _words(UNANSWERABLE_ORACLE)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", fold(text))


def answer_terms(answer: str, analyzer: ItalianAnalyzer) -> frozenset[str]:
    """Distinct content terms (stemmed, no stopwords) of an answer."""
    return frozenset(analyzer.tokens(answer))


def overlap(terms: frozenset[str], context: str, analyzer: ItalianAnalyzer) -> float:
    """Share of `terms` that occur among the context's terms (0 for an empty context)."""
    if not terms:
        raise ValueError("overlap needs at least one answer term")
    return len(terms & set(analyzer.tokens(context))) / len(terms)


@dataclass
class OverlapScores:
    """Per-question rows of one strategy and the questions left out."""

    strategy: str
    rows: list[dict] = field(default_factory=list)
    unanswerable: int = 0  # oracle is the unanswerable phrase
    no_terms: int = 0  # oracle without a content term
    no_oracle: int = 0  # ranked question beyond the oracle file's rows


def score_strategy(strategy: str, rankings: Mapping[int, Sequence[RetrievedParent]], oracle: Sequence[str],
                   budgets: Sequence[int], measure: Measure = CHARS, analyzer: ItalianAnalyzer | None = None
                   ) -> OverlapScores:
    """Oracle overlap of every ranked answerable question at every budget (and the strategy's own k)."""
    analyzer = analyzer or ItalianAnalyzer()
    result = OverlapScores(strategy)
    for question_index in sorted(rankings):
        if question_index >= len(oracle):
            result.no_oracle += 1
            continue
        answer = oracle[question_index]
        if is_unanswerable(answer):
            result.unanswerable += 1
            continue
        terms = answer_terms(answer, analyzer)
        if not terms:
            result.no_terms += 1
            continue
        for label, context in pack_all(rankings[question_index], budgets, measure).items():
            result.rows.append({"strategy": strategy, "budget": label, "question_index": question_index,
                                "oracle_overlap": overlap(terms, "\n".join(context.texts), analyzer),
                                "answer_terms": len(terms)})
    if result.no_oracle:
        logger.warning("%s: %d ranked question(s) have no oracle row", strategy, result.no_oracle)
    return result


def overlap_folder(results_dir: Path, oracle: Sequence[str], budgets: Sequence[int], strategies: Sequence[str],
                   measure: Measure = CHARS) -> tuple[list[dict], list[str]]:
    """Oracle-overlap rows (OVERLAP_COLUMNS) of every strategy's retrieval file, and one note per strategy."""
    from .results import read_retrieval, retrieval_path

    rows: list[dict] = []
    notes = []
    for strategy in strategies:
        scored = score_strategy(strategy, read_retrieval(retrieval_path(results_dir, strategy)), oracle, budgets,
                                measure)
        rows += scored.rows
        notes.append(f"{strategy}: oracle overlap of {len({r['question_index'] for r in scored.rows})} questions; "
                     f"left out {scored.unanswerable} with the unanswerable oracle, {scored.no_terms} without "
                     "content terms")
    return rows, notes
