"""Reading a results folder for the report, through ragstudy.results (the one owner of every file's name, columns
and reader): every file is optional, and a reader returns None (or an empty mapping) when its file is absent, so
that a section can say which command would produce it; a file that is there but malformed is an error naming it.

Strategy names, display names, colours and order are the registry's StrategySpec; a strategy found in a file but
not registered is still shown (grey, its name as display name, after the registered ones).
"""

from __future__ import annotations

import json

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from Postprocessing import common
from ragstudy import results
from ragstudy.answering.llm_axis import read_groups
from ragstudy.registry import StrategySpec

logger = logging.getLogger(__name__)

UNKNOWN_COLOR = "#999999"


class Strategies:
    """The registry's strategies (StrategySpec), looked up by registry or display name; names met in the files but
    not registered are shown grey, after the registered ones."""

    def __init__(self, specs: Iterable[StrategySpec]) -> None:
        self._specs = {s.name: s for s in specs}
        self._by_display = {s.display_name: s for s in self._specs.values()}

    @classmethod
    def from_registry(cls) -> "Strategies":
        from ragstudy import registry

        return cls(registry.specs())

    def spec(self, name: str) -> StrategySpec | None:
        """The registered spec of ``name`` (a registry name, or a display name as survey tables use), or None."""
        name = str(name)
        return self._specs.get(name) or self._by_display.get(name)

    def display(self, name: str) -> str:
        spec = self.spec(name)
        return spec.display_name if spec and spec.display_name else str(name)

    def color(self, name: str) -> str:
        spec = self.spec(name)
        return spec.color if spec and spec.color else UNKNOWN_COLOR

    def order(self, name: str) -> float:
        spec = self.spec(name)
        return float(spec.order) if spec else float("inf")

    def ordered(self, names: Iterable[str]) -> list[str]:
        """Distinct ``names`` in registry order; unregistered ones after, in the order first met."""
        names = list(dict.fromkeys(str(n) for n in names))
        first = {n: i for i, n in enumerate(names)}
        return sorted(names, key=lambda n: (self.order(n), first[n]))


def run_settings(run: results.Run) -> dict[str, Any] | None:
    """``config.json`` as written by evaluation_chain.py (read once by the run handle), or None when absent."""
    return run.raw if run.record.path is not None else None


def chunk_exports(results_dir: Path, folders: dict[str, Path] | None = None) -> dict[str, pd.DataFrame]:
    """``chunks_<strategy>.csv`` files (ragstudy.results.read_chunk_rows), keyed by strategy name, with a
    ``chars`` column (length of ``contents``); `folders`: strategy -> the folder holding its file (a run's variants),
    default every one in `results_dir`."""
    out: dict[str, pd.DataFrame] = {}
    for name, folder in (folders or {s: results_dir for s in results.exported_strategies(results_dir)}).items():
        frame = pd.DataFrame(results.read_chunk_rows(Path(folder), name), columns=list(results.CHUNK_COLUMNS))
        frame["chars"] = frame["contents"].str.len()
        out[name] = frame
    return out


def read_datasets(run: results.Run) -> dict[str, list[dict[str, Any]]]:
    """The chain's Dataset files (ragstudy.results.read_dataset; JSON preferred over CSV) keyed by strategy name,
    as rows with question_index, question, answer, contexts, sources."""
    out: dict[str, list[dict[str, Any]]] = {}
    for path in results.dataset_files(run.path, record=run.record):
        dataset = results.read_dataset(path, None, None, require_answers=False)
        out[dataset.strategy] = [row.to_record() for row in dataset.rows]
    return out


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
    metrics_baselines: pd.DataFrame | None
    metrics_signal: dict[str, Any] | None  # metrics_run.json's signal check (answer_baselines.Signal.to_dict)
    retrieval_summary: pd.DataFrame | None
    retrieval_paired: pd.DataFrame | None
    retrieval_verdict: pd.DataFrame | None
    chunk_quality: pd.DataFrame | None
    survey_overall: pd.DataFrame | None
    survey_pairwise: pd.DataFrame | None
    survey_summary: str | None
    survey_answers_present: bool
    sweep_summary: pd.DataFrame | None
    sweep_best: pd.DataFrame | None
    oracle: tuple[list[str], Path] | None
    retrieval_dir: Path | None = None  # where the retrieval tables came from (None: results_dir)
    retrieval_config: dict[str, Any] | None = None  # that folder's config.json (retriever, embedder)
    retrieval_across: Any = None  # ragstudy.scoring.verdict_across.CrossVerdict of a run ranked with several retrievers
    answers_across: tuple[str, ...] = ()  # an answering run with several LLMs: the verdict across them (its lines)
    answers_group: str | None = None  # ... whose first LLM's answers the Answers tables show
    hope_run: dict[str, Any] | None = None  # chunk_quality_run.json's "hope" record ({} when --no-hope; None: no file)


