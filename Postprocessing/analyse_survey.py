"""Analyse the raters' survey (``interview_answers.xlsx``): preference counts overall, per question and per
rater (with and without "Nessuna delle precedenti"), plots (PDF + PNG), a chi-square test against equal
preference, pairwise sign tests, Fleiss' kappa, and a Markdown summary.

Options are mapped back to strategies with ``answer_key.csv`` (written by preprocessing_files.py). Without a
key the paper's fixed order is assumed (Opzione 1/2/3 = Paragraph/Fixed-size/Blank-line) and the summary says so.

Run from the repository root::

    ragstudy survey --results-dir results
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from Postprocessing import cli, plots
from Postprocessing import survey as survey_lib
from Postprocessing.common import DataError
from Postprocessing.review import KEY_NAME, TEMPLATE_NAME, read_answer_key
from ragstudy import results
from ragstudy.io import atomic_write_text, tell
from ragstudy.settings import Setting, record

logger = logging.getLogger(__name__)


def analyse_survey(args: SurveySettings) -> results.Written:
    """`ragstudy survey`: read the survey (with the answer key, or the paper's order), write tables, plots and the
    summary; the files it wrote, with exit code 3 when the plots could not be written."""
    results_dir = Path(args.results_dir)
    out_dir = Path(args.out_dir or results_dir / "survey")
    answers_path = Path(args.answers or results_dir / TEMPLATE_NAME)
    key_path = Path(args.key or results_dir / KEY_NAME)
    key = None
    if args.no_key:
        logger.warning("--no-key: assuming the paper's fixed option order")
    elif key_path.is_file():
        key = read_answer_key(key_path)
    elif args.key:
        raise DataError(f"answer key {key_path} not found")
    else:
        logger.warning("No answer key at %s: assuming the paper's fixed order (Opzione 1/2/3 = Paragraph/"
                       "Fixed-size/Blank-line)", key_path)
    survey = survey_lib.read_survey(answers_path, key, skip_malformed=args.skip_malformed)
    overall = survey_lib.overall_table(survey)
    tests = survey_lib.survey_tests(survey)
    survey_lib.write_tables(out_dir, survey, overall, tests)
    written, plot_error = [], None
    if not args.no_plot:
        try:
            written = plots.write_figures(plots.survey_figures(survey), out_dir / "plots")
        except RuntimeError as exc:  # no Chrome: everything else is still written
            plot_error = str(exc)
    else:
        plot_error = "--no-plots given"
    report = survey_lib.markdown_summary(survey, overall, tests, written, plot_error, key_path if key else None)
    atomic_write_text(results.SURVEY_SUMMARY_MD.path(out_dir), report)
    tell(f"{report}\nOutputs in {out_dir}")
    if plot_error and not args.no_plot:
        logger.error("Plots not written: %s", plot_error)
        return results.written_by(out_dir, "survey", 3)
    return results.written_by(out_dir, "survey")


def settings() -> tuple[Setting, ...]:
    """This script's flags (shared ones from Postprocessing.cli)."""
    return (
        cli.RESULTS_DIR.but(help="folder holding interview_answers.xlsx and answer_key.csv"),
        Setting("answers", "raters' workbook", default_doc="<results-dir>/interview_answers.xlsx"),
        Setting("key", "answer key", default_doc="<results-dir>/answer_key.csv"),
        Setting("no_key", "ignore any key; assume the paper's fixed order", kind="switch"),
        cli.OUT_DIR.but(help="outputs", default_doc="<results-dir>/survey"),
        Setting("skip_malformed", "count malformed cells as unanswered (listed) instead of failing", kind="switch"),
        cli.NO_PLOT.but(help="skip the PDF/PNG plots"),
    )


def build_parser() -> argparse.ArgumentParser:
    return cli.script_parser(
        "Analyse interview_answers.xlsx (one row per rater, one column per question, cells 'Opzione k' or "
        "'Nessuna delle precedenti'): counts, plots (PDF+PNG), chi-square, sign tests, Fleiss' kappa.", settings())


SurveySettings = record("SurveySettings", settings())  # the job's typed settings (docs/python.md)

