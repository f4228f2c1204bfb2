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
ragstudy.decomposition; docs/text-layer.md).

A run whose grid has several groups (`--retriever dense,bm25`, `--text-layer raw,clean`, `--embedding a,b`, ...:
the variants that differ only in strategy are a group): each group is scored as above into groups/<group>/, then the
parent gets retrieval_verdict_across.csv and a retrieval_summary.md saying, per group, the best strategy per budget
and paragraph's differences, and in words where the conclusion changes across the groups (ragstudy.verdict_across;
docs/retrieval.md). A sweep's group compares its configurations (variant ids) instead of strategies.

Oracle overlap (ragstudy.oracle_overlap): with --oracle FILE, or Oracle.csv beside the run's questions file, also the
share of each oracle answer's content terms in the context; without evidence it is the only score.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any
from pathlib import Path

import pandas as pd

from Postprocessing import cli, common, formatting
from Postprocessing.common import DataError
from ragstudy import budget_metrics, results
from ragstudy import evidence as evidence_mod
from ragstudy.budget_eval import DEFAULT_REFERENCE, Verdict, per_question_columns
from ragstudy.settings import Setting, record
from ragstudy.stats import HOLM_COLUMN, ci_label
from ragstudy.verdict_across import CrossVerdict

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
    group-by over the text-layer axis (ragstudy.decomposition)."""
    def rest(group: Any) -> tuple:
        return tuple(v for axis, v in group.context.items() if axis != "text_layer")

    return [(raw, clean) for raw in groups if raw.context.get("text_layer") == "raw"
            for clean in groups if clean.context.get("text_layer") == "clean" and rest(clean) == rest(raw)]


def text_layer_decomposition(raw: pd.DataFrame, clean: pd.DataFrame, labels: Sequence[str], metrics: Sequence[str],
                             args: ScoreRetrievalSettings) -> pd.DataFrame | None:
    """Paragraph − fixed-size split into cleaning and segmentation (ragstudy.decomposition) on each of the verdict's
    evidence `metrics`, from the per-question rows of a raw and a clean group; None when either lacks what it needs
    (paragraph and fixed-size in the raw group, fixed-size in the clean one)."""
    from ragstudy.decomposition import BASELINE, SEGMENTED, decompose, to_frame

    if not metrics or not {SEGMENTED, BASELINE} <= set(raw["strategy"]) or BASELINE not in set(clean["strategy"]):
        return None
    return to_frame([part for metric in metrics for part in
                     decompose(raw, clean, labels, metric, args.n_resamples, args.seed, args.confidence)])


def decomposition_markdown(frame: pd.DataFrame | None, unit: str, confidence: float, details: str = "") -> str:
    from ragstudy.decomposition import markdown as split_markdown

    return "" if frame is None else split_markdown(frame, unit, confidence, details)


def pairs_decomposition(pairs: Sequence[tuple[Any, Any]], scored: dict[str, Path]) -> pd.DataFrame | None:
    """The run's top-level decomposition table: the one raw/clean pair's split as it is, or, over several pairs
    (e.g. three retrievers × two embedders), every pair's split with a first column `group` naming the pair by its
    other axes (dense / multilingual-e5-small), in the run's order; None when no pair has a split."""
    from ragstudy import results
    from ragstudy.decomposition import GROUP

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


ScoreRetrievalSettings = record("ScoreRetrievalSettings", settings())  # the job's typed settings (docs/python.md)


def score_retrieval(args: ScoreRetrievalSettings) -> results.Written:
    """`ragstudy score-retrieval`: score the run in --results-dir, one verdict per group of variants that differ only
    in strategy (ragstudy.variants.run_groups; a folder without variants.csv is one group), checked across the groups
    when there are several (run_across); the files it wrote."""
    from ragstudy.variants import run_groups

    results_dir = Path(args.results_dir)
    top = results.open_run(results_dir)  # config.json is read once, here
    groups = run_groups(top)
    out_dir = Path(args.out_dir or results_dir)
    if len(groups) > 1:
        run_across(args, groups)
    else:
        score_group(args, groups[0], results_dir, out_dir, handle=top)
    return results.written_by(out_dir, "score-retrieval")


