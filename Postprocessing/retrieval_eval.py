"""Retrieval at equal context budgets: how often does each strategy put the evidence in front of the LLM when every
strategy gets the same amount of context?

Reads what `python3 evaluation_chain.py --retrieval-only` wrote into --results-dir (retrieval_<strategy>.csv,
chunks_<strategy>.csv + sources_<strategy>.jsonl, config.json) and an evidence file: sample/evidence.json, or a
hand-written CSV (question_index, evidence (verbatim text), optional pdf; several rows per question allowed —
/work/shared/qa/evidence.csv is one). For each strategy and budget B (config.json's budgets, in characters or LLM
tokens) the context is the top-ranked parents, whole, in rank order, while the total stays <= B (a first parent
longer than B is cut at B); the budget "k" is the strategy's own paper k (the parents its k child windows retrieve,
as the chain does).

    python3 Postprocessing/retrieval_eval.py --results-dir results
    python3 Postprocessing/retrieval_eval.py --results-dir results-qa --evidence ../shared/qa/evidence.csv

Per strategy x budget: hit (the whole evidence inside the context, after normalisation), span recall, precision
and IoU (normalised characters), MRR (rank of the parent that completes the evidence) and the context size, with
seeded bootstrap CIs; paired differences between strategies at each budget (bootstrap CI, Wilcoxon, Holm over the
pairs of one budget and metric). Unanswerable questions (no evidence) are left out and counted. Writes
retrieval_per_question.csv, retrieval_summary.csv / .md, retrieval_paired.csv and retrieval_hit_rate.{png,pdf,html}.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pandas as pd

from Postprocessing import common, stats
from Postprocessing.common import DataError
from ragstudy.io import PROJECT_ROOT as REPO_ROOT

logger = logging.getLogger("Postprocessing.retrieval_eval")

DEFAULT_EVIDENCE = REPO_ROOT / "sample" / "evidence.json"
PER_QUESTION_COLUMNS = ("strategy", "budget", "question_index", "hit", "span_recall", "span_precision", "span_iou",
                        "reciprocal_rank", "context_chars", "parents")
SUMMARY_COLUMNS = ("strategy", "strategy_display", "budget", "metric", "n", "mean", "ci_low", "ci_high")
PAIRED_COLUMNS = ("budget", "metric", "strategy_a", "strategy_b", "n", "mean_diff", "ci_low", "ci_high",
                  "p_wilcoxon", "p_holm")
# summary metric -> per-question column
METRICS: dict[str, str] = {"hit": "hit", "span_recall": "span_recall", "span_precision": "span_precision",
                           "span_iou": "span_iou", "mrr": "reciprocal_rank", "context_chars": "context_chars"}
PAIRED_METRICS = ("hit", "span_recall", "span_precision", "span_iou", "mrr")
METRIC_TITLES = {"hit": "Hit rate: the whole evidence inside the context",
                 "span_recall": "Span recall: evidence characters in the context / evidence characters",
                 "span_precision": "Span precision: evidence characters in the context / context characters",
                 "span_iou": "Span IoU", "mrr": "MRR: 1 / rank of the parent that completes the evidence",
                 "context_chars": "Context size (characters)"}
PLOT_STEM = "retrieval_hit_rate"


# ----------------------------------------------------------------------------------------------- evaluation

@dataclass
class StrategyEvaluation:
    """Per-question rows of one strategy and what was left out."""

    strategy: str
    rows: list[dict] = field(default_factory=list)
    ranked_questions: int = 0
    unanswerable: int = 0  # ranked questions without evidence: left out
    document_missing: int = 0  # evidence in a PDF the run did not index: left out
    partly_unlocated: int = 0  # evidence not (wholly) found in the strategy's text: kept, cannot be a hit


def evaluate_strategy(results_dir: Path, strategy: str, evidence: Mapping, budgets: Sequence[int], measure
                      ) -> StrategyEvaluation:
    """Score every ranked answerable question of `strategy` at every budget (ragstudy.retrieval packs them)."""
    from Postprocessing.chunkeval.retrieval import SourceIndex, context_scores
    from ragstudy.errors import StudyInputError
    from ragstudy.results import read_chunks
    from ragstudy.retrieval import pack_all, read_retrieval, retrieval_path

    try:
        rankings = read_retrieval(retrieval_path(results_dir, strategy))
        chunk_rows, sources = read_chunks(Path(results_dir), strategy)
    except StudyInputError as exc:
        raise DataError(str(exc)) from exc
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
                    raise DataError(f"{retrieval_path(results_dir, strategy)}: question {question_index} rank "
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


def summarize(frame: pd.DataFrame, display: Mapping[str, str], n_resamples: int, seed: int, confidence: float
              ) -> pd.DataFrame:
    """Mean and bootstrap CI of every metric per strategy and budget."""
    records = []
    for (strategy, budget), part in frame.groupby(["strategy", "budget"], sort=False):
        for metric, column in METRICS.items():
            values = part[column].astype(float).to_numpy()
            mean, low, high = stats.bootstrap_ci(values, n_resamples, seed, confidence)
            records.append({"strategy": strategy, "strategy_display": display.get(strategy, strategy),
                            "budget": str(budget), "metric": metric, "n": len(values), "mean": mean,
                            "ci_low": low, "ci_high": high})
    return pd.DataFrame(records, columns=list(SUMMARY_COLUMNS))


def compare(frame: pd.DataFrame, strategies: Sequence[str], labels: Sequence[str], n_resamples: int, seed: int,
            confidence: float) -> pd.DataFrame:
    """Paired differences (a - b, same questions) of every pair of strategies at every budget; Holm over the pairs
    of one budget and metric."""
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
                result = stats.compare_paired(pair[a].to_numpy(float), pair[b].to_numpy(float), n_resamples, seed,
                                              confidence)
                family.append({"budget": label, "metric": metric, "strategy_a": a, "strategy_b": b, "n": result.n,
                               "mean_diff": result.mean_diff, "ci_low": result.ci_low, "ci_high": result.ci_high,
                               "p_wilcoxon": result.p_wilcoxon})
            for record, adjusted in zip(family, stats.holm([r["p_wilcoxon"] for r in family]) if family else []):
                record["p_holm"] = adjusted
            records += family
    return pd.DataFrame(records, columns=list(PAIRED_COLUMNS))


# ----------------------------------------------------------------------------------------------- the report

def _budget_key(label: str) -> tuple[int, int]:
    return (0, int(label)) if label.isdigit() else (1, 0)


def markdown(summary: pd.DataFrame, paired: pd.DataFrame, strategies: Sequence[str], display: Mapping[str, str],
             labels: Sequence[str], unit: str, notes: Sequence[str]) -> str:
    lines = [f"# Retrieval at equal context budgets ({unit})\n",
             f"Budget B: the top-ranked parents, whole, in rank order, while their total stays <= B {unit} (a first "
             "parent longer than B is cut at B). Budget **k**: the parents each strategy's own k child windows "
             "retrieve, as the chain does (different sizes per strategy). Mean [95 % bootstrap CI] over the "
             "answerable questions.\n"]
    header = ["strategy", *[f"{label} {unit}" if label.isdigit() else "own k" for label in labels]]
    for metric in METRICS:
        part = summary[summary["metric"] == metric]
        if part.empty:
            continue
        digits = 0 if metric == "context_chars" else 3
        by_key = {(r.strategy, r.budget): r for r in part.itertuples()}
        body = []
        for s in strategies:
            cells = []
            for label in labels:
                r = by_key.get((s, label))
                cells.append("–" if r is None else stats.format_estimate(r.mean, r.ci_low, r.ci_high, digits))
            body.append([display.get(s, s), *cells])
        n = int(part["n"].max())
        lines.append(f"## {METRIC_TITLES[metric]} (n = {n})\n")
        lines.append(common.markdown_table(header, body, "l" + "r" * len(labels)))
    if len(paired):
        hit = paired[paired["metric"] == "hit"]
        body = [[r.budget, f"{display.get(r.strategy_a, r.strategy_a)} − {display.get(r.strategy_b, r.strategy_b)}",
                 r.n, stats.format_estimate(r.mean_diff, r.ci_low, r.ci_high, 3, signed=True),
                 stats.format_p(r.p_wilcoxon), stats.format_p(r.p_holm)]
                for r in hit.itertuples() if r.p_holm < 0.05]
        lines.append("## Paired differences in hit rate with Holm-adjusted p < 0.05\n")
        lines.append(common.markdown_table(["budget", "a − b", "n", "difference [95 % CI]", "Wilcoxon", "Holm"],
                                           body, "llrrrr") if body else "None.\n")
        lines.append("All pairs and metrics: `retrieval_paired.csv`.\n")
    lines.append("## Notes\n\n" + "".join(f"- {note}\n" for note in notes))
    return "\n".join(lines)


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def hit_rate_figure(summary: pd.DataFrame, frame: pd.DataFrame, strategies: Sequence[str], unit: str):
    """Hit rate against the budget, a line per strategy with its CI band; each strategy's own k as a hollow marker
    at its mean context size."""
    import plotly.graph_objects as go

    from ragstudy import registry

    fig = go.Figure()
    hit = summary[summary["metric"] == "hit"]
    budgets = sorted({int(b) for b in hit["budget"] if b.isdigit()})
    for s in strategies:
        spec = registry.get(s)
        part = hit[(hit["strategy"] == s) & hit["budget"].str.isdigit()].copy()
        if part.empty:
            continue
        part["x"] = part["budget"].astype(int)
        part = part.sort_values("x")
        x = part["x"].tolist()
        fig.add_trace(go.Scatter(x=x + x[::-1], y=part["ci_high"].tolist() + part["ci_low"].tolist()[::-1],
                                 mode="lines", fill="toself", fillcolor=_rgba(spec.color, 0.10), line=dict(width=0),
                                 hoverinfo="skip", showlegend=False, legendgroup=s))
        fig.add_trace(go.Scatter(x=x, y=part["mean"], mode="lines+markers", name=spec.display_name,
                                 line=dict(color=spec.color, width=2), legendgroup=s,
                                 hovertemplate=f"{spec.display_name}<br>budget %{{x}} {unit}<br>hit %{{y:.3f}}"
                                               "<extra></extra>"))
        own = hit[(hit["strategy"] == s) & (hit["budget"] == "k")]
        sizes = frame[(frame["strategy"] == s) & (frame["budget"] == "k")]["context_units"]
        if len(own) and len(sizes):
            k = own.iloc[0]
            fig.add_trace(go.Scatter(
                x=[max(float(sizes.mean()), 1.0)], y=[k["mean"]], mode="markers", legendgroup=s, showlegend=False,
                marker=dict(symbol="circle-open", size=12, color=spec.color, line=dict(width=2)),
                error_y=dict(type="data", symmetric=False, array=[k["ci_high"] - k["mean"]],
                             arrayminus=[k["mean"] - k["ci_low"]], color=spec.color, thickness=1),
                hovertemplate=f"{spec.display_name}, own k<br>mean context %{{x:.0f}} {unit}<br>hit %{{y:.3f}}"
                              "<extra></extra>"))
    fig.update_layout(
        title="Evidence in the context vs context budget (hollow: each strategy's own k)",
        width=900, height=560, plot_bgcolor="white", font=dict(size=14), legend=dict(title="strategy"),
        xaxis=dict(title=f"context budget ({unit}, log scale)", type="log", tickvals=budgets,
                   ticktext=[str(b) for b in budgets], gridcolor="lightgrey"),
        yaxis=dict(title="hit rate (95 % CI band)", range=[0, 1.02], gridcolor="lightgrey"))
    return fig


def write_plots(fig, out_dir: Path, stem: str, notes: list[str]) -> list[Path]:
    """HTML always; PNG and PDF through kaleido when a Chromium is installed (else a note says why not)."""
    from Postprocessing.interview_analysis import write_figures

    html = out_dir / f"{stem}.html"
    common.atomic_write_text(html, fig.to_html(include_plotlyjs=True, full_html=True))
    written = [html]
    try:
        written += write_figures({stem: fig}, out_dir)
    except RuntimeError as exc:
        notes.append(f"PNG/PDF plots skipped: {exc}")
    return written


# ----------------------------------------------------------------------------------------------- the script

def discover(results_dir: Path) -> list[str]:
    from ragstudy import registry

    names = [p.name[len("retrieval_"):-len(".csv")] for p in sorted(Path(results_dir).glob("retrieval_*.csv"))]
    names = [n for n in names if n not in ("per_question", "summary", "paired")]
    order = {name: i for i, name in enumerate(registry.available())}
    names.sort(key=lambda n: (order.get(n, len(order)), n))
    if not names:
        raise DataError(f"no retrieval_<strategy>.csv in {results_dir}: run `python3 evaluation_chain.py "
                        f"--retrieval-only --output-dir {results_dir}` first")
    return names


def measure_for(run_config: Mapping, results_dir: Path):
    """Characters, or the run's LLM tokenizer when config.json says budget_unit tokens."""
    from ragstudy.retrieval import CHARS, llm_measure

    if run_config.get("budget_unit", "chars") == "chars":
        return CHARS
    from ragstudy.config import StudyConfig

    return llm_measure(StudyConfig.from_dict(run_config, str(Path(results_dir) / "config.json")))


