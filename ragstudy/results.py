"""The results folder and the study's input tables: one owner for every file the chain writes and the scripts read.

Each file has its reader and writer here: Questions.csv and Oracle.csv (`read_questions`, `read_oracle`), the
Dataset files (`write_dataset` / `read_dataset`, which also reads the paper's own), `config.json` (`write_config` /
`read_config`; this module does not import the configuration, so reading one loads no plug-in family), chunk
exports, rankings, the derived tables (`TABLES`: `write_table` / `read_table`) and every other output
(`OUTPUT_GROUPS`, from which docs/outputs.md is generated). `open_run` opens a folder once; `ResultsFolder.prepare()`
takes a folder's lock before anything is written. See docs/metrics.md ("Results files"), docs/evaluation.md (the
paper's Dataset files) and docs/troubleshooting.md (how Questions.csv and Oracle.csv are read).
"""

from __future__ import annotations

import ast
import csv
import io
import json
import logging
import os
import re
import tokenize
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence

from ragstudy import registry
from ragstudy.errors import StudyInputError
from ragstudy.grid.records import (NOT_APPLICABLE, VARIANT_KEYS, AnsweringModel, DatasetRow, RetrievedParent, Source,
                                   Variant, normalize_ws, read_csv_text, read_text_csv, short)
from ragstudy.io import atomic_write_json, atomic_write_text, check_name, lock_folder, release_folder, sha256_file
from ragstudy.scoring import budget_metrics
from ragstudy.scoring.stats import CI_COLUMNS, HOLM_COLUMN
from ragstudy.text.chunks import ChunkedDocument
from ragstudy.text.textlayer import SourceText

logger = logging.getLogger(__name__)

QUESTION_COLUMN = "questions"
ORACLE_COLUMN = "oracle"
CONFIG_NAME = "config.json"
DATASET_COLUMNS = ("question_index", "question", "answer", "contexts", "sources", "strategy")
PAPER_DATASET_COLUMNS = ("question", "answer", "contexts")
CHUNK_COLUMNS = ("doc_id", "contents", "path", "start_end_idx", "metadata")


ROWS_NAMED = 3  # rows a warning names one by one (repeated questions, too long ones); it counts the rest


def read_questions(path: str | Path, limit: int | None = None) -> list[str]:
    """Questions from the `questions` column; errors name the file and line. Rows that repeat an earlier question
    (whitespace and case aside) are kept, with one warning that counts them and names the first few."""
    table = read_text_csv(path, QUESTION_COLUMN, "a CSV with a 'questions' column (pass --questions FILE)")
    questions = list(table.values[:limit] if limit else table.values)
    first_line: dict[str, int] = {}
    repeats: list[tuple[int, int, str]] = []  # (line, the earlier line it repeats, the question)
    for value, line in zip(questions, table.lines):  # a repeated row is answered and scored twice: say so
        earlier = first_line.setdefault(normalize_ws(value).casefold(), line)
        if earlier != line:
            repeats.append((line, earlier, value))
    if len(repeats) == 1:
        line, earlier, value = repeats[0]
        logger.warning("%s line %d repeats the question of line %d (%r): it is answered and scored twice; delete "
                       "one of the rows if that is not intended", table.path, line, earlier, value[:60])
    elif repeats:
        named = ", ".join(f"line {line} repeats line {earlier} ({short(value, 40)!r})"
                          for line, earlier, value in repeats[:ROWS_NAMED])
        more = f", and {len(repeats) - ROWS_NAMED:,} more" if len(repeats) > ROWS_NAMED else ""
        logger.warning("%s: %s rows repeat an earlier question (%s%s): each is answered and scored again; delete the "
                       "repeated rows if that is not intended", table.path, f"{len(repeats):,}", named, more)
    return questions


def warn_long_questions(path: str | Path, limit: int | None, count, max_tokens: int, model: str) -> list[int]:
    """Warn once about the questions (the first `limit` rows) longer than the `max_tokens` the embedding model reads
    (`count(text)`: its token count), which it cuts silently; returns their 0-based indices."""
    table = read_text_csv(path, QUESTION_COLUMN, "a CSV with a 'questions' column (pass --questions FILE)")
    values = table.values[:limit] if limit else table.values
    long = [(i, n) for i, n in ((i, count(text)) for i, text in enumerate(values)) if n > max_tokens]
    if len(long) == 1:
        (i, n), = long
        logger.warning("%s line %d: the question is %s tokens long and the embedding model %s reads %s: the rest is "
                       "cut from its query vector, so retrieval sees a cut question; shorten it", table.path,
                       table.lines[i], f"{n:,}", model, f"{max_tokens:,}")
    elif long:
        named = "; ".join(f"line {table.lines[i]}: {n:,} tokens" for i, n in long[:ROWS_NAMED])
        more = f"; and {len(long) - ROWS_NAMED:,} more" if len(long) > ROWS_NAMED else ""
        logger.warning("%s: %s questions are longer than the %s tokens the embedding model %s reads (%s%s): the rest "
                       "of each is cut from its query vector, so retrieval sees cut questions; shorten them",
                       table.path, f"{len(long):,}", f"{max_tokens:,}", model, named, more)
    return [i for i, _ in long]


def read_oracle(path: str | Path) -> list[str]:
    return list(read_text_csv(path, ORACLE_COLUMN, "a CSV with an 'oracle' column, one answer per question").values)


# ------------------------------------------------------------------------------------------------ Dataset files

@dataclass(frozen=True)
class Dataset:
    strategy: str
    path: Path
    rows: tuple[DatasetRow, ...]
    paper_format: bool = False  # rows matched to Questions.csv by position; no sources

    def by_index(self) -> dict[int, DatasetRow]:
        return {row.question_index: row for row in self.rows}


def dataset_paths(results_dir: Path, spec: registry.StrategySpec) -> tuple[Path, Path]:
    return Path(results_dir) / f"{spec.dataset_name}.json", Path(results_dir) / f"{spec.dataset_name}.csv"


def write_dataset(rows: Sequence[DatasetRow], output_dir: Path, dataset_name: str) -> list[Path]:
    """Write `<dataset_name>.json` and `.csv` (lists JSON-encoded in CSV cells), atomically."""
    json_path, csv_path = Path(output_dir) / f"{dataset_name}.json", Path(output_dir) / f"{dataset_name}.csv"
    records = [row.to_record() for row in rows]
    atomic_write_json(json_path, records)
    _write_csv(csv_path, [{**record, "contexts": json.dumps(record["contexts"], ensure_ascii=False),
                           "sources": json.dumps(record["sources"], ensure_ascii=False)} for record in records],
               DATASET_COLUMNS)
    return [csv_path, json_path]


def _write_csv(path: Path, rows: list[dict], columns: Sequence[str]) -> None:
    """`rows` as a CSV of `columns`, in order (UTF-8, atomic)."""
    import pandas as pd

    atomic_write_text(path, pd.DataFrame(rows, columns=list(columns)).to_csv(index=False))


def _read_text_rows(path: Path, columns: Sequence[str], missing: str) -> list[dict]:
    """A CSV export's rows, each cell as text; `missing` (naming `{missing}`) words a file lacking `columns`."""
    import pandas as pd

    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    lacking = [c for c in columns if c not in frame.columns]
    if lacking:
        raise StudyInputError(f"{path}: {missing.format(missing=lacking)}")
    return frame.to_dict("records")


def parse_list_cell(value: Any, where: str) -> list[str]:
    """A list cell: a JSON list, a Python list literal, or the NumPy-style `['a' 'b']` that `datasets` writes;
    Python's own parser would silently join `'a' 'b'` into one string, so each string literal is read alone."""
    if isinstance(value, list):
        return [str(v) for v in value]
    text = str(value).strip()
    if not text:
        return []
    try:
        parsed = json.loads(text)
        if isinstance(parsed, list):
            return [str(v) for v in parsed]
    except json.JSONDecodeError:
        pass
    if not (text.startswith("[") and text.endswith("]")):
        raise StudyInputError(f"{where}: contexts {short(text, 60)!r} is not a list")
    items: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text[1:-1]).readline):
            if token.type == tokenize.STRING:
                items.append(ast.literal_eval(token.string))
            elif token.string != "," and token.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER,
                                                            tokenize.INDENT, tokenize.DEDENT):
                raise ValueError(f"unexpected {token.string!r}")
    except (tokenize.TokenError, ValueError, SyntaxError) as exc:
        raise StudyInputError(f"{where}: contexts is not a list of strings ({exc})") from None
    return items


