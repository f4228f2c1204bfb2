"""Retrieval at equal context budgets: every context a strategy's ranking fills (ragstudy.scoring.budgets) scored
against the question's evidence by every budget metric (ragstudy.scoring.budget_metrics), per question and budget; per
strategy and budget, means with seeded bootstrap CIs (`summarize`); between strategies, paired bootstrap CIs and
Wilcoxon p, Holm-adjusted over the pairs of one budget and metric (`compare`). ragstudy.scoring.verdict reads the two
tables.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Any, Callable

from ragstudy.errors import StudyInputError
from ragstudy.scoring import budget_metrics
from ragstudy.scoring.budgets import CHARS, Measure, llm_measure, pack_all
from ragstudy.scoring.evidence import QuestionEvidence, SourceIndex
from ragstudy.scoring.stats import HOLM_COLUMN, CiSettings, bootstrap_ci, compare_paired, holm

logger = logging.getLogger(__name__)


def run_measure(run_config: Mapping[str, Any], results_dir: Path) -> Measure:
    """The measure of a finished run from its config.json: characters, or its LLM tokenizer."""
    if run_config.get("budget_unit", "chars") == "chars":
        return CHARS
    from ragstudy.config import StudyConfig
    from ragstudy.results import CONFIG_NAME

    return llm_measure(StudyConfig.from_dict(dict(run_config), str(Path(results_dir) / CONFIG_NAME)))


# ------------------------------------------------------------------------------------------------ scoring

@dataclass
class StrategyEvaluation:
    """Per-question rows of one strategy and what was left out."""

    strategy: str
    rows: list[dict] = field(default_factory=list)
    ranked_questions: int = 0
    unanswerable: int = 0  # ranked questions without evidence: left out of the evidence metrics
    document_missing: int = 0  # evidence in a PDF the run did not index: left out of the evidence metrics
    partly_unlocated: int = 0  # evidence not (wholly) found in the strategy's text: kept, cannot be a hit
    evidence_given: bool = True
    oracle: Any = None  # ragstudy.scoring.oracle_overlap.OracleTerms, when an oracle file was given
    oracle_scored: int = 0
    no_oracle: int = 0  # ranked questions beyond the oracle file's rows
    answerable: set[int] = field(default_factory=set)  # ranked questions with evidence
    found: set[int] = field(default_factory=set)  # ... whose evidence was wholly found in the strategy's text
    ran_out: dict[str, int] = field(default_factory=dict)  # budget -> questions whose ranking ended before filling it
    unit: str = "chars"  # the budgets' unit

    def note(self) -> str:
        """What was scored and what was left out, in one line."""
        kept = len({r["question_index"] for r in self.rows if not math.isnan(r[budget_metrics.HIT])})
        parts = [f"{kept} of {self.ranked_questions} ranked questions scored",
                 f"{self.unanswerable} unanswerable (no evidence) left out"]
        if self.document_missing:
            parts.append(f"{self.document_missing} left out because their evidence PDF was not indexed")
        if self.partly_unlocated:
            parts.append(f"{self.partly_unlocated} with evidence not (wholly) found in the strategy's text (kept: "
                         "cannot be a hit)")
        return f"{self.strategy}: " + "; ".join(parts)

    def ran_out_note(self) -> str | None:
        """A warning when the retriever ranked too few parents to fill a budget the strategy's text could fill: those
        contexts are smaller than the budget, so the strategies are not compared at equal budgets there."""
        if not self.ran_out:
            return None
        counts = ", ".join(f"{n} of {self.ranked_questions} questions at {b} {self.unit}"
                           for b, n in self.ran_out.items())
        return (f"{self.strategy}: the retriever's ranking ended before filling the budget ({counts}) although the "
                "strategy's text could fill it; those contexts are smaller than the budget, so the comparison is "
                "not at equal budgets there (a retriever must rank parents until the largest budget is overfilled)")

    def notes(self) -> list[str]:
        """The evidence note (with evidence), the ran-out warning, the oracle-overlap note (with an oracle)."""
        oracle = (self.oracle.note(self.strategy, self.oracle_scored, self.no_oracle)
                  if self.oracle is not None else None)
        return [n for n in (self.note() if self.evidence_given else None, self.ran_out_note(), oracle) if n]


def _reading_order(chunk_rows: Sequence[Mapping]) -> dict[str, int]:
    """doc_id -> position of the parent among its source's parents in reading order (start, then end)."""
    by_path: dict[str, list[Mapping]] = {}
    for row in chunk_rows:
        by_path.setdefault(row["path"], []).append(row)
    return {row["doc_id"]: position for rows in by_path.values()
            for position, row in enumerate(sorted(rows, key=lambda r: tuple(r["start_end_idx"])))}


