"""The budget metrics: every score of one packed context, declared once, with the function that computes it.

Each registered metric scores one context (ragstudy.scoring.budgets.pack_all) from a `ContextCase`, and every table,
sweep column, verdict choice and report reads metrics, columns, titles and directions from `metrics()`. Definitions,
what each needs (NaN without it), hit vs contiguous hit, and how to add one: docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from ragstudy.plugins import Registry
from ragstudy.scoring.evidence import ContextScores, LocatedEvidence, Span, context_scores, score_spans

Needs = Literal["evidence", "oracle", "context"]


@dataclass(frozen=True)
class ContextParent:
    """A parent of a packed context, placed on its strategy's normalised source text: its span, its normalised
    length, and its position in reading order among its source's parents (adjacent parents differ by 1)."""

    span: Span
    length: int
    position: int


@dataclass
class ContextCase:
    """One question's context at one budget, and what it is scored against (None: not available)."""

    texts: tuple[str, ...]  # the context's parent texts in rank order (the first possibly cut at the budget)
    parents: tuple[ContextParent, ...] = ()  # placed on the source text (only when the question has evidence)
    evidence: LocatedEvidence | None = None
    oracle_terms: frozenset[str] | None = None
    analyzer: Any = None  # ragstudy.lexical.ItalianAnalyzer, when oracle_terms are given

    @cached_property
    def scores(self) -> ContextScores:
        """The character-span scores of the context against the evidence, computed once for every metric."""
        return context_scores(self.evidence.spans, [([p.span], p.length) for p in self.parents],
                              self.evidence.unlocated)

    def available(self, needs: Needs) -> bool:
        return {"evidence": self.evidence is not None, "oracle": self.oracle_terms is not None,
                "context": True}[needs]


@dataclass(frozen=True)
class BudgetMetric:
    """A budget metric's facts and its per-context function."""

    name: str  # the `metric` of retrieval_summary.csv / retrieval_paired.csv, `<name>@<budget>` of sweeps
    column: str  # its column in retrieval_per_question.csv
    title: str  # a table's heading
    words: str  # how a sentence names it ("hit rate")
    description: str
    higher_is_better: bool | None  # None: neither direction is better (a size)
    needs: Needs
    compute: Callable[[ContextCase], float] = field(compare=False, repr=False)
    compared: bool = True  # paired between strategies, and a metric the verdict can rank by
    scale: tuple[float, float] | None = (0.0, 1.0)
    decimals: int = 3


# the built-in metrics are this module's own (registered below, as it is imported); outside ones come from the
# packages of $RAGSTUDY_PLUGIN_PACKAGES on the first lookup (ragstudy.plugins)
METRICS: Registry[BudgetMetric] = Registry("budget metric", BudgetMetric, ordered=False,
                                          unique=lambda metric: (("column", metric.column),))


def register_budget_metric(name: str, *, title: str, words: str, description: str, higher_is_better: bool | None,
                           needs: Needs, column: str | None = None, compared: bool = True,
                           scale: tuple[float, float] | None = (0.0, 1.0), decimals: int = 3
                           ) -> Callable[[Callable[[ContextCase], float]], Callable[[ContextCase], float]]:
    """Decorator: register the decorated function as the per-context computation of metric `name`."""

    def decorate(compute: Callable[[ContextCase], float]) -> Callable[[ContextCase], float]:
        METRICS.register(BudgetMetric(name, column or name, title, words, description, higher_is_better, needs,
                                      compute, compared, scale, decimals))
        return compute

    return decorate


def metrics() -> list[BudgetMetric]:
    """Every budget metric in registration order (the order of every table)."""
    return METRICS.members()


def get(name: str) -> BudgetMetric:
    return METRICS.get(name)


def names(compared_only: bool = False) -> tuple[str, ...]:
    return tuple(m.name for m in metrics() if m.compared or not compared_only)


def columns(builtin: bool = False) -> tuple[str, ...]:
    """The per-question columns of every metric (retrieval_per_question.csv), in registration order; `builtin`:
    only those registered so far, loading nothing (a declaration made at import time)."""
    return tuple(m.column for m in (METRICS.registered() if builtin else metrics()))


def score(case: ContextCase) -> dict[str, float]:
    """column -> value of every registered metric for one context (NaN where the metric's input is missing)."""
    return {m.column: m.compute(case) if case.available(m.needs) else float("nan") for m in metrics()}


