"""Retrieval at equal context budgets: pack each question's ranking (`retrieval_<strategy>.csv`) into budgets and
score every context against the question's evidence.

The paper's strategies hand the LLM very different amounts of context (paragraph k=1 parent, the baselines k=4
child windows -> up to 4 parents). A budget B is filled by `pack_budget`: whole parents in rank order while the
total stays <= B; a first parent longer than B is cut at B. The budget "k" is what the strategy's own k child
windows retrieve, as the chain prompts with. Budgets are counted in characters or in tokens of the LLM's tokenizer
(`Measure`) and validated once, by `validate_budgets` (ragstudy.config, re-exported here).

Per question and budget: hit (the whole evidence inside the context), span recall / precision / IoU and the
reciprocal rank of the parent that completes the evidence (ragstudy.evidence), and the context size. Per strategy
and budget: means with seeded bootstrap CIs (`summarize`); between strategies: paired bootstrap CIs and Wilcoxon
p-values, Holm-adjusted over the pairs of one budget and metric (`compare`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .config import validate_budgets  # noqa: F401  (budgets are checked by the config, once)
from .errors import StudyInputError

if TYPE_CHECKING:
    from .results import RetrievedParent

logger = logging.getLogger(__name__)

PAPER_K_LABEL = "k"  # the budget label of "the parents the strategy's own k child windows retrieve"
# summary metric -> per-question column
METRICS: dict[str, str] = {"hit": "hit", "span_recall": "span_recall", "span_precision": "span_precision",
                           "span_iou": "span_iou", "mrr": "reciprocal_rank", "context_chars": "context_chars",
                           "oracle_overlap": "oracle_overlap"}  # ragstudy.oracle_overlap: needs no evidence
PAIRED_METRICS = ("hit", "span_recall", "span_precision", "span_iou", "mrr")


# ------------------------------------------------------------------------------------------------ budgets

def budget_labels(budgets: Sequence[int]) -> list[str]:
    """Budget labels in table order: the numeric budgets ascending, then "k"."""
    return [str(b) for b in sorted(set(budgets))] + [PAPER_K_LABEL]


@dataclass(frozen=True)
class Measure:
    """How a budget is counted: `length(text)` in the budget's unit and `cut(text, n)`, the longest prefix of
    `text` of at most n units."""

    unit: str
    length: Callable[[str], int]
    cut: Callable[[str, int], str]
    name: str = ""  # which tokenizer, for cache keys


CHARS = Measure("chars", len, lambda text, n: text[:n])


def token_measure(tokenizer) -> Measure:
    """Budgets in tokens of `tokenizer` (a transformers fast tokenizer: cuts use its character offsets)."""

    def length(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def cut(text: str, n: int) -> str:
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        return text if len(offsets) <= n else text[:offsets[n - 1][1]] if n > 0 else ""

    return Measure("tokens", length, cut, str(getattr(tokenizer, "name_or_path", "")))


def llm_measure(config) -> Measure:
    """The budget measure of a StudyConfig: characters, or tokens of the study's LLM tokenizer (no weights)."""
    if config.budget_unit == "chars":
        return CHARS
    from transformers import AutoTokenizer

    from .models import resolve_llm

    origin = config.origins.get("llm", "config")
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolve_llm(config.profile.llm, origin))
    except OSError as exc:
        raise StudyInputError(f"budget_unit tokens needs the LLM's tokenizer ({config.profile.llm}, set by {origin}),"
                              f" which could not be loaded: {exc}") from exc
    tokenizer.model_max_length = 10 ** 9  # counting only
    return token_measure(tokenizer)


def run_measure(run_config: Mapping[str, Any], results_dir: Path) -> Measure:
    """The measure of a finished run from its config.json: characters, or its LLM tokenizer."""
    if run_config.get("budget_unit", "chars") == "chars":
        return CHARS
    from .config import StudyConfig

    return llm_measure(StudyConfig.from_dict(dict(run_config), str(Path(results_dir) / "config.json")))


# ------------------------------------------------------------------------------------------------ packing

@dataclass(frozen=True)
class PackedContext:
    """What fills one budget: the included parents in rank order and their texts (the first one possibly cut)."""

    budget: str  # "500", …, or "k"
    parents: tuple[RetrievedParent, ...]
    texts: tuple[str, ...]
    used: int  # size in the budget's unit
    cut: bool = False  # the first parent was longer than the budget and was cut

    @property
    def chars(self) -> int:
        return sum(len(text) for text in self.texts)


