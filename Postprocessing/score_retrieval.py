"""Retrieval at equal context budgets: how often does each strategy put the evidence in front of the LLM when every
strategy gets the same amount of context?

Reads what `ragstudy retrieve` wrote into --results-dir (retrieval_<strategy>.csv,
chunks_<strategy>.csv + sources_<strategy>.jsonl, config.json) and an evidence file: sample/evidence.json, or a
hand-written CSV (question_index, evidence (verbatim text), optional pdf; several rows per question allowed —
/work/shared/qa/evidence.csv is one). For each strategy and budget B (config.json's budgets, in characters or LLM
tokens) the context is the top-ranked parents, whole, in rank order, while the total stays <= B (a first parent
longer than B is cut at B); the budget "k" is the strategy's own paper k (the parents its k child windows retrieve,
as the chain does).

    ragstudy score-retrieval --results-dir results
    ragstudy score-retrieval --results-dir results-qa --evidence ../shared/qa/evidence.csv

Per strategy x budget: hit (the whole evidence inside the context, after normalisation), span recall, precision
and IoU (normalised characters), MRR (rank of the parent that completes the evidence) and the context size, with
seeded bootstrap CIs; paired differences between strategies at each budget (bootstrap CI, Wilcoxon, Holm over the
pairs of one budget and metric). Unanswerable questions (no evidence) are left out and counted. The verdict comes
first (stdout and retrieval_summary.md): at each budget the best strategy by hit rate, and --reference (paragraph)
minus each other strategy with its CI and Holm p, in words. Writes retrieval_per_question.csv, retrieval_summary.csv /
.md, retrieval_paired.csv, retrieval_verdict.csv and retrieval_hit_rate.{png,pdf,html}. When the run has both text
layers (`ragstudy retrieve --text-layer raw,clean`: the clean one in text-layer-clean/), the
verdict is followed by paragraph − fixed-size split into cleaning and segmentation (retrieval_decomposition.csv,
ragstudy.scoring.decomposition; docs/text-layer.md).

A run whose grid has several groups (`--retriever dense,bm25`, `--text-layer raw,clean`, `--embedding a,b`, ...:
the variants that differ only in strategy are a group): each group is scored as above into groups/<group>/, then the
parent gets retrieval_verdict_across.csv and a retrieval_summary.md saying, per group, the best strategy per budget
and paragraph's differences, and in words where the conclusion changes across the groups
(ragstudy.scoring.verdict_across; docs/retrieval.md). A sweep's group compares its configurations (variant ids) instead
of strategies.

Oracle overlap (ragstudy.scoring.oracle_overlap): with --oracle FILE, or Oracle.csv beside the run's questions file,
also the share of each oracle answer's content terms in the context; without evidence it is the only score.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from Postprocessing import cli, common, formatting
from Postprocessing.common import DataError
from ragstudy import results
from ragstudy.scoring import budget_metrics
from ragstudy.scoring import evidence as evidence_mod
from ragstudy.scoring.budget_eval import StrategyEvaluation, per_question_columns
from ragstudy.scoring.budgets import Measure, budget_labels
from ragstudy.scoring.stats import HOLM_COLUMN, ci_label
from ragstudy.scoring.verdict import DEFAULT_REFERENCE, Verdict
from ragstudy.scoring.verdict_across import CrossVerdict
from ragstudy.settings import Setting, record

logger = logging.getLogger(__name__)

PLOT_STEM = results.RETRIEVAL_PLOT.stem


# ----------------------------------------------------------------------------------------------- the report

def table_markdown(verdict: Verdict) -> str:
    """The table of the reference's differences (difference [CI], Holm p) per budget."""
    headers, rows = verdict.table()
    return formatting.markdown_table(headers, [[c.text for c in row] for row in rows],
                                     "lrl" + "r" * (len(headers) - 3))


