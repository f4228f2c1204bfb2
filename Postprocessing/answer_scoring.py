"""Score every strategy's answers against the reference: per-question table, summary with bootstrap CIs, paired
comparisons between strategies, the Markdown summary, and the files ``evaluation_metrics.py`` writes."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd

from Postprocessing import answer_baselines, common, metric_catalogue
from ragstudy import results
from ragstudy.scoring import stats
from Postprocessing.answer_metrics import MetricsConfig, clean_text, write_cleaned_oracle
from Postprocessing.common import DataError
from Postprocessing.formatting import format_estimate, format_p, markdown_table
from ragstudy.io import atomic_write_text
from ragstudy.results import Dataset

logger = logging.getLogger(__name__)

PAIRED_COLUMNS = ["strategy_a", "strategy_b", "metric", "n", "mean_diff", "ci_low", "ci_high", "p_wilcoxon",
                  "p_bootstrap", stats.HOLM_COLUMN, *stats.CI_COLUMNS]


@dataclass
class MetricsResult:
    """What compute_metrics returns: the three tables and sacrebleu's signature of the corpus BLEU."""

    per_question: pd.DataFrame
    summary: pd.DataFrame
    paired: pd.DataFrame
    corpus_bleu_signature: str = ""
    baselines: pd.DataFrame | None = None  # metrics_baselines.csv (answer_baselines.baseline_rows)
    signal: answer_baselines.Signal | None = None


@dataclass(frozen=True)
class Reference:
    """The reference texts actually scored against, and where they came from."""

    path: Path
    texts: tuple[str, ...]
    cleaned: bool


def selected_scorers(names: Sequence[str] | str) -> list[metric_catalogue.Scorer]:
    """The registered scorers named in `names` (or `all`), in registration order (the tables' order); an unknown
    name is one error naming --metrics and the valid names."""
    chosen = set(metric_catalogue.SCORERS.parse(names, "--metrics"))
    return [s for s in metric_catalogue.SCORERS.members() if s.name in chosen]


def resolve_reference(oracle_path: Path, cleaned_path: Path, mode: str, clean: bool) -> Reference:
    """Pick the reference: ``--clean`` (re)writes the cleaned oracle; ``auto`` uses it when present."""
    if clean:
        write_cleaned_oracle(oracle_path, cleaned_path)
        mode = "cleaned"
    if mode == "auto":
        mode = "cleaned" if cleaned_path.is_file() else "raw"
    if mode == "cleaned":
        if not cleaned_path.is_file():
            raise DataError(f"{cleaned_path} not found: pass --clean to create it from {oracle_path}")
        return Reference(cleaned_path, tuple(common.read_text_column(cleaned_path, "oracle")), True)
    return Reference(oracle_path, tuple(common.read_text_column(oracle_path, "oracle")), False)


def score_texts(scorers: Sequence[metric_catalogue.Scorer], hyps: Sequence[str], refs: Sequence[str],
                config: MetricsConfig) -> tuple[dict[str, list[float]], list[tuple[str, metric_catalogue.CorpusScore]]]:
    """Per-item scores of every scorer and the corpus-level scores, for hypotheses `hyps` against `refs`."""
    scores: dict[str, list[float]] = {}
    corpus: list[tuple[str, metric_catalogue.CorpusScore]] = []
    for scorer in scorers:
        scores.update(scorer.items(hyps, refs, config))
        corpus.extend((name, fn(hyps, refs, config)) for name, fn in scorer.corpus.items())
    return scores, corpus