def _read_records(path: Path) -> tuple[list[dict[str, Any]], str]:
    """Records of a Dataset file and how to name them in messages ('row' for CSV lines, 'item' for JSON)."""
    if path.suffix == ".json":
        text = path.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            try:  # `datasets`' to_json writes JSON Lines
                data = [json.loads(line) for line in text.splitlines() if line.strip()]
            except json.JSONDecodeError as exc:
                raise StudyInputError(f"{path}: neither JSON nor JSON Lines ({exc})") from None
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise StudyInputError(f"{path}: expected a JSON list of records")
        return data, "json"
    text = read_csv_text(path)
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        records = []
        for record in reader:
            if None in record or any(v is None for v in record.values()):
                raise StudyInputError(f"{path} row {reader.line_num}: the number of fields differs from the "
                                      "header's; the file is damaged")
            records.append(record)
    except csv.Error as exc:
        raise StudyInputError(f"{path}: not valid CSV ({exc})") from None
    return records, "csv"


def _where(path: Path, kind: str, i: int) -> str:
    return f"{path} row {i + 2}" if kind == "csv" else f"{path} item {i}"


def _sources(value: Any, where: str) -> tuple[Source, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value or "[]")
        except json.JSONDecodeError as exc:
            raise StudyInputError(f"{where}: sources is not a JSON list ({exc})") from None
    if not isinstance(value, list):
        raise StudyInputError(f"{where}: sources is not a list")
    return tuple(Source(s.get("doc_id"), s.get("path"), s.get("page_start"), s.get("page_end")) for s in value)


def read_dataset(path: str | Path, strategy: str | None, questions: Sequence[str] | None, questions_path: str | Path = "",
                 require_answers: bool = True) -> Dataset:
    """Read and check one Dataset file, in this project's format or the paper's (`question, answer, contexts`,
    matched to Questions.csv by position). Every question must equal its Questions.csv row (whitespace normalised);
    with `questions` None (a reader that checks questions against another file, e.g. an evidence file) only the
    file's own consistency is checked. With `strategy` None the strategy is the registry's owner of the file name,
    else the one its rows name, else the file stem."""
    path = Path(path)
    records, kind = _read_records(path)
    if not records:
        raise StudyInputError(f"{path} has no rows")
    if strategy is None:
        spec = registry.by_dataset_name(path.stem)
        named = {str(r["strategy"]) for r in records if r.get("strategy")}
        strategy = spec.name if spec else named.pop() if len(named) == 1 else path.stem
    paper = "question_index" not in records[0]
    required = PAPER_DATASET_COLUMNS if paper else ("question_index", "question", "answer")
    rows: list[DatasetRow] = []
    seen: dict[int, int] = {}
    for i, record in enumerate(records):
        where = _where(path, kind, i)
        for key in required:
            if key not in record:
                raise StudyInputError(f"{where}: no {key!r} field; expected a Dataset file of ragstudy answer "
                                      f"(columns {', '.join(DATASET_COLUMNS)}) or of the paper's code "
                                      f"({', '.join(PAPER_DATASET_COLUMNS)})")
        index = i if paper else _question_index(record["question_index"], where)
        if questions is not None and not 0 <= index < len(questions):
            raise StudyInputError(f"{where}: question_index {index} is outside {questions_path} ({len(questions)} "
                                  "questions); the answers and the questions file do not belong together")
        if index in seen:
            raise StudyInputError(f"{where}: question_index {index} repeats {_where(path, kind, seen[index])}")
        seen[index] = i
        question = "" if record["question"] is None else str(record["question"])
        if questions is not None and normalize_ws(question) != normalize_ws(questions[index]):
            raise StudyInputError(f"{where} (question_index {index}): question {short(question)!r} differs from "
                                  f"{questions_path} row {index + 2} {short(questions[index])!r}")
        answer = "" if record["answer"] is None else str(record["answer"])
        if require_answers and not answer.strip():
            raise StudyInputError(f"{where} (question_index {index}): empty answer (the model answered nothing). "
                                  "Re-run ragstudy answer with the same settings: empty answers are never cached, "
                                  "so the model is asked again; if it stays empty, raise --max-new-tokens or check "
                                  "the prompt")
        row_strategy = record.get("strategy")
        if row_strategy not in (None, "") and str(row_strategy) != strategy:
            raise StudyInputError(f"{where}: strategy {row_strategy!r}, but {path.name} holds {strategy!r}")
        contexts = tuple(parse_list_cell(record.get("contexts", []), where))
        sources = None if paper else _sources(record.get("sources", []), where)
        if sources and len(sources) != len(contexts):
            raise StudyInputError(f"{where}: {len(contexts)} contexts but {len(sources)} sources")
        rows.append(DatasetRow(index, questions[index] if questions is not None else question, answer, contexts,
                               sources, strategy))
    if paper:
        logger.info("%s: the paper's format (no question_index, no sources): rows matched to %s by position",
                    path, questions_path)
    return Dataset(strategy, path, tuple(rows), paper_format=paper)


def _question_index(raw: Any, where: str) -> int:
    text = str(raw).strip()
    if not text.removeprefix("-").isdecimal() or text != str(int(text)):  # no "1.0", "+1" or "01"
        raise StudyInputError(f"{where}: question_index {raw!r} is not an integer")
    return int(text)


def dataset_files(results_dir: str | Path, stale: str = "warn", record: "RunRecord | None" = None) -> list[Path]:
    """Every `Dataset*.json` in `results_dir`, and each `Dataset*.csv` whose JSON twin is absent, by name; files
    left by an earlier run are reported as `check_stale_datasets` says (`stale`: "warn" or "error")."""
    folder = Path(results_dir)
    paths = sorted(folder.glob("Dataset*.json"))
    paths += [p for p in sorted(folder.glob("Dataset*.csv")) if not p.with_suffix(".json").is_file()]
    check_stale_datasets(folder, paths, stale, record)
    return paths


def find_datasets(results_dir: str | Path, prefer: str = "json", stale: str = "error") -> dict[str, Path]:
    """Dataset files present in `results_dir`, keyed by strategy name, in registry order (JSON or CSV). Files left
    by an earlier run are an error (`stale="error"`, for scoring) or a warning (`"warn"`)."""
    step = 1 if prefer == "json" else -1  # dataset_paths: (JSON, CSV)
    first = {spec.name: next((p for p in dataset_paths(results_dir, spec)[::step] if p.is_file()), None)
             for spec in registry.specs()}
    found = {name: path for name, path in first.items() if path is not None}
    check_stale_datasets(Path(results_dir), list(found.values()), stale)
    return found


STALE_SLACK_SECONDS = 2.0  # config.json's date has whole seconds; file times may be coarse too


def stale_datasets(results_dir: Path, paths: Sequence[Path], record: "RunRecord | None" = None
                   ) -> list[tuple[Path, str]]:
    """Dataset files among `paths` that the run config.json describes did not write, each with why; [] without a
    config.json (e.g. the paper's own files)."""
    path = Path(results_dir) / CONFIG_NAME
    if not path.is_file():
        return []
    raw = (record or read_config(results_dir)).raw  # a damaged config.json is an error naming it
    date = raw.get("date")
    try:
        started = datetime.fromisoformat(date).timestamp() if isinstance(date, str) and date else None
    except ValueError:
        raise StudyInputError(f"{path}: date {date!r} is not an ISO date (ragstudy answer writes one); fix or "
                              "delete the key") from None
    strategies = raw.get("strategies") if isinstance(raw.get("strategies"), list) else None
    by_file = {p.name: spec.name for spec in registry.specs() for p in dataset_paths(results_dir, spec)}
    found = []
    for path in paths:
        name = by_file.get(path.name)
        if raw.get("retrieval_only") or raw.get("chunks_only"):
            kind = "retrieval-only" if raw.get("retrieval_only") else "chunks-only"
            found.append((path, f"the last run ({raw.get('date')}) was {kind} and wrote no Dataset file"))
        elif strategies is not None and name is not None and name not in strategies:
            found.append((path, f"the last run ({raw.get('date')}) did not run {name} (it ran {', '.join(strategies)})"))
        elif started is not None and path.stat().st_mtime < started - STALE_SLACK_SECONDS:
            found.append((path, f"written before the last run started ({raw.get('date')})"))
    return found