def verdict_markdown(verdicts: Sequence[Verdict], setting: Mapping[str, str] | None = None) -> str:
    """The verdict box: the main verdict in one sentence (under the run's retriever and embedder, `setting`), its
    matrix, the other verdicts' sentences; then, under "Details", each verdict's lines and table of differences."""
    main = verdicts[0]
    parts = ["## Verdict\n", f"**{main.headline(**(setting or {}))}**\n", main.matrix_markdown(),
             *(f"{v.also_on()}\n" for v in verdicts[1:]), "### Details\n"]
    for number, verdict in enumerate(verdicts):
        if number:
            parts += [f"#### The same verdict on the {verdict.metric_words}\n", verdict.matrix_markdown()]
        parts.append(verdict.markdown() + "\n" + table_markdown(verdict))
    return "\n".join(p for p in parts if p)


def markdown(summary: pd.DataFrame, paired: pd.DataFrame, strategies: Sequence[str], display: Mapping[str, str],
             labels: Sequence[str], unit: str, notes: Sequence[str], verdicts: Sequence[Verdict],
             confidence: float, decomposition: str = "", setting: Mapping[str, str] | None = None) -> str:
    """retrieval_summary.md: the verdict first (and the cleaning/segmentation split when the run has both text
    layers), then every metric's table, the significant pairs and the notes; intervals labelled with `confidence`,
    the level the tables record."""
    ci = ci_label(confidence)
    lines = [f"# Retrieval at equal context budgets ({unit})\n", verdict_markdown(verdicts, setting),
             *([decomposition] if decomposition else []),
             "## How the contexts are built\n",
             f"Budget B: the top-ranked parents, whole, in rank order, while their total stays <= B {unit} (a first "
             "parent longer than B is cut at B). Budget **k**: the parents each strategy's own k child windows "
             f"retrieve, as the chain does (different sizes per strategy). Mean [{ci} bootstrap CI] over the "
             "answerable questions.\n"]
    header = ["strategy", *[f"{label} {unit}" if label.isdigit() else "own k" for label in labels]]
    for metric in budget_metrics.metrics():
        part = summary[summary["metric"] == metric.name]
        if part.empty:
            continue
        digits = 0 if metric.scale is None else 3
        by_key = {(r.strategy, r.budget): r for r in part.itertuples()}
        body = []
        for s in strategies:
            cells = []
            for label in labels:
                r = by_key.get((s, label))
                cells.append("–" if r is None else formatting.format_estimate(r.mean, r.ci_low, r.ci_high, digits))
            body.append([display.get(s, s), *cells])
        n = int(part["n"].max())
        lines.append(f"## {metric.title} (n = {n})\n")
        lines.append(formatting.markdown_table(header, body, "l" + "r" * len(labels)))
    if len(paired):
        hit = paired[paired["metric"] == budget_metrics.HIT]
        body = [[r.budget, f"{display.get(r.strategy_a, r.strategy_a)} − {display.get(r.strategy_b, r.strategy_b)}",
                 r.n, formatting.format_estimate(r.mean_diff, r.ci_low, r.ci_high, 3, signed=True),
                 formatting.format_p(r.p_wilcoxon), formatting.format_p(getattr(r, HOLM_COLUMN))]
                for r in hit.itertuples() if getattr(r, HOLM_COLUMN) < 0.05]
        lines.append("## Paired differences in hit rate with Holm-adjusted p < 0.05\n")
        lines.append(formatting.markdown_table(["budget", "a − b", "n", f"difference [{ci} CI]", "Wilcoxon", "Holm"],
                                               body, "llrrrr") if body else "None.\n")
        lines.append("All pairs and metrics: `retrieval_paired.csv`.\n")
    lines.append("## Notes\n\n" + "".join(f"- {note}\n" for note in notes))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- the script

def text_layer_pairs(groups: Sequence[Any]) -> list[tuple[Any, Any]]:
    """(raw group, clean group) pairs of groups that differ only in the text layer: cleaning vs segmentation is a
    group-by over the text-layer axis (ragstudy.scoring.decomposition)."""
    def rest(group: Any) -> tuple:
        return tuple(v for axis, v in group.context.items() if axis != "text_layer")

    return [(raw, clean) for raw in groups if raw.context.get("text_layer") == "raw"
            for clean in groups if clean.context.get("text_layer") == "clean" and rest(clean) == rest(raw)]