def load_evidence(path: Path) -> dict:
    from Postprocessing.chunkeval.retrieval import EvidenceError, load_evidence_file

    try:
        return load_evidence_file(path)
    except EvidenceError as exc:
        raise DataError(str(exc)) from exc


def evaluate_folder(results_dir: Path, evidence: Mapping, budgets: Sequence[int], measure,
                    strategies: Sequence[str]) -> tuple[pd.DataFrame, list[str], list[StrategyEvaluation]]:
    """Per-question rows of every strategy (with the internal context_units column) and notes on what was left
    out."""
    evaluations = [evaluate_strategy(results_dir, s, evidence, budgets, measure) for s in strategies]
    frame = pd.DataFrame([row for e in evaluations for row in e.rows],
                         columns=[*PER_QUESTION_COLUMNS, "context_units"])
    notes = []
    for e in evaluations:
        kept = len({r["question_index"] for r in e.rows})
        parts = [f"{kept} of {e.ranked_questions} ranked questions scored", f"{e.unanswerable} unanswerable "
                 "(no evidence) left out"]
        if e.document_missing:
            parts.append(f"{e.document_missing} left out because their evidence PDF was not indexed")
        if e.partly_unlocated:
            parts.append(f"{e.partly_unlocated} with evidence not (wholly) found in the strategy's text (kept: "
                         "cannot be a hit)")
        notes.append(f"{e.strategy}: " + "; ".join(parts))
    return frame, notes, evaluations


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default="results",
                        help="folder `evaluation_chain.py --retrieval-only` wrote (default: results)")
    parser.add_argument("--evidence", default=str(DEFAULT_EVIDENCE),
                        help="sample/evidence.json format, or a CSV question_index,evidence[,pdf] (default: "
                             "sample/evidence.json)")
    parser.add_argument("--out-dir", help="where the tables go (default: --results-dir)")
    parser.add_argument("--strategies", help="comma-separated (default: every retrieval_<strategy>.csv present)")
    parser.add_argument("--budgets", help="comma-separated budgets (default: config.json's, else 500,1000,2000,4000)")
    parser.add_argument("--no-plot", action="store_true", help="skip the plot")
    parser.add_argument("--n-resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--confidence", type=float, default=0.95, help="CI level (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def run(args: argparse.Namespace) -> dict:
    from ragstudy import registry
    from ragstudy.config import DEFAULT_BUDGETS
    from ragstudy.retrieval import budget_labels

    started = time.perf_counter()
    results_dir = Path(args.results_dir)
    out_dir = Path(args.out_dir or results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    run_config = common.read_run_config(results_dir)
    if args.budgets:
        try:
            budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
        except ValueError:
            raise DataError(f"--budgets {args.budgets!r}: give positive integers, e.g. 500,1000,2000") from None
    else:
        budgets = list(run_config.get("budgets") or DEFAULT_BUDGETS)
    if not budgets or min(budgets) <= 0:
        raise DataError(f"budgets must be positive integers, got {budgets}")
    ranked_for = max(run_config.get("budgets") or DEFAULT_BUDGETS)
    if max(budgets) > ranked_for:
        raise DataError(f"--budgets {max(budgets)} exceeds the largest budget the run ranked parents for "
                        f"({ranked_for}): re-run evaluation_chain.py --retrieval-only --budgets "
                        f"{','.join(map(str, budgets))}")
    unit = run_config.get("budget_unit", "chars")
    measure = measure_for(run_config, results_dir)
    strategies = ([s.strip() for s in args.strategies.split(",") if s.strip()] if args.strategies
                  else discover(results_dir))
    evidence_path = Path(args.evidence)
    evidence = load_evidence(evidence_path)
    frame, notes, _ = evaluate_folder(results_dir, evidence, budgets, measure, strategies)
    if frame.empty:
        raise DataError(f"no answerable question of {evidence_path} was ranked in {results_dir}: do the evidence "
                        "file and the run's Questions.csv belong together?")
    labels = budget_labels(budgets)
    display = {s: registry.get(s).display_name for s in strategies}
    summary = summarize(frame, display, args.n_resamples, args.seed, args.confidence)
    paired = compare(frame, strategies, labels, args.n_resamples, args.seed, args.confidence)
    k = {name: p.get("k") for name, p in (run_config.get("strategy_params") or {}).items() if name in strategies}
    notes = [f"evidence: {evidence_path} ({len(evidence)} answerable questions); matched after NFKC, accent, "
             "case, whitespace, punctuation and line-break-hyphenation normalisation",
             f"budgets in {unit}; each strategy's own k (child windows): {k or 'unknown'}", *notes,
             "paired tests: bootstrap CI of the mean difference, Wilcoxon signed-rank p, Holm over the strategy "
             "pairs of each budget and metric"]
    written = {"per_question": out_dir / "retrieval_per_question.csv", "summary": out_dir / "retrieval_summary.csv",
               "paired": out_dir / "retrieval_paired.csv", "summary_md": out_dir / "retrieval_summary.md"}
    common.atomic_write_csv(written["per_question"], frame[list(PER_QUESTION_COLUMNS)])
    common.atomic_write_csv(written["summary"], summary)
    common.atomic_write_csv(written["paired"], paired)
    if not args.no_plot:
        fig = hit_rate_figure(summary, frame, strategies, unit)
        for path in write_plots(fig, out_dir, PLOT_STEM, notes):
            written[path.suffix.lstrip(".")] = path
    report = markdown(summary, paired, strategies, display, labels, unit, notes)
    common.atomic_write_text(written["summary_md"], report)
    print(report)
    print(f"outputs in {out_dir} ({time.perf_counter() - started:.0f} s)")
    return written


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_script(build_parser, run, argv)


if __name__ == "__main__":
    sys.exit(main())