def pack_budget(ranked: Sequence[RetrievedParent], budget: int, measure: Measure = CHARS) -> PackedContext:
    """Fill `budget` with whole parents in rank order while the total stays <= budget; stop at the first parent
    that does not fit. A first parent longer than the budget is cut at the budget."""
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    parents: list[RetrievedParent] = []
    texts: list[str] = []
    used = 0
    for parent in sorted(ranked, key=lambda p: p.rank):
        size = measure.length(parent.contents)
        if used + size <= budget:
            parents.append(parent)
            texts.append(parent.contents)
            used += size
            continue
        if not parents:
            text = measure.cut(parent.contents, budget)
            return PackedContext(str(budget), (parent,), (text,), measure.length(text), cut=True)
        break
    return PackedContext(str(budget), tuple(parents), tuple(texts), used)


def pack_paper_k(ranked: Sequence[RetrievedParent], measure: Measure = CHARS) -> PackedContext:
    """The parents the strategy's own k child windows retrieve, whole, in rank order (what the chain prompts with)."""
    parents = tuple(p for p in sorted(ranked, key=lambda p: p.rank) if p.in_k)
    return PackedContext(PAPER_K_LABEL, parents, tuple(p.contents for p in parents),
                         sum(measure.length(p.contents) for p in parents))


def pack_all(ranked: Sequence[RetrievedParent], budgets: Sequence[int], measure: Measure = CHARS
             ) -> dict[str, PackedContext]:
    """Every budget's context, in `budget_labels` order."""
    packed = {str(b): pack_budget(ranked, b, measure) for b in sorted(set(budgets))}
    packed[PAPER_K_LABEL] = pack_paper_k(ranked, measure)
    return packed


# ------------------------------------------------------------------------------------------------ scoring

@dataclass
class StrategyEvaluation:
    """Per-question rows of one strategy and what was left out."""

    strategy: str
    rows: list[dict] = field(default_factory=list)
    ranked_questions: int = 0
    unanswerable: int = 0  # ranked questions without evidence: left out
    document_missing: int = 0  # evidence in a PDF the run did not index: left out
    partly_unlocated: int = 0  # evidence not (wholly) found in the strategy's text: kept, cannot be a hit

    def note(self) -> str:
        """What was scored and what was left out, in one line."""
        kept = len({r["question_index"] for r in self.rows})
        parts = [f"{kept} of {self.ranked_questions} ranked questions scored",
                 f"{self.unanswerable} unanswerable (no evidence) left out"]
        if self.document_missing:
            parts.append(f"{self.document_missing} left out because their evidence PDF was not indexed")
        if self.partly_unlocated:
            parts.append(f"{self.partly_unlocated} with evidence not (wholly) found in the strategy's text (kept: "
                         "cannot be a hit)")
        return f"{self.strategy}: " + "; ".join(parts)


def evaluate_strategy(results_dir: Path, strategy: str, evidence: Mapping, budgets: Sequence[int],
                      measure: Measure = CHARS) -> StrategyEvaluation:
    """Score every ranked answerable question of `strategy` at every budget. `evidence` maps question_index to
    ragstudy.evidence.QuestionEvidence (load_evidence_file)."""
    from .evidence import SourceIndex, context_scores
    from .results import read_chunks, read_retrieval, retrieval_path

    rankings = read_retrieval(retrieval_path(results_dir, strategy))
    chunk_rows, sources = read_chunks(Path(results_dir), strategy)
    by_id = {row["doc_id"]: row for row in chunk_rows}
    index = SourceIndex({path: source.text for path, source in sources.items()})
    result = StrategyEvaluation(strategy, ranked_questions=len(rankings))
    for question_index in sorted(rankings):
        if question_index not in evidence:
            result.unanswerable += 1
            continue
        located = index.locate(evidence[question_index])
        if located.documents_missing:
            result.document_missing += 1
            continue
        result.partly_unlocated += located.unlocated > 0
        for label, context in pack_all(rankings[question_index], budgets, measure).items():
            parents = []
            for parent, text in zip(context.parents, context.texts):
                row = by_id.get(parent.doc_id)
                if row is None or row["contents"] != parent.contents:
                    raise StudyInputError(f"{retrieval_path(results_dir, strategy)}: question {question_index} rank "
                                          f"{parent.rank}: parent {parent.doc_id} is not in chunks_{strategy}.csv as "
                                          "ranked; the files come from different runs: re-run evaluation_chain.py "
                                          "--retrieval-only")
                start = row["start_end_idx"][0]
                parents.append(index.span(row["path"], start, start + len(text)))
            scores = context_scores(located.spans, [([span], length) for span, length in parents],
                                    located.unlocated)
            result.rows.append({
                "strategy": strategy, "budget": label, "question_index": question_index, "hit": scores.hit,
                "span_recall": scores.span_recall, "span_precision": scores.span_precision,
                "span_iou": scores.span_iou, "reciprocal_rank": scores.reciprocal_rank,
                "context_chars": context.chars, "parents": len(context.parents), "context_units": context.used,
            })
    return result