def text_layer_decomposition(raw: pd.DataFrame, clean: pd.DataFrame, labels: Sequence[str], metrics: Sequence[str],
                             scoring: ScoreRetrievalSettings) -> pd.DataFrame | None:
    """Paragraph − fixed-size split into cleaning and segmentation (ragstudy.scoring.decomposition) on each of the
    verdict's evidence `metrics`, from the per-question rows of a raw and a clean group; None when either lacks what it
    needs (paragraph and fixed-size in the raw group, fixed-size in the clean one)."""
    from ragstudy.scoring.decomposition import BASELINE, SEGMENTED, decompose, to_frame

    if not metrics or not {SEGMENTED, BASELINE} <= set(raw["strategy"]) or BASELINE not in set(clean["strategy"]):
        return None
    return to_frame([part for metric in metrics for part in
                     decompose(raw, clean, labels, metric, scoring.n_resamples, scoring.seed, scoring.confidence)])


def decomposition_markdown(frame: pd.DataFrame | None, unit: str, confidence: float, details: str = "") -> str:
    from ragstudy.scoring.decomposition import markdown as split_markdown

    return "" if frame is None else split_markdown(frame, unit, confidence, details)


def pairs_decomposition(pairs: Sequence[tuple[Any, Any]], scored: dict[str, Path]) -> pd.DataFrame | None:
    """The run's top-level decomposition table: the one raw/clean pair's split as it is, or, over several pairs
    (e.g. three retrievers × two embedders), every pair's split with a first column `group` naming the pair by its
    other axes (dense / multilingual-e5-small), in the run's order; None when no pair has a split."""
    from ragstudy.scoring.decomposition import GROUP

    frames = [(raw, results.read_table(scored[raw.label], results.RETRIEVAL_DECOMPOSITION)) for raw, _ in pairs]
    frames = [(raw, frame) for raw, frame in frames if frame is not None]
    if len(frames) <= 1:
        return frames[0][1] if frames else None
    named = [frame.assign(**{GROUP: raw.label_without("text_layer")}) for raw, frame in frames]
    table = pd.concat(named, ignore_index=True)
    return table[[GROUP, *(c for c in table.columns if c != GROUP)]]


def settings() -> tuple[Setting, ...]:
    """This script's flags (shared ones from Postprocessing.cli)."""
    return (
        cli.RESULTS_DIR.but(help="folder `ragstudy retrieve` wrote"),
        cli.EVIDENCE.but(default_doc="sample/evidence.json when the run answered the bundled Questions.csv, else "
                         "none: then only the oracle overlap is reported"),
        cli.ORACLE.but(help="oracle answers (CSV with an 'oracle' column, one row per question) for the "
                       "oracle-overlap score", default_doc="Oracle.csv beside the run's questions file"),
        cli.QUESTIONS.but(help="the questions file the run's question_index counts rows of",
                          default_doc="the one config.json names; its sha256 must match the run's"),
        Setting("allow_questions_mismatch", "score although the questions file differs from the one the run "
                "recorded (sha256)", kind="switch"),
        cli.OUT_DIR,
        cli.STRATEGIES.but(default_doc="every retrieval_<strategy>.csv present"),
        cli.BUDGETS,
        cli.NO_PLOT,
        Setting("reference", "the strategy the verdict compares with every other one (when absent from the run the "
                "verdict shows only the best strategy per budget)", metavar="STRATEGY",
                default_doc=DEFAULT_REFERENCE),
        Setting("verdict_metric", "the metric the verdict ranks and compares by (with the hit rate, the verdict on "
                f"{budget_metrics.HIT_CONTIGUOUS} follows it)", choices=lambda: budget_metrics.names(compared_only=True),
                default=budget_metrics.HIT),
        cli.ALLOW_MIXED,
        *cli.BOOTSTRAP,
    )


