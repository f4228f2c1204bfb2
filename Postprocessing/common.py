"""Shared pieces of the postprocessing scripts: the strategy table, loading and checking the files that
``evaluation_chain.py`` writes, and atomic writers.

Every loader fails loudly with the file and the row at fault: the paper's script silently mis-paired answers
with oracle rows when a row was dropped, which this module exists to prevent.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragstudy.io import atomic_save, atomic_write_text  # noqa: F401  (the scripts use them from here)

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS_DIR = Path("results")
DEFAULT_QUESTIONS = REPO_ROOT / "Questions.csv"
DEFAULT_ORACLE = REPO_ROOT / "Oracle.csv"
CLEANED_ORACLE_NAME = "Cleaned_Oracle.csv"
UNANSWERABLE_ORACLE = "Il contesto fornito non contiene la risposta."


@dataclass(frozen=True)
class Strategy:
    """A chunking strategy as the postprocessing sees it."""

    name: str  # registry name, as in the Dataset files' ``strategy`` column
    display: str  # name used in tables and plots
    stem: str  # file stem evaluation_chain.py writes


def _registered_strategies() -> tuple[Strategy, ...]:
    """The strategies of the chain's registry, in its order (paragraph, fixed-size, newline, then any added)."""
    from ragstudy import registry

    specs = [registry.get(name) for name in registry.available()]
    return tuple(Strategy(s.name, s.display_name or s.name, s.dataset_name) for s in specs)


STRATEGIES: tuple[Strategy, ...] = _registered_strategies()
STRATEGY_BY_NAME: dict[str, Strategy] = {s.name: s for s in STRATEGIES}
# paper: the survey always showed (Custom, FixedSize, NewLine) as Opzione 1/2/3.
PAPER_SURVEY_ORDER: tuple[str, ...] = ("paragraph", "fixed-size", "newline")


class DataError(ValueError):
    """An input file is missing, malformed, or inconsistent with another one."""


@dataclass(frozen=True)
class AnswerRow:
    """One answered question from a Dataset file."""

    question_index: int
    question: str
    answer: str


@dataclass(frozen=True)
class StrategyAnswers:
    """All rows of one strategy's Dataset file, validated against Questions.csv."""

    strategy: Strategy
    path: Path
    rows: tuple[AnswerRow, ...]

    def by_index(self) -> dict[int, AnswerRow]:
        return {row.question_index: row for row in self.rows}


def normalize_ws(text: str) -> str:
    """Collapse runs of whitespace: how question texts are compared across files."""
    return " ".join(text.split())


