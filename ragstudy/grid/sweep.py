"""Parameter sweeps: a grid of strategy x parameter settings, each run retrieval-only and scored at every budget.

    ragstudy sweep sweeps/hope_eight.yaml --output-dir results-sweep

A sweep file's entries go through the run's grid (ragstudy.grid.variants), one variant each; its keys and the tables
it writes (sweep_summary.csv, sweep_best.csv) are in docs/retrieval.md#sweeps. Scores: ragstudy.scoring.budget_eval.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragstudy.config import validate_budgets
from ragstudy.errors import StudyInputError
from ragstudy.grid import axes
from ragstudy.io import check_name
from ragstudy.scoring import budget_metrics
from ragstudy.scoring.budget_eval import budget_means
from ragstudy.scoring.budgets import budget_labels

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepConfig:
    """One configuration of a sweep file; ragstudy.grid.variants.expand turns it into the run's variants."""

    id: str | None  # the entry's `id:`; None: derived from its values (ragstudy.grid.variants.derived_id)
    strategy: str
    params: dict[str, Any]  # overrides as written in the sweep file
    # axis -> its one value (ragstudy.grid.axes), where it sets one
    axes: Mapping[str, str] = field(default_factory=dict)
    where: str = field(default="", compare=False, repr=False)  # where it was read (for messages)


@dataclass(frozen=True)
class SweepFile:
    path: Path
    configs: tuple[SweepConfig, ...]
    evidence: Path | None
    budgets: tuple[int, ...] | None


def _params(entry: dict[str, Any], where: str, example: str) -> dict[str, Any]:
    """An entry's `params:` mapping ({} when absent); a list or a scalar is an error naming the entry."""
    params = entry.get("params")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise StudyInputError(f"{where}: params must be a mapping of parameter names to values, e.g. {example}; got "
                              f"a {type(params).__name__} ({params!r:.60})")
    return dict(params)


def load_sweep(path: str | Path) -> SweepFile:
    """Read and validate a sweep file: strategies, parameters and axis values are checked here, before anything
    runs (an axis key is any declared axis, ragstudy.grid.axes); configuration ids must be unique."""
    from ragstudy import registry
    from ragstudy.config import read_yaml_mapping

    path = Path(path)
    data = read_yaml_mapping(path, "a sweep file", "a mapping with `configs:` and/or `grid:`")
    unknown = set(data) - {"configs", "grid", "evidence", "budgets", "description"}
    if unknown:
        raise StudyInputError(f"{path}: unknown keys {sorted(unknown)}; known: configs, grid, evidence, budgets")
    for key in ("configs", "grid"):
        if data.get(key) is not None and not isinstance(data[key], list):
            raise StudyInputError(f"{path}: `{key}:` must be a list of entries (each line starting with `- `)")
    configs = [*(_config_entry(entry, f"{path}: configs[{i}]") for i, entry in enumerate(data.get("configs") or [])),
               *(c for i, entry in enumerate(data.get("grid") or []) for c in _grid_entry(entry, f"{path}: grid[{i}]"))]
    if not configs:
        raise StudyInputError(f"{path}: no configurations (add `configs:` or `grid:` entries)")
    for c in configs:  # fail now, not after an hour of indexing
        registry.get(c.strategy).resolve_params(c.params, where=f"{c.where} {c.strategy}.")
    ids = [c.id for c in configs if c.id is not None]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise StudyInputError(f"{path}: configuration ids {duplicates} appear twice; give each entry its own `id:`")
    folded = [i.casefold() for i in ids]  # macOS and Windows name folders without regard to case
    cased = sorted({i for i in ids if folded.count(i.casefold()) > 1})
    if cased:
        raise StudyInputError(f"{path}: configuration ids {cased} differ only in case, and name one folder on macOS "
                              "and Windows; give each entry an id of its own")
    budgets = validate_budgets(data["budgets"], f"{path}: budgets") if data.get("budgets") is not None else None
    evidence_path = path.parent / data["evidence"] if data.get("evidence") else None  # an absolute one stays as it is
    return SweepFile(path, tuple(configs), evidence_path, budgets)


def _entry_keys(entry: Any, where: str, known: tuple[str, ...], needs: str) -> None:
    if not isinstance(entry, dict) or "strategy" not in entry:
        raise StudyInputError(f"{where}: each entry needs `strategy:` ({needs})")
    unknown = set(entry) - {*known, *axes.names()}
    if unknown:
        raise StudyInputError(f"{where}: unknown keys {sorted(unknown)}; known: "
                              f"{', '.join(sorted({*known, *axes.names()}))}")


def _config_entry(entry: Any, where: str) -> SweepConfig:
    """One `configs:` entry: its id, strategy, parameters and one value per axis it sets."""
    _entry_keys(entry, where, ("id", "strategy", "params"), "and optional `id:`, `params:` and axes: "
                + ", ".join(f"`{name}:`" for name in axes.names()))
    given_id = entry.get("id")
    if given_id is not None:
        check_name(given_id, f"{where}: id")  # it names <output-dir>/variants/<id>/: never a path
    chosen = {axis.name: axis.one(entry[axis.name], where) for axis in axes.grid_axes()
              if entry.get(axis.name) is not None}
    return SweepConfig(str(given_id) if given_id is not None else None, str(entry["strategy"]),
                       _params(entry, where, "params: {chunk_size: 256}"), chosen, where)


