"""Score each strategy's answers against the oracle: BLEU, ROUGE, METEOR and BERTScore, with seeded bootstrap
confidence intervals and paired comparisons between strategies. Everything runs offline.

Run from the repository root::

    ragstudy score-answers --results-dir results

Writes ``metrics_per_question.csv``, ``metrics_summary.csv``, ``metrics_paired.csv``, ``metrics_summary.md``
and ``metrics_run.json`` into ``--out-dir`` (default: the results folder) and prints the Markdown summary.
The metrics themselves live in ``answer_metrics`` (registered in ``metric_catalogue``), the tables in
``answer_scoring``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from Postprocessing import answer_baselines, answer_scoring, cli, common, metric_catalogue
from Postprocessing.answer_metrics import PAPER_BERTSCORE_MODEL, MetricsConfig, resolve_bertscore
from Postprocessing.common import DataError
from ragstudy import results
from ragstudy.io import tell, torch_threads
from ragstudy.settings import Setting, record


def score_answers(args: ScoreAnswersSettings) -> results.Written:
    """`ragstudy score-answers`: load and check the inputs, score, write the outputs, print the Markdown summary;
    the files it wrote. A run with several LLMs (`--llm a,b`): each LLM's group is scored in its own folder, then
    the verdict across the LLMs is written beside answer_groups.csv (Postprocessing.answer_across)."""
    import torch

    from Postprocessing import answer_across
    from ragstudy.answering.llm_axis import read_groups

    torch.set_num_threads(torch_threads(args.threads))
    groups = read_groups(args.results_dir)
    if not groups:
        return _score_folder(args)
    if args.out_dir:
        raise DataError(f"{args.results_dir} holds the answers of {len(groups)} LLMs: each group's scores are "
                        "written into its own folder; drop --out-dir")
    scored = []
    for gid, _, folder in groups:
        _score_folder(replace(args, results_dir=str(folder), out_dir=None))
        scored.append(answer_across.read_group(folder, gid))
    tell(answer_across.write_across(Path(args.results_dir), scored))
    return results.written_by(args.results_dir, "score-answers")


def _score_folder(args: ScoreAnswersSettings) -> results.Written:
    """Score the answers of one answering run (one LLM's) into its folder or --out-dir."""
    results_dir = Path(args.results_dir)
    args = common.resolve_inputs(args)
    out_dir = Path(args.out_dir or results_dir)
    questions, oracle = common.load_questions_and_oracle(Path(args.questions), Path(args.oracle))
    cleaned_path = Path(args.cleaned_oracle or Path(args.oracle).with_name(common.CLEANED_ORACLE_NAME))
    reference = answer_scoring.resolve_reference(Path(args.oracle), cleaned_path, args.reference, args.clean)
    if len(reference.texts) != len(oracle):
        raise DataError(f"{reference.path} has {len(reference.texts)} rows but {args.oracle} has {len(oracle)}: "
                        "re-create it with --clean")
    answers = common.load_all_answers(results_dir, questions, Path(args.questions), args.format,
                                      args.allow_mixed_configurations)
    indices = common.common_question_indices(answers, len(questions), allow_partial=args.allow_partial)
    groups = tuple(g.strip() for g in args.metrics.split(",") if g.strip())
    answer_scoring.selected_scorers(groups)  # unknown names fail before any model loads
    spec = None
    if "bertscore" in groups:
        spec = resolve_bertscore(args.bertscore_model, args.bertscore_layers, common.read_run_config(results_dir))
    config = MetricsConfig(metrics=groups, rouge_tokenizer=args.rouge_tokenizer, bertscore=spec,
                           bertscore_batch_size=args.bertscore_batch_size, clean_answers=not args.no_clean_answers,
                           n_resamples=args.n_resamples, seed=args.seed, confidence=args.confidence)
    record = results.read_config(results_dir)
    run_config = dict(record.raw)
    evidence = answer_baselines.evidence_answers(args.evidence, run_config, questions, Path(args.questions))
    answering = record.answering_model  # the model that wrote the answers, as the run recorded it
    result = answer_scoring.compute_metrics(answers, reference, indices, config, evidence=evidence,
                                            model=answering.name if answering else "")
    notes = [f"Answers by: {answering.describe()}"] if answering else []
    notes += [f"`{a.path.name}`: the paper's format (question, answer, contexts): rows matched to the questions by "
              "position; no sources recorded, so no source-dependent metric" for a in answers if a.paper_format]
    if not (results_dir / results.CONFIG_NAME).is_file():
        notes.append(f"No config.json in {results_dir}: run settings unknown; BERTScore model "
                     f"{spec.model if spec else 'not used'}"
                     + (" (the paper profile's, assumed)" if spec and spec.source.startswith("assumed") else ""))
    report = answer_scoring.markdown_report(result, reference, config, len(indices), len(questions), notes=notes)
    answer_scoring.write_outputs(out_dir, result, report, {
        "results_dir": str(results_dir), "questions": str(args.questions), "reference": str(reference.path),
        "reference_cleaned": reference.cleaned, "dataset_files": [str(a.path) for a in answers],
        "answering_model": answering.to_record() if answering else None,
        "questions_scored": len(indices), "questions_total": len(questions)}, config)
    tell(f"{report}\nScored {len(indices)} of {len(questions)} questions for {len(answers)} strategies; outputs in "
         f"{out_dir}")
    return results.written_by(out_dir, "score-answers")


def settings() -> tuple[Setting, ...]:
    """This script's flags (shared ones from Postprocessing.cli)."""
    scorers = ",".join(metric_catalogue.scorers())
    return (
        *cli.dataset_settings("scored against"),
        Setting("cleaned_oracle", "cleaned oracle file", default_doc="Cleaned_Oracle.csv beside --oracle"),
        Setting("reference", "score against Oracle.csv (raw), Cleaned_Oracle.csv (cleaned), or the cleaned one "
                "when it exists (auto)", choices=lambda: ("auto", "raw", "cleaned"), default="auto"),
        Setting("clean", "(re)create the cleaned oracle the paper's way (lower-case, no punctuation, no Italian "
                "stopwords) and score against it", kind="switch"),
        Setting("no_clean_answers", "with a cleaned reference, score the raw answers (the paper's asymmetric "
                "setup); by default answers are cleaned the same way", kind="switch"),
        Setting("metrics", f"comma-separated scorers out of {scorers}", default=scorers),
        Setting("rouge_tokenizer", "unicode keeps accented letters; default reproduces the paper's HF rouge",
                choices=lambda: ("unicode", "default"), default="unicode"),
        Setting("bertscore_model", "hub id or local folder",
                default_doc=f"from config.json profile: paper → {PAPER_BERTSCORE_MODEL}, lite → multilingual-e5-small "
                "(the lite embedder's folder)"),
        Setting("bertscore_layers", "layer whose embeddings BERTScore uses (required for a local folder)", type=int,
                default_doc="the model's own; lite: 10 of multilingual-e5-small's 12"),
        Setting("bertscore_batch_size", "texts per BERTScore batch", type=int, default=64),
        replace(cli.EVIDENCE, help=cli.EVIDENCE.help + "; its passages, as answers, are the extractive reference "
                "beside each metric", default_doc="sample/evidence.json for the bundled Questions.csv, else none"),
        *cli.BOOTSTRAP,
        cli.THREADS,
    )


def build_parser() -> argparse.ArgumentParser:
    return cli.script_parser(
        "Score each strategy's answers (Dataset*.csv from ragstudy answer) against the oracle with BLEU, "
        "ROUGE-1/2/L/Lsum, METEOR and BERTScore, offline; write per-question scores, a summary with bootstrap CIs "
        "and paired comparisons (CSV + Markdown).", settings())


ScoreAnswersSettings = record("ScoreAnswersSettings", settings())  # the job's typed settings (docs/python.md)

