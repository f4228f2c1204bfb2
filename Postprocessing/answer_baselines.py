"""Where an answer score sits: floors and references computed without an LLM, on the same questions and reference,
and the signal check that decides whether answer metrics can compare the strategies at all.

- **shuffled-oracle floor**: each question's reference scored against another question's reference (a seeded
  derangement of the scored questions). What an answer that is fluent, on-topic for the corpus and wrong scores.
- **context-copy baseline**: the first N characters of the context the LLM was given for that question, as the
  answer, N = the mean length of that strategy's LLM answers. What pasting the retrieved text scores.
- **evidence reference**: where evidence exists, the evidence passage as the answer (an extractive reference).

Each is scored with the same scorers, cleaned the same way, and its mean gets the same bootstrap CI as the LLM's;
the LLM's per-question scores are compared with each baseline's, paired (LLM − baseline, CI and Wilcoxon p).

The signal check (:func:`signal`): a metric carries signal when, for every strategy, the LLM's answers score above
the floor and above the context-copy baseline (paired CI of the difference above 0). Strategy comparisons on a
metric without signal are "not interpretable": a difference may only reflect how much context text the model copies.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from Postprocessing import common, metric_catalogue
from ragstudy.scoring import stats
from ragstudy.scoring.stats import derangement

logger = logging.getLogger(__name__)

FLOOR = "shuffled_oracle"
COPY = "context_copy"
EVIDENCE = "evidence"
BASELINE_LABELS = {FLOOR: "shuffled-oracle floor", COPY: "context-copy baseline", EVIDENCE: "evidence reference"}
BASELINES = tuple(BASELINE_LABELS)


def shuffled_oracle(references: Sequence[str], seed: int) -> list[str]:
    """Each position gets another position's reference (seeded derangement)."""
    return [references[j] for j in derangement(len(references), seed)]


def context_copy(contexts: Sequence[Sequence[str]], n_chars: int) -> list[str]:
    """The first `n_chars` characters of each question's context (its passages joined by a blank line)."""
    return ["\n\n".join(passages)[:max(n_chars, 0)] for passages in contexts]


def mean_length(texts: Sequence[str]) -> int:
    """Mean length in characters, rounded (0 for no texts)."""
    return int(round(float(np.mean([len(t) for t in texts])))) if texts else 0


@dataclass
class BaselineInputs:
    """What the baselines are made from, for the questions `indices` (the order the scores use)."""

    indices: Sequence[int]
    references: Sequence[str]  # the reference of each scored question, as scored against
    contexts: Mapping[str, Sequence[Sequence[str]]]  # strategy -> the context of each scored question
    answer_lengths: Mapping[str, int]  # strategy -> mean length of its LLM answers (N of the copy baseline)
    evidence: Mapping[int, str] = field(default_factory=dict)  # question index -> evidence passage(s)


def baseline_texts(inputs: BaselineInputs, seed: int) -> dict[tuple[str, str | None], tuple[list[int], list[str]]]:
    """(baseline, strategy or None for strategy-independent ones) -> (question indices, texts as answers)."""
    out: dict[tuple[str, str | None], tuple[list[int], list[str]]] = {}
    if len(inputs.indices) >= 2:
        out[(FLOOR, None)] = (list(inputs.indices), shuffled_oracle(inputs.references, seed))
    else:
        logger.warning("one question scored: no shuffled-oracle floor (it needs two)")
    for strategy, contexts in inputs.contexts.items():
        out[(COPY, strategy)] = (list(inputs.indices), context_copy(contexts, inputs.answer_lengths[strategy]))
    with_evidence = [i for i in inputs.indices if inputs.evidence.get(i)]
    if with_evidence:
        out[(EVIDENCE, None)] = (with_evidence, [inputs.evidence[i] for i in with_evidence])
    return out