def build_parser() -> argparse.ArgumentParser:
    return cli.script_parser(__doc__, settings())


@dataclass(frozen=True)
class GroupInputs:
    """What one group is scored on, checked (`check_group`)."""

    members: dict[str, Path]  # each compared name scored -> the folder holding its rankings
    strategy_of: Callable[[str], str]  # a compared name -> its strategy (a sweep compares variant ids)
    run_config: Mapping[str, Any]
    budgets: tuple[int, ...]
    unit: str  # the budgets' unit: chars or tokens
    measure: Measure
    identity_notes: list[str]
    evidence: Mapping
    evidence_path: Path | None
    oracle: Sequence[str] | None
    oracle_path: Path | None


@dataclass(frozen=True)
class GroupScores:
    """One group's per-question rows, their summary, paired differences and verdicts (`score_inputs`)."""

    frame: pd.DataFrame
    evaluations: list[StrategyEvaluation]
    labels: list[str]
    display: dict[str, str]
    summary: pd.DataFrame
    paired: pd.DataFrame
    verdicts: list[Verdict]
    has_evidence: bool


ScoreRetrievalSettings = record("ScoreRetrievalSettings", settings())  # the job's typed settings (docs/python.md)


def out_folder(scoring: ScoreRetrievalSettings) -> Path:
    """Where the scores go: --out-dir, else --results-dir."""
    return Path(scoring.out_dir or scoring.results_dir)


def score_retrieval(scoring: ScoreRetrievalSettings) -> results.Written:
    """`ragstudy score-retrieval`: score the run in --results-dir, one verdict per group of variants that differ only
    in strategy (ragstudy.grid.variants.run_groups; a folder without variants.csv is one group), checked across the
    groups when there are several (run_across); the files it wrote."""
    from ragstudy.grid.variants import run_groups

    top = results.open_run(scoring.results_dir)  # config.json is read once, here
    groups = run_groups(top)
    if len(groups) > 1:
        run_across(scoring, groups)
    else:
        score_group(scoring, groups[0], out_folder(scoring), handle=top)
    return results.written_by(out_folder(scoring), "score-retrieval")


def score_group(scoring: ScoreRetrievalSettings, group: Any, out_dir: Path, clean: pd.DataFrame | None = None,
                handle: results.Run | None = None) -> tuple[dict, pd.DataFrame]:
    """One group's tables, plot and retrieval_summary.md in `out_dir`: its strategies (each ranked in its member's
    folder) at every budget, their paired differences and the verdict, and, given `clean` (the per-question rows of
    the clean group when this is the raw group of a raw/clean pair: run_across), the cleaning vs segmentation split;
    returns (what was written, the per-question rows)."""
    started = time.perf_counter()
    inputs = check_group(scoring, group, handle)
    scores = score_inputs(scoring, inputs)
    return write_group(scoring, inputs, scores, out_dir, clean, started), scores.frame


