"""Lexical retrieval for Italian text: an analyzer (folding, Debian's Snowball stopwords, Snowball stemmer), a BM25
index over text units (bm25s, Lucene k1 1.5, b 0.75; equal scores by unit position, never the library's sort), and
parents ranked by their best unit (docs/retrieval.md, Retrievers).

Building is cheap (7,000 child windows of 250 characters: 2.2-3.4 s on a loaded 2-core machine; 36 queries 0.5 s),
so the index is rebuilt rather than cached; `LexicalIndex.key`, a content hash, keys the cached rankings.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from itertools import accumulate
from pathlib import Path

import numpy as np

from ragstudy.errors import StudyInputError
from ragstudy.io import sha256_text, stable_json

logger = logging.getLogger(__name__)

STOPWORDS_IT = Path("/usr/share/perl5/Lingua/StopWords/IT.pm")
STOPWORDS_PACKAGE = "liblingua-stopwords-perl"
_TOKEN = re.compile(r"\w+")


def fold(text: str) -> str:
    """Lower-case and strip accents: NFKD, combining marks dropped, case folded ("Più" -> "piu")."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


@lru_cache(maxsize=4)
def italian_stopwords(source: Path = STOPWORDS_IT) -> frozenset[str]:
    """The Snowball Italian stopwords of Lingua::StopWords::IT, folded; a clear error when the package is absent."""
    return frozenset(fold(word) for word in italian_stopword_list(source))


def italian_stopword_list(source: Path = STOPWORDS_IT) -> list[str]:
    """The Snowball Italian stopwords of Lingua::StopWords::IT as written there (accents kept), in file order."""
    if not source.is_file():
        raise StudyInputError(f"{source} is missing: the Italian stopwords come from the Debian package "
                              f"{STOPWORDS_PACKAGE!r}; install it with `apt-get install -y --no-install-recommends "
                              f"{STOPWORDS_PACKAGE}` (tools/setup.sh does)")
    match = re.search(r"return\s+qw\((.*?)\)", source.read_text(encoding="utf-8"), flags=re.S)
    if match is None or not match.group(1).split():
        raise StudyInputError(f"{source}: no `return qw(...)` word list found; the package format changed")
    return match.group(1).split()


@lru_cache(maxsize=4)
def _stemmer(language: str):
    import Stemmer  # PyStemmer

    return Stemmer.Stemmer(language)


@dataclass(frozen=True)
class ItalianAnalyzer:
    """Text -> index terms: fold, tokenise on \\w+, drop stopwords, stem. `settings()` identifies it in cache keys."""

    stem: bool = True
    remove_stopwords: bool = True
    stopwords_path: str = str(STOPWORDS_IT)

    def settings(self) -> dict:
        words = sorted(self.stopwords()) if self.remove_stopwords else []
        return {"analyzer": "italian-v1", "stem": "snowball-italian" if self.stem else None,
                "stopwords": len(words), "stopwords_hash": sha256_text("\n".join(words))[:16]}

    def stopwords(self) -> frozenset[str]:
        return italian_stopwords(Path(self.stopwords_path)) if self.remove_stopwords else frozenset()

    def tokens(self, text: str) -> list[str]:
        """Index terms of `text`, in text order (repeats kept: BM25 counts them)."""
        stop = self.stopwords()
        words = [t for t in _TOKEN.findall(fold(text)) if t not in stop]
        return _stemmer("italian").stemWords(words) if self.stem and words else words


@dataclass(frozen=True)
class BM25Settings:
    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"


