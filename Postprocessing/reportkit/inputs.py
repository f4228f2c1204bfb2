"""Reading a results folder for the report: every file is optional, and each reader returns None (or an empty
mapping) when its file is absent, so that a section can say which command would produce it.

The readers are kept small and in one place so that they can move to the shared results-folder module once it
exists. Strategy names, display names, colours and order come from the registry; a strategy found in a file but not
registered is still shown (grey, its name as display name).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from Postprocessing import common
from ragstudy.io import PROJECT_ROOT

logger = logging.getLogger(__name__)

UNKNOWN_COLOR = "#999999"
SURVEY_SUBDIR = "survey"  # interview_analysis.py writes into <results>/survey by default


@dataclass(frozen=True)
class StrategyStyle:
    """How one strategy is named, coloured and ordered in the report."""

    name: str
    display: str
    color: str
    order: float
    registered: bool


class Strategies:
    """The registry's strategies, plus any unregistered names met in the files (grey, after the registered)."""

    def __init__(self, styles: Iterable[StrategyStyle]) -> None:
        self._styles = {s.name: s for s in styles}
        self._by_display = {s.display: s for s in self._styles.values()}

    @classmethod
    def from_registry(cls) -> "Strategies":
        from ragstudy import registry

        return cls(StrategyStyle(s.name, s.display_name or s.name, s.color or UNKNOWN_COLOR, float(s.order), True)
                   for s in registry.specs())

    def style(self, name: str) -> StrategyStyle:
        """The registered style of ``name`` (a registry name, or a display name as survey tables use)."""
        name = str(name)
        if name in self._styles:
            return self._styles[name]
        if name in self._by_display:
            return self._by_display[name]
        return StrategyStyle(name, name, UNKNOWN_COLOR, float("inf"), False)

    def display(self, name: str) -> str:
        return self.style(name).display

    def color(self, name: str) -> str:
        return self.style(name).color

    def ordered(self, names: Iterable[str]) -> list[str]:
        """Distinct ``names`` in registry order; unregistered ones after, in the order first met."""
        names = list(dict.fromkeys(str(n) for n in names))
        first = {n: i for i, n in enumerate(names)}
        return sorted(names, key=lambda n: (self.style(n).order, first[n]))


def read_config(results_dir: Path) -> dict[str, Any] | None:
    """``config.json`` as written by evaluation_chain.py (any version: keys are not checked), or None when
    absent."""
    path = Path(results_dir) / "config.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise common.DataError(f"{path}: not valid JSON ({exc}); re-run evaluation_chain.py") from None
    if not isinstance(data, dict):
        raise common.DataError(f"{path}: expected a JSON object; re-run evaluation_chain.py")
    return data


def read_csv(results_dir: Path, name: str, subdirs: Iterable[str] = ()) -> pd.DataFrame | None:
    """``<results_dir>/<name>`` (or the first ``<results_dir>/<subdir>/<name>``) as a DataFrame, or None."""
    for folder in (Path(results_dir), *(Path(results_dir) / d for d in subdirs)):
        path = folder / name
        if path.is_file():
            logger.debug("reading %s", path)
            try:
                return pd.read_csv(path, encoding="utf-8", keep_default_na=True)
            except (pd.errors.ParserError, UnicodeDecodeError) as exc:
                raise common.DataError(f"{path}: not a readable UTF-8 CSV ({exc}); re-run the script that wrote "
                                       "it") from exc
            except pd.errors.EmptyDataError:
                logger.warning("%s is empty; treated as absent", path)
                return None
    return None


def read_text(results_dir: Path, name: str, subdirs: Iterable[str] = ()) -> str | None:
    for folder in (Path(results_dir), *(Path(results_dir) / d for d in subdirs)):
        if (folder / name).is_file():
            return (folder / name).read_text(encoding="utf-8")
    return None


def require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise common.DataError(f"{what} has no column(s) {missing} (columns: {list(frame.columns)}); is it from an "
                               "older version of the script that writes it? Re-run that script")


def read_chunks(results_dir: Path) -> dict[str, pd.DataFrame]:
    """``chunks_<strategy>.csv`` files, keyed by strategy name, with a ``chars`` column (length of ``contents``)."""
    out: dict[str, pd.DataFrame] = {}
    for path in sorted(Path(results_dir).glob("chunks_*.csv")):
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
        require_columns(frame, ["contents"], str(path))
        frame["chars"] = frame["contents"].str.len()
        out[path.stem[len("chunks_"):]] = frame
    return out


