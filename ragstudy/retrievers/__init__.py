"""Retrievers: how a retrieval-only run ranks a strategy's parents for a question (config `retriever`).

One module per member, each one `@register_retriever(...)` on its class (`dense`, the paper's and the chain's,
`dense-parents`, `bm25`, `bm25-parents`, `hybrid`); a member is made once per strategy from `RetrievalInputs`,
builds its index, then ranks every question; ragstudy.ranking runs and caches them. The protocol and members from
outside the repository: docs/architecture-plugins.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ragstudy.plugins import Registry, members_of

Unit = Literal["children", "parents"]


@dataclass(frozen=True)
class RetrievalInputs:
    """What a retriever is made from: one strategy's chunks under one run's settings."""

    stage: Any  # pipeline.StageSettings: strategy, params (child windows, k), embedding, db_dir, chroma_server, ...
    chunked: Sequence[Any]  # chunks.ChunkedDocument
    embedding: Callable[[], Any]  # the study's embedding model, loaded on the first call (pipeline.lazy_embedding)

    @property
    def strategy(self) -> str:  # the earlier field, for members written against it (one release)
        return self.stage.strategy

    @property
    def params(self) -> Any:  # the earlier field: the strategy's StrategyParams (one release)
        return self.stage.params


@dataclass(frozen=True)
class IndexReport:
    """What `Retriever.index()` did: units in the index, units embedded now, units whose vectors were reused."""

    units: int
    embedded: int = 0
    reused: int = 0


class Retriever(Protocol):
    """A member's ranking of one strategy's parents (made by `RetrieverSpec.make(inputs)`)."""

    def cache_key(self) -> str | None:
        """What the ranking cache key needs besides collection, k, questions and budget (BM25's index key); or None."""

    def index(self) -> IndexReport:
        """Build (or open) the index: Chroma collection, unit vectors, BM25 index."""

    def rank(self, question: str, question_index: int, largest: int, measure: Any) -> list[Any]:
        """`records.RetrievedParent` rows, best first, overfilling `largest` units of `measure` (or every parent)."""


@dataclass(frozen=True)
class RetrieverSpec:
    name: str  # the config value, e.g. "bm25"
    make: Callable[[RetrievalInputs], Retriever]
    unit: Unit  # what it scores: child windows or whole parents (parents are ranked by their best unit)
    vectors: bool  # needs the embedding model (dense scores)
    lexical: bool  # needs a BM25 index
    description: str = ""
    order: float = 100.0
    chain: bool = False  # the answering chain's retriever (the others rank for retrieval-only runs only)


RETRIEVERS: Registry[RetrieverSpec] = Registry("retriever", RetrieverSpec, setting="retriever",
                                                builtins=members_of(__name__))


def register_retriever(name: str, *, unit: Unit, vectors: bool = False, lexical: bool = False,
                       description: str = "", order: float = 100.0, chain: bool = False):
    """Class decorator of a member module: `cls(inputs)` makes the retriever (see Retriever)."""
    def register(cls):
        summary = description or (cls.__doc__ or "").strip().split("\n")[0]
        cls.spec = RETRIEVERS.register(RetrieverSpec(name, cls, unit, vectors, lexical, summary, order, chain))
        return cls

    return register


# the family's look-ups, as every plug-in family names them (parse: `"dense,bm25"`, a YAML list or `all`)
names, get, parse = RETRIEVERS.names, RETRIEVERS.get, RETRIEVERS.parse
