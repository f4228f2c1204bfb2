"""What every Postprocessing script shares on the command line: logging set-up, the bad-input-exits-2 wrapper,
the results-folder flags, and the bootstrap flags ``--n-resamples/--seed/--confidence`` (defined and checked here
once)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError

DEFAULT_RESULTS_DIR = Path("results")
DEFAULT_N_RESAMPLES = 10_000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95

BuildParser = Callable[[], argparse.ArgumentParser]
Run = Callable[[argparse.Namespace], Any]


def setup_logging(verbose: bool = False) -> None:
    """Scripts: INFO (or DEBUG) logs to stderr, results on stdout."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("kaleido", "choreographer", "logistro", "httpx", "urllib3", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)  # chatty at INFO


def run_script(build_parser: BuildParser, run: Run, argv: Sequence[str] | None = None) -> int:
    """A Postprocessing script's main: parse, set up logging, run; bad input -> message on stderr, exit 2.

    `run(args)` may return an int exit code; anything else (None, a dict of outputs) means 0.
    """
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    try:
        code = run(args)
    except StudyInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return code if isinstance(code, int) else 0


def script_main(build_parser: BuildParser, run: Run) -> Callable[[Sequence[str] | None], int]:
    """The ``main(argv=None) -> exit code`` of a script made of `build_parser` and `run` (see run_script)."""

    def main(argv: Sequence[str] | None = None) -> int:
        return run_script(build_parser, run, argv)

    return main


def script_parser(description: str) -> argparse.ArgumentParser:
    """A script's parser with ``-v/--verbose`` (run_script reads it) and defaults shown in --help."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def add_dataset_args(parser: argparse.ArgumentParser, what: str) -> None:
    """The flags of a script that reads the chain's Dataset files: where they are, the questions and oracle they
    answer, which format, and whether a partial run is accepted. `what` says what the script does with them."""
    parser.add_argument("--results-dir", default=str(DEFAULT_RESULTS_DIR),
                        help="folder with Dataset*.csv|json and config.json")
    parser.add_argument("--out-dir", default=None, help="where outputs go (default: --results-dir)")
    parser.add_argument("--questions", help="Questions.csv (column questions; default: the one the run used, from "
                                            "config.json, else ./Questions.csv)")
    parser.add_argument("--oracle", help=f"Oracle.csv {what} (column oracle; default: Oracle.csv beside the "
                                         "questions file)")
    parser.add_argument("--format", choices=("csv", "json"), default="csv", help="which Dataset files to read")
    parser.add_argument("--allow-mixed-configurations", action="store_true",
                        help="score Dataset files written by different configurations (see run_identity.json), "
                             "with a warning")
    parser.add_argument("--allow-partial", action="store_true",
                        help="use only the questions every strategy answered instead of failing")


class _CheckedValue(argparse.Action):
    """Stores the value after `check`; a bad one stops the parser (exit 2) naming the flag as the user wrote it."""

    def __init__(self, *args: Any, check: Callable[[Any], str | None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.check = check

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        problem = self.check(values)
        if problem:
            parser.error(f"{option_string} {values}: {problem}")
        setattr(namespace, self.dest, values)


def _resamples_problem(value: int) -> str | None:
    return None if value >= 1 else "must be at least 1"


def _confidence_problem(value: float) -> str | None:
    return None if 0.0 < value < 1.0 else "must be between 0 and 1"


def add_bootstrap_args(parser: argparse.ArgumentParser, seed_help: str = "bootstrap seed") -> None:
    """``--n-resamples`` (>= 1), ``--seed`` and ``--confidence`` (between 0 and 1, exclusive), checked on parsing."""
    parser.add_argument("--n-resamples", type=int, default=DEFAULT_N_RESAMPLES, action=_CheckedValue,
                        check=_resamples_problem, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=seed_help)
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE, action=_CheckedValue,
                        check=_confidence_problem, help="confidence level of the intervals")