def baseline_rows(per_question: pd.DataFrame, baseline_scores: Mapping[tuple[str, str | None], pd.DataFrame],
                  corpus: Mapping[tuple[str, str | None], Sequence[tuple[str, metric_catalogue.CorpusScore]]],
                  metric_names: Sequence[str], config) -> pd.DataFrame:
    """One row per (strategy, metric, baseline): the baseline's mean and CI on the questions it covers, the LLM's
    mean on the same questions, and the paired difference LLM − baseline (CI, Wilcoxon p, `llm_above`: 1 when the
    CI lies above 0 for a higher-is-better metric). Corpus-level metrics get the baseline's corpus score only."""
    from ragstudy.results import METRICS_BASELINES

    ci_cols = stats.CiSettings(config.n_resamples, config.seed, config.confidence).columns()
    rows = []
    for strategy, llm in per_question.groupby("strategy", sort=False):
        llm = llm.set_index("question_index")
        display = common.display_name(strategy)
        for baseline in BASELINES:
            key = (baseline, strategy) if (baseline, strategy) in baseline_scores else (baseline, None)
            scores = baseline_scores.get(key)
            if scores is None:
                continue
            scores = scores.set_index("question_index")
            shared = scores.index.intersection(llm.index)
            for metric in metric_names:
                base, mine = scores.loc[shared, metric].to_numpy(float), llm.loc[shared, metric].to_numpy(float)
                mean, low, high = stats.bootstrap_ci(base, config.n_resamples, config.seed, config.confidence)
                diff = stats.compare_paired(mine, base, config.n_resamples, config.seed, config.confidence)
                better = metric_catalogue.get(metric).higher_is_better
                above = diff.ci_low > 0 if better else diff.ci_high < 0
                rows.append({"strategy": strategy, "strategy_display": display, "metric": metric,
                             "baseline": baseline, "n": len(shared), "mean": mean, "ci_low": low, "ci_high": high,
                             "llm_mean": float(mine.mean()), "diff": diff.mean_diff, "diff_ci_low": diff.ci_low,
                             "diff_ci_high": diff.ci_high, "p_wilcoxon": diff.p_wilcoxon,
                             "llm_above": int(bool(above)), **ci_cols})
            for name, score in corpus.get(key, ()):
                rows.append({"strategy": strategy, "strategy_display": display, "metric": name, "baseline": baseline,
                             "n": len(scores), "mean": score.point, "ci_low": score.low, "ci_high": score.high,
                             "llm_mean": np.nan, "diff": np.nan, "diff_ci_low": np.nan, "diff_ci_high": np.nan,
                             "p_wilcoxon": np.nan, "llm_above": np.nan, **ci_cols})
    return pd.DataFrame(rows, columns=list(METRICS_BASELINES.columns))