def ranked_folders(folder: Path, run: results.Run | None = None) -> tuple[Path, dict[str, Path]]:
    """(the folder whose verdict the report shows, every group's scores folder): a retrieval-only run's groups of
    variants (ragstudy.grid.variants.run_groups) are scored into one folder each, its first group being the main one
    (`ragstudy study`: dense, the answering chain's retriever); a run with one group is scored into its own folder.
    `run`: the folder's run handle when the caller has one (config.json is read once)."""
    from ragstudy.grid.variants import run_groups, scores_folder

    groups = run_groups(run or results.open_run(folder))
    folders = {g.label: scores_folder(folder, g, len(groups)) for g in groups}
    return next(iter(folders.values())), folders


def main_group_source(folder: Path, run: results.Run | None = None) -> tuple[Path, dict[str, Path]]:
    """(the folder whose config.json records the main group's settings, strategy -> the folder holding its chunk
    tables): a variant's folder and the main group's members for a run with variants.csv, else the folder itself."""
    from ragstudy.grid.variants import run_groups

    run = run or results.open_run(folder)
    if not run.variants():
        return folder, {s: folder for s in results.exported_strategies(folder)}
    main = run_groups(run)[0]
    members: dict[str, Path] = {}
    for name, folder in main.members.items():  # a sweep's strategy: the chunks of its first configuration
        members.setdefault(main.strategy_of(name), folder)
    return next(iter(main.members.values())), members


def group_axis(folder: Path, run: results.Run | None = None) -> str:
    """What the run's groups of variants differ in, as the cross-check words it (ragstudy.grid.variants.axis_word)."""
    from ragstudy.grid.variants import axis_word, run_groups

    return axis_word(run_groups(run or results.open_run(folder)))


def across(folders: dict[str, Path], axis: str = "retriever") -> Any:
    """The CrossVerdict of several retrievers' folders, or None for one retriever or when a folder has no verdict yet
    (the verdict section then names the command)."""
    from ragstudy.scoring.verdict_across import CrossVerdict

    try:
        return CrossVerdict.scored(folders, axis)
    except ValueError as exc:
        raise common.DataError(f"{next(iter(folders.values())).parent}: {exc}") from exc