class LexicalIndex:
    """BM25 over a list of text units (child windows or whole parents), in the order given."""

    def __init__(self, units: Sequence[str], analyzer: ItalianAnalyzer | None = None,
                 settings: BM25Settings = BM25Settings()) -> None:
        import bm25s

        if not units:
            raise StudyInputError("a BM25 index needs at least one text unit")
        self.analyzer = analyzer or ItalianAnalyzer()
        self.settings = settings
        self.size = len(units)
        # content hash of what determines the index: the units in order, the analyzer, the BM25 settings
        self.key = sha256_text(stable_json({"units": sha256_text(*units), "analyzer": self.analyzer.settings(),
                                            "bm25": asdict(settings)}))
        self.vocab: dict[str, int] = {}
        ids = [[self.vocab.setdefault(t, len(self.vocab)) for t in self.analyzer.tokens(u)] for u in units]
        self._bm25 = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        # token ids + vocabulary: bm25s does no tokenisation of its own; an empty unit gets the empty token
        self._bm25.index((ids, dict(self.vocab)), show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every unit for `query` (all zero when no query term occurs in the units)."""
        tokens = self.analyzer.tokens(query)
        known = [self.vocab[t] for t in tokens if t in self.vocab]
        if not known:  # every unit scores 0: the ranking is document order, which must not pass unnoticed
            logger.warning("BM25: the question %r has %s, so every unit scores 0 and its ranking is document "
                           "order; reword it", query[:80], "no words besides stopwords" if not tokens else
                           "no word that occurs in the documents")
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(known), dtype=np.float32)

    def ranking(self, query: str) -> list[tuple[int, float]]:
        """(unit position, score) of every unit, best first; equal scores in unit order."""
        scores = self.scores(query)
        order = np.lexsort((np.arange(self.size), -scores))
        return [(int(i), float(scores[i])) for i in order]


@dataclass(frozen=True)
class UnitRanked:
    """A parent ranked by its best unit: `score` is that unit's score, `unit` its position, `rank` 1-based."""

    parent: str
    score: float
    unit: int
    rank: int


def parents_by_best_unit(ranking: Iterable[tuple[int, float]], unit_parent: Sequence[str]) -> list[UnitRanked]:
    """Parents in the order of their best unit in `ranking` ((unit position, score), best first)."""
    result: list[UnitRanked] = []
    seen: set[str] = set()
    for unit, score in ranking:
        parent = unit_parent[unit]
        if parent not in seen:
            seen.add(parent)
            result.append(UnitRanked(parent, score, unit, len(result) + 1))
    return result


def fill_depth(ranked: Sequence[UnitRanked], lengths: Mapping[str, int], largest: int) -> list[UnitRanked]:
    """The shortest prefix of `ranked` whose parents overfill `largest` (the whole list if they cannot), as dense
    keeps: every budget up to `largest` is then packed from the prefix alone."""
    totals = accumulate(lengths[item.parent] for item in ranked)
    return list(ranked[:next((i + 1 for i, total in enumerate(totals) if total > largest), len(ranked))])


@dataclass
class UnitCorpus:
    """Text units of a set of parents: unit i is `texts[i]` of parent `parents[i]`."""

    texts: list[str]
    parents: list[str]


@dataclass(frozen=True)
class ParentInfo:
    """What a retrieval file records of a parent besides its rank and score."""

    path: str
    page_start: int
    page_end: int
    contents: str


def to_retrieved(question_index: int, ranked: Sequence[UnitRanked], parents: Mapping[str, ParentInfo],
                 in_k: set[str]) -> list:
    """`retrieval.RetrievedParent` rows of a lexical or fused ranking. Their `score` is the negated BM25 (or fused)
    score, so that lower is better as for the dense rankings' Chroma distances."""
    from ragstudy.grid.records import RetrievedParent

    return [RetrievedParent(question_index=question_index, rank=item.rank, doc_id=item.parent,
                            score=0.0 - float(item.score), in_k=item.parent in in_k, **asdict(parents[item.parent]))
            for item in ranked]


def paper_k_parents(ranked_units: Sequence[tuple[int, float]], unit_parent: Sequence[str], k: int) -> set[str]:
    """The parents of the k best units: what the paper's retriever (k child windows) would return."""
    return {unit_parent[unit] for unit, _ in ranked_units[:k]}