@dataclass(frozen=True)
class Signal:
    """The signal check: which per-question metrics carry signal (every strategy above the floor and above the
    context copy), and, for the others, whether the answers fail already at the floor."""

    model: str
    checked: tuple[str, ...]  # metrics checked (per-question metrics with both baselines)
    with_signal: tuple[str, ...]  # every strategy above floor and copy
    above_floor_only: tuple[str, ...]  # every strategy above the floor, not every one above the copy baseline
    copy_chars: Mapping[str, int]
    floor_strategies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # metric -> strategies above floor

    def interpretable(self, metric: str) -> bool:
        """Whether paired strategy comparisons on `metric` may be read as findings."""
        return metric in self.with_signal

    @property
    def any(self) -> bool:
        return bool(self.with_signal)

    def sentence(self) -> str:
        """The one sentence the Answers section opens with."""
        model = self.model or "the LLM"
        floor, copy = BASELINE_LABELS[FLOOR], BASELINE_LABELS[COPY]
        n = ", ".join(f"{c}" for c in sorted(set(self.copy_chars.values())))
        if not self.checked:
            return (f"The answers of {model} could not be checked against the {floor} and the {copy} (fewer than two "
                    "questions, or no contexts recorded): answer metrics are shown without a signal check, and "
                    "their strategy comparisons are not interpretable.")
        if self.with_signal and len(self.with_signal) == len(self.checked):
            return (f"The answers of {model} score above the {floor} and above the {copy} (the first {n} characters "
                    "of the retrieved context) for every strategy on every metric: the strategy comparisons on answers "
                    "are findings.")
        if self.with_signal:
            others = [m for m in self.checked if m not in self.with_signal]
            return (f"The answers of {model} score above the {floor} and the {copy} for every strategy on "
                    f"{', '.join(self.with_signal)} only: strategy comparisons on those metrics are findings; on "
                    f"{', '.join(others)} they are not interpretable.")
        if self.above_floor_only:
            return (f"The answers of {model} score above the {floor} but not above the {copy} (the first {n} "
                    "characters of the retrieved context, pasted as the answer) for every strategy: answer metrics "
                    "cannot compare the strategies here, since a difference may only reflect how much context text "
                    "the model copies.")
        return (f"The answers of {model} do not differ from the {floor} (each question's reference scored against "
                "another question's) for every strategy: answer metrics cannot compare the strategies here.")

    def floor_sentence(self) -> str:
        """Against the floor alone, metric by metric: above it for every strategy, for some (named), or for none;
        said only where it adds to the sentence (some metric above the floor somewhere, not every one with signal)."""
        if not any(self.floor_strategies.values()) or len(self.with_signal) == len(self.checked):
            return ""
        groups: dict[str, list[str]] = {}
        for metric in self.checked:
            above = self.floor_strategies.get(metric, ())
            key = ("every strategy" if above and len(above) == len(self.copy_chars) else  # copy_chars: per strategy
                   f"{', '.join(above)} only" if above else "no strategy")
            groups.setdefault(key, []).append(metric)
        order = sorted(groups, key=lambda k: (k != "every strategy", k == "no strategy", k))
        return (f"Against the {BASELINE_LABELS[FLOOR]} alone: above it for "
                + "; for ".join(f"{key} on {', '.join(groups[key])}" for key in order) + ".")

    def to_dict(self) -> dict:
        return {"model": self.model, "checked": list(self.checked), "with_signal": list(self.with_signal),
                "above_floor_only": list(self.above_floor_only), "copy_chars": dict(self.copy_chars),
                "floor_strategies": {m: list(s) for m, s in self.floor_strategies.items()},
                "sentence": " ".join(filter(None, (self.sentence(), self.floor_sentence())))}


def signal(baselines: pd.DataFrame, model: str, copy_chars: Mapping[str, int]) -> Signal:
    """The signal check over `baselines` (metrics_baselines.csv rows): per per-question metric, is every strategy's
    LLM score above the floor, and above the context-copy baseline?"""
    item = baselines[baselines["diff"].notna()] if len(baselines) else baselines
    checked, with_signal, floor_only, floor_strategies = [], [], [], {}
    for metric in dict.fromkeys(item["metric"]) if len(item) else ():
        rows = item[item["metric"] == metric]
        floor, copy = rows[rows["baseline"] == FLOOR], rows[rows["baseline"] == COPY]
        if floor.empty or copy.empty:
            continue
        checked.append(metric)
        floor_strategies[metric] = tuple(floor.loc[floor["llm_above"] == 1, "strategy"])
        strategies = set(rows["strategy"])
        above_floor = set(floor.loc[floor["llm_above"] == 1, "strategy"]) == strategies
        above_copy = set(copy.loc[copy["llm_above"] == 1, "strategy"]) == strategies
        if above_floor and above_copy:
            with_signal.append(metric)
        elif above_floor:
            floor_only.append(metric)
    return Signal(model, tuple(checked), tuple(with_signal), tuple(floor_only), dict(copy_chars), floor_strategies)


def evidence_answers(evidence: str | Path | None, run_config: Mapping, questions: Sequence[str],
                     questions_path: Path) -> dict[int, str]:
    """Question index -> its evidence passages joined by a space, from `evidence` (a flag) or the bundled sample's
    evidence when the run answered the bundled questions; {} when there is none (no evidence reference)."""
    from ragstudy.scoring.evidence import default_evidence, load_evidence_file

    path = Path(evidence) if evidence else default_evidence(run_config)
    if path is None:
        logger.info("no evidence file: no evidence reference (pass --evidence FILE for one)")
        return {}
    records = load_evidence_file(path, questions, questions_path)
    return {i: " ".join(t.text for t in q.texts) for i, q in records.items() if q.texts}
