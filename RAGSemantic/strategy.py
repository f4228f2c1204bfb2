"""What differs for the semantic strategy: breakpoints where consecutive sentences stop being similar.

Sentences come from the core's Italian splitter (`ragstudy.text.sentences`, shared with the sentence strategy). Each is
embedded once with the study's embedding model (`context.embedding()`, whose vector cache embeds a repeated
sentence once) and a sentence's vector is the mean with its `buffer_size` neighbours on each side
(`buffer_mode="mean"`, the default; LangChain and LlamaIndex embed the joined text of the window instead,
`buffer_mode="text"`, which costs ~2.5x more on Italian manuals at buffer 1 and re-embeds everything when
buffer_size changes). The cosine distance between consecutive sentences is then thresholded as in LangChain's
SemanticChunker (langchain-experimental) — `percentile` (default, 95), `standard_deviation` (mean +
3 sd), `interquartile` (mean + 1.5 IQR) or `gradient` (95th percentile of the distances' gradient) — and as in
LlamaIndex's SemanticSplitterNodeParser (buffer 1, percentile 95). Unlike those, every chunk is bounded: a group
longer than `max_chunk_size` is split again at its largest internal distance until it fits (a sentence longer than
the maximum is first cut at line breaks, then between words), and a group shorter than `min_chunk_size` joins the
more similar neighbour when the result still fits. langchain-experimental's SemanticChunker itself was not used:
it has no maximum size, re-joins sentences with single spaces (its chunks are not slices of the source, so
`start_end_idx` would be lost), splits sentences with a regex that cuts after "art." and "D.Lgs.", and pulls in
langchain-community; chonkie's SemanticChunker has a maximum but its own delimiter-based sentence split and
embedding wrappers. The thresholds are the few lines below. Sizes in characters (800 = the fixed-size parents);
child windows 200 / overlap 0, k=4, as the baselines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np

from ragstudy.registry import ChunkerContext, register_strategy
from ragstudy.text.chunks import SpanChunker
from ragstudy.text.sentences import ItalianSentenceSplitter, SentenceUnits, Span

ThresholdType = Literal["percentile", "standard_deviation", "interquartile", "gradient"]
BufferMode = Literal["mean", "text"]
# LangChain SemanticChunker's default amount for each threshold type
DEFAULT_AMOUNTS: dict[str, float] = {"percentile": 95.0, "standard_deviation": 3.0, "interquartile": 1.5,
                                     "gradient": 95.0}


@dataclass(frozen=True)
class SemanticParams:
    """Breakpoint rule and size bounds (characters) of semantic parents."""

    threshold_type: ThresholdType = "percentile"
    threshold_amount: float | None = None  # None: LangChain's default for threshold_type
    buffer_size: int = 1  # neighbours on each side that join a sentence's vector (LangChain and LlamaIndex: 1)
    buffer_mode: BufferMode = "mean"  # "mean": average of the sentences' vectors; "text": embed the joined text
    min_chunk_size: int = 100
    max_chunk_size: int = 800

    def __post_init__(self) -> None:
        if self.threshold_type not in DEFAULT_AMOUNTS:
            raise ValueError(f"threshold_type must be one of {', '.join(DEFAULT_AMOUNTS)}, got {self.threshold_type!r}")
        amount = self.amount
        if self.threshold_type in ("percentile", "gradient") and not 0 <= amount <= 100:
            raise ValueError(f"threshold_amount for {self.threshold_type} is a percentile in [0, 100], got {amount}")
        if amount < 0:
            raise ValueError(f"threshold_amount must be >= 0, got {amount}")
        if not 0 <= self.buffer_size <= 5:
            raise ValueError(f"buffer_size must be between 0 and 5, got {self.buffer_size}")
        if self.max_chunk_size < 20:
            raise ValueError(f"max_chunk_size must be at least 20 characters, got {self.max_chunk_size}")
        if not 0 <= self.min_chunk_size <= self.max_chunk_size:
            raise ValueError(f"min_chunk_size ({self.min_chunk_size}) must be >= 0 and at most max_chunk_size "
                             f"({self.max_chunk_size})")

    @property
    def amount(self) -> float:
        return DEFAULT_AMOUNTS[self.threshold_type] if self.threshold_amount is None else float(self.threshold_amount)


def breakpoints(distances: np.ndarray, threshold_type: str, amount: float) -> np.ndarray:
    """Indices i where the boundary between sentence i and i+1 is a breakpoint (LangChain's definitions)."""
    if len(distances) == 0:
        return np.zeros(0, dtype=int)
    if threshold_type == "percentile":
        return np.flatnonzero(distances > np.percentile(distances, amount))
    if threshold_type == "standard_deviation":
        return np.flatnonzero(distances > np.mean(distances) + amount * np.std(distances))
    if threshold_type == "interquartile":
        q1, q3 = np.percentile(distances, [25, 75])
        return np.flatnonzero(distances > np.mean(distances) + amount * (q3 - q1))
    if threshold_type == "gradient":
        if len(distances) < 2:
            return np.zeros(0, dtype=int)
        gradient = np.gradient(distances)
        return np.flatnonzero(gradient > np.percentile(gradient, amount))
    raise ValueError(f"unknown threshold_type {threshold_type!r}")


def _split_to_max(units: list[Span], distances: np.ndarray, first: int, last: int, limit: int) -> list[tuple[int, int]]:
    """Groups (first, last unit) of units[first..last], split at the largest internal distance until each fits."""
    done, todo = [], [(first, last)]
    while todo:
        first, last = todo.pop()
        if units[last][1] - units[first][0] <= limit or first == last:
            done.append((first, last))
            continue
        cut = first + int(np.argmax(distances[first:last]))  # boundary after unit `cut`
        todo += [(cut + 1, last), (first, cut)]
    return done


def _merge_small(units: list[Span], distances: np.ndarray, groups: list[tuple[int, int]], minimum: int,
                 limit: int) -> list[tuple[int, int]]:
    """Join each group shorter than `minimum` with its more similar neighbour while the result fits in `limit`."""
    groups = list(groups)
    size = lambda g: units[g[1]][1] - units[g[0]][0]  # noqa: E731
    i = 0
    while i < len(groups):
        if size(groups[i]) >= minimum or len(groups) == 1:
            i += 1
            continue
        options = []
        if i > 0 and size((groups[i - 1][0], groups[i][1])) <= limit:
            options.append((distances[groups[i - 1][1]], i - 1))
        if i + 1 < len(groups) and size((groups[i][0], groups[i + 1][1])) <= limit:
            options.append((distances[groups[i][1]], i))
        if not options:
            i += 1
            continue
        _, left = min(options)
        groups[left:left + 2] = [(groups[left][0], groups[left + 1][1])]
        i = left  # the merged group may still be short
    return groups


@dataclass
class SemanticSplitter:
    """Semantic chunk spans of a text; `seconds` accumulates time spent embedding and splitting."""

    embed: Callable[[list[str]], Any]
    params: SemanticParams
    seconds: dict = field(default_factory=lambda: {"embedding": 0.0, "splitting": 0.0})

    def __post_init__(self) -> None:
        self._units = SentenceUnits(ItalianSentenceSplitter(), self.params.max_chunk_size)

    def spans(self, text: str) -> list[Span]:
        began = time.perf_counter()
        units = self._units(text)
        if len(units) <= 1:
            self.seconds["splitting"] += time.perf_counter() - began
            return [(units[0][0], units[-1][1])] if units else []
        b, n = self.params.buffer_size, len(units)
        windows = [(max(0, i - b), min(n - 1, i + b)) for i in range(n)]
        if self.params.buffer_mode == "text":
            texts = [" ".join(text[units[lo][0]:units[hi][1]].split()) for lo, hi in windows]
        else:
            texts = [" ".join(text[start:end].split()) for start, end in units]
        embedding_began = time.perf_counter()
        vectors = np.asarray(self.embed(texts), dtype=np.float64)
        embedded = time.perf_counter()
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        if self.params.buffer_mode == "mean" and b:
            sums = np.vstack([np.zeros((1, vectors.shape[1])), np.cumsum(vectors, axis=0)])
            vectors = np.stack([(sums[hi + 1] - sums[lo]) / (hi + 1 - lo) for lo, hi in windows])
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        distances = 1.0 - np.einsum("ij,ij->i", vectors[:-1], vectors[1:])
        cuts = breakpoints(distances, self.params.threshold_type, self.params.amount)
        groups, first = [], 0
        for cut in [*cuts.tolist(), len(units) - 1]:
            if cut >= first:
                groups.extend(_split_to_max(units, distances, first, cut, self.params.max_chunk_size))
                first = cut + 1
        groups = _merge_small(units, distances, groups, self.params.min_chunk_size, self.params.max_chunk_size)
        self.seconds["embedding"] += embedded - embedding_began
        self.seconds["splitting"] += (embedding_began - began) + (time.perf_counter() - embedded)
        return [(units[first][0], units[last][1]) for first, last in groups]

    def split_text(self, text: str) -> list[str]:
        return [text[start:end] for start, end in self.spans(text)]


@dataclass(frozen=True)
class SemanticChunker(SpanChunker):
    """A SpanChunker that reports its splitter's embedding and splitting seconds (for the benchmark)."""

    splitter: SemanticSplitter

    @property
    def seconds(self) -> dict:
        return self.splitter.seconds


def make_chunker(config: SemanticParams, context: ChunkerContext) -> SemanticChunker:
    return SemanticChunker(SemanticSplitter(context.embedding().embed_documents, config))


# parents: sentences grouped at 95th-percentile distance drops, 100-800 characters; child windows 200/0, k=4;
# colour Okabe–Ito sky blue
SPEC = register_strategy("semantic", make_chunker, SemanticParams, display_name="Semantic", color="#56B4E9", order=5,
                         description="sentences grouped at embedding-similarity drops, 100-800 characters",
                         needs_embedding=True)