def compute_metrics(answers: Sequence[Dataset], reference: Reference, indices: Sequence[int],
                    config: MetricsConfig, evidence: dict[int, str] | None = None, model: str = ""
                    ) -> MetricsResult:
    """Per-question scores, summary with bootstrap CIs, and paired comparisons on ``indices``; then the floors and
    references of answer_baselines (`evidence`: question index -> evidence passage, for the extractive reference)
    scored the same way, and the signal check (`model` names the LLM in its sentence)."""
    from Postprocessing.offline_data import italian_stopwords

    scorers = selected_scorers(config.metrics)
    stop = italian_stopwords() if (reference.cleaned and config.clean_answers) else None

    def prepare(texts: Sequence[str]) -> list[str]:
        return [clean_text(t, stop) for t in texts] if stop is not None else list(texts)

    refs = [reference.texts[i] for i in indices]
    frames, corpus_rows, signature = [], [], ""
    contexts: dict[str, list[tuple[str, ...]]] = {}
    lengths: dict[str, int] = {}
    for dataset in answers:
        by_index = dataset.by_index()
        raw = [by_index[i].answer for i in indices]
        hyps = prepare(raw)
        contexts[dataset.strategy] = [by_index[i].contexts for i in indices]
        lengths[dataset.strategy] = answer_baselines.mean_length(raw)
        logger.info("Scoring %s: %d answers", dataset.path, len(hyps))
        scores, corpus = score_texts(scorers, hyps, refs, config)
        frames.append(pd.DataFrame({
            "strategy": dataset.strategy,
            "strategy_display": common.display_name(dataset.strategy),
            "question_index": list(indices),
            "question": [by_index[i].question for i in indices],
            **scores,
        }))
        for name, score in corpus:
            signature = score.signature or signature
            corpus_rows.append((dataset.strategy, name, score))
    per_question = pd.concat(frames, ignore_index=True)
    metric_names = [m for s in scorers for m in s.metrics]
    summary = summarize(per_question, metric_names, corpus_rows, config)
    paired = paired_comparisons(per_question, [a.strategy for a in answers], metric_names, config)
    by_position = dict(zip(indices, refs, strict=True))
    inputs = answer_baselines.BaselineInputs(indices, refs, contexts, lengths, dict(evidence or {}))
    base_scores, base_corpus = {}, {}
    for key, (idx, texts) in answer_baselines.baseline_texts(inputs, config.seed).items():
        logger.info("Scoring the %s%s: %d texts", answer_baselines.BASELINE_LABELS[key[0]],
                    f" of {key[1]}" if key[1] else "", len(texts))
        # the floor's texts are references already (cleaned when the reference is); the others are answers
        hyps = texts if key[0] == answer_baselines.FLOOR else prepare(texts)
        scores, corpus = score_texts(scorers, hyps, [by_position[i] for i in idx], config)
        base_scores[key] = pd.DataFrame({"question_index": idx, **scores})
        base_corpus[key] = corpus
    baselines = answer_baselines.baseline_rows(per_question, base_scores, base_corpus, metric_names, config)
    check = answer_baselines.signal(baselines, model, lengths)
    return MetricsResult(per_question, summary, paired, signature, baselines, check)


def summarize(per_question: pd.DataFrame, metric_names: Sequence[str],
              corpus_rows: Sequence[tuple[str, str, metric_catalogue.CorpusScore]], config: MetricsConfig
              ) -> pd.DataFrame:
    """One row per (strategy, metric): n, mean and bootstrap CI; corpus-level metrics last."""
    ci = stats.CiSettings(config.n_resamples, config.seed, config.confidence).columns()  # recorded in every row
    rows = []
    for name, group in per_question.groupby("strategy", sort=False):
        display = group["strategy_display"].iloc[0]
        for metric in metric_names:
            mean, low, high = stats.bootstrap_ci(group[metric].to_numpy(), config.n_resamples, config.seed,
                                                 config.confidence)
            rows.append({"strategy": name, "strategy_display": display, "metric": metric, "n": len(group),
                         "mean": mean, "ci_low": low, "ci_high": high, **ci})
    for strategy, metric, score in corpus_rows:
        n = int((per_question["strategy"] == strategy).sum())
        rows.append({"strategy": strategy, "strategy_display": common.display_name(strategy), "metric": metric,
                     "n": n, "mean": score.point, "ci_low": score.low, "ci_high": score.high, **ci})
    return pd.DataFrame(rows)


def paired_comparisons(per_question: pd.DataFrame, strategies: Sequence[str], metric_names: Sequence[str],
                       config: MetricsConfig) -> pd.DataFrame:
    """Every pair of strategies (in the given order), every metric: mean difference A − B on the same questions,
    paired-bootstrap CI, Wilcoxon signed-rank p, bootstrap p, and Holm-adjusted Wilcoxon p across the pairs
    of each metric."""
    if len(strategies) < 2:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    wide = {s: per_question[per_question["strategy"] == s].set_index("question_index") for s in strategies}
    rows = []
    for metric in metric_names:
        block = []
        for a, b in combinations(strategies, 2):
            common_idx = wide[a].index.intersection(wide[b].index)
            result = stats.compare_paired(wide[a].loc[common_idx, metric].to_numpy(),
                                          wide[b].loc[common_idx, metric].to_numpy(),
                                          config.n_resamples, config.seed, config.confidence)
            block.append({"strategy_a": a, "strategy_b": b, "metric": metric, "n": result.n,
                          "mean_diff": result.mean_diff, "ci_low": result.ci_low, "ci_high": result.ci_high,
                          "p_wilcoxon": result.p_wilcoxon, "p_bootstrap": result.p_bootstrap,
                          **stats.CiSettings(config.n_resamples, config.seed, config.confidence).columns()})
        for row, adjusted in zip(block, stats.holm([r["p_wilcoxon"] for r in block]), strict=True):
            row[stats.HOLM_COLUMN] = adjusted
        rows.extend(block)
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def paired_line(row: pd.Series) -> str:
    """``paragraph vs fixed-size, BERTScore F1: +0.031 [0.012, 0.049], p=0.002``."""
    d = metric_catalogue.decimals(row["metric"])
    return (f"{row['strategy_a']} vs {row['strategy_b']}, {row['metric']}: "
            f"{format_estimate(row['mean_diff'], row['ci_low'], row['ci_high'], d, signed=True)}, "
            f"{format_p(row['p_wilcoxon'])}")