def _grid_entry(entry: Any, where: str) -> list[SweepConfig]:
    """One `grid:` entry: the product of its axes' values (a list is a grid axis) and of its parameters' values."""
    _entry_keys(entry, where, ("strategy", "params"), "and `params:` {name: [values]}")
    grid = _params(entry, where, "params: {chunk_size: [256, 512]}")
    names = sorted(grid)
    values = [v if isinstance(v, list) else [v] for v in (grid[n] for n in names)]
    given = [axis for axis in axes.grid_axes() if entry.get(axis.name) is not None]
    axis_values = [[axis.one(v, where) for v in (entry[axis.name] if isinstance(entry[axis.name], list)
                                                  else [entry[axis.name]])] for axis in given]
    return [SweepConfig(None, str(entry["strategy"]), dict(zip(names, combo)),
                        dict(zip((axis.name for axis in given), chosen)), where)
            for chosen in itertools.product(*axis_values) for combo in itertools.product(*values)]


@dataclass(frozen=True)
class SweepResult:
    summary: Any  # pandas DataFrame, the sweep_summary.csv table
    best: Any  # pandas DataFrame, the sweep_best.csv table
    labels: tuple[str, ...]  # budget labels in table order
    output_dir: Path
    evidence: Path
    seconds: float

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.summary.to_dict("records")


def run_sweep(config, sweep_file: str | Path, evidence: str | Path | None = None, executor: Any = None
              ) -> SweepResult:
    """Run every configuration of `sweep_file` retrieval-only through the run's grid (ragstudy.ranking.run_retrieval:
    one variant each, in `<output-dir>/variants/<id>/`), score it at every budget and write sweep_summary.csv and
    sweep_best.csv; `evidence` overrides the sweep file's."""
    import pandas as pd

    from ragstudy.ranking import run_retrieval
    from ragstudy.results import (RETRIEVAL_PER_QUESTION, SWEEP_BEST, SWEEP_FIXED_COLUMNS, SWEEP_SUMMARY,
                                  read_questions, write_table)
    from ragstudy.scoring.budget_eval import evaluate_folder
    from ragstudy.scoring.budgets import llm_measure
    from ragstudy.scoring.evidence import check_evidence_pdfs, default_evidence, load_evidence_file
    from ragstudy.text.textlayer import load_documents

    config.check_embedders()
    sweep = load_sweep(sweep_file)
    if sweep.budgets:
        config = replace(config, budgets=sweep.budgets)
    evidence_path = Path(evidence) if evidence else sweep.evidence or default_evidence(config.questions)
    if evidence_path is None:
        raise StudyInputError(f"{sweep.path}: a sweep is scored against evidence and none is given for "
                              f"{config.questions}; pass --evidence FILE or set `evidence:` in the sweep file (the "
                              f"bundled sample/evidence.json belongs to the bundled Questions.csv only)")
    every_question = read_questions(config.questions)
    evidence_items = load_evidence_file(evidence_path, every_question, config.questions)
    documents = load_documents(Path(config.documents))
    check_evidence_pdfs(evidence_items, [doc.path for doc in documents], evidence_path,
                        f"--documents {config.documents}")
    started = time.perf_counter()
    grid = run_retrieval(config, sweep, executor)  # one variant per configuration (and per listed run axis)
    measure = llm_measure(config)
    labels = budget_labels(config.budgets)
    compared = budget_metrics.names(compared_only=True)  # averaged per configuration and budget (outside ones too)
    rows: list[dict[str, Any]] = []
    for item in grid.variants:
        folder, run = grid.folders[item.id], grid.runs[item.id]
        frame, evaluations = evaluate_folder(folder, evidence_items, config.budgets, measure, [item.strategy])
        write_table(folder, RETRIEVAL_PER_QUESTION, frame[list(RETRIEVAL_PER_QUESTION.columns)])
        rows.append({"config": item.id, "strategy": item.strategy, "params": item.params_json(),
                     "chunks": run.chunks, "chars_mean": run.chars_mean, "chars_cv": run.chars_cv,
                     "index_seconds": run.index_seconds, "embedded": grid.embedded_for(item.id),
                     "reused": run.reused - grid.ahead.by_variant.get(item.id, 0),
                     **dict(item.values), **budget_means(frame, labels, compared)})
        logger.info("%s: %s", item.id, "; ".join(e.note() for e in evaluations))
    metrics = [f"{metric}@{label}" for label in labels for metric in compared]
    summary = pd.DataFrame(rows, columns=[*SWEEP_FIXED_COLUMNS, *axes.names(), *metrics])
    write_table(grid.output_dir, SWEEP_SUMMARY, summary)
    best = best_configs(summary, labels)
    write_table(grid.output_dir, SWEEP_BEST, best)
    return SweepResult(summary, best, tuple(labels), grid.output_dir, evidence_path, time.perf_counter() - started)


def best_configs(summary, labels: list[str]):
    """The best configuration per metric and budget (highest mean; ties: the first in the sweep file)."""
    import pandas as pd

    from ragstudy.results import SWEEP_BEST

    records = []
    for label in labels:
        for metric in budget_metrics.names(compared_only=True):
            column = f"{metric}@{label}"
            values = summary[column]
            if values.notna().any():
                best = summary.loc[values.idxmax()]
                records.append({"metric": metric, "budget": label, "config": best["config"],
                                "strategy": best["strategy"], "params": best["params"], "value": best[column]})
    return pd.DataFrame(records, columns=list(SWEEP_BEST.columns))