def check_group(scoring: ScoreRetrievalSettings, group: Any, handle: results.Run | None = None) -> GroupInputs:
    """Check everything one group is scored on before scoring it. `handle`: the run already open, if it is the
    group's first folder (a group's variants share every setting but the strategy: config.json is read once)."""
    from ragstudy import registry
    from ragstudy.grid import runidentity
    from ragstudy.scoring.budget_eval import run_measure

    order = {name: i for i, name in enumerate(registry.available())}
    strategy_of, results_dir = group.strategy_of, Path(scoring.results_dir)
    members = dict(sorted(group.members.items(), key=lambda m: (order.get(strategy_of(m[0]), len(order)), m[0])))
    if not members:
        raise DataError(f"no retrieval_<strategy>.csv in {results_dir}: run `ragstudy retrieve "
                        f"--output-dir {results_dir}` first")
    first = next(iter(members.values()))
    run = handle if handle is not None and handle.path == first else results.open_run(first)
    budgets, measure = checked_budgets(scoring, run.raw), run_measure(run.raw, first)
    strategies = (list(registry.parse_strategies(scoring.strategies)) if scoring.strategies is not None
                  else list(members))
    missing = [s for s in strategies if s not in members]
    if missing:
        raise DataError(f"--strategies: {', '.join(missing)} not ranked in {results_dir}; run `ragstudy retrieve "
                        f"--strategies {','.join(strategies)} --output-dir {results_dir}` first")
    if scoring.reference is not None and scoring.reference not in strategies:
        raise DataError(f"--reference {scoring.reference}: not a strategy of this evaluation (strategies: "
                        f"{', '.join(strategies)}); pass one of them")
    questions, questions_path = run.questions(scoring.questions, scoring.allow_questions_mismatch)
    check_rankings(scoring, group, members, strategies, run.raw, questions)
    identity_notes = runidentity.check_compared(results_dir, strategies, group.ranking,  # one configuration but
                                                scoring.allow_mixed_configurations, group.unshared())  # the strategy
    return GroupInputs({s: members[s] for s in strategies}, strategy_of, run.raw, budgets,
                       run.raw.get("budget_unit", "chars"), measure, identity_notes,
                       *scored_against(scoring, run, questions, questions_path))


def checked_budgets(scoring: ScoreRetrievalSettings, run_config: Mapping[str, Any]) -> tuple[int, ...]:
    """--budgets, else the run's; never above the largest the run ranked parents for."""
    from ragstudy.config import DEFAULT_BUDGETS, validate_budgets

    ranked_for = validate_budgets(list(run_config.get("budgets") or DEFAULT_BUDGETS),
                                  str(Path(scoring.results_dir) / results.CONFIG_NAME))
    budgets = validate_budgets(scoring.budgets, "--budgets") if scoring.budgets else ranked_for
    if max(budgets) > max(ranked_for):
        raise DataError(f"--budgets {max(budgets)} exceeds the largest budget the run ranked parents for "
                        f"({max(ranked_for)}): re-run ragstudy retrieve --budgets {','.join(map(str, budgets))}")
    return budgets


def check_rankings(scoring: ScoreRetrievalSettings, group: Any, members: Mapping[str, Path], strategies: Sequence[str],
                   run_config: Mapping[str, Any], questions: Sequence[str] | None) -> None:
    """Each scored folder's config.json is as its run wrote it, and its rankings cover the questions it ranked."""
    from ragstudy.grid import runidentity

    ranked_questions = len(questions) if questions else None
    if ranked_questions is not None and run_config.get("limit"):  # a --limit run ranks the first N questions only
        ranked_questions = min(ranked_questions, int(run_config["limit"]))
    first = next(iter(members.values()))
    for folder in dict.fromkeys(members[s] for s in strategies):  # each variant's folder, or the one folder
        own = [s for s in strategies if members[s] == folder]
        folder_config = run_config if folder == first else results.open_run(folder).raw
        runidentity.check_config(folder, folder_config)  # a hand-edited config.json is never scored as the run's
        runidentity.check_rankings(folder, {group.strategy_of(s): results.read_retrieval(group.ranking(s))
                                            for s in own if group.ranking(s).is_file()}, ranked_questions,
                                   folder_config.get("strategies") if scoring.strategies is None else None)