def score_group(args: ScoreRetrievalSettings, group: Any, results_dir: Path, out_dir: Path, split: Any = None,
                handle: results.Run | None = None) -> tuple[dict, pd.DataFrame]:
    """One group's tables, plot and retrieval_summary.md in `out_dir`: its strategies (each ranked in its member's
    folder) at every budget, their paired differences and the verdict, and `split(frame, labels, metrics)`'s
    cleaning vs segmentation table when given (run_across: the raw group of a raw/clean pair); returns (what was
    written, the per-question rows)."""
    from ragstudy import registry, runidentity
    from ragstudy.budget_eval import (budget_labels, check_evidence_found, compare, evaluate_members, run_measure,
                                      summarize, verdict, verdict_metrics, verdict_setting)
    from ragstudy.config import DEFAULT_BUDGETS, validate_budgets
    from ragstudy.evidence import load_evidence_file

    started = time.perf_counter()
    order = {name: i for i, name in enumerate(registry.available())}
    strategy_of = group.strategy_of  # a compared name -> its strategy (a sweep compares variant ids)
    members = dict(sorted(group.members.items(), key=lambda m: (order.get(strategy_of(m[0]), len(order)), m[0])))
    if not members:
        raise DataError(f"no retrieval_<strategy>.csv in {results_dir}: run `ragstudy retrieve "
                        f"--output-dir {results_dir}` first")
    first = next(iter(members.values()))
    run = handle if handle is not None and handle.path == first else results.open_run(first)  # config.json read
    # once (a group's variants share every setting but the strategy)
    run_config = run.raw
    ranked_for = validate_budgets(list(run_config.get("budgets") or DEFAULT_BUDGETS),
                                  str(results_dir / results.CONFIG_NAME))
    budgets = validate_budgets(args.budgets, "--budgets") if args.budgets else ranked_for
    if max(budgets) > max(ranked_for):
        raise DataError(f"--budgets {max(budgets)} exceeds the largest budget the run ranked parents for "
                        f"({max(ranked_for)}): re-run ragstudy retrieve --budgets "
                        f"{','.join(map(str, budgets))}")
    unit = run_config.get("budget_unit", "chars")
    measure = run_measure(run_config, first)
    strategies = (list(registry.parse_strategies(args.strategies)) if args.strategies is not None  # '' is an error
                  else list(members))
    missing = [s for s in strategies if s not in members]
    if missing:
        raise DataError(f"--strategies: {', '.join(missing)} not ranked in {results_dir}; run `ragstudy retrieve "
                        f"--strategies {','.join(strategies)} --output-dir {results_dir}` first")
    if args.reference is not None and args.reference not in strategies:
        raise DataError(f"--reference {args.reference}: not a strategy of this evaluation (strategies: "
                        f"{', '.join(strategies)}); pass one of them")
    questions, questions_path = run.questions(args.questions, args.allow_questions_mismatch)
    ranked_questions = len(questions) if questions else None
    if ranked_questions is not None and run_config.get("limit"):  # a --limit run ranks the first N questions only
        ranked_questions = min(ranked_questions, int(run_config["limit"]))
    for folder in dict.fromkeys(members[s] for s in strategies):  # each variant's folder, or the one folder
        own = [s for s in strategies if members[s] == folder]
        folder_config = run_config if folder == first else results.open_run(folder).raw
        runidentity.check_config(folder, folder_config)  # a hand-edited config.json is never scored as the run's
        runidentity.check_rankings(folder, {strategy_of(s): results.read_retrieval(group.ranking(s))
                                            for s in own if group.ranking(s).is_file()},
                                   ranked_questions,
                                   folder_config.get("strategies") if args.strategies is None else None)

    identity_notes = runidentity.check_compared(results_dir, strategies, group.ranking,  # one configuration but
                                                args.allow_mixed_configurations, group.unshared())  # the strategy
    evidence_path = evidence_mod.default_evidence(run_config) if args.evidence is None else Path(args.evidence)
    found = run.oracle(args.oracle)  # --oracle, else Oracle.csv beside the run's questions
    oracle, oracle_path = found if found is not None else (None, None)
    if evidence_path is None and oracle_path is None:
        raise DataError(f"nothing to score {results_dir} against: pass --evidence FILE, or --oracle FILE (or put "
                        "Oracle.csv beside the run's questions file)")
    if evidence_path is None:  # every oracle row says "no answer" (or has no content term): nothing to score
        from ragstudy.lexical import ItalianAnalyzer
        from ragstudy.oracle_overlap import oracle_terms

        terms = oracle_terms(oracle, ItalianAnalyzer())
        if not terms.terms:
            raise DataError(f"{oracle_path}: no oracle answer to score the run against (left out "
                            f"{len(terms.unanswerable)} with the unanswerable oracle, {len(terms.no_terms)} without "
                            "content terms); pass --evidence FILE, or an oracle file whose rows hold answers")
    evidence = load_evidence_file(evidence_path, questions, questions_path) if evidence_path else {}
    if evidence and run_config.get("documents_sha256"):  # the run's PDFs (config.json of runs since they are kept)
        evidence_mod.check_evidence_pdfs(evidence, run_config["documents_sha256"], evidence_path,
                                         f"the run in {results_dir}")
    frame, evaluations = evaluate_members({s: members[s] for s in strategies}, evidence, budgets, measure, oracle,
                                          strategy_of)
    if evidence_path and not frame[budget_metrics.HIT].notna().any():
        raise DataError(f"no answerable question of {evidence_path} was ranked in {results_dir}: do the evidence "
                        "file and the run's Questions.csv belong together?")
    if evidence_path:
        check_evidence_found(evaluations, evidence_path)  # before any verdict: evidence in no PDF means nothing
    labels = budget_labels(budgets)
    display = {s: registry.get(s).display_name if strategy_of(s) == s else s for s in strategies}
    summary = summarize(frame, display, args.n_resamples, args.seed, args.confidence)
    paired = compare(frame, strategies, labels, args.n_resamples, args.seed, args.confidence)
    verdict_metric = args.verdict_metric
    has_evidence = bool(frame[budget_metrics.HIT].notna().any())
    if budget_metrics.get(verdict_metric).needs == "evidence" and not has_evidence:
        verdict_metric = budget_metrics.ORACLE_OVERLAP  # no evidence: the oracle overlap is the only score there is
    boxes = [verdict(summary, paired, args.reference or DEFAULT_REFERENCE, metric, unit, confidence=args.confidence)
             for metric in verdict_metrics(verdict_metric, has_evidence)]
    k = {s: p.get("k") for s, p in (run_config.get("strategy_params") or {}).items()
         if s in map(strategy_of, strategies)}
    from ragstudy.qagen.outputs import generated_note

    notes = [*filter(None, [generated_note(run_config)]),
             f"retriever: {run_config.get('retriever', 'dense')} (ragstudy retrieve --retriever)",
             *identity_notes,
             f"evidence: {evidence_path} ({len(evidence)} answerable questions); matched after NFKC, accent, "
             "case, whitespace, punctuation and line-break-hyphenation normalisation" if evidence_path else
             "evidence: none given (--evidence FILE): only the oracle overlap is scored",
             f"oracle overlap: {oracle_path}" if oracle_path else "oracle overlap: no oracle file (--oracle FILE)",
             f"budgets in {unit}; each strategy's own k (child windows): {k or 'unknown'}",
             *(note for e in evaluations for note in e.notes()),
             "paired tests: bootstrap CI of the mean difference, Wilcoxon signed-rank p, Holm over the strategy "
             "pairs of each budget and metric"]
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {"per_question": results.write_table(out_dir, results.RETRIEVAL_PER_QUESTION,
                                                   frame[per_question_columns()]),
               "summary": results.write_table(out_dir, results.RETRIEVAL_SUMMARY, summary),
               "paired": results.write_table(out_dir, results.RETRIEVAL_PAIRED, paired),
               "verdict": results.write_table(out_dir, results.RETRIEVAL_VERDICT,
                                              pd.concat([box.to_frame() for box in boxes], ignore_index=True)),
               "summary_md": results.RETRIEVAL_SUMMARY_MD.path(out_dir)}
    if not args.no_plot and has_evidence:
        from Postprocessing.budget_plots import hit_rate_figure, write_plots

        fig = hit_rate_figure(summary, frame, strategies, unit, strategy_of)
        for path in write_plots(fig, out_dir, PLOT_STEM, notes):
            written[path.suffix.lstrip(".")] = path
    metrics = [m for m in verdict_metrics(verdict_metric, has_evidence) if budget_metrics.get(m).needs == "evidence"]
    decomposition = split(frame, labels, metrics) if split is not None else None
    if decomposition is not None:
        written["decomposition"] = results.write_table(out_dir, results.RETRIEVAL_DECOMPOSITION, decomposition)
    else:
        notes.append("cleaning vs segmentation: not measured (the run has one text layer; run `ragstudy retrieve "
                     "--text-layer raw,clean` for the split)")
        if results.RETRIEVAL_DECOMPOSITION.path(out_dir).is_file():  # an earlier scoring's, of text layers now gone
            results.RETRIEVAL_DECOMPOSITION.path(out_dir).unlink()
            logger.warning("%s: removed: it came from an earlier scoring, and this one measured no cleaning vs "
                           "segmentation split (see the note in %s)", results.RETRIEVAL_DECOMPOSITION.path(out_dir),
                           results.RETRIEVAL_SUMMARY_MD.name)
    report = markdown(summary, paired, strategies, display, labels, unit, notes, boxes, args.confidence,
                      decomposition_markdown(decomposition, unit, args.confidence), verdict_setting(run_config))
    common.atomic_write_text(written["summary_md"], report)
    common.tell_report(report, out_dir, time.perf_counter() - started)
    return written, frame


