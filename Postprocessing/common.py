"""Loading and checking, for the Postprocessing scripts, the files that ``evaluation_chain.py`` writes: questions,
oracle, Dataset files (as ``ragstudy.results.Dataset``), the run's config; strategy names shown through the registry.

Every loader fails loudly with the file and the row at fault: the paper's script silently mis-paired answers
with oracle rows when a row was dropped, which this module exists to prevent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from ragstudy import registry, results
from ragstudy.errors import StudyInputError
from ragstudy.grid import records
from ragstudy.io import atomic_write_text, tell
from ragstudy.results import Dataset


logger = logging.getLogger(__name__)

CLEANED_ORACLE_NAME = results.CLEANED_ORACLE.name
# paper: the survey always showed (Custom, FixedSize, NewLine) as Opzione 1/2/3.
PAPER_SURVEY_ORDER: tuple[str, ...] = ("paragraph", "fixed-size", "newline")
UNREGISTERED_COLOR = "#999999"

# Bad input in the Postprocessing scripts is the same kind of error as in the chain.
DataError = StudyInputError


def display_name(name: str) -> str:
    """The registered strategy's display name, or `name` itself for a name no strategy registers."""
    spec = _spec(name)
    return spec.display_name if spec else name


def color(name: str) -> str:
    """The registered strategy's plot colour, or grey for a name no strategy registers."""
    spec = _spec(name)
    return spec.color if spec else UNREGISTERED_COLOR


def _spec(name: str) -> registry.StrategySpec | None:
    return registry.get(name) if name in registry.available() else None


def strategy_order(names: Iterable[str]) -> list[str]:
    """`names` in registry order, unregistered ones last by name."""
    order = {name: i for i, name in enumerate(registry.available())}
    return sorted(dict.fromkeys(names), key=lambda n: (order.get(n, len(order)), n))


def _short(text: str, limit: int = 80) -> str:
    return records.short(text, limit)


def csv_row(path: Path, i: int) -> str:
    """Where data row ``i`` (0-based) of a CSV is, as a spreadsheet shows it (header = row 1)."""
    return f"{path} row {i + 2}"


def read_text_column(path: Path, column: str) -> list[str]:
    """The cells of one text column of a UTF-8 CSV, strictly (see ragstudy.grid.records.read_text_csv)."""
    return list(records.read_text_csv(path, column).values)


def default_questions(results_dir: Path) -> Path:
    """The questions file the run used (config.json), else Questions.csv in the current folder."""
    recorded = results.read_config(results_dir).questions_path if (Path(results_dir) / results.CONFIG_NAME).is_file() \
        else None
    return recorded or Path("Questions.csv")


def resolve_inputs(args: Any) -> Any:
    """A job's settings with ``questions`` / ``oracle`` left unset filled in: the run's questions file, and Oracle.csv
    beside it."""
    questions = str(default_questions(Path(args.results_dir))) if args.questions is None else args.questions
    oracle = str(Path(questions).parent / "Oracle.csv") if args.oracle is None else args.oracle
    return replace(args, questions=questions, oracle=oracle)


def load_questions_and_oracle(questions_path: Path, oracle_path: Path) -> tuple[list[str], list[str]]:
    """Questions.csv ``questions`` and Oracle.csv ``oracle``, which must have the same number of rows."""
    questions = results.read_questions(questions_path)
    oracle = results.read_oracle(oracle_path)
    if len(questions) != len(oracle):
        n = min(len(questions), len(oracle))
        longer, extra = (questions_path, questions) if len(questions) > n else (oracle_path, oracle)
        raise DataError(
            f"{questions_path} has {len(questions)} rows but {oracle_path} has {len(oracle)}: they must be "
            f"parallel (row i answers question i). First unmatched: {csv_row(Path(longer), n)} "
            f"{_short(extra[n])!r}"
        )
    return questions, oracle


