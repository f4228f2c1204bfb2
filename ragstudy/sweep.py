"""Parameter sweeps: a grid of strategy x parameter settings, each run retrieval-only and scored at every budget.

    ragstudy sweep sweeps/hope_eight.yaml --output-dir results-sweep

A sweep file (YAML)::

    evidence: sample/evidence.json      # optional; without it or --evidence: the bundled sample's, for the
                                        # bundled Questions.csv only (evidence.default_evidence)
    budgets: [500, 1000, 2000, 4000]    # optional; default: the study's
    configs:                            # one entry per configuration
      - id: fixed-256                   # optional; default: strategy, parameters and axes (variants.derived_id)
        strategy: fixed-size
        params: {chunk_size: 256, chunk_overlap: 0}
      - id: fixed-256-bm25              # optional `retriever:` (ragstudy retrieve --retriever): a sweep axis
        strategy: fixed-size
        params: {chunk_size: 256, chunk_overlap: 0}
        retriever: bm25
    grid:                               # optional: the product of every listed value, per strategy
      - strategy: paragraph
        params: {min_chars: [100, 200], max_chars: [1000, 2000]}
        retriever: [dense, bm25]        # optional; a list is a grid axis like a parameter
        text_layer: [raw, clean]        # optional (--text-layer): the text a text-layer strategy chunks; an axis too
        embedding: [wheel:multilingual-e5-small]  # optional (--embedding): an axis too

A sweep is a grid (ragstudy.variants): an axis an entry does not set takes the run's list (--retriever dense,bm25
ranks every entry with both). Every variant writes its complete retrieval run into `<output-dir>/variants/<id>/`
(variants.csv lists them); the sweep writes `sweep_summary.csv` (one row per variant: chunk statistics, indexing
time and cost, its retriever, text layer and embedder, and the metrics at each budget as `hit@500`, `span_recall@500`, …, `hit@k`, …) and `sweep_best.csv` (the best
configuration per metric and budget) into the output folder, like AutoRAG's summary.csv per node;
`ragstudy sweep` prints the table and draws `sweep_hit_rate.{html,png,pdf}`. Scores come from
ragstudy.budget_eval. Child windows already embedded for another configuration are not embedded again (Chroma
collections and the vector cache are keyed by content).
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import budget_metrics
from .budget_eval import budget_labels, budget_means
from .config import validate_budgets
from .errors import StudyInputError
from .io import check_name

logger = logging.getLogger(__name__)



def sweep_metrics() -> tuple[str, ...]:
    """The budget metrics averaged per configuration and budget: every compared one (outside ones included)."""
    return budget_metrics.names(compared_only=True)


@dataclass(frozen=True)
class SweepConfig:
    """One configuration of a sweep file; ragstudy.variants.expand turns it into the run's variants (an axis it does
    not set takes the run's --retriever / --text-layer / --embedding list)."""

    id: str | None  # the entry's `id:`; None: derived from its values (ragstudy.variants.derived_id)
    strategy: str
    params: dict[str, Any]  # overrides as written in the sweep file
    retriever: str | None = None  # None: the run's (--retriever, default dense)
    text_layer: str | None = None  # None: the run's (--text-layer, default raw)
    embedding: str | None = None  # None: the run's (--embedding, default the profile's)


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
    """Read and validate a sweep file: strategies and parameters are checked against the registry here, before
    anything runs; configuration ids must be unique."""
    from . import registry
    from .config import read_yaml_mapping

    path = Path(path)
    data = read_yaml_mapping(path, "a sweep file", "a mapping with `configs:` and/or `grid:`")
    unknown = set(data) - {"configs", "grid", "evidence", "budgets", "description"}
    if unknown:
        raise StudyInputError(f"{path}: unknown keys {sorted(unknown)}; known: configs, grid, evidence, budgets")
    for key in ("configs", "grid"):
        if data.get(key) is not None and not isinstance(data[key], list):
            raise StudyInputError(f"{path}: `{key}:` must be a list of entries (each line starting with `- `)")
    entries: list[tuple[str | None, str, dict[str, Any], dict[str, str | None], str]] = []
    for i, entry in enumerate(data.get("configs") or []):
        where = f"{path}: configs[{i}]"
        if not isinstance(entry, dict) or "strategy" not in entry:
            raise StudyInputError(f"{where}: each entry needs `strategy:` (and optional `id:`, `params:`, "
                                  "`retriever:`, `text_layer:`, `embedding:`)")
        _check_entry_keys(entry, {"id", "strategy", "params", *_AXES}, where)
        given_id = entry.get("id")
        if given_id is not None:
            check_name(given_id, f"{where}: id")  # it names <output-dir>/variants/<id>/: never a path
        axes = {axis: None if entry.get(axis) is None else check(entry[axis], where) for axis, check in _AXES.items()}
        entries.append((str(given_id) if given_id is not None else None, str(entry["strategy"]),
                        _params(entry, where, "params: {chunk_size: 256}"), axes, where))
    for i, entry in enumerate(data.get("grid") or []):
        where = f"{path}: grid[{i}]"
        if not isinstance(entry, dict) or "strategy" not in entry:
            raise StudyInputError(f"{where}: each entry needs `strategy:` and `params:` {{name: [values]}}")
        _check_entry_keys(entry, {"strategy", "params", *_AXES}, where)
        grid = _params(entry, where, "params: {chunk_size: [256, 512]}")
        names = sorted(grid)
        values = [v if isinstance(v, list) else [v] for v in (grid[n] for n in names)]
        axis_values = [[None] if entry.get(axis) is None else
                       [check(v, where) for v in (entry[axis] if isinstance(entry[axis], list) else [entry[axis]])]
                       for axis, check in _AXES.items()]  # a list is a grid axis like a parameter
        for chosen in itertools.product(*axis_values):
            for combo in itertools.product(*values):
                entries.append((None, str(entry["strategy"]), dict(zip(names, combo)), dict(zip(_AXES, chosen)),
                                where))
    if not entries:
        raise StudyInputError(f"{path}: no configurations (add `configs:` or `grid:` entries)")
    configs = []
    for given_id, strategy, params, axes, where in entries:
        spec = registry.get(strategy)
        spec.resolve_params(params, where=f"{where} {strategy}.")  # fail now, not after an hour of indexing
        configs.append(SweepConfig(given_id, strategy, params, **axes))
    ids = [c.id for c in configs if c.id is not None]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise StudyInputError(f"{path}: configuration ids {duplicates} appear twice; give each entry its own `id:`")
    folded = [i.casefold() for i in ids]  # macOS and Windows name folders without regard to case
    cased = sorted({i for i in ids if folded.count(i.casefold()) > 1})
    if cased:
        raise StudyInputError(f"{path}: configuration ids {cased} differ only in case, and name one folder on macOS "
                              "and Windows; give each entry an id of its own")
    evidence = data.get("evidence")
    budgets = data.get("budgets")
    if budgets is not None:
        budgets = validate_budgets(budgets, f"{path}: budgets")
    evidence_path = None
    if evidence:
        evidence_path = Path(evidence)
        if not evidence_path.is_absolute():
            evidence_path = path.parent / evidence_path  # relative to the sweep file
    return SweepFile(path, tuple(configs), evidence_path, budgets)