def markdown_report(result: MetricsResult, reference: Reference, config: MetricsConfig, n_scored: int,
                    n_questions: int, notes: Sequence[str] = ()) -> str:
    """The Markdown summary: settings, metric × strategy table with CIs, paired comparisons."""
    pct = stats.ci_label(config.confidence)  # "95 %", "97.5 %"
    summary = result.summary
    strategies = list(dict.fromkeys(summary["strategy_display"]))
    lines = [
        "# Automatic metrics: answers vs oracle\n",
        f"- Questions scored: {n_scored} of {n_questions}",
        f"- Reference: `{reference.path}`"
        + (f" (cleaned; answers cleaned the same way: {'yes' if config.clean_answers else 'no, as in the paper'})"
           if reference.cleaned else ""),
        f"- Cells: mean over questions [{pct} percentile-bootstrap CI, {config.n_resamples} resamples, "
        f"seed {config.seed}]",
    ]
    if "bleu" in config.metrics:
        lines.append(f"- BLEU: sacrebleu, 0–100; per-question sentence BLEU (exp smoothing, effective order) and "
                     f"corpus BLEU (`{result.corpus_bleu_signature}`, CI by resampling questions)")
    if "rouge" in config.metrics:
        lines.append("- ROUGE: rouge_score F-measure, no stemming, tokenizer "
                     + ("Unicode-aware `\\w+` (keeps accented letters)" if config.rouge_tokenizer == "unicode"
                        else "rouge_score default (drops non-ASCII letters, as the paper's HF metric)"))
    if "meteor" in config.metrics:
        lines.append("- METEOR: nltk `meteor_score`, `wordpunct_tokenize`, WordNet 3.0 (English synonyms)")
    if "bertscore" in config.metrics and config.bertscore is not None:
        layers = config.bertscore.num_layers if config.bertscore.num_layers is not None else "bert-score default"
        lines.append(f"- BERTScore: `{config.bertscore.model}`, layer {layers}, no idf, no baseline rescaling "
                     f"({config.bertscore.source})")
    lines.extend(f"- {note}" for note in notes)
    lines.append("")
    if result.signal is not None:
        lines.insert(1, f"**Signal check.** {result.signal.to_dict()['sentence']}\n")
    lines.append(_summary_table(summary, strategies))
    if result.baselines is not None and len(result.baselines):
        lines.extend(_baseline_section(result.baselines, strategies, pct))
    lines.extend(_paired_section(result.paired, pct, result.signal))
    return "\n".join(lines)


def _baseline_section(baselines: pd.DataFrame, strategies: Sequence[str], pct: str) -> list[str]:
    """Metric x strategy: the LLM's mean beside each floor/reference, and LLM − baseline with its CI."""
    lines = [f"## Floors and references (scored like the answers; mean [{pct} CI]; LLM − baseline paired on the "
             "same questions)\n",
             "- shuffled-oracle floor: each question's reference scored against another question's reference "
             "(seeded derangement)",
             "- context-copy baseline: the first N characters of the context given to the LLM, N = the mean length "
             "of that strategy's answers",
             "- evidence reference: the evidence passage as the answer (questions with evidence only)\n"]
    headers = ["Metric", "Baseline", *strategies]
    rows = []
    for metric in dict.fromkeys(baselines["metric"]):
        d = metric_catalogue.decimals(metric)
        for baseline in answer_baselines.BASELINES:
            part = baselines[(baselines["metric"] == metric) & (baselines["baseline"] == baseline)]
            if part.empty:
                continue
            cells = []
            for display in strategies:
                r = part[part["strategy_display"] == display]
                if r.empty:
                    cells.append("–")
                    continue
                r = r.iloc[0]
                cell = format_estimate(r["mean"], r["ci_low"], r["ci_high"], d)
                if pd.notna(r["diff"]):
                    cell += (f"; LLM − it {format_estimate(r['diff'], r['diff_ci_low'], r['diff_ci_high'], d, True)}"
                             + (" ▲" if r["llm_above"] == 1 else ""))
                cells.append(cell)
            rows.append([metric, answer_baselines.BASELINE_LABELS[baseline] + f" (n={int(part['n'].max())})",
                         *cells])
    lines.append(markdown_table(headers, rows, "ll" + "r" * len(strategies)))
    lines.append("▲: the LLM's answers score above the baseline (the CI of LLM − baseline excludes 0).\n")
    return lines