def evaluate_folder(results_dir: Path, evidence: Mapping, budgets: Sequence[int], measure: Measure,
                    strategies: Sequence[str]):
    """Per-question rows of every strategy (the retrieval_per_question.csv columns plus `context_units`, the
    context size in the budget's unit) and each strategy's StrategyEvaluation."""
    import pandas as pd

    from .results import RETRIEVAL_PER_QUESTION

    evaluations = [evaluate_strategy(results_dir, s, evidence, budgets, measure) for s in strategies]
    frame = pd.DataFrame([row for e in evaluations for row in e.rows],
                         columns=[*RETRIEVAL_PER_QUESTION.columns, "context_units"])
    return frame, evaluations


def with_oracle_overlap(frame, overlap_rows: Sequence[Mapping]):
    """Per-question rows of the evidence scores (`frame`, maybe empty) joined with the oracle-overlap rows on
    (strategy, budget, question_index); a question scored one way only keeps NaN in the other's columns."""
    import pandas as pd

    keys = ["strategy", "budget", "question_index"]
    overlap = pd.DataFrame(list(overlap_rows), columns=[*keys, "oracle_overlap"])
    base = frame.drop(columns=["oracle_overlap"], errors="ignore")
    if not len(overlap):
        return base.assign(oracle_overlap=float("nan"))
    base = base.astype({"question_index": int, "budget": str})
    merged = base.merge(overlap.astype({"question_index": int, "budget": str}), on=keys, how="outer")
    return merged.sort_values(keys, key=lambda c: c.map(_budget_order) if c.name == "budget" else c,
                              kind="stable").reset_index(drop=True)


def _budget_order(label: str) -> float:
    return float(label) if str(label).isdigit() else float("inf")


def budget_means(frame, labels: Sequence[str], metrics: Sequence[str] = PAIRED_METRICS) -> dict[str, float]:
    """`<metric>@<budget>` -> mean over the questions of `frame` (one strategy's per-question rows); NaN where no
    question was scored."""
    means = {}
    for label in labels:
        part = frame[frame["budget"] == label]
        for metric in metrics:
            column = METRICS[metric]
            means[f"{metric}@{label}"] = float(part[column].mean()) if len(part) else float("nan")
    return means


def summarize(frame, display: Mapping[str, str], n_resamples: int, seed: int, confidence: float):
    """Mean and bootstrap CI of every metric per strategy and budget (the retrieval_summary.csv table)."""
    import pandas as pd

    from .results import RETRIEVAL_SUMMARY
    from .stats import bootstrap_ci

    records = []
    for (strategy, budget), part in frame.groupby(["strategy", "budget"], sort=False):
        for metric, column in METRICS.items():
            if column not in part:
                continue
            values = part[column].dropna().astype(float).to_numpy()  # evidence or oracle missing: not scored
            if not len(values):
                continue
            mean, low, high = bootstrap_ci(values, n_resamples, seed, confidence)
            records.append({"strategy": strategy, "strategy_display": display.get(strategy, strategy),
                            "budget": str(budget), "metric": metric, "n": len(values), "mean": mean,
                            "ci_low": low, "ci_high": high})
    return pd.DataFrame(records, columns=list(RETRIEVAL_SUMMARY.columns))


def compare(frame, strategies: Sequence[str], labels: Sequence[str], n_resamples: int, seed: int,
            confidence: float):
    """Paired differences (a - b, same questions) of every pair of strategies at every budget; Holm over the pairs
    of one budget and metric (the retrieval_paired.csv table)."""
    import pandas as pd

    from .results import RETRIEVAL_PAIRED
    from .stats import compare_paired, holm

    records = []
    for label in labels:
        at_budget = frame[frame["budget"] == label]
        for metric in PAIRED_METRICS:
            column = METRICS[metric]
            wide = at_budget.pivot(index="question_index", columns="strategy", values=column)
            family = []
            for a, b in combinations([s for s in strategies if s in wide.columns], 2):
                pair = wide[[a, b]].dropna()
                if len(pair) < 2:
                    continue
                result = compare_paired(pair[a].to_numpy(float), pair[b].to_numpy(float), n_resamples, seed,
                                        confidence)
                family.append({"budget": label, "metric": metric, "strategy_a": a, "strategy_b": b, "n": result.n,
                               "mean_diff": result.mean_diff, "ci_low": result.ci_low, "ci_high": result.ci_high,
                               "p_wilcoxon": result.p_wilcoxon})
            for record, adjusted in zip(family, holm([r["p_wilcoxon"] for r in family]) if family else []):
                record["p_holm"] = adjusted
            records += family
    return pd.DataFrame(records, columns=list(RETRIEVAL_PAIRED.columns))