def _short(text: str, limit: int = 80) -> str:
    text = normalize_ws(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def csv_row(path: Path, i: int) -> str:
    """Where data row ``i`` (0-based) of a CSV is, as a spreadsheet shows it (header = row 1)."""
    return f"{path} row {i + 2}"


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def read_text_column(path: Path, column: str) -> list[str]:
    """The cells of one text column of a UTF-8 CSV; an empty cell or missing column is an error."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} not found")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    if column not in frame.columns:
        raise DataError(f"{path} has no column {column!r} (columns: {list(frame.columns)})")
    values = frame[column].tolist()
    for i, value in enumerate(values):
        if _is_missing(value):
            raise DataError(f"{csv_row(path, i)}: empty {column!r} cell; fill it or remove the row everywhere")
    return values


def load_questions_and_oracle(questions_path: Path, oracle_path: Path) -> tuple[list[str], list[str]]:
    """Questions.csv ``questions`` and Oracle.csv ``oracle``, which must have the same number of rows."""
    questions = read_text_column(questions_path, "questions")
    oracle = read_text_column(oracle_path, "oracle")
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
    found = {s.name: Path(results_dir) / f"{s.stem}.{fmt}" for s in STRATEGIES}
    found = {name: path for name, path in found.items() if path.is_file()}
    if not found:
        expected = ", ".join(f"{s.stem}.{fmt}" for s in STRATEGIES)
        raise DataError(f"no Dataset file in {results_dir} (expected one of {expected}); run evaluation_chain.py")
    return found


def _read_dataset_records(path: Path) -> tuple[list[dict[str, Any]], str]:
    """Raw records plus a label kind ('csv'|'json') used to name rows in errors."""
    if path.suffix == ".json":
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
        return data, "json"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    return frame.to_dict(orient="records"), "csv"


def load_strategy_answers(path: Path, strategy: Strategy, questions: Sequence[str],
                          questions_path: Path) -> StrategyAnswers:
    """Read one Dataset file and check every row against Questions.csv.

    Errors (naming file and row): missing column, non-integer or out-of-range or repeated ``question_index``,
    question text different from Questions.csv's row, empty answer, foreign ``strategy`` value.
    """
    path = Path(path)
    records, kind = _read_dataset_records(path)

    def where(i: int) -> str:
        return csv_row(path, i) if kind == "csv" else f"{path} item {i}"

    rows: list[AnswerRow] = []
    seen: dict[int, int] = {}
    for i, rec in enumerate(records):
        for key in ("question_index", "question", "answer"):
            if key not in rec:
                raise DataError(f"{where(i)}: no {key!r} field; is this a file written by evaluation_chain.py?")
        raw_index = rec["question_index"]
        try:
            qi = int(str(raw_index).strip())
        except ValueError:
            raise DataError(f"{where(i)}: question_index {raw_index!r} is not an integer") from None
        if not 0 <= qi < len(questions):
            raise DataError(
                f"{where(i)}: question_index {qi} is outside {questions_path} ({len(questions)} questions); "
                "the answers and Questions.csv do not belong together"
            )
        if qi in seen:
            raise DataError(f"{where(i)}: question_index {qi} repeats {where(seen[qi])}")
        seen[qi] = i
        question = "" if _is_missing(rec["question"]) else str(rec["question"])
        if normalize_ws(question) != normalize_ws(questions[qi]):
            raise DataError(
                f"{where(i)} (question_index {qi}): question {_short(question)!r} differs from "
                f"{csv_row(Path(questions_path), qi)} {_short(questions[qi])!r}"
            )
        if _is_missing(rec["answer"]):
            raise DataError(f"{where(i)} (question_index {qi}): empty answer; re-run that question")
        row_strategy = rec.get("strategy")
        if not _is_missing(row_strategy) and str(row_strategy) != strategy.name:
            raise DataError(f"{where(i)}: strategy {row_strategy!r}, but {path.name} holds {strategy.name!r}")
        rows.append(AnswerRow(qi, questions[qi], str(rec["answer"])))
    if not rows:
        raise DataError(f"{path} has no rows")
    return StrategyAnswers(strategy, path, tuple(rows))


def load_all_answers(results_dir: Path, questions: Sequence[str], questions_path: Path,
                     fmt: str = "csv") -> list[StrategyAnswers]:
    """Every Dataset file present in ``results_dir``, validated."""
    files = find_dataset_files(results_dir, fmt)
    return [load_strategy_answers(path, STRATEGY_BY_NAME[name], questions, questions_path)
            for name, path in files.items()]


def common_question_indices(answers: Sequence[StrategyAnswers], n_questions: int,
                            allow_partial: bool = False) -> list[int]:
    """The question indices every strategy answered, after checking that the sets are consistent.

    A run limited with ``--limit N`` answers the first N questions: a prefix of Questions.csv is accepted
    (and logged). A strategy lacking a question another strategy answered, or a hole inside the prefix, is an
    error naming the file and the question, unless ``allow_partial`` (then the intersection is used).
    """
    sets = {a.strategy.name: set(a.by_index()) for a in answers}
    union = set().union(*sets.values())
    problems = []
    for a in answers:
        missing = sorted(union - sets[a.strategy.name])
        if missing:
            others = [b.path.name for b in answers if missing[0] in sets[b.strategy.name]]
            problems.append(
                f"{a.path} has no answer for question_index {missing[0]} (Questions.csv row {missing[0] + 2})"
                f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''}, which {', '.join(others)} "
                "answered"
            )
    common = sorted(set.intersection(*sets.values()))
    if common and common != list(range(len(common))):
        hole = next(i for i in range(len(common)) if i not in set(common))
        problems.append(
            f"question_index {hole} (Questions.csv row {hole + 2}) is unanswered by every strategy although "
            f"later questions are answered: not a --limit run"
        )
    if problems:
        message = "; ".join(problems)
        if not allow_partial:
            raise DataError(message + ". Re-run the missing questions, or pass --allow-partial to score only "
                                      "the questions every strategy answered.")
        logger.warning("%s. Scoring the %d questions every strategy answered.", message, len(common))
    if not common:
        raise DataError("no question is answered by every strategy")
    if len(common) < n_questions:
        logger.warning("Scoring %d of %d questions (the others have no answers: a --limit run, or --allow-partial)", len(common),
                       n_questions)
    return common


def read_run_config(results_dir: Path) -> dict[str, Any]:
    """``config.json`` written by evaluation_chain.py, or {} (with a warning) when absent."""
    path = Path(results_dir) / "config.json"
    if not path.is_file():
        logger.warning("%s not found: run settings (profile, models) unknown", path)
        return {}
    with path.open(encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object")
    return data


def atomic_write_csv(path: Path, frame: pd.DataFrame) -> None:
    """``frame.to_csv(index=False)`` atomically, UTF-8."""
    atomic_write_text(Path(path), frame.to_csv(index=False))


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> str:
    """A GitHub-flavoured Markdown table; ``align`` is one char per column ('l' or 'r')."""
    align = align or "l" * len(headers)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "| " + " | ".join(sep) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"


def setup_logging(verbose: bool = False) -> None:
    """Scripts: INFO (or DEBUG) logs to stderr, results on stdout."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("kaleido", "choreographer", "logistro", "httpx", "urllib3", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)  # chatty at INFO


def run_script(build_parser, run, argv: Sequence[str] | None = None) -> int:
    """A Postprocessing script's main: parse, set up logging, run; bad input -> message on stderr, exit 2.

    `run(args)` may return an int exit code; anything else (None, a dict of outputs) means 0.
    """
    from ragstudy.errors import StudyInputError

    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    try:
        code = run(args)
    except (DataError, StudyInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return code if isinstance(code, int) else 0