def read_datasets(results_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The chain's ``Dataset*.json`` files keyed by strategy name (the rows' ``strategy`` field, else the registry's
    owner of the file stem, else the stem)."""
    from ragstudy import registry

    out: dict[str, list[dict[str, Any]]] = {}
    paths = sorted(Path(results_dir).glob("Dataset*.json"))
    paths += [p for p in sorted(Path(results_dir).glob("Dataset*.csv")) if not p.with_suffix(".json").is_file()]
    for path in paths:
        rows = _json_rows(path) if path.suffix == ".json" else _csv_rows(path)
        names = {str(r["strategy"]) for r in rows if r.get("strategy")}
        spec = registry.by_dataset_name(path.stem)
        name = names.pop() if len(names) == 1 else spec.name if spec else path.stem
        # the paper's files have no question_index: their rows follow Questions.csv
        out[name] = [r if r.get("question_index") is not None else {**r, "question_index": i}
                     for i, r in enumerate(rows)]
    return out


def _csv_rows(path: Path) -> list[dict[str, Any]]:
    """A Dataset CSV whose JSON twin is missing: ``sources`` decoded when it is JSON (the paper's have none)."""
    rows = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8").to_dict("records")
    for row in rows:
        try:
            row["sources"] = json.loads(row.get("sources") or "[]")
        except json.JSONDecodeError:
            row["sources"] = []
        if not str(row.get("question_index", "")).strip().isdigit():
            row.pop("question_index", None)
    return rows


def _json_rows(path: Path) -> list[dict[str, Any]]:
    """A JSON list of objects (this project's Dataset files) or JSON Lines (the paper's, via `datasets`)."""
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise common.DataError(f"{path}: neither JSON nor JSON Lines ({exc}); re-run evaluation_chain.py") \
                from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise common.DataError(f"{path}: expected a list of rows, got {type(data).__name__}")
    return [r for r in data if isinstance(r, dict)]


def oracle_path(config: Mapping[str, Any] | None) -> Path | None:
    """Oracle.csv beside the questions file recorded in config.json, else the repository's, else None."""
    candidates = []
    for key in ("questions_resolved", "questions"):
        questions = (config or {}).get(key)
        if questions:
            q = Path(str(questions))
            candidates += [q.parent / "Oracle.csv"] if q.is_absolute() else [
                q.parent / "Oracle.csv", PROJECT_ROOT / q.parent / "Oracle.csv"]
    candidates.append(PROJECT_ROOT / "Oracle.csv")
    return next((p for p in candidates if p.is_file()), None)


def read_oracle(config: Mapping[str, Any] | None) -> tuple[list[str], Path] | None:
    path = oracle_path(config)
    if path is None:
        return None
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    if "oracle" not in frame.columns:
        logger.warning("%s has no 'oracle' column; the explorer shows no oracle answers", path)
        return None
    return frame["oracle"].tolist(), path


@dataclass
class Inputs:
    """Everything the report may show; None / empty where the results folder lacks the file."""

    results_dir: Path
    config: dict[str, Any] | None
    chunks: dict[str, pd.DataFrame]
    datasets: dict[str, list[dict[str, Any]]]
    metrics_summary: pd.DataFrame | None
    metrics_paired: pd.DataFrame | None
    metrics_per_question: pd.DataFrame | None
    retrieval_summary: pd.DataFrame | None
    retrieval_paired: pd.DataFrame | None
    chunk_quality: pd.DataFrame | None
    survey_overall: pd.DataFrame | None
    survey_pairwise: pd.DataFrame | None
    survey_summary: str | None
    survey_answers_present: bool
    sweep_summary: pd.DataFrame | None
    sweep_best: pd.DataFrame | None
    oracle: tuple[list[str], Path] | None


def _budgets_as_text(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """Budgets are labels ("500" … "4000", "k"): read them as text whatever pandas guessed."""
    if frame is not None and "budget" in frame.columns:
        frame = frame.copy()
        frame["budget"] = [str(int(b)) if isinstance(b, float) and b.is_integer() else str(b)
                           for b in frame["budget"]]
    return frame


def load(results_dir: Path) -> Inputs:
    """Read every file the report can use from ``results_dir``."""
    d = Path(results_dir)
    if not d.is_dir():
        raise common.DataError(f"results folder {d} not found; run evaluation_chain.py (--output-dir {d}) first, "
                               "or pass --results-dir")
    config = read_config(d)
    survey = (SURVEY_SUBDIR,)
    return Inputs(
        results_dir=d, config=config, chunks=read_chunks(d), datasets=read_datasets(d),
        metrics_summary=read_csv(d, "metrics_summary.csv"), metrics_paired=read_csv(d, "metrics_paired.csv"),
        metrics_per_question=read_csv(d, "metrics_per_question.csv"),
        retrieval_summary=_budgets_as_text(read_csv(d, "retrieval_summary.csv")),
        retrieval_paired=_budgets_as_text(read_csv(d, "retrieval_paired.csv")),
        chunk_quality=read_csv(d, "chunk_quality.csv"),
        survey_overall=read_csv(d, "survey_counts_overall.csv", survey),
        survey_pairwise=read_csv(d, "survey_pairwise_tests.csv", survey),
        survey_summary=read_text(d, "survey_summary.md", survey),
        survey_answers_present=(d / "interview_answers.xlsx").is_file(),
        sweep_summary=read_csv(d, "sweep_summary.csv"), sweep_best=read_csv(d, "sweep_best.csv"),
        oracle=read_oracle(config),
    )