def scored_against(scoring: ScoreRetrievalSettings, run: results.Run, questions: Sequence[str] | None,
                   questions_path: Path | None) -> tuple[Mapping, Path | None, Sequence[str] | None, Path | None]:
    """(evidence, its file, oracle answers, their file): --evidence, else the bundled sample's when the run answered
    its questions; --oracle, else Oracle.csv beside the run's questions. An error when there is nothing to score."""
    from ragstudy.scoring.evidence import load_evidence_file

    evidence_path = evidence_mod.default_evidence(run.raw) if scoring.evidence is None else Path(scoring.evidence)
    found = run.oracle(scoring.oracle)
    oracle, oracle_path = found if found is not None else (None, None)
    if evidence_path is None and oracle_path is None:
        raise DataError(f"nothing to score {scoring.results_dir} against: pass --evidence FILE, or --oracle FILE (or "
                        "put Oracle.csv beside the run's questions file)")
    if evidence_path is None:  # every oracle row says "no answer" (or has no content term): nothing to score
        from ragstudy.lexical import ItalianAnalyzer
        from ragstudy.scoring.oracle_overlap import oracle_terms

        terms = oracle_terms(oracle, ItalianAnalyzer())
        if not terms.terms:
            raise DataError(f"{oracle_path}: no oracle answer to score the run against (left out "
                            f"{len(terms.unanswerable)} with the unanswerable oracle, {len(terms.no_terms)} without "
                            "content terms); pass --evidence FILE, or an oracle file whose rows hold answers")
    evidence = load_evidence_file(evidence_path, questions, questions_path) if evidence_path else {}
    if evidence and run.raw.get("documents_sha256"):  # the run's PDFs (config.json of runs since they are kept)
        evidence_mod.check_evidence_pdfs(evidence, run.raw["documents_sha256"], evidence_path,
                                         f"the run in {scoring.results_dir}")
    return evidence, evidence_path, oracle, oracle_path


def score_inputs(scoring: ScoreRetrievalSettings, inputs: GroupInputs) -> GroupScores:
    """Every scored strategy at every budget (per question), the summary, paired differences and the verdicts."""
    from ragstudy import registry
    from ragstudy.scoring.budget_eval import check_evidence_found, compare, evaluate_members, summarize
    from ragstudy.scoring.verdict import verdict, verdict_metrics

    strategies, strategy_of = list(inputs.members), inputs.strategy_of
    frame, evaluations = evaluate_members(inputs.members, inputs.evidence, inputs.budgets, inputs.measure,
                                          inputs.oracle, strategy_of)
    has_evidence = bool(frame[budget_metrics.HIT].notna().any())
    if inputs.evidence_path and not has_evidence:
        raise DataError(f"no answerable question of {inputs.evidence_path} was ranked in {scoring.results_dir}: do "
                        "the evidence file and the run's Questions.csv belong together?")
    if inputs.evidence_path:
        check_evidence_found(evaluations, inputs.evidence_path)  # before any verdict: evidence in no PDF means nothing
    labels = budget_labels(inputs.budgets)
    display = {s: registry.get(s).display_name if strategy_of(s) == s else s for s in strategies}
    summary = summarize(frame, display, scoring.n_resamples, scoring.seed, scoring.confidence)
    paired = compare(frame, strategies, labels, scoring.n_resamples, scoring.seed, scoring.confidence)
    metric = scoring.verdict_metric
    if budget_metrics.get(metric).needs == "evidence" and not has_evidence:
        metric = budget_metrics.ORACLE_OVERLAP  # no evidence: the oracle overlap is the only score there is
    verdicts = [verdict(summary, paired, scoring.reference or DEFAULT_REFERENCE, m, inputs.unit,
                        confidence=scoring.confidence) for m in verdict_metrics(metric, has_evidence)]
    return GroupScores(frame, evaluations, labels, display, summary, paired, verdicts, has_evidence)


def group_notes(inputs: GroupInputs, scores: GroupScores) -> list[str]:
    """retrieval_summary.md's notes: what was scored against what, and what was left out."""
    from ragstudy.qagen.outputs import generated_note

    run_config, strategies = inputs.run_config, set(map(inputs.strategy_of, inputs.members))
    k = {s: p.get("k") for s, p in (run_config.get("strategy_params") or {}).items() if s in strategies}
    return [*filter(None, [generated_note(run_config)]),
            f"retriever: {run_config.get('retriever', 'dense')} (ragstudy retrieve --retriever)",
            *inputs.identity_notes,
            f"evidence: {inputs.evidence_path} ({len(inputs.evidence)} answerable questions); matched after NFKC, "
            "accent, case, whitespace, punctuation and line-break-hyphenation normalisation" if inputs.evidence_path
            else "evidence: none given (--evidence FILE): only the oracle overlap is scored",
            f"oracle overlap: {inputs.oracle_path}" if inputs.oracle_path else
            "oracle overlap: no oracle file (--oracle FILE)",
            f"budgets in {inputs.unit}; each strategy's own k (child windows): {k or 'unknown'}",
            *(note for e in scores.evaluations for note in e.notes()),
            "paired tests: bootstrap CI of the mean difference, Wilcoxon signed-rank p, Holm over the strategy "
            "pairs of each budget and metric"]