def check_stale_datasets(results_dir: Path, paths: Sequence[Path], stale: str = "error",
                         record: "RunRecord | None" = None) -> None:
    """Dataset files from an earlier run in the same folder (`stale_datasets`) would be scored beside the new ones:
    an error (`stale="error"`) or a warning naming each file and why."""
    found = stale_datasets(results_dir, paths, record)
    if not found:
        return
    listed = "; ".join(f"{path.name}: {why}" for path, why in found)
    message = (f"{results_dir}: Dataset files left by an earlier run ({listed}); move or delete them, or write each "
               "run into its own --output-dir")
    if stale == "error":
        raise StudyInputError(f"{message}, so that runs are not compared as one")
    logger.warning("%s", message)


# ---------------------------------------------------------------------------------------------------- config

@dataclass(frozen=True)
class RunRecord:
    """What `config.json` holds: the resolved config plus facts of the run (PDF hashes, model labels), as written
    (`raw`; {} when there is no config.json). `config.StudyConfig.of_run(record)` parses the config."""

    raw: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def questions_path(self) -> Path | None:
        for key in ("questions_resolved", "questions"):
            value = self.raw.get(key)
            if value and Path(value).is_file():
                return Path(value)
        return None

    @property
    def answering_model(self) -> AnsweringModel | None:
        """The model that wrote the run's answers, as config.json records it (`answering_model`, written by
        llms.answering_model); None when the run recorded no LLM. A config.json written before that record: the
        served model (`llm_server_model`) when servers answered, else the `llm` setting and its label."""
        where = str(self.path or CONFIG_NAME)
        if "answering_model" in self.raw:
            return AnsweringModel.from_record(self.raw["answering_model"], where)
        if self.raw.get("llm_servers") and self.raw.get("llm_server_model"):
            name, urls = str(self.raw["llm_server_model"]), self.raw["llm_servers"]
            urls = [url.strip() for entry in (urls if isinstance(urls, list) else [urls])
                    for url in str(entry).split(",") if url.strip()]
            return AnsweringModel(name, name, "server", tuple((url, ()) for url in urls))
        models, labels = self.raw.get("models") or {}, self.raw.get("model_labels") or {}
        if not isinstance(models, dict) or not models.get("llm"):
            return None
        name = str(models["llm"])
        label = labels.get("llm") if isinstance(labels, dict) else None
        return AnsweringModel(name, str(label or name), str(self.raw.get("llm_engine") or ""))