def evaluate_strategy(results_dir: Path, strategy: str, evidence: Mapping[int, QuestionEvidence],
                      budgets: Sequence[int], measure: Measure = CHARS, oracle: Any = None,
                      analyzer: Any = None) -> StrategyEvaluation:
    """Score every ranked question of `strategy` at every budget with every budget metric, packing its ranking once
    per budget; `oracle`: ragstudy.scoring.oracle_overlap.OracleTerms. A question with neither evidence nor oracle
    terms is left out; the metrics whose input a question lacks are NaN in its rows."""
    from ragstudy.results import read_chunks, read_retrieval, retrieval_path

    rankings = read_retrieval(retrieval_path(results_dir, strategy))
    chunk_rows, sources = read_chunks(Path(results_dir), strategy)
    by_id = {row["doc_id"]: row for row in chunk_rows}
    position = _reading_order(chunk_rows)
    index = SourceIndex({path: source.text for path, source in sources.items()})
    result = StrategyEvaluation(strategy, ranked_questions=len(rankings), evidence_given=bool(evidence),
                                oracle=oracle, unit=measure.unit)
    holds = sum(measure.length(row["contents"]) for row in chunk_rows)  # what the strategy's parents hold in all
    for question_index in sorted(rankings):
        located = None
        if question_index not in evidence:
            result.unanswerable += 1
        else:
            result.answerable.add(question_index)
            located = index.locate(evidence[question_index])
            if located.documents_missing:
                result.document_missing += 1
                located = None
            else:
                result.partly_unlocated += located.unlocated > 0
                if not located.unlocated:
                    result.found.add(question_index)
        terms = None
        if oracle is not None:
            terms = oracle.terms.get(question_index)
            result.no_oracle += question_index >= oracle.answers
            result.oracle_scored += terms is not None
        if located is None and terms is None:
            continue
        for label, context in pack_all(rankings[question_index], budgets, measure).items():
            if (label.isdigit() and len(context.parents) == len(rankings[question_index])
                    and context.used < int(label) <= holds):  # the ranking ended, not the budget
                result.ran_out[label] = result.ran_out.get(label, 0) + 1
            parents = []
            for parent, text in zip(context.parents, context.texts):
                row = by_id.get(parent.doc_id)
                if row is None or row["contents"] != parent.contents:
                    raise StudyInputError(f"{retrieval_path(results_dir, strategy)}: question {question_index} rank "
                                          f"{parent.rank}: parent {parent.doc_id} is not in chunks_{strategy}.csv as "
                                          "ranked; the files come from different runs: re-run "
                                          "`ragstudy retrieve`")
                if located is not None:
                    start = row["start_end_idx"][0]
                    span, length = index.span(row["path"], start, start + len(text))
                    parents.append(budget_metrics.ContextParent(span, length, position[parent.doc_id]))
            case = budget_metrics.ContextCase(context.texts, tuple(parents), located, terms, analyzer)
            result.rows.append({"strategy": strategy, "budget": label, "question_index": question_index,
                                **budget_metrics.score(case), "parents": len(context.parents),
                                "context_units": context.used})
    if result.no_oracle:
        logger.warning("%s: %d ranked question(s) have no oracle row", strategy, result.no_oracle)
    if result.ran_out:
        logger.warning("%s", result.ran_out_note())
    return result


def check_evidence_found(evaluations: Sequence[StrategyEvaluation], evidence_path: str | Path) -> None:
    """Evidence that occurs in none of the run's PDFs gives hit 0 everywhere and a verdict that means nothing: a
    DataError naming the file when no answerable question's evidence is wholly found in any strategy's text; a
    warning naming how many are not when some are."""
    answerable = set().union(*(e.answerable for e in evaluations))
    found = set().union(*(e.found for e in evaluations))
    if not answerable:
        return
    missing = sorted(answerable - found)
    if not found:
        raise StudyInputError(f"{evidence_path}: the evidence of none of its {len(answerable)} answerable questions "
                              f"occurs in the run's PDFs ({len(answerable)} of {len(answerable)} matched no "
                              "strategy's text): it belongs to other PDFs, or its passages are not copied verbatim "
                              "from them. Pass the evidence of these PDFs (ragstudy make-qa drafts it), or score "
                              "without --evidence (the oracle overlap)")
    if missing:
        shown = ", ".join(map(str, missing[:5])) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        logger.warning("%s: the evidence of %d of %d answerable questions occurs in none of the run's PDFs "
                       "(question_index %s): they are scored as misses", evidence_path, len(missing),
                       len(answerable), shown)


