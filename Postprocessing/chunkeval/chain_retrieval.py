"""Retrieval metrics of the chain's own contexts (chunk_quality.py): did the parents a Dataset file records contain
the question's evidence, and how tightly, with chunks and evidence aligned to the ground-truth reference. The span
metrics themselves are ragstudy.scoring.evidence's (the same ones retrieval at equal budgets uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragstudy.scoring.evidence import Span, SpanScores, score_spans

from .align import AlignedChunk


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


def aligned_spans(chunks: Sequence[AlignedChunk]) -> list[Span]:
    return [(c.document, s, e) for c in chunks for s, e in c.ref_intervals]


def span_scores(retrieved: Sequence[AlignedChunk], evidence: Sequence[Span]) -> SpanScores:
    """`score_spans` of chunks aligned to the reference; Σ len(r) is their characters as retrieved."""
    return score_spans(evidence, aligned_spans(retrieved), sum(c.length for c in retrieved))


def question_retrieval(question_index: int, retrieved: Sequence[AlignedChunk], evidence: Sequence[Span],
                       hit_threshold: float) -> QuestionRetrieval:
    """hit@k: recall >= `hit_threshold` (alignment to the reference may miss a few characters of punctuation);
    hit@1 uses the first retrieved chunk only. Lengths are the chunks' characters as retrieved."""
    scores = span_scores(retrieved, evidence)
    first = span_scores(retrieved[:1], evidence)
    return QuestionRetrieval(
        question_index=question_index, retrieved=len(retrieved),
        hit_at_1=float(bool(retrieved) and first.recall >= hit_threshold),
        hit_at_k=float(scores.recall >= hit_threshold), recall=scores.recall, precision=scores.precision,
        iou=scores.iou,
        retrieved_chars_mean=sum(c.length for c in retrieved) / len(retrieved) if retrieved else 0.0,
    )