def _summary_table(summary: pd.DataFrame, strategies: Sequence[str]) -> str:
    """Metric x strategy, mean [CI]."""
    table_rows = []
    for metric in dict.fromkeys(summary["metric"]):
        cells = []
        for display in strategies:
            r = summary[(summary["metric"] == metric) & (summary["strategy_display"] == display)].iloc[0]
            cells.append(format_estimate(r["mean"], r["ci_low"], r["ci_high"], metric_catalogue.decimals(metric)))
        table_rows.append([metric, *cells])
    return markdown_table(["Metric", *strategies], table_rows, "l" + "r" * len(strategies))


def _paired_section(paired: pd.DataFrame, pct: str, signal: answer_baselines.Signal | None = None) -> list[str]:
    """The paired-comparison table and one sentence per pair and metric; with a signal check, the metrics without
    signal are headed "not interpretable" and their sentences say so."""
    if paired.empty:
        return ["Paired comparisons need at least two strategies; only one was found.\n"]
    lines = [f"## Paired comparisons (A − B on the same questions; {pct} paired-bootstrap CI; "
             "two-sided Wilcoxon signed-rank p; Holm-adjusted over the pairs of each metric)\n"]
    if signal is not None:
        closed = [m for m in dict.fromkeys(paired["metric"]) if not signal.interpretable(m)]
        if closed:
            lines.append(f"Not interpretable (no signal: the answers do not beat the floor and the context-copy "
                         f"baseline for every strategy): {', '.join(closed)}. Their differences are listed for "
                         "completeness, not as findings.\n")
    pairs = list(dict.fromkeys(zip(paired["strategy_a"], paired["strategy_b"])))
    headers = ["Metric", *[f"{common.display_name(a)} − {common.display_name(b)}" for a, b in pairs]]
    rows = []
    for metric in dict.fromkeys(paired["metric"]):
        digits = metric_catalogue.decimals(metric)
        cells = []
        for a, b in pairs:
            r = paired[(paired["metric"] == metric) & (paired["strategy_a"] == a) & (paired["strategy_b"] == b)].iloc[0]
            cells.append(f"{format_estimate(r['mean_diff'], r['ci_low'], r['ci_high'], digits, True)}"
                         f", {format_p(r['p_wilcoxon'])} (Holm {format_p(r['p_holm'])})")
        rows.append([metric, *cells])
    lines.append(markdown_table(headers, rows, "l" + "r" * len(pairs)))
    lines.append("In words:\n")
    lines += [f"- {paired_line(r)}" + ("" if signal is None or signal.interpretable(r["metric"])
                                       else " (not interpretable)") for _, r in paired.iterrows()]
    lines.append("")
    return lines


def write_outputs(out_dir: Path, result: MetricsResult, report: str, run_info: dict[str, Any],
                  config: MetricsConfig) -> None:
    """The five metrics files, each written atomically; `run_info` plus the settings go to metrics_run.json."""
    results.write_table(out_dir, results.METRICS_PER_QUESTION, result.per_question)
    results.write_table(out_dir, results.METRICS_SUMMARY, result.summary)
    results.write_table(out_dir, results.METRICS_PAIRED, result.paired)
    if result.baselines is not None:
        results.write_table(out_dir, results.METRICS_BASELINES, result.baselines)
    atomic_write_text(results.METRICS_SUMMARY_MD.path(out_dir), report)
    info = {**run_info, "corpus_bleu_signature": result.corpus_bleu_signature, **asdict(config),
            "signal": result.signal.to_dict() if result.signal is not None else None}
    atomic_write_text(results.METRICS_RUN.path(out_dir), json.dumps(info, indent=2, ensure_ascii=False))