def _check_entry_keys(entry: dict, known: set[str], where: str) -> None:
    unknown = set(entry) - known
    if unknown:
        raise StudyInputError(f"{where}: unknown keys {sorted(unknown)}; known: {', '.join(sorted(known))}")


def _retriever(value: Any, where: str) -> str:
    from . import retrievers

    return retrievers.get(value, f"{where}: retriever").name


def _text_layer(value: Any, where: str) -> str:
    from .textlayer import TEXT_LAYERS

    if value not in TEXT_LAYERS:
        raise StudyInputError(f"{where}: text_layer {value!r} is not one of {', '.join(TEXT_LAYERS)}")
    return str(value)


def _embedding(value: Any, where: str) -> str:
    from .models import check_wheel_embedding

    if not isinstance(value, str) or not value.strip() or "," in value:
        raise StudyInputError(f"{where}: embedding {value!r} is not one model name (a list is a grid axis: "
                              "`embedding: [a, b]`)")
    check_wheel_embedding(value.strip(), f"{where}: embedding")
    return value.strip()


_AXES = {"retriever": _retriever, "text_layer": _text_layer, "embedding": _embedding}  # a sweep entry's axis keys


def metric_columns(labels: list[str]) -> list[str]:
    return [f"{metric}@{label}" for label in labels for metric in sweep_metrics()]


@dataclass(frozen=True)
class SweepResult:
    """What a sweep wrote: the summary and best-configuration tables and where they are."""

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

    from .budget_eval import evaluate_folder, llm_measure
    from .evidence import check_evidence_pdfs, default_evidence, load_evidence_file
    from .ranking import run_retrieval
    from .results import RETRIEVAL_PER_QUESTION, SWEEP_BEST, SWEEP_FIXED_COLUMNS, SWEEP_SUMMARY, read_questions, write_table
    from .textlayer import load_documents

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
    rows: list[dict[str, Any]] = []
    for item in grid.variants:
        folder, run = grid.folders[item.id], grid.runs[item.id]
        frame, evaluations = evaluate_folder(folder, evidence_items, config.budgets, measure, [item.strategy])
        write_table(folder, RETRIEVAL_PER_QUESTION, frame[list(RETRIEVAL_PER_QUESTION.columns)])
        rows.append({"config": item.id, "strategy": item.strategy, "params": item.params_json(),
                     "chunks": run.chunks, "chars_mean": run.chars_mean, "chars_cv": run.chars_cv,
                     "index_seconds": run.index_seconds, "embedded": grid.embedded_for(item.id),
                     "reused": run.reused - grid.ahead.by_variant.get(item.id, 0),
                     "retriever": item.retriever, "text_layer": item.text_layer, "embedding": item.embedding,
                     **budget_means(frame, labels, sweep_metrics())})
        logger.info("%s: %s", item.id, "; ".join(e.note() for e in evaluations))
    summary = pd.DataFrame(rows, columns=[*SWEEP_FIXED_COLUMNS, "text_layer", "embedding", *metric_columns(labels)])
    write_table(grid.output_dir, SWEEP_SUMMARY, summary)
    best = best_configs(summary, labels)
    write_table(grid.output_dir, SWEEP_BEST, best)
    return SweepResult(summary, best, tuple(labels), grid.output_dir, evidence_path, time.perf_counter() - started)


def best_configs(summary, labels: list[str]):
    """The best configuration per metric and budget (highest mean; ties: the first in the sweep file)."""
    import pandas as pd

    from .results import SWEEP_BEST

    records = []
    for label in labels:
        for metric in sweep_metrics():
            column = f"{metric}@{label}"
            values = summary[column]
            if values.notna().any():
                best = summary.loc[values.idxmax()]
                records.append({"metric": metric, "budget": label, "config": best["config"],
                                "strategy": best["strategy"], "params": best["params"], "value": best[column]})
    return pd.DataFrame(records, columns=list(SWEEP_BEST.columns))