def write_group(scoring: ScoreRetrievalSettings, inputs: GroupInputs, scores: GroupScores, out_dir: Path,
                clean: pd.DataFrame | None, started: float) -> dict:
    """One group's tables, plot, cleaning vs segmentation split (against `clean`'s rows, when given) and
    retrieval_summary.md, told with the time since `started`; what was written."""
    from ragstudy.scoring.verdict import verdict_setting

    notes, strategies, unit = group_notes(inputs, scores), list(inputs.members), inputs.unit
    verdicts = pd.concat([v.to_frame() for v in scores.verdicts], ignore_index=True)
    tables = {"per_question": (results.RETRIEVAL_PER_QUESTION, scores.frame[per_question_columns()]),
              "summary": (results.RETRIEVAL_SUMMARY, scores.summary),
              "paired": (results.RETRIEVAL_PAIRED, scores.paired), "verdict": (results.RETRIEVAL_VERDICT, verdicts)}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {key: results.write_table(out_dir, spec, frame) for key, (spec, frame) in tables.items()}
    written["summary_md"] = results.RETRIEVAL_SUMMARY_MD.path(out_dir)
    if not scoring.no_plot and scores.has_evidence:
        from Postprocessing.budget_plots import hit_rate_figure, write_plots

        fig = hit_rate_figure(scores.summary, scores.frame, strategies, unit, inputs.strategy_of)
        written.update({path.suffix.lstrip("."): path for path in write_plots(fig, out_dir, PLOT_STEM, notes)})
    metrics = [v.metric for v in scores.verdicts if budget_metrics.get(v.metric).needs == "evidence"]
    decomposition = (None if clean is None else
                     text_layer_decomposition(scores.frame, clean, scores.labels, metrics, scoring))
    decomposition_file = results.RETRIEVAL_DECOMPOSITION.path(out_dir)
    if decomposition is not None:
        written["decomposition"] = results.write_table(out_dir, results.RETRIEVAL_DECOMPOSITION, decomposition)
    else:
        notes.append("cleaning vs segmentation: not measured (the run has one text layer; run `ragstudy retrieve "
                     "--text-layer raw,clean` for the split)")
        if decomposition_file.is_file():  # an earlier scoring's, of text layers now gone
            decomposition_file.unlink()
            logger.warning("%s: removed: it came from an earlier scoring, and this one measured no cleaning vs "
                           "segmentation split (see the note in %s)", decomposition_file,
                           results.RETRIEVAL_SUMMARY_MD.name)
    split_md = decomposition_markdown(decomposition, unit, scoring.confidence)
    report = markdown(scores.summary, scores.paired, strategies, scores.display, scores.labels, unit, notes,
                      scores.verdicts, scoring.confidence, split_md, verdict_setting(inputs.run_config))
    common.atomic_write_text(written["summary_md"], report)
    common.tell_report(report, out_dir, time.perf_counter() - started)
    return written