def _json_record(path: Path, again: str) -> dict[str, Any] | None:
    """A JSON record a job wrote (`again`: the command that writes it again), None when there is no such file."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise common.DataError(f"{path}: cannot read it ({exc}); run `{again}` again") from exc
    return record if isinstance(record, dict) else {}


def hope_run(folder: Path) -> dict[str, Any] | None:
    """What chunk_quality_run.json records of HOPE: its settings and seconds, {} when chunk-quality ran with
    --no-hope, None when there is no such file (chunk-quality has not run here)."""
    record = _json_record(results.CHUNK_QUALITY_RUN.path(folder), f"ragstudy chunk-quality --results-dir {folder}")
    if record is None:
        return None
    found = record.get("hope")
    return found if isinstance(found, dict) else {}


def metrics_signal(folder: Path) -> dict[str, Any] | None:
    """The signal check recorded in `metrics_run.json`, or None (not scored yet, or scored by a version without it)."""
    record = _json_record(results.METRICS_RUN.path(folder), f"ragstudy score-answers --results-dir {folder}")
    signal = (record or {}).get("signal")
    return signal if isinstance(signal, dict) and isinstance(signal.get("sentence"), str) else None


def load(results_dir: Path, oracle: str | Path | None = None, retrieval_dir: str | Path | None = None) -> Inputs:
    """Read every file the report can use from ``results_dir``; the oracle from ``oracle`` (an --oracle flag) or
    beside the run's questions file (ragstudy.results.run_oracle: its row count is checked). ``retrieval_dir``: a
    retrieval-only run's folder to take the retrieval tables and the verdict from (`ragstudy study` keeps the
    answering and the retrieval-only run apart)."""
    d = Path(results_dir)
    if not d.is_dir():
        raise common.DataError(f"results folder {d} not found; run ragstudy answer (--output-dir {d}) first, "
                               "or pass --results-dir")
    # several LLMs (ragstudy.answering.llm_axis): the first one's tables, the verdict across them all
    groups = read_groups(d)
    if groups:
        inputs = load(groups[0][2], oracle, retrieval_dir)
        across_md = results.ANSWER_VERDICT_ACROSS_MD.path(d)
        lines = tuple(line[2:] for line in across_md.read_text(encoding="utf-8").splitlines()
                      if line.startswith("- ")) if across_md.is_file() else ()
        return replace(inputs, results_dir=d, answers_across=lines, answers_group=groups[0][1])
    r = Path(retrieval_dir) if retrieval_dir is not None else d
    if not r.is_dir():
        raise common.DataError(f"retrieval folder {r} not found; run `ragstudy retrieve --output-dir {r}` and "
                               f"`ragstudy score-retrieval --results-dir {r}` first, or drop --retrieval-dir")
    top = results.open_run(r)  # each config.json is read once
    main, folders = ranked_folders(r, top)  # a run with several groups of variants: its first group's scores, and all
    source, chunk_folders = main_group_source(r, top)  # the main group's settings (a variant's config.json), chunks
    run = top if d == r else results.open_run(d)
    ranked = top if main == r else results.open_run(main)  # the main group's scores
    config = run_settings(run)
    survey_dir = d / results.SURVEY_OVERALL.subdir
    summary_md = next((p for p in (results.SURVEY_SUMMARY_MD.path(d), results.SURVEY_SUMMARY_MD.path(survey_dir))
                       if p.is_file()), None)
    return Inputs(
        results_dir=Path(results_dir), config=config,
        chunks=chunk_exports(d) if retrieval_dir is not None or results.exported_strategies(d) else
        chunk_exports(d, chunk_folders), datasets=read_datasets(run),
        metrics_summary=run.table(results.METRICS_SUMMARY),
        metrics_paired=run.table(results.METRICS_PAIRED),
        metrics_per_question=run.table(results.METRICS_PER_QUESTION),
        metrics_baselines=run.table(results.METRICS_BASELINES), metrics_signal=metrics_signal(d),
        retrieval_summary=ranked.table(results.RETRIEVAL_SUMMARY),
        retrieval_paired=ranked.table(results.RETRIEVAL_PAIRED),
        retrieval_verdict=ranked.table(results.RETRIEVAL_VERDICT),
        chunk_quality=run.table(results.CHUNK_QUALITY),
        survey_overall=run.table(results.SURVEY_OVERALL),
        survey_pairwise=run.table(results.SURVEY_PAIRWISE),
        survey_summary=summary_md.read_text(encoding="utf-8") if summary_md else None,
        survey_answers_present=results.SURVEY_TEMPLATE.path(d).is_file(),
        sweep_summary=run.table(results.SWEEP_SUMMARY), sweep_best=run.table(results.SWEEP_BEST),
        oracle=run.oracle(oracle),
        retrieval_dir=None if retrieval_dir is None else r,
        retrieval_config=run_settings(top if source == r else results.open_run(source)),
        retrieval_across=across(folders, group_axis(r, top)), hope_run=hope_run(d),
    )
