"""Build the blinded human-review workbook: one row per question with the question, the oracle answer and
each strategy's answer as "Opzione 1/2/3" in an order shuffled per question (seeded, balanced, recorded in a
separate answer key), plus an empty ``interview_answers.xlsx`` for the raters' choices.

Run from the repository root::

    ragstudy review --results-dir results

Writes ``output.xlsx`` (for raters), ``answer_key.csv`` (NOT for raters) and ``interview_answers.xlsx``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from Postprocessing import cli, common, review
from ragstudy import results
from ragstudy.io import tell
from ragstudy.settings import Setting, record

logger = logging.getLogger(__name__)


def build_review(args: ReviewSettings) -> results.Written:
    """`ragstudy review`: load and check the Dataset files, draw the option orders, write the three files."""
    results_dir = Path(args.results_dir)
    args = common.resolve_inputs(args)
    out_dir = Path(args.out_dir or results_dir)
    questions, oracle = common.load_questions_and_oracle(Path(args.questions), Path(args.oracle))
    answers = common.load_all_answers(results_dir, questions, Path(args.questions), args.format,
                                      args.allow_mixed_configurations)
    indices = common.common_question_indices(answers, len(questions), allow_partial=args.allow_partial)
    if len(answers) < 2:
        logger.warning("Only %s present: the workbook will have a single option", answers[0].path.name)
    key = review.build_key(answers, indices, None if args.fixed_order else args.seed)
    review.write_review_files(out_dir, key, oracle, answers, args.raters)
    tell(f"Wrote {out_dir / review.WORKBOOK_NAME} ({len(key.rows)} questions, {len(answers)} options each, "
         f"order: {key.scheme}{'' if key.seed is None else f', seed {key.seed}'})\n"
         f"Wrote {out_dir / review.KEY_NAME} (answer key: keep it away from the raters)\n"
         f"Wrote {out_dir / review.TEMPLATE_NAME} ({args.raters} rater rows)")
    return results.written_by(out_dir, "review")


def settings() -> tuple[Setting, ...]:
    """This script's flags (shared ones from Postprocessing.cli)."""
    return (
        *cli.dataset_settings("shown to raters"),
        cli.SEED.but(help="seed of the per-question option order"),
        Setting("fixed_order", "no shuffling: the paper's order (Paragraph, Fixed-size, Blank-line) everywhere",
                kind="switch"),
        Setting("raters", "rater rows in interview_answers.xlsx", type=int, default=10),
    )


def build_parser() -> argparse.ArgumentParser:
    return cli.script_parser(
        "Build the blinded review workbook (output.xlsx), its answer key (answer_key.csv) and the empty rater "
        "sheet (interview_answers.xlsx) from the Dataset files of ragstudy answer.", settings())


ReviewSettings = record("ReviewSettings", settings())  # the job's typed settings (docs/python.md)