def across_markdown(cross: CrossVerdict, folders: Mapping[str, Path], decomposition: str = "") -> str:
    """The parent folder's retrieval_summary.md: whether the best strategy changes with the axis, and apart which
    differences reach significance where; each group's sentence and matrix; then, under "Details", what changes
    budget by budget and each group's table of differences (from its own folder); then cleaning vs segmentation when
    the run has both text layers."""
    axis, changes = cross.axis, cross.sentences()
    lines = [f"# Retrieval at equal context budgets, checked across {axis}s\n", f"## Verdict across {axis}s\n",
             cross.headline() + "\n"]
    for name, v in cross.verdicts.items():
        lines += [f"### Under {name}\n", v.headline() + "\n", v.matrix_markdown()]
    lines += ["## Details\n", f"What changes with the {axis}, budget by budget:\n",
              "".join(f"- {line}\n" for line in changes) if changes else
              f"Nothing: the best strategy and the significant differences are the same at every budget under every "
              f"{axis}.\n"]
    for name, v in cross.verdicts.items():
        lines += [f"### Under {name}: the differences\n", table_markdown(v),
                  f"All of {name}'s tables: `{folders[name] / results.RETRIEVAL_SUMMARY_MD.name}`.\n"]
    lines.append(f"Per {axis} x budget: `{results.RETRIEVAL_VERDICT_ACROSS.name}`.\n")
    if decomposition:
        lines.append(decomposition)
    return "\n".join(p for p in lines if p)


def run_across(scoring: ScoreRetrievalSettings, groups: Sequence[Any]) -> dict:
    """--results-dir holds several groups of variants (e.g. --retriever dense,bm25, --text-layer raw,clean,
    --embedding a,b): each group is scored as a run of its own into <out>/groups/<group>/, then the folder gets
    retrieval_verdict_across.csv and retrieval_summary.md comparing their verdicts (ragstudy.scoring.verdict_across),
    and, for groups that differ only in the text layer, paragraph − fixed-size split into cleaning and segmentation
    (retrieval_decomposition.csv in the raw group's folder and, for the first pair, here)."""
    from ragstudy.grid.variants import axis_word, scores_folder

    started, out_dir = time.perf_counter(), out_folder(scoring)
    scored: dict[str, Path] = {}
    frames: dict[str, pd.DataFrame] = {}
    written: dict = {}
    pairs = text_layer_pairs(groups)
    later = [raw for raw, _ in pairs]  # a raw group is scored after its clean one, with the split
    for group in sorted(groups, key=lambda g: g in later):
        target = scores_folder(out_dir, group, len(groups))
        clean = next((frames[c.label] for raw, c in pairs if raw is group), None)  # scored before it
        logger.info("scoring the group %s", group.label)
        try:
            each, frames[group.label] = score_group(scoring, group, target, clean)
        except DataError as exc:
            raise DataError(f"group {group.label}: {exc}") from None
        scored[group.label] = target
        written.update({f"{group.id}/{key}": path for key, path in each.items()})
    scored = {g.label: scored[g.label] for g in groups}  # the run's order: its first group leads
    cross = CrossVerdict.read(scored, axis=axis_word(groups))
    out_dir.mkdir(parents=True, exist_ok=True)
    written["verdict_across"] = results.write_table(out_dir, results.RETRIEVAL_VERDICT_ACROSS, cross.to_frame())
    top = pairs_decomposition(pairs, scored)
    if top is not None:
        written["decomposition"] = results.write_table(out_dir, results.RETRIEVAL_DECOMPOSITION, top)
    elif results.RETRIEVAL_DECOMPOSITION.path(out_dir).is_file():
        results.RETRIEVAL_DECOMPOSITION.path(out_dir).unlink()
    unit = str(results.open_run(next(iter(groups[0].members.values()))).raw.get("budget_unit", "chars"))
    written["summary_md"] = results.RETRIEVAL_SUMMARY_MD.path(out_dir)
    details = "Each group's sentences: the retrieval_summary.md of its raw folder (" + ", ".join(
        f"`{scored[raw.label] / results.RETRIEVAL_SUMMARY_MD.name}`" for raw, _ in pairs) + ")."
    report = across_markdown(cross, scored, decomposition_markdown(top, unit, scoring.confidence, details))
    common.atomic_write_text(written["summary_md"], report)
    common.tell_report(report, out_dir, time.perf_counter() - started)
    return written