def find_dataset_files(results_dir: Path, fmt: str = "csv") -> dict[str, Path]:
    """The Dataset files present in ``results_dir``, keyed by strategy name, in registry order."""
    if fmt not in ("csv", "json"):
        raise ValueError(f"fmt must be 'csv' or 'json', not {fmt!r}")
    found = results.find_datasets(results_dir, prefer=fmt)
    found = {name: path for name, path in found.items() if path.suffix == f".{fmt}"}
    if not found:
        expected = ", ".join(f"{s.dataset_name}.{fmt}" for s in registry.specs())
        raise DataError(f"no Dataset file in {results_dir} (expected one of {expected}); run ragstudy answer")
    return found


def load_all_answers(results_dir: Path, questions: Sequence[str], questions_path: Path,
                     fmt: str = "csv", allow_mixed: bool = False) -> list[Dataset]:
    """Every Dataset file present in ``results_dir`` (this project's format or the paper's), each row checked
    against Questions.csv; files written by different configurations are refused unless ``allow_mixed``."""
    from ragstudy.grid.runidentity import check_compared, check_config

    check_config(results_dir)  # a hand-edited config.json is never scored as the run's
    files = find_dataset_files(results_dir, fmt)
    for note in check_compared(results_dir, list(files), lambda name: files[name], allow_mixed):
        logger.info("%s", note)
    answers = [results.read_dataset(path, name, questions, questions_path) for name, path in files.items()]
    paper = [a.path.name for a in answers if a.paper_format]
    if paper:
        logger.warning("%s: the paper's Dataset format (question, answer, contexts): rows matched to %s by "
                       "position; no sources recorded, so source-dependent metrics are not available",
                       ", ".join(paper), questions_path)
    return answers


def common_question_indices(answers: Sequence[Dataset], n_questions: int,
                            allow_partial: bool = False) -> list[int]:
    """The question indices every strategy answered, after checking that the sets are consistent.

    A run limited with ``--limit N`` answers the first N questions: a prefix of Questions.csv is accepted
    (and logged). A strategy lacking a question another strategy answered, or a hole inside the prefix, is an
    error naming the file and the question, unless ``allow_partial`` (then the intersection is used).
    """
    sets = {a.strategy: set(a.by_index()) for a in answers}
    union = set().union(*sets.values())
    problems = []
    for a in answers:
        missing = sorted(union - sets[a.strategy])
        if missing:
            others = [b.path.name for b in answers if missing[0] in sets[b.strategy]]
            problems.append(
                f"{a.path} has no answer for question_index {missing[0]} (the question on line {missing[0] + 2} of "
                f"the questions file){f' and {len(missing) - 1} more' if len(missing) > 1 else ''}, which "
                f"{', '.join(others)} answered"
            )
    common = sorted(set.intersection(*sets.values()))
    if common and common != list(range(len(common))):
        hole = next(i for i in range(len(common)) if i not in set(common))
        problems.append(
            f"question_index {hole} (the question on line {hole + 2} of the questions file) is unanswered by every "
            "strategy although later questions are answered: not a --limit run"
        )
    if problems:
        message = "; ".join(problems)
        if not allow_partial:
            raise DataError(message + ". Re-run ragstudy answer with the same settings for the strategies "
                                      "that lack answers (answers already in the cache are not generated again), "
                                      "or pass --allow-partial to score only the questions every strategy answered.")
        logger.warning("%s. Scoring the %d questions every strategy answered.", message, len(common))
    if not common:
        raise DataError("no question is answered by every strategy")
    if len(common) < n_questions:
        logger.warning("Scoring %d of %d questions (the others have no answers: a --limit run, or --allow-partial)",
                       len(common), n_questions)
    return common


def read_run_config(results_dir: Path) -> dict[str, Any]:
    """``config.json`` written by evaluation_chain.py as a dict, or {} (with a warning) when absent."""
    return dict(results.read_config(results_dir).raw)


def atomic_write_csv(path: Path, frame: pd.DataFrame) -> None:
    """``frame.to_csv(index=False)`` atomically, UTF-8."""
    atomic_write_text(Path(path), frame.to_csv(index=False))



def tell_report(report: str, out_dir: Path, seconds: float) -> None:
    """How a job ends: it tells its report, then one line saying where the outputs are and how long it took."""
    tell(f"{report}\noutputs in {out_dir} ({seconds:.0f} s)")
