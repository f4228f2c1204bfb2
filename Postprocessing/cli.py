"""What every Postprocessing job shares on the command line: logging set-up and each shared flag (the results folder,
the questions and oracle, the bootstrap's ``--n-resamples/--seed/--confidence``, ...) declared once as a `Setting`
with its help and default. A script lists its settings (shared ones from here, its own beside them) and
`script_parser` builds its parser from them; help shows each default from the declaration (see docs/settings.md)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragstudy.io import TORCH_THREADS_DOC
from ragstudy.settings import VERBOSE, Setting, add_arguments

DEFAULT_RESULTS_DIR = Path("results")
DEFAULT_N_RESAMPLES = 10_000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95


def _resamples_problem(value: int) -> str | None:
    return None if value >= 1 else "must be at least 1"


def _confidence_problem(value: float) -> str | None:
    return None if 0.0 < value < 1.0 else "must be between 0 and 1"


def _default_budgets() -> str:
    from ragstudy.config import DEFAULT_BUDGETS
    from ragstudy.settings import format_value

    return f"config.json's, else {format_value(DEFAULT_BUDGETS)}"


# The shared flags. A script that gives one a narrower meaning says so with .but(help=..., default_doc=...).
RESULTS_DIR = Setting("results_dir", "results folder that `ragstudy answer|retrieve|chunks` and the scoring "
                                     "subcommands wrote "
                      "(Dataset files, rankings, chunks, config.json)", default=str(DEFAULT_RESULTS_DIR))
OUT_DIR = Setting("out_dir", "where the outputs go", default_doc="--results-dir")
QUESTIONS = Setting("questions", "the questions file (column questions)",
                    default_doc="the one the run used, from config.json, else ./Questions.csv")
ORACLE = Setting("oracle", "oracle answers (CSV with an 'oracle' column, one row per question)",
                 default_doc="Oracle.csv beside the questions file the run used")
EVIDENCE = Setting("evidence", "evidence file: sample/evidence.json format, or a CSV question_index,evidence[,pdf]")
STRATEGIES = Setting("strategies", "comma-separated strategy names",
                     default_doc="every strategy whose files the results folder holds")
BUDGETS = Setting("budgets", "comma-separated context budgets", kind="list", type=int, default_doc=_default_budgets)
FORMAT = Setting("format", "which Dataset files to read", choices=lambda: ("csv", "json"), default="csv")
ALLOW_PARTIAL = Setting("allow_partial", "use only the questions every strategy answered instead of failing",
                        kind="switch")
ALLOW_MIXED = Setting("allow_mixed_configurations", "compare files written by different configurations (retriever, "
                      "embedding, questions, LLM; see run_identity.json), with a warning", kind="switch")
NO_PLOT = Setting("no_plot", "skip the plots", kind="switch", aliases=("--no-plots",))
THREADS = Setting("threads", "torch CPU threads", type=int, default_doc=TORCH_THREADS_DOC)  # None: io.torch_threads
N_RESAMPLES = Setting("n_resamples", "bootstrap resamples", type=int, default=DEFAULT_N_RESAMPLES,
                      check=_resamples_problem)
SEED = Setting("seed", "bootstrap seed", type=int, default=DEFAULT_SEED)
CONFIDENCE = Setting("confidence", "confidence level of the intervals", type=float, default=DEFAULT_CONFIDENCE,
                     check=_confidence_problem)
BOOTSTRAP = (N_RESAMPLES, SEED, CONFIDENCE)
SHARED = (RESULTS_DIR, OUT_DIR, QUESTIONS, ORACLE, EVIDENCE, STRATEGIES, BUDGETS, FORMAT, ALLOW_PARTIAL, NO_PLOT,
          THREADS, *BOOTSTRAP, VERBOSE)


def dataset_settings(what: str) -> tuple[Setting, ...]:
    """The flags of a script that reads the chain's Dataset files: where they are, the questions and oracle they
    answer, which format, and whether a partial run is accepted. `what` says what the script does with the oracle
    (e.g. "scored against")."""
    return (RESULTS_DIR, OUT_DIR, QUESTIONS, ORACLE.but(help=f"Oracle.csv {what} (column oracle, one row per "
                                                               "question)"), FORMAT, ALLOW_PARTIAL, ALLOW_MIXED)


def setup_logging(verbose: bool = False) -> None:
    """The scoring, review, survey and report subcommands: INFO (or DEBUG) logs to stderr, results on stdout."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("kaleido", "choreographer", "logistro", "httpx", "urllib3", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)  # chatty at INFO


def script_parser(description: str, settings: Iterable[Setting] = ()) -> argparse.ArgumentParser:
    """A script's parser built from its `settings` (-v/--verbose added when they lack it; the runner reads it)."""
    formatter = argparse.RawDescriptionHelpFormatter if "\n" in description else argparse.HelpFormatter
    parser = argparse.ArgumentParser(description=description, formatter_class=formatter, allow_abbrev=False)
    return add_script_arguments(parser, settings)


def add_script_arguments(parser: argparse.ArgumentParser,
                         settings: Iterable[Setting]) -> argparse.ArgumentParser:
    """Add a script's `settings` (and -v/--verbose) to any parser, e.g. a subcommand's."""
    settings = tuple(settings)
    add_arguments(parser, settings if VERBOSE in settings else (*settings, VERBOSE))
    return parser


def describe(settings: Iterable[Setting]) -> list[dict[str, Any]]:
    """A script's declaration as rows (name, flag, yaml_key, type, default, choices, help, group), for docs."""
    return [item.describe() for item in settings]


def add_bootstrap_args(parser: argparse.ArgumentParser, seed_help: str = SEED.help) -> None:
    """``--n-resamples`` (>= 1), ``--seed`` and ``--confidence`` (between 0 and 1, exclusive), checked on parsing."""
    add_arguments(parser, bootstrap_settings(seed_help))


def bootstrap_settings(seed_help: str | None = None) -> tuple[Setting, ...]:
    """The bootstrap's three flags; `seed_help` when the seed also seeds something else."""
    return (N_RESAMPLES, SEED.but(help=seed_help) if seed_help else SEED, CONFIDENCE)