def evaluate_folder(results_dir: Path, evidence: Mapping, budgets: Sequence[int], measure: Measure,
                    strategies: Sequence[str], oracle: Sequence[str] | None = None):
    """Per-question rows of every strategy (the retrieval_per_question.csv columns plus `context_units`, the
    context size in the budget's unit) and each strategy's StrategyEvaluation; `oracle` (one answer per question)
    adds the oracle overlap."""
    return evaluate_members({s: results_dir for s in strategies}, evidence, budgets, measure, oracle)


def evaluate_members(members: Mapping[str, Path], evidence: Mapping, budgets: Sequence[int], measure: Measure,
                     oracle: Sequence[str] | None = None, strategy_of: Callable[[str], str] = str):
    """evaluate_folder over a group of variants (ragstudy.grid.variants.Group.members: compared name -> the folder
    holding its rankings; `strategy_of(name)` the strategy whose rankings they are, for a sweep's variant ids), in
    `members`' order: the per-question rows of every name and their StrategyEvaluations."""
    import pandas as pd

    terms = analyzer = None
    if oracle is not None:
        from ragstudy.lexical import ItalianAnalyzer
        from ragstudy.scoring.oracle_overlap import oracle_terms

        analyzer = ItalianAnalyzer()
        terms = oracle_terms(oracle, analyzer)
    evaluations = [replace(evaluate_strategy(folder, strategy_of(name), evidence, budgets, measure, terms, analyzer),
                           strategy=name) for name, folder in members.items()]
    frame = pd.DataFrame([{**row, "strategy": e.strategy} for e in evaluations for row in e.rows],
                         columns=[*per_question_columns(), "context_units"])
    return frame, evaluations


def per_question_columns() -> list[str]:
    """The columns of retrieval_per_question.csv: results.RETRIEVAL_PER_QUESTION's, with every registered budget
    metric's (an outside package's too) in place of the built-in ones it declares."""
    return ["strategy", "budget", "question_index", *budget_metrics.columns(), "parents"]


def budget_means(frame, labels: Sequence[str], metrics: Sequence[str] | None = None) -> dict[str, float]:
    """`<metric>@<budget>` -> mean over the questions of `frame` (one strategy's per-question rows); NaN where no
    question was scored. `metrics`: the compared budget metrics by default."""
    parts = {label: frame[frame["budget"] == label] for label in labels}
    return {f"{metric}@{label}": float(part[budget_metrics.get(metric).column].mean()) if len(part) else float("nan")
            for label, part in parts.items() for metric in metrics or budget_metrics.names(compared_only=True)}


def summarize(frame, display: Mapping[str, str], n_resamples: int, seed: int, confidence: float):
    """Mean and bootstrap CI of every metric per strategy and budget (the retrieval_summary.csv table)."""
    import pandas as pd

    from ragstudy.results import RETRIEVAL_SUMMARY

    ci = CiSettings(n_resamples, seed, confidence).columns()  # recorded in every row
    records = []
    for (strategy, budget), part in frame.groupby(["strategy", "budget"], sort=False):
        for metric in (m for m in budget_metrics.metrics() if m.column in part):
            values = part[metric.column].dropna().astype(float).to_numpy()  # evidence or oracle missing: not scored
            if not len(values):
                continue
            mean, low, high = bootstrap_ci(values, n_resamples, seed, confidence)
            records.append({"strategy": strategy, "strategy_display": display.get(strategy, strategy),
                            "budget": str(budget), "metric": metric.name, "n": len(values), "mean": mean,
                            "ci_low": low, "ci_high": high, **ci})
    return pd.DataFrame(records, columns=list(RETRIEVAL_SUMMARY.columns))


def compare(frame, strategies: Sequence[str], labels: Sequence[str], n_resamples: int, seed: int,
            confidence: float):
    """Paired differences (a - b, same questions) of every pair of strategies at every budget; Holm over the pairs
    of one budget and metric (the retrieval_paired.csv table)."""
    import pandas as pd

    from ragstudy.results import RETRIEVAL_PAIRED

    ci = CiSettings(n_resamples, seed, confidence).columns()  # recorded in every row
    records = []
    for label in labels:
        at_budget = frame[frame["budget"] == label]
        for metric in budget_metrics.names(compared_only=True):
            column = budget_metrics.get(metric).column
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
                               "p_wilcoxon": result.p_wilcoxon, **ci})
            for record, adjusted in zip(family, holm([r["p_wilcoxon"] for r in family]) if family else []):
                record[HOLM_COLUMN] = adjusted
            records += family
    return pd.DataFrame(records, columns=list(RETRIEVAL_PAIRED.columns))
