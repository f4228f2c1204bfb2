"""Retrieval metrics from evidence spans: did the retrieved parents contain the evidence, and how tightly.

The character-span metrics follow chunking_evaluation (Chroma research, "Evaluating chunking strategies for
retrieval"): with R the retrieved chunks and E the evidence spans of a question, both on the reference text,

- recall    = |E ∩ R| / |E|
- precision = |E ∩ R| / Σ len(r)            (every retrieved chunk's length counts, as the LLM reads it all)
- IoU       = |E ∩ R| / (Σ len(r) + |E \\ R|)

``len(r)`` is the chunk's length as retrieved (its characters), so header/footer noise inside a chunk lowers
precision. hit@k: recall >= a threshold (default 0.9: alignment to the reference may miss a few characters of
punctuation); hit@1 uses the first retrieved chunk only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .align import AlignedChunk
from .intrinsic import merged_length

Span = tuple[str, int, int]  # (document name, start, end) on the reference text


@dataclass(frozen=True)
class SpanScores:
    recall: float
    precision: float
    iou: float
    intersection: int
    evidence_chars: int
    retrieved_chars: int


def _intersection(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for s1, e1 in a:
        for s2, e2 in b:
            s, e = max(s1, s2), min(e1, e2)
            if e > s:
                out.append((s, e))
    return out


def span_scores(retrieved: Sequence[AlignedChunk], evidence: Sequence[Span]) -> SpanScores:
    """Recall, precision and IoU of the retrieved chunks against the evidence spans (see module docstring)."""
    documents = {doc for doc, _, _ in evidence} | {c.document for c in retrieved}
    intersection = evidence_chars = 0
    for doc in documents:
        ev = [(s, e) for d, s, e in evidence if d == doc]
        got = [iv for c in retrieved if c.document == doc for iv in c.ref_intervals]
        evidence_chars += merged_length(ev)
        intersection += merged_length(_intersection(ev, got))
    retrieved_chars = sum(c.length for c in retrieved)
    recall = intersection / evidence_chars if evidence_chars else 0.0
    precision = intersection / retrieved_chars if retrieved_chars else 0.0
    denominator = retrieved_chars + evidence_chars - intersection
    iou = intersection / denominator if denominator else 0.0
    return SpanScores(recall, precision, iou, intersection, evidence_chars, retrieved_chars)


@dataclass(frozen=True)
class QuestionRetrieval:
    """Retrieval metrics of one answerable question for one strategy."""

    question_index: int
    retrieved: int  # parents retrieved
    hit_at_1: float
    hit_at_k: float
    recall: float
    precision: float
    iou: float
    retrieved_chars_mean: float  # mean length of the retrieved parents (characters)


def question_retrieval(question_index: int, retrieved: Sequence[AlignedChunk], evidence: Sequence[Span],
                       hit_threshold: float) -> QuestionRetrieval:
    scores = span_scores(retrieved, evidence)
    first = span_scores(retrieved[:1], evidence) if retrieved else scores
    return QuestionRetrieval(
        question_index=question_index, retrieved=len(retrieved),
        hit_at_1=float(bool(retrieved) and first.recall >= hit_threshold),
        hit_at_k=float(scores.recall >= hit_threshold), recall=scores.recall, precision=scores.precision,
        iou=scores.iou,
        retrieved_chars_mean=sum(c.length for c in retrieved) / len(retrieved) if retrieved else 0.0,
    )
