"""A retrieval score that needs no hand-written evidence: how much of the oracle answer the packed context contains
(one of the budget metrics). Its definition and why to check it against the evidence hit: docs/retrieval.md ("Oracle
overlap").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragstudy.lexical import ItalianAnalyzer, fold
from ragstudy.scoring.groundtruth import UNANSWERABLE_ORACLE


def is_unanswerable(oracle: str) -> bool:
    """The paper's 'no answer in the context' oracle, ignoring case, accents, punctuation and spacing."""
    return re.findall(r"\w+", fold(oracle)) == re.findall(r"\w+", fold(UNANSWERABLE_ORACLE))


def overlap(terms: frozenset[str], context: str, analyzer: ItalianAnalyzer) -> float:
    """Share of `terms` that occur among the context's terms (0 for an empty context)."""
    if not terms:
        raise ValueError("overlap needs at least one answer term")
    return len(terms & set(analyzer.tokens(context))) / len(terms)


@dataclass(frozen=True)
class OracleTerms:
    """The content terms of every oracle answer a run's questions have, and why the others have none."""

    terms: dict[int, frozenset[str]]  # question_index -> its answer's content terms
    unanswerable: frozenset[int]  # the oracle is the unanswerable phrase
    no_terms: frozenset[int]  # the oracle has no content term
    answers: int  # rows of the oracle file

    def note(self, strategy: str, scored: int, no_oracle: int) -> str:
        """What the oracle overlap scored for one strategy, in one line."""
        line = (f"{strategy}: oracle overlap of {scored} questions; left out {len(self.unanswerable)} with the "
                f"unanswerable oracle, {len(self.no_terms)} without content terms")
        return line + (f", {no_oracle} ranked beyond the oracle file's rows" if no_oracle else "")


def oracle_terms(oracle: Sequence[str], analyzer: ItalianAnalyzer) -> OracleTerms:
    """Each answerable oracle answer's content terms (the paper's unanswerable phrase and answers without a
    content term have none, and are counted)."""
    unanswerable = frozenset(i for i, answer in enumerate(oracle) if is_unanswerable(answer))
    found = {i: frozenset(analyzer.tokens(answer))  # distinct content terms: stemmed, no stopwords
             for i, answer in enumerate(oracle) if i not in unanswerable}
    return OracleTerms({i: t for i, t in found.items() if t}, unanswerable,
                       frozenset(i for i, t in found.items() if not t), len(oracle))