# ------------------------------------------------------------------------------------------------ the metrics

HIT = "hit"  # the default metric of the verdict and of the plots
HIT_CONTIGUOUS = "hit_contiguous"
ORACLE_OVERLAP = "oracle_overlap"  # the one score a run without evidence has
SPAN_METRICS = ("span_recall", "span_precision", "span_iou")
CONTEXT_CHARS = "context_chars"


def _span_score(field_name: str) -> Callable[[ContextCase], float]:
    """The metric that reads one of the context's character-span scores (`ContextCase.scores`, computed once)."""
    return lambda case: getattr(case.scores, field_name)


register_budget_metric(HIT, needs="evidence", higher_is_better=True, words="hit rate",
                       title="Hit rate: the whole evidence inside the context",
                       description="1 when every character of the question's evidence is inside the packed "
                                   "context, in any of its parents and in any order (pieces split across "
                                   "parents count)")(_span_score("hit"))


def contiguous_hit(evidence: LocatedEvidence, parents: Sequence[ContextParent]) -> float:
    """1 when one parent, or a run of parents adjacent in their source's reading order, holds the whole evidence;
    evidence not wholly located, or in several documents, is never a contiguous hit."""
    if evidence.unlocated or not evidence.spans:
        return 0.0
    total = score_spans(evidence.spans, [], 1).evidence_chars
    runs: list[list[ContextParent]] = []  # parents of one source, adjacent in its reading order
    for p in sorted(parents, key=lambda p: (p.span[0], p.position)):
        if runs and p.span[0] == runs[-1][-1].span[0] and p.position <= runs[-1][-1].position + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return float(any(score_spans(evidence.spans, [p.span for p in run], 1).intersection == total for run in runs))


@register_budget_metric(HIT_CONTIGUOUS, needs="evidence", higher_is_better=True, words="contiguous hit rate",
                        title="Contiguous hit rate: one parent, or adjacent parents in reading order, hold the "
                              "whole evidence",
                        description="1 when one parent of the context, or parents of the context adjacent in "
                                    "their document's reading order, hold the whole evidence: the coherent "
                                    "stretch of text the paper's claim is about")
def hit_contiguous(case: ContextCase) -> float:
    return contiguous_hit(case.evidence, case.parents)


register_budget_metric(SPAN_METRICS[0], needs="evidence", higher_is_better=True, words="span recall",
                       title="Span recall: evidence characters in the context / evidence characters",
                       description="evidence characters retrieved / evidence characters")(_span_score("span_recall"))

register_budget_metric(SPAN_METRICS[1], needs="evidence", higher_is_better=True, words="span precision",
                       title="Span precision: evidence characters in the context / context characters",
                       description="evidence characters retrieved / retrieved characters"
                       )(_span_score("span_precision"))

register_budget_metric(SPAN_METRICS[2], needs="evidence", higher_is_better=True, words="span IoU", title="Span IoU",
                       description="intersection over union of evidence and retrieved characters"
                       )(_span_score("span_iou"))

register_budget_metric("mrr", column="reciprocal_rank", needs="evidence", higher_is_better=True, words="MRR",
                       title="MRR: 1 / rank of the parent that completes the evidence",
                       description="1 / rank of the parent that completes the evidence (0: never complete), "
                                   "averaged over questions")(_span_score("reciprocal_rank"))


@register_budget_metric(CONTEXT_CHARS, needs="context", higher_is_better=None, compared=False, scale=None,
                        decimals=1, words="context size", title="Context size (characters)",
                        description="characters of context the LLM received per question (every question)")
def context_chars(case: ContextCase) -> int:
    return sum(len(text) for text in case.texts)


@register_budget_metric(ORACLE_OVERLAP, needs="oracle", higher_is_better=True, words="oracle overlap",
                        title="Oracle overlap: share of the oracle answer's content terms in the context",
                        description="share of the oracle answer's content terms found in the packed context (no "
                                    "evidence needed; ragstudy.scoring.oracle_overlap)")
def oracle_overlap(case: ContextCase) -> float:
    from ragstudy.scoring.oracle_overlap import overlap

    return overlap(case.oracle_terms, "\n".join(case.texts), case.analyzer)