def across_markdown(cross: CrossVerdict, folders: Mapping[str, Path], decomposition: str = "") -> str:
    """The parent folder's retrieval_summary.md: whether the best strategy changes with the axis, and apart which
    differences reach significance where; each group's sentence and matrix; then, under "Details", what changes
    budget by budget and each group's table of differences (from its own folder); then cleaning vs segmentation when
    the run has both text layers."""
    from ragstudy import results

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


def run_across(args: ScoreRetrievalSettings, groups: Sequence[Any]) -> dict:
    """--results-dir holds several groups of variants (e.g. --retriever dense,bm25, --text-layer raw,clean,
    --embedding a,b): each group is scored as a run of its own into <out>/groups/<group>/, then the folder gets
    retrieval_verdict_across.csv and retrieval_summary.md comparing their verdicts (ragstudy.verdict_across),
    and, for groups that differ only in the text layer, paragraph − fixed-size split into cleaning and segmentation
    (retrieval_decomposition.csv in the raw group's folder and, for the first pair, here)."""
    from ragstudy import results
    from ragstudy.variants import axis_word, scores_folder

    started = time.perf_counter()
    results_dir = Path(args.results_dir)
    out_dir = Path(args.out_dir or results_dir)
    scored: dict[str, Path] = {}
    frames: dict[str, pd.DataFrame] = {}
    written: dict = {}
    pairs = text_layer_pairs(groups)
    later = [raw for raw, _ in pairs]  # a raw group is scored after its clean one, with the split
    for group in sorted(groups, key=lambda g: g in later):
        target = scores_folder(out_dir, group, len(groups))
        clean = next((c for raw, c in pairs if raw is group), None)

        def split(frame: pd.DataFrame, labels: Sequence[str], metrics: Sequence[str], clean: Any = clean
                  ) -> pd.DataFrame | None:
            return None if clean is None else text_layer_decomposition(frame, frames[clean.label], labels, metrics,
                                                                       args)

        logger.info("scoring the group %s", group.label)
        try:
            each, frames[group.label] = score_group(args, group, results_dir, target, split)
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
    report = across_markdown(cross, scored, decomposition_markdown(top, unit, args.confidence, details))
    common.atomic_write_text(written["summary_md"], report)
    common.tell_report(report, out_dir, time.perf_counter() - started)
    return written

