"""Intrinsic chunk statistics (AutoRAG's chunk-quality table, extended): sizes, overlap, coverage, boundaries.

Sizes, overlap and mid-word cuts are measured on each strategy's own source text (what its offsets point into).
Coverage, boundary quality and noise chunks are measured on the common reference (see ``align``), so that the
strategies are comparable although their source texts differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragstudy.scoring.evidence import merged_length  # noqa: F401  (also used by the chunk_quality tests)

from .align import AlignedChunk, ReferenceDoc

TokenCounter = Callable[[Sequence[str]], list[int]]


def word_counts(texts: Sequence[str]) -> list[int]:
    """Whitespace-separated words per text (the token counter that needs no model)."""
    return [len(text.split()) for text in texts]


def overlap_counts(spans: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """(characters covered by two or more spans, characters covered by at least one span)."""
    events: list[tuple[int, int]] = []
    for start, end in spans:
        if end > start:
            events += [(start, 1), (end, -1)]
    events.sort()
    multi = covered = depth = 0
    prev = None
    for pos, delta in events:
        if prev is not None and depth > 0:
            covered += pos - prev
            if depth > 1:
                multi += pos - prev
        depth += delta
        prev = pos
    return multi, covered


def overlap_ratio(spans_by_document: Mapping[str, Sequence[tuple[int, int]]]) -> float:
    """Characters covered more than once / characters covered at least once, over all documents."""
    multi = covered = 0
    for spans in spans_by_document.values():
        m, c = overlap_counts(spans)
        multi, covered = multi + m, covered + c
    return multi / covered if covered else 0.0


def midword_cuts(text: str, start: int, end: int) -> int:
    """How many of the chunk's two edges fall inside a word (letters or digits on both sides)."""
    cuts = 0
    if 0 < start < len(text) and text[start - 1].isalnum() and text[start].isalnum():
        cuts += 1
    if 0 < end < len(text) and text[end - 1].isalnum() and text[end].isalnum():
        cuts += 1
    return cuts


def coverage(chunks: Iterable[AlignedChunk], references: Mapping[str, ReferenceDoc]) -> float:
    """Share of the references' characters (in word tokens) that lie in at least one chunk."""
    covered: dict[str, set[int]] = {name: set() for name in references}
    for chunk in chunks:
        covered.setdefault(chunk.document, set()).update(int(i) for i in chunk.ref_tokens)
    total = sum(ref.tokens.chars() for ref in references.values())
    hit = sum(references[name].tokens.chars(np.asarray(sorted(idx), dtype=np.int64))
              for name, idx in covered.items() if name in references and idx)
    return hit / total if total else 0.0


@dataclass(frozen=True)
class ChunkFacts:
    """Per-chunk values that the intrinsic table aggregates (one row per chunk)."""

    doc_id: str
    document: str
    chars: int
    tokens: int
    midword_cut_share: float  # 0, 0.5 or 1: share of the chunk's two edges that cut a word
    body_chars: int  # characters of reference body text the chunk covers
    boundary_ok: float | None  # 1.0 if its body content ends at a sentence/block end; None without body content


def chunk_facts(chunks: Sequence[AlignedChunk], contents: Sequence[str], source_texts: Sequence[str],
                references: Mapping[str, ReferenceDoc], token_counter: TokenCounter,
                tolerance: int) -> list[ChunkFacts]:
    """Facts for each chunk (`contents[i]` and `source_texts[i]` belong to `chunks[i]`)."""
    token_counts = token_counter(list(contents))
    facts = []
    for chunk, text, source, tokens in zip(chunks, contents, source_texts, token_counts, strict=True):
        ref_end = chunk.ref_end
        ok = None if ref_end is None else float(references[chunk.document].near_boundary(ref_end, tolerance))
        facts.append(ChunkFacts(chunk.doc_id, chunk.document, len(text), int(tokens),
                                midword_cuts(source, chunk.start, chunk.end) / 2, chunk.ref_chars, ok))
    return facts


def length_summary(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample variance and coefficient of variation (std / mean) of chunk lengths."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return {"mean": float("nan"), "variance": float("nan"), "cv": float("nan")}
    var = float(arr.var(ddof=1)) if arr.size > 1 else 0.0
    mean = float(arr.mean())
    return {"mean": mean, "variance": var, "cv": (var ** 0.5) / mean if mean else float("nan")}