class _Recordable(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


def write_config(output_dir: Path, config: _Recordable, extra: dict[str, Any]) -> Path:
    """config.json: `config.to_dict()` (a config.StudyConfig) plus the run's facts in `extra`."""
    path = Path(output_dir) / CONFIG_NAME
    atomic_write_json(path, {**config.to_dict(), **extra})
    return path


def read_config(results_dir: str | Path) -> RunRecord:
    """`config.json` of a results folder; an empty RunRecord (and a warning) when absent."""
    path = Path(results_dir) / CONFIG_NAME
    if not path.is_file():
        logger.warning("%s not found: run settings (profile, models) unknown; the scripts say which defaults they "
                       "assume", path)
        return RunRecord()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise StudyInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise StudyInputError(f"{path}: expected a JSON object")
    return RunRecord(raw, path)


def run_questions(results_dir: str | Path, questions: str | Path | None = None, allow_mismatch: bool = False,
                  flag: str = "--allow-questions-mismatch", record: RunRecord | None = None
                  ) -> tuple[list[str] | None, Path | None]:
    """Every question of the file a run's rows are numbered by, and that file: `questions` (a --questions flag) or
    the one config.json names; (None, None), with a warning, when neither names one (a hand-made folder). A file
    whose sha256 differs from config.json's `questions_sha256` would make scores silently wrong: an error unless
    `allow_mismatch` (then a warning). `record`: the folder's config.json already read (a Run's)."""
    record = record or read_config(results_dir)
    path = Path(questions) if questions else record.questions_path
    named = record.raw.get("questions_resolved") or record.raw.get("questions")
    if path is None and not named:
        logger.warning("%s records no questions file: evidence cannot be checked against the run's questions "
                       "(pass --questions FILE)", Path(results_dir) / CONFIG_NAME)
        return None, None
    if path is None:
        raise StudyInputError(f"{Path(results_dir) / CONFIG_NAME}: the run's questions file "
                              f"{named or '(not recorded)'} is not there; pass --questions FILE (the file the run used)")
    texts = read_questions(path)
    recorded = record.raw.get("questions_sha256")
    if recorded and sha256_file(path) != recorded:
        how = "is not the file" if questions else "has changed since the run: it is not the file"
        message = (f"{path} {how} the run in {results_dir} was numbered by (its sha256 differs from "
                   f"{CONFIG_NAME}'s questions_sha256 {recorded[:12]}…, run on {record.raw.get('questions')}), so "
                   "question_index would point at other questions")
        if not allow_mismatch:
            raise StudyInputError(f"{message}; pass the run's questions file, or {flag} if the rows are the same")
        logger.warning("%s (%s given: scoring anyway)", message, flag)
    return texts, path


def run_oracle(results_dir: str | Path, oracle: str | Path | None = None, record: RunRecord | None = None
               ) -> tuple[list[str], Path] | None:
    """The oracle answers of a run and their file: `oracle` (an --oracle flag), else `Oracle.csv` beside the
    questions file config.json names (never a file elsewhere, such as the repository's sample); None when there is
    none. `record`: the folder's config.json already read (a Run's)."""
    record = record or read_config(results_dir)
    questions_path = record.questions_path
    if oracle:
        path = Path(oracle)
    elif questions_path is not None and (questions_path.parent / "Oracle.csv").is_file():
        path = questions_path.parent / "Oracle.csv"
    else:
        return None
    return oracle_answers(path, questions_path), path


def oracle_answers(path: Path, questions_path: Path | None) -> list[str]:
    """The oracle answers in `path`, one per question of `questions_path` (when known), else an error naming both."""
    answers = read_oracle(path)
    if questions_path is not None:
        count = len(read_questions(questions_path))
        if count != len(answers):
            raise StudyInputError(f"{path}: {len(answers)} oracle answers but the run's questions file {questions_path} "
                                  f"has {count} questions; the oracle needs one answer per question, in the same "
                                  "order (pass --oracle FILE with the run's oracle)")
    return answers


# ----------------------------------------------------------------------------------------------- chunk exports

def write_chunks(chunked: Sequence[ChunkedDocument], strategy: str, output_dir: Path) -> tuple[Path, Path]:
    """Write `chunks_<strategy>.csv` and `sources_<strategy>.jsonl` (the texts start_end_idx points into)."""
    csv_path, sources_path = Path(output_dir) / f"chunks_{strategy}.csv", Path(output_dir) / f"sources_{strategy}.jsonl"
    _write_csv(csv_path, [{
        "doc_id": chunk.doc_id, "contents": chunk.contents, "path": chunk.path,
        "start_end_idx": json.dumps([chunk.start, chunk.end]),
        "metadata": json.dumps({"page_start": chunk.page_start, "page_end": chunk.page_end, "strategy": chunk.strategy,
                                "source_sha256": item.source.sha256, **chunk.extra}, ensure_ascii=False),
    } for item in chunked for chunk in item.chunks], CHUNK_COLUMNS)
    atomic_write_text(sources_path, "".join(
        json.dumps(item.source.to_record(), ensure_ascii=False) + "\n" for item in chunked))
    return csv_path, sources_path


def chunks_folder(output_dir: str | Path, strategy: str) -> Path:
    """Where `strategy`'s chunk export is: `output_dir`, or, for a retrieval-only run's grid, the folder of the
    strategy's one variant (Run.strategy_folder)."""
    output_dir = Path(output_dir)
    if (output_dir / f"chunks_{strategy}.csv").is_file() or not VARIANTS.path(output_dir).is_file():
        return output_dir
    return Run(output_dir).strategy_folder(strategy)


def read_chunk_rows(output_dir: Path, strategy: str) -> list[dict]:
    """`chunks_<strategy>.csv` alone: rows with start_end_idx and metadata decoded (no source texts)."""
    output_dir = chunks_folder(output_dir, strategy)
    csv_path = output_dir / f"chunks_{strategy}.csv"
    if not csv_path.is_file():
        raise StudyInputError(f"{csv_path} not found: run `ragstudy chunks --output-dir {output_dir}` first")
    records = _read_text_rows(csv_path, CHUNK_COLUMNS, "no column(s) {missing}; not a chunk export of "
                              "`ragstudy chunks`")
    for i, record in enumerate(records):
        try:
            record["start_end_idx"] = tuple(json.loads(record["start_end_idx"]))
            record["metadata"] = json.loads(record["metadata"])
        except json.JSONDecodeError as exc:
            raise StudyInputError(f"{csv_path} row {i + 2}: unreadable start_end_idx or metadata ({exc})") from None
        if not isinstance(record["metadata"], dict) or len(record["start_end_idx"]) != 2:
            raise StudyInputError(f"{csv_path} row {i + 2}: metadata must be a JSON object and start_end_idx a "
                                  "[start, end] pair; not a chunk export of `ragstudy chunks`")
    return records


def read_chunks(output_dir: Path, strategy: str) -> tuple[list[dict], dict[str, SourceText]]:
    """Read back an export: rows (with start_end_idx and metadata decoded) and source texts by path."""
    output_dir = chunks_folder(output_dir, strategy)
    rows = read_chunk_rows(output_dir, strategy)
    with open(output_dir / f"sources_{strategy}.jsonl", encoding="utf-8") as handle:
        sources = [SourceText.from_record(json.loads(line)) for line in handle]
    return rows, {source.path: source for source in sources}


def exported_strategies(results_dir: str | Path) -> list[str]:
    """Strategies with a chunk export in `results_dir`: registered ones in registry order, then others by name."""
    return _named_strategies(results_dir, "chunks_")


def _named_strategies(results_dir: str | Path, prefix: str, leave_out: Iterable[str] = ()) -> list[str]:
    """The `<strategy>` of each `<prefix><strategy>.csv` in `results_dir` (but the files `leave_out` names):
    registered strategies in registry order, then others by name."""
    leave_out = set(leave_out)
    names = [p.name[len(prefix):-len(".csv")] for p in Path(results_dir).glob(f"{prefix}*.csv")
             if p.name not in leave_out]
    order = {name: i for i, name in enumerate(registry.available())}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


# -------------------------------------------------------------------------------- rankings of retrieval-only runs

RETRIEVAL_COLUMNS = ("question_index", "rank", "doc_id", "path", "page_start", "page_end", "score", "in_k",
                     "contents")


def retrieval_path(output_dir: str | Path, strategy: str) -> Path:
    return Path(output_dir) / f"retrieval_{strategy}.csv"


def write_retrieval(rows: Sequence[RetrievedParent], output_dir: str | Path, strategy: str) -> Path:
    """Write `retrieval_<strategy>.csv` (RETRIEVAL_COLUMNS, one row per ranked parent)."""
    path = retrieval_path(output_dir, strategy)
    _write_csv(path, [row.to_dict() for row in rows], RETRIEVAL_COLUMNS)
    return path


def read_retrieval(path: str | Path) -> dict[int, list[RetrievedParent]]:
    """`retrieval_<strategy>.csv` -> question_index -> parents in rank order; errors name the file and row."""
    path = Path(path)
    if not path.is_file():
        raise StudyInputError(f"{path}: not found; run `ragstudy retrieve` first")
    result: dict[int, list[RetrievedParent]] = {}
    records = _read_text_rows(path, RETRIEVAL_COLUMNS, "missing columns {missing}; is it a retrieval file of "
                              "`ragstudy retrieve`?")
    for i, row in enumerate(records):
        try:
            parent = RetrievedParent.from_dict(row)
        except ValueError as exc:  # every cell is read as text: a bad number is a ValueError
            raise StudyInputError(f"{path} row {i + 2}: {exc}") from exc
        result.setdefault(parent.question_index, []).append(parent)
    for question, parents in result.items():
        parents.sort(key=lambda p: p.rank)
        if [p.rank for p in parents] != list(range(1, len(parents) + 1)):
            raise StudyInputError(f"{path}: question_index {question} has ranks {[p.rank for p in parents]}, "
                                  "expected 1..n; the file was edited or comes from two runs")
    return result


def ranked_strategies(results_dir: str | Path) -> list[str]:
    """Strategies with a `retrieval_<strategy>.csv` in `results_dir`, registered ones in registry order first; the
    declared tables (retrieval_summary.csv, ...) and their former names are not rankings."""
    return _named_strategies(results_dir, "retrieval_",
                             [*TABLES, *(t.formerly[0] for t in TABLES.values() if t.formerly)])


# ------------------------------------------------------------------------------------------------ derived tables

@dataclass(frozen=True)
class Table:
    """A derived table of a results folder: its file name, the columns it has, and who writes it."""

    name: str
    columns: tuple[str, ...]
    writer: str  # the command that writes it, for messages
    text_columns: tuple[str, ...] = ()  # read as text whatever pandas would guess (budget labels "500", "k")
    subdir: str = ""  # looked for in <results>/<subdir>/ too
    then_axes: bool = False  # one column per axis of the grid follows (ragstudy.grid.axes)
    all_text: bool = False  # every column read as text (variants.csv: ids, strategies, the axes' values)
    formerly: tuple[str, str, str] | None = None  # (old name, old column, new column): still read, for one release
    finite: tuple[str, ...] = ()  # columns whose every value is a finite number (read_table refuses inf, NaN, text)
    finite_after: bool = False  # so is every numeric column after the declared ones (one per metric)
    damaged: str = ""  # what to do with a damaged file when re-running its writer is not it (the writer reads it)

    def path(self, folder: str | Path) -> Path:
        return Path(folder) / self.name


_RETRIEVAL_EVAL = "ragstudy score-retrieval --results-dir RESULTS"
_METRICS = "ragstudy score-answers --results-dir RESULTS"
_SWEEP = "ragstudy sweep SWEEP.yaml --output-dir RESULTS"
_SURVEY = "ragstudy survey --results-dir RESULTS"
_CHUNK_QUALITY = "ragstudy chunk-quality --results-dir RESULTS"
# a table's columns: every column it always has, in order; tables whose further columns depend on the run (one
# per metric, budget or survey category) say which in a comment, and keep those after the declared ones
_SUMMARY = ("n", "mean", "ci_low", "ci_high", *CI_COLUMNS)  # a mean and its CI, and how the CI was made
_PAIRED = ("n", "mean_diff", "ci_low", "ci_high", "p_wilcoxon")

RETRIEVAL_PER_QUESTION = Table("retrieval_per_question.csv", (
    "strategy", "budget", "question_index", *budget_metrics.columns(builtin=True), "parents"), _RETRIEVAL_EVAL, ("budget",))
RETRIEVAL_SUMMARY = Table("retrieval_summary.csv", ("strategy", "strategy_display", "budget", "metric", *_SUMMARY),
                          _RETRIEVAL_EVAL, ("budget",))
RETRIEVAL_PAIRED = Table("retrieval_paired.csv", (
    "budget", "metric", "strategy_a", "strategy_b", *_PAIRED, HOLM_COLUMN, *CI_COLUMNS), _RETRIEVAL_EVAL, ("budget",))
RETRIEVAL_VERDICT = Table("retrieval_verdict.csv", (
    "metric", "unit", "reference", "alpha", "confidence", "budget", "role", "strategy", "strategy_display", "n",
    "value", "ci_low", "ci_high", HOLM_COLUMN, "significant", "n_min", "n_max"), _RETRIEVAL_EVAL,
    ("budget", "reference", "strategy", "strategy_display"))  # its roles: ragstudy.scoring.verdict.Verdict.to_frame
RETRIEVAL_VERDICT_ACROSS = Table("retrieval_verdict_across.csv", (
    "group", "metric", "unit", "reference", "budget", "n_min", "n_max", "best", "best_display", "best_value",
    "best_ci_low", "best_ci_high", "reference_value", "changes"), _RETRIEVAL_EVAL,
    ("group", "budget", "reference", "best", "best_display", "changes"),
    formerly=("retrieval_verdict_by_retriever.csv", "retriever", "group"))  # then `<field>:<strategy>` per other
# strategy (ragstudy.scoring.verdict_across.CrossVerdict.to_frame); one row per group of variants x budget
RETRIEVAL_DECOMPOSITION = Table("retrieval_decomposition.csv", (
    "budget", "metric", "part", "n", "mean_diff", "ci_low", "ci_high", "p_wilcoxon"), _RETRIEVAL_EVAL,
    ("budget",))  # ragstudy.scoring.decomposition (--text-layer raw,clean; a first column `group` with several pairs)
VARIANTS = Table("variants.csv", VARIANT_KEYS, "ragstudy retrieve --output-dir RESULTS",
                 then_axes=True, all_text=True, damaged="move it away (e.g. to variants.csv.bad), then re-run the "
                 "`ragstudy retrieve` that made RESULTS, with the settings its config.json records: it lists that "
                 "grid's variants again and computes none that finished")  # a row per variant (ragstudy.grid.variants)
SWEEP_FIXED_COLUMNS = ("config", "strategy", "params", "chunks", "chars_mean", "chars_cv", "index_seconds",
                       "embedded", "reused")  # then one column per axis (ragstudy.grid.axes), <metric>@<budget>
SWEEP_SUMMARY = Table("sweep_summary.csv", SWEEP_FIXED_COLUMNS, _SWEEP, then_axes=True)
SWEEP_BEST = Table("sweep_best.csv", ("metric", "budget", "config", "strategy", "params", "value"), _SWEEP,
                   ("budget",))
# the answer metrics' tables: the scores and their intervals are finite numbers (a hand-edited inf or NaN is refused)
_ESTIMATE = ("n", "mean", "ci_low", "ci_high")
METRICS_SUMMARY = Table("metrics_summary.csv", ("strategy", "strategy_display", "metric", *_SUMMARY), _METRICS,
                        finite=_ESTIMATE)
METRICS_PAIRED = Table("metrics_paired.csv", ("strategy_a", "strategy_b", "metric", *_PAIRED, "p_bootstrap",
                                              HOLM_COLUMN, *CI_COLUMNS), _METRICS,
                       finite=("n", "mean_diff", "ci_low", "ci_high"))
METRICS_BASELINES = Table("metrics_baselines.csv", (
    "strategy", "strategy_display", "metric", "baseline", "n", "mean", "ci_low", "ci_high", "llm_mean", "diff",
    "diff_ci_low", "diff_ci_high", "p_wilcoxon", "llm_above", *CI_COLUMNS), _METRICS,
    ("baseline",), finite=_ESTIMATE)  # Postprocessing.answer_baselines: shuffled_oracle floor, context_copy,
# evidence reference; llm_mean, diff ... are empty for a corpus-level metric
METRICS_PER_QUESTION = Table("metrics_per_question.csv", ("strategy", "strategy_display", "question_index"),
                             _METRICS, finite=("question_index",), finite_after=True)  # then one per answer metric
ANSWER_GROUPS = Table("answer_groups.csv", ("group", "llm", "model", "folder"), "ragstudy answer --llm A,B "
                      "--output-dir RESULTS", ("group", "llm", "model", "folder"))  # one row per LLM (llm_axis)
ANSWER_VERDICT_ACROSS = Table("answer_verdict_across.csv", (
    "group", "model", "metric", "signal", "best", "best_display", "best_mean", "best_ci_low", "best_ci_high",
    "runner_up", "diff", "diff_ci_low", "diff_ci_high", "p_holm", "significant"), _METRICS,
    ("group", "model", "best", "best_display", "runner_up"))  # Postprocessing.answer_across: per LLM and metric
# its signal check passed on, the best strategy and its lead over the runner-up
CHUNK_QUALITY = Table("chunk_quality.csv", ("strategy", "group", "metric", "n", "mean", "ci_low", "ci_high",
                                            "failures", "note", *CI_COLUMNS), _CHUNK_QUALITY)
CHUNK_QUALITY_CHUNKS = Table("chunk_quality_chunks.csv", ("strategy",), _CHUNK_QUALITY)  # then one per chunk fact
CHUNK_QUALITY_QUESTIONS = Table("chunk_quality_questions.csv", ("strategy",), _CHUNK_QUALITY)  # then per metric
CHUNK_QUALITY_HOPE = Table("chunk_quality_hope.csv", ("strategy",), _CHUNK_QUALITY)  # then one per HOPE item fact
CHUNK_QUALITY_CORRELATION = Table("chunk_quality_correlation.csv", ("chunk_metric", "answer_metric", "n", "rho",
                                                                    "p"), _CHUNK_QUALITY)
SURVEY_OVERALL = Table("survey_counts_overall.csv", ("category", "count", "share_all", "share_without_none"),
                       _SURVEY, subdir="survey")
SURVEY_PER_QUESTION = Table("survey_counts_per_question.csv", ("question_id",), _SURVEY,
                            subdir="survey")  # then one column per category
SURVEY_PER_RATER = Table("survey_counts_per_rater.csv", ("rater",), _SURVEY, subdir="survey")  # then per category
SURVEY_CHOICES = Table("survey_choices.csv", ("rater", "question_id", "question_index", "category", "cell"),
                       _SURVEY, subdir="survey")
SURVEY_PAIRWISE = Table("survey_pairwise_tests.csv", ("strategy_a", "strategy_b", "count_a", "count_b", "n",
                                                      "share_a", "p_sign", HOLM_COLUMN), _SURVEY, subdir="survey")

TABLES = {t.name: t for t in list(globals().values()) if isinstance(t, Table)}  # every Table declared above


@dataclass(frozen=True)
class Output:
    """A file the project writes that is not a derived table (a run's records, a Markdown summary, a workbook, a
    plot, a lock): its name (`<strategy>`-style placeholders where it varies), who writes it and what it holds;
    `also`: the same stem with these suffixes too; `subdir`: where in the folder; `columns`: a CSV's columns."""

    name: str
    writer: str
    holds: str = ""
    subdir: str = ""
    also: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()

    def path(self, folder: str | Path) -> Path:
        return Path(folder) / self.name

    @property
    def stem(self) -> str:
        return Path(self.name).stem

    @property
    def names(self) -> tuple[str, ...]:
        """Every file name it stands for (`also` included)."""
        return (self.name, *(self.stem + suffix for suffix in self.also))

    def matches(self, path: str | Path) -> bool:
        """True when `path` (relative to the folder written into) is one of this output's files: a placeholder
        stands for any name, and the file lies in `subdir` when it has one."""
        path = Path(path)
        if self.subdir and not path.parent.as_posix().endswith(self.subdir):
            return False
        return any(re.fullmatch(re.sub(r"<[^>]+>", lambda _: "[^/]+", re.escape(name)), path.name)
                   for name in self.names)


_CHAIN = "ragstudy answer --output-dir RESULTS"
_RETRIEVAL_ONLY = "ragstudy retrieve --output-dir RESULTS"
_REVIEW = "ragstudy review --results-dir RESULTS"
_REPORT = "ragstudy report --results-dir RESULTS"
_STUDY = "ragstudy study --output-dir RESULTS"
_MAKE_QA = "ragstudy make-qa --out QA"

# a run's folder (the chain: answers, retrieval-only rankings, chunk exports)
DATASET_FILES = Output("Dataset<Name>.csv", _CHAIN, "each question's answer, its contexts and their sources, one "
                       "file per strategy (the paper's Dataset files; the .json as a list of records)",
                       also=(".json",), columns=DATASET_COLUMNS)
CHUNK_EXPORT = Output("chunks_<strategy>.csv", _CHAIN, "every chunk of a strategy, with where it came from",
                      columns=CHUNK_COLUMNS)
SOURCE_TEXTS = Output("sources_<strategy>.jsonl", _CHAIN, "per PDF, the text `start_end_idx` points into and each "
                      "page's offset")
RANKINGS = Output("retrieval_<strategy>.csv", _RETRIEVAL_ONLY, "every question's ranked parents, deep enough for "
                  "the largest budget", columns=RETRIEVAL_COLUMNS)
RUN_CONFIG = Output(CONFIG_NAME, _CHAIN, "the resolved settings and the run's facts (PDF hashes, model labels; for "
                    "an answering run, `answering_model`: the model that answered, served or in-process, with each "
                    "server's GET /v1/models list); a retrieval-only run writes one in its folder and one in each "
                    "`variants/<id>/` folder")
RUN_IDENTITY = Output("run_identity.json", _CHAIN, "the identity of the configuration that wrote each file of the "
                      "folder (ragstudy.grid.runidentity): a run refuses to write beside another configuration's "
                      "files; each Dataset file's entry also names the model that answered (`answering_model`)")
RUN_LOCK = Output(".ragstudy-run.lock", _CHAIN, "held while a run writes into the folder (one run at a time)")
VARIANT_DONE_FILE = Output("variant.done.json",
                           "ragstudy.grid.executors (every executor: in-process, --workers, --ray)",
                           "written last into a variant's folder once its run finished, with the variant's key (a "
                           "sha256 of its settings, questions, documents and code); a re-run skips the variants whose "
                           "marker carries their key and computes the others again")
VARIANT_RUN = Output("variant_run.json", _RETRIEVAL_ONLY, "what one variant's run did: chunks, their length, "
                     "vectors embedded and reused, seconds per stage; in `variants/<id>/`, each variant's complete "
                     "run folder (its config.json, run identity, chunk tables and rankings)")
SWEEP_PLOT = Output("sweep_hit_rate.html", _SWEEP, "hit rate against the budget, one line per configuration "
                    "(PDF and PNG when a Chromium is installed); each configuration's own run folder is "
                    "`variants/<config>/`", also=(".pdf", ".png"))
# the scripts' summaries, records and plots
RETRIEVAL_SUMMARY_MD = Output("retrieval_summary.md", _RETRIEVAL_EVAL, "the retrieval scores and the verdict, as "
                              "printed")
RETRIEVAL_PLOT = Output("retrieval_hit_rate.html", _RETRIEVAL_EVAL, "hit rate against the budget per strategy "
                        "(PDF and PNG when a Chromium is installed)", also=(".pdf", ".png"))
METRICS_SUMMARY_MD = Output("metrics_summary.md", _METRICS, "the answer metrics and their floors, as printed")
METRICS_RUN = Output("metrics_run.json", _METRICS, "what the answer scores were computed with")
ANSWER_VERDICT_ACROSS_MD = Output("answer_verdict_across.md", _METRICS, "with several LLMs (`--llm a,b`): per LLM the "
                                  "best strategy on each metric with signal, and whether it changes across the LLMs")
CLEANED_ORACLE = Output("Cleaned_Oracle.csv", _METRICS, "the oracle answers cleaned for scoring, beside the "
                        "oracle file (not in the results folder)")
CHUNK_QUALITY_MD = Output("chunk_quality.md", _CHUNK_QUALITY, "the chunk statistics, retrieval at own k and HOPE, "
                          "as printed")
CHUNK_QUALITY_RUN = Output("chunk_quality_run.json", _CHUNK_QUALITY, "what the chunk quality was computed with, "
                           "and its notes")
REVIEW_WORKBOOK = Output("output.xlsx", _REVIEW, "the blinded review workbook for the raters: each question, the "
                         "oracle and the answers in shuffled order, no strategy names")
ANSWER_KEY = Output("answer_key.csv", _REVIEW, "which strategy is behind each option of each question (NOT for "
                    "the raters)")
SURVEY_TEMPLATE = Output("interview_answers.xlsx", _REVIEW, "the empty sheet the raters fill: one row per rater, "
                         "one column per question")
SURVEY_SUMMARY_MD = Output("survey_summary.md", _SURVEY, "the raters' preferences and their tests, as printed",
                           subdir="survey")
SURVEY_PLOTS = Output("<figure>.pdf", _SURVEY, "the survey's figures (pies, bars per question and rater)",
                      subdir="survey/plots", also=(".png",))
REPORT_HTML = Output("report.html", _REPORT, "one self-contained page, the verdict first", also=(".md",))
# `ragstudy study`: the answering run in answers/, the retrieval-only run in retrieval/, these at the top
STUDY_LEDGER = Output("study.json", _STUDY, "each stage's inputs key and the files it wrote (their sha256): a "
                      "re-run recomputes only the stages whose inputs changed")
STUDY_LOG = Output("study.log", _STUDY, "every stage's own output")
STUDY_LOCK = Output(".ragstudy-study.lock", _STUDY, "held while a study runs in the folder")
# make-qa's draft question set, for review
QA_QUESTIONS = Output("Questions.csv", _MAKE_QA, "the accepted questions (column questions)")
QA_ORACLE = Output("Oracle.csv", _MAKE_QA, "their reference answers (column oracle)")
QA_EVIDENCE = Output("evidence.csv", _MAKE_QA, "their verbatim evidence, placed on the text layer", columns=(
    "question_index", "question", "pdf", "page", "boundary", "evidence", "start_end_idx", "passage_kind"))
QA_SIDECAR = Output("make_qa.json", _MAKE_QA, "how the set was made (model, prompt, seed, filters, counts)")
QA_CANDIDATES = Output("candidates.jsonl", _MAKE_QA, "every candidate the LLM wrote and what the filters said")
QA_REPORT = Output("qa_report.md", _MAKE_QA, "the set's report (filters, strata, overlap with a reference set)")
QA_WORKBOOK = Output("review.xlsx", _MAKE_QA, "one row per candidate for a person to accept, edit or reject")

# every file the project writes besides the derived tables, grouped as docs/outputs.md lists them
RUN_FOLDER: tuple[Output, ...] = (DATASET_FILES, CHUNK_EXPORT, SOURCE_TEXTS, RANKINGS, RUN_CONFIG, RUN_IDENTITY,
                                  RUN_LOCK, VARIANT_RUN, VARIANT_DONE_FILE, SWEEP_PLOT)
OUTPUT_GROUPS: dict[str, tuple[Output, ...]] = {
    "A run's folder (`ragstudy answer`, `retrieve`, `chunks`, `sweep`)": RUN_FOLDER,
    "Scores, reviews and the report (`ragstudy score-retrieval`, `score-answers`, `chunk-quality`, `review`, "
    "`survey`, `report`)": (
        RETRIEVAL_SUMMARY_MD, RETRIEVAL_PLOT, METRICS_SUMMARY_MD, METRICS_RUN, ANSWER_VERDICT_ACROSS_MD,
        CLEANED_ORACLE, CHUNK_QUALITY_MD,
        CHUNK_QUALITY_RUN, REVIEW_WORKBOOK, ANSWER_KEY, SURVEY_TEMPLATE, SURVEY_SUMMARY_MD, SURVEY_PLOTS,
        REPORT_HTML),
    "A study's folder (`ragstudy study`: `answers/` and `retrieval/` are run folders)": (
        STUDY_LEDGER, STUDY_LOG, STUDY_LOCK),
    "A question set (`ragstudy make-qa --out QA`)": (
        QA_QUESTIONS, QA_ORACLE, QA_EVIDENCE, QA_SIDECAR, QA_CANDIDATES, QA_REPORT, QA_WORKBOOK),
}
OUTPUTS = {o.name: o for group in OUTPUT_GROUPS.values() for o in group}


def declared_output(path: str | Path) -> Table | Output | None:
    """The declaration of a file the project wrote (`path` relative to the folder written into): a derived table or
    an output; None for a file nothing declares."""
    return TABLES.get(Path(path).name) or next((o for o in OUTPUTS.values() if o.matches(path)), None)


RUN_COMMANDS = ("answer", "retrieve", "sweep", "chunks")  # the chain's jobs: each writes a run's folder


def writer_command(declared: Table | Output) -> str:
    """The subcommand a declaration names as its writer (`score-retrieval` for "ragstudy score-retrieval
    --results-dir RESULTS"); a file of a run's folder is the chain's (`answer`), whichever of its jobs wrote it."""
    if declared in RUN_FOLDER or declared in (VARIANTS, ANSWER_GROUPS):
        return RUN_COMMANDS[0]
    words = declared.writer.split()
    return words[1] if len(words) > 1 and words[0] == "ragstudy" else declared.writer


@dataclass(frozen=True)
class Written:
    """What a job wrote: the folder it wrote into and, by the declarations, every file under it that its command
    writes (hidden files, the locks, left out); `exit_code`: 0, or the job's own code for a part it could not
    write (a plot without Chromium)."""

    folder: Path
    files: tuple[Path, ...]
    exit_code: int = 0


def written_by(folder: str | Path, command: str, exit_code: int = 0) -> Written:
    """The files under `folder` that `ragstudy <command>` writes (a chain job: the run folder's files), by their
    declarations in TABLES and OUTPUT_GROUPS."""
    folder = Path(folder)
    command = RUN_COMMANDS[0] if command in RUN_COMMANDS else command
    files = []
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        rel = path.relative_to(folder)
        declared = declared_output(rel)
        if path.is_file() and declared is not None and not any(part.startswith(".") for part in rel.parts) \
                and writer_command(declared) == command:
            files.append(path)
    return Written(folder, tuple(files), exit_code)


def write_table(folder: str | Path, table: Table, frame) -> Path:
    """`frame` as `table` in `folder` (its declared columns first, in order; UTF-8, atomic)."""
    missing = [c for c in table.columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{table.name}: the frame lacks column(s) {missing}")
    extra = [c for c in frame.columns if c not in table.columns]
    path = table.path(folder)
    atomic_write_text(path, frame[[*table.columns, *extra]].to_csv(index=False))
    return path


def read_table(folder: str | Path, table: Table):
    """`table` from `folder` (or `folder/<subdir>`) as a DataFrame, or None when absent or empty; a file that is not
    a readable CSV or lacks a column is an error naming it and the command that writes it."""
    import pandas as pd

    candidates = (table.path(folder), table.subdir and table.path(Path(folder) / table.subdir),
                  table.formerly and Path(folder) / table.formerly[0])
    path = next((p for p in candidates if p and p.is_file()), None)
    if path is None:
        return None
    writer = table.writer.replace("RESULTS", str(folder))
    fix = table.damaged.replace("RESULTS", str(folder)) or f"re-run `{writer}`"  # never the command that reads it
    try:
        text = str if table.all_text else {c: str for c in table.text_columns}
        frame = pd.read_csv(path, encoding="utf-8", dtype=text)
        if table.formerly and path.name == table.formerly[0]:
            frame = frame.rename(columns={table.formerly[1]: table.formerly[2]})
    except pd.errors.EmptyDataError:
        logger.warning("%s is empty; treated as absent", path)
        return None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise StudyInputError(f"{path}: not a readable UTF-8 CSV ({exc}); {fix}") from exc
    missing = [c for c in table.columns if c not in frame.columns]
    if missing:
        raise StudyInputError(f"{path}: no column(s) {missing} (columns: {list(frame.columns)}); written by an "
                              f"older version? {fix[:1].upper()}{fix[1:]}")
    check_finite(frame, table, path, writer)
    return frame


def check_finite(frame, table: Table, path: Path, writer: str) -> None:
    """The columns `table` declares finite (and, with `finite_after`, its numeric columns after the declared ones)
    hold finite numbers: a hand-edited inf or NaN would be shown as a result."""
    import numpy as np
    import pandas as pd

    after = [c for c in frame.columns if c not in table.columns and pd.api.types.is_numeric_dtype(frame[c])]
    for column in [*table.finite, *(after if table.finite_after else [])]:
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            row, cell = int(bad[0]), frame[column].iloc[int(bad[0])]
            shown = repr(cell) if isinstance(cell, str) else str(cell)  # inf, nan (an empty cell too), 'text'
            raise StudyInputError(f"{path} row {row + 2}, column {column!r}: {shown} is not a finite number (edited "
                                  f"by hand?); re-run `{writer}`")


# ------------------------------------------------------------------------------------------- the run handle

class Run:
    """A finished run's results folder, opened once: its config.json (read and parsed once, on first use), its
    questions and oracle, its ranked strategies, variants and derived tables, each through the one reader of its file.
    Scripts take one (`open_run`) instead of re-reading config.json."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._questions: dict[tuple, tuple[list[str] | None, Path | None]] = {}
        self._variants: list[Variant] | None = None

    @cached_property
    def record(self) -> RunRecord:
        return read_config(self.path)

    @property
    def raw(self) -> dict[str, Any]:
        """config.json as written ({} when absent)."""
        return dict(self.record.raw)

    def questions(self, given: str | Path | None = None, allow_mismatch: bool = False,
                  flag: str = "--allow-questions-mismatch") -> tuple[list[str] | None, Path | None]:
        """`run_questions` with this run's config.json (read once per set of arguments)."""
        key = (str(given) if given else None, allow_mismatch, flag)
        if key not in self._questions:
            self._questions[key] = run_questions(self.path, given, allow_mismatch, flag, record=self.record)
        return self._questions[key]

    def oracle(self, given: str | Path | None = None) -> tuple[list[str], Path] | None:
        """`run_oracle` with this run's config.json."""
        return run_oracle(self.path, given, record=self.record)

    def ranked_strategies(self) -> list[str]:
        return ranked_strategies(self.path)

    def table(self, table: Table):
        return read_table(self.path, table)

    def variants(self) -> list[Variant]:
        """The variants of a retrieval-only run's grid (variants.csv), in order, read and checked once per handle; the
        one finder of variant folders, so a hand-edited or mixed folder is never scored under wrong labels."""
        if self._variants is None:
            found = read_variants(self.path)
            if not found:
                check_layout(self.path)
            for variant in found:
                folder = variant_folder(self.path, variant.id)
                if not folder.is_dir():
                    raise StudyInputError(f"{VARIANTS.path(self.path)}: lists variant {variant.id!r} but {folder} "
                                          "is missing; re-run the same `ragstudy retrieve` into the folder (finished "
                                          "work is cached)")
            check_variant_records(self.path, found)
            check_variant_documents(self.path, found)
            self._variants = found
        return list(self._variants)

    def strategy_folder(self, strategy: str) -> Path:
        """The folder holding `strategy`'s run: this folder when its rankings or chunks are here, else the folder of
        the strategy's one variant; a StudyInputError when the grid has none or several (name the variant then)."""
        if retrieval_path(self.path, strategy).is_file() or (self.path / f"chunks_{strategy}.csv").is_file():
            return self.path
        found = [v for v in self.variants() if v.strategy == strategy]
        if len(found) != 1:
            raise StudyInputError(f"{self.path}: {len(found)} variants of {strategy} "
                                  f"({', '.join(v.id for v in found) or 'none'}); name one: "
                                  f"{self.path / VARIANTS_FOLDER}/<id>/")
        return variant_folder(self.path, found[0].id)

    def variant_folders(self) -> dict[str, Path]:
        """Variant id -> its run folder, in variants.csv's order."""
        return {v.id: variant_folder(self.path, v.id) for v in self.variants()}


VARIANTS_FOLDER = "variants"


def variant_folder(output_dir: str | Path, variant_id: str) -> Path:
    """`<output-dir>/variants/<id>/`: one variant's complete retrieval run."""
    return Path(output_dir) / VARIANTS_FOLDER / variant_id


def read_variants(output_dir: str | Path) -> list[Variant]:
    """variants.csv's variants, in order ([] when there is none); a row never makes a run read another run's files
    (its folder, links followed, lies inside `<output-dir>/variants/`)."""
    output_dir = Path(output_dir)
    frame = read_table(output_dir, VARIANTS)
    if frame is None:
        return []
    path, inside = VARIANTS.path(output_dir), (output_dir / VARIANTS_FOLDER).resolve()
    fix = f"restore {path.name}, or re-run `ragstudy retrieve` into a fresh --output-dir (finished work is cached)"
    found = []
    for number, row in enumerate(frame.fillna(NOT_APPLICABLE).to_dict("records"), start=2):  # "n/a" read as NaN
        where = f"{path} row {number}"
        variant = Variant.from_row(row, where)
        try:
            check_name(variant.id, f"{where}: id")
        except StudyInputError as exc:
            raise StudyInputError(f"{exc}; {fix}") from None
        folder = variant_folder(output_dir, variant.id)
        if not folder.resolve().is_relative_to(inside):
            raise StudyInputError(f"{where}: the folder of variant {variant.id}, {folder}, leads outside {inside} (to "
                                  f"{folder.resolve()}): another run's files would be scored as this run's; put the "
                                  "variant's own folder there, or re-run `ragstudy retrieve` into a fresh --output-dir")
        found.append(variant)
    return found


def recorded_variant(folder: str | Path) -> Variant | None:
    """The variant a variant folder's own config.json records (run_variant writes its variants.csv row there), or
    None when the folder records none (a folder made by hand: nothing to check it against)."""
    row = _recorded(folder, "variant")
    return Variant.from_row(row, f"{Path(folder) / CONFIG_NAME}: variant") if isinstance(row, dict) else None


def _recorded(folder: str | Path, key: str) -> Any:
    """`key` of the config.json in `folder`; None without one (and no warning, unlike read_config)."""
    return read_config(folder).raw.get(key) if (Path(folder) / CONFIG_NAME).is_file() else None


def check_variant_records(output_dir: str | Path, variants: Sequence[Variant], skip: Iterable[str] = ()) -> None:
    """Every value a variants.csv row claims is the one its variant's own run recorded (recorded_variant).
    `variants`: every row of the file, `skip`: ids not checked (a run about to write those variants again)."""
    path, skip = VARIANTS.path(output_dir), set(skip)
    for number, variant in enumerate(variants, start=2):
        folder = variant_folder(output_dir, variant.id)
        recorded = None if variant.id in skip else recorded_variant(folder)
        said, truth = variant.to_row(), recorded.to_row() if recorded is not None else variant.to_row()
        columns = [c for c in dict.fromkeys([*said, *truth]) if c != "id"] + ["id"]  # strategy, params, axes, id
        wrong = [column for column in columns if said.get(column) != truth.get(column)]
        if not wrong:
            continue
        column = wrong[0]
        more = f" (and {', '.join(wrong[1:])} {'differs' if len(wrong) == 2 else 'differ'})" if wrong[1:] else ""
        raise StudyInputError(
            f"{path} row {number} (variant {variant.id}) says {column} {said[column]!r} but {folder / CONFIG_NAME}, "
            f"the run that made the variant, records {column} {truth[column]!r}{more}: {path.name} or the variant's "
            "folder was edited or comes from another run, and the scores would carry labels that did not make them. "
            f"Restore {path.name}, or re-run `ragstudy retrieve` into a fresh --output-dir (finished work is cached)")


def recorded_documents(folder: str | Path) -> dict[str, str] | None:
    """The documents a run's config.json records: PDF file name -> content sha256 (`documents_sha256`, the hashes
    the chunk caches are keyed by), or None when it records none."""
    hashes = _recorded(folder, "documents_sha256")
    return {Path(str(name)).name: str(sha) for name, sha in hashes.items()} if isinstance(hashes, dict) else None


def documents_difference(first: tuple[str, dict[str, str]], second: tuple[str, dict[str, str]]) -> str:
    """How two runs' documents (each: who ran over them, PDF name -> sha256) differ, in words: how many PDFs each ran
    over, those only one of them has, and those edited between them (same name, other content)."""
    def few(names: Iterable[str]) -> str:
        names = sorted(names)
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

    (one, ours), (two, theirs) = first, second
    parts = ((set(ours) - set(theirs), f"only in {one}'s"), (set(theirs) - set(ours), f"only in {two}'s"),
             ({name for name in set(ours) & set(theirs) if ours[name] != theirs[name]},
              "edited between them (other content, same name)"))
    return f"{one} over {len(ours)} PDF(s), {two} over {len(theirs)}: " + "; ".join(
        f"{few(names)} {what}" for names, what in parts if names)


def check_variant_documents(output_dir: str | Path, variants: Sequence[Variant]) -> None:
    """The variants of one results folder were run over the same documents (recorded_documents), else a
    StudyInputError; variants that record no documents are not checked."""
    seen: dict[str, tuple[str, dict[str, str]]] = {}
    for variant in variants:
        documents = recorded_documents(variant_folder(output_dir, variant.id))
        if documents is None:
            continue
        key = json.dumps(documents, sort_keys=True)
        seen.setdefault(key, (variant.id, documents))
        if len(seen) > 1:
            first, second = list(seen.values())[:2]
            raise StudyInputError(
                f"{output_dir}: its variants were run over different documents ({documents_difference(first, second)})"
                "; they would be compared as one run. Re-run `ragstudy retrieve` with every variant over one "
                "--documents folder into a fresh --output-dir (finished work is cached)")


def check_layout(folder: str | Path) -> None:
    """Refuse a folder an earlier version wrote: one subfolder per retriever, text layer or sweep, no variants.csv."""
    folder = Path(folder)
    config = folder / CONFIG_NAME
    recorded = ""
    if config.is_file():
        try:
            recorded = str(json.loads(config.read_text(encoding="utf-8")).get("retriever") or "")
        except (ValueError, AttributeError):
            recorded = ""
    old = ([p.name for p in sorted(folder.glob("text-layer-*")) if p.is_dir()]
           + [name for name in recorded.split(",") if "," in recorded and (folder / name).is_dir()]
           + (["sweep"] if (folder / "sweep").is_dir() else []))
    if old and not VARIANTS.path(folder).is_file():
        earlier = (f"{folder}: written by an earlier version (one subfolder per retriever, text layer or sweep "
                   f"configuration: {', '.join(old)}/); ")
        if STUDY_LEDGER.path(folder.parent).is_file():  # the retrieval run of a study: the study makes it
            raise StudyInputError(earlier + f"move it away, then re-run `ragstudy study` (its retrieval stage writes "
                                  "it again, one folder per variant, from the cached chunks, vectors and rankings), "
                                  "or give the study a fresh --output-dir")
        raise StudyInputError(earlier + "re-run `ragstudy retrieve` (or `ragstudy sweep`) with the same settings into "
                              "a fresh --output-dir: it writes one folder per variant, variants/<id>/, and reuses "
                              "every cached chunk, vector and ranking")


def open_run(path: str | Path) -> Run:
    """The run handle of a results folder (nothing is read until asked for)."""
    return Run(path)


# ---------------------------------------------------------------------------------------------- the folder lock

def check_output_location(output: str | Path, documents: str | Path | None, flag: str = "--output-dir") -> None:
    """Refuse to write results where they do not belong (links followed: another spelling of a folder is caught)."""
    where = Path(output).expanduser().resolve()
    fix = f"Pass a folder of its own, e.g. {flag} results-mine"
    if where == Path(where.anchor):
        raise StudyInputError(f"{output}: {flag} is the filesystem root; the results would be written among the "
                              f"system's folders. {fix}")
    if where == Path.home().resolve():
        raise StudyInputError(f"{output}: {flag} is the home folder; the results would be written among your own "
                              f"files. {fix}")
    if documents is None:
        return
    pdfs = Path(documents).expanduser().resolve()
    relation = ("is the --documents folder; the results would be written among the PDFs" if where == pdfs else
                f"is inside the --documents folder {documents}; the results would be written among the PDFs"
                if where.is_relative_to(pdfs) else
                f"holds the --documents folder {documents}; the results would be written around the PDFs (a run's "
                "subfolders could meet the documents folder)" if pdfs.is_relative_to(where) else None)
    if relation:
        raise StudyInputError(f"{output}: {flag} {relation}. {fix}, beside the documents folder rather than in or "
                              "around it")


class ResultsFolder:
    """An output folder that one run at a time writes into."""

    LOCK_NAME = RUN_LOCK.name

    def __init__(self, path: str | Path, documents: str | Path | None = None) -> None:
        self.path = Path(path)
        self.documents = documents  # the run's --documents folder: the results never go in or around it

    def prepare(self) -> "ResultsFolder":
        """Before any write: check where the folder is, create or check it, check it is writable, take its lock."""
        check_output_location(self.path, self.documents)
        if self.path.exists() and not self.path.is_dir():
            raise StudyInputError(f"{self.path}: --output-dir is an existing file, not a folder. Pass a folder "
                                  "path (it is created if missing).")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StudyInputError(f"{self.path}: cannot create the output folder ({exc.strerror}). Pass a "
                                  "writable --output-dir.") from None
        if not os.access(self.path, os.W_OK | os.X_OK):
            raise StudyInputError(f"{self.path}: the output folder is not writable. Pass a writable --output-dir.")
        lock_folder(self.path, self.LOCK_NAME, "output folder", "--output-dir")
        return self

    def release(self) -> None:
        release_folder(self.path, self.LOCK_NAME)
