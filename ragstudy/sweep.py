"""Parameter sweeps: a grid of strategy x parameter settings, each run retrieval-only and scored at every budget.

    python3 evaluation_chain.py --sweep sweeps/hope_eight.yaml --output-dir results-sweep

A sweep file (YAML)::

    evidence: sample/evidence.json      # optional; --evidence-less runs use the bundled sample's
    budgets: [500, 1000, 2000, 4000]    # optional; default: the study's
    configs:                            # one entry per configuration
      - id: fixed-256                   # optional; default: strategy and parameters
        strategy: fixed-size
        params: {chunk_size: 256, chunk_overlap: 0}
    grid:                               # optional: the product of every listed value, per strategy
      - strategy: paragraph
        params: {min_chars: [100, 200], max_chars: [1000, 2000]}

Every configuration writes its retrieval files into `<output-dir>/sweep/<id>/`; the sweep writes
`sweep_summary.csv` (one row per configuration: chunk statistics, indexing time and cost, and the metrics at each
budget as `hit@500`, `span_recall@500`, …, `hit@k`, …), `sweep_best.csv` (the best configuration per metric and
budget) and `sweep_hit_rate.{html,png,pdf}` into the output folder, like AutoRAG's summary.csv per node. Child windows
already embedded for another configuration are not embedded again (Chroma collections and the vector cache are keyed
by content).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .errors import StudyInputError

logger = logging.getLogger(__name__)

DEFAULT_EVIDENCE = Path(__file__).resolve().parents[1] / "sample" / "evidence.json"
SWEEP_METRICS = ("hit", "span_recall", "span_precision", "span_iou", "mrr")
FIXED_COLUMNS = ("config", "strategy", "params", "chunks", "chars_mean", "chars_cv", "index_seconds", "embedded",
                 "reused")
BEST_COLUMNS = ("metric", "budget", "config", "strategy", "params", "value")


@dataclass(frozen=True)
class SweepConfig:
    id: str
    strategy: str
    params: dict[str, Any]  # overrides as written in the sweep file


@dataclass(frozen=True)
class SweepFile:
    path: Path
    configs: tuple[SweepConfig, ...]
    evidence: Path | None
    budgets: tuple[int, ...] | None


def _default_id(strategy: str, params: dict[str, Any]) -> str:
    parts = [strategy] + [f"{k}={params[k]}" for k in sorted(params)]
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", "_".join(parts))


def load_sweep(path: str | Path) -> SweepFile:
    """Read and validate a sweep file: strategies and parameters are checked against the registry here, before
    anything runs; configuration ids must be unique."""
    import yaml

    from . import registry

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise StudyInputError(f"{path}: cannot read the sweep file ({exc})") from exc
    except yaml.YAMLError as exc:
        raise StudyInputError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise StudyInputError(f"{path}: a sweep file is a mapping with `configs:` and/or `grid:`")
    unknown = set(data) - {"configs", "grid", "evidence", "budgets", "description"}
    if unknown:
        raise StudyInputError(f"{path}: unknown keys {sorted(unknown)}; known: configs, grid, evidence, budgets")
    entries: list[tuple[str | None, str, dict[str, Any], str]] = []
    for i, entry in enumerate(data.get("configs") or []):
        where = f"{path}: configs[{i}]"
        if not isinstance(entry, dict) or "strategy" not in entry:
            raise StudyInputError(f"{where}: each entry needs `strategy:` (and optional `id:`, `params:`)")
        entries.append((entry.get("id"), str(entry["strategy"]), dict(entry.get("params") or {}), where))
    for i, entry in enumerate(data.get("grid") or []):
        where = f"{path}: grid[{i}]"
        if not isinstance(entry, dict) or "strategy" not in entry:
            raise StudyInputError(f"{where}: each entry needs `strategy:` and `params:` {{name: [values]}}")
        grid = dict(entry.get("params") or {})
        names = sorted(grid)
        values = [v if isinstance(v, list) else [v] for v in (grid[n] for n in names)]
        for combo in itertools.product(*values):
            entries.append((None, str(entry["strategy"]), dict(zip(names, combo)), where))
    if not entries:
        raise StudyInputError(f"{path}: no configurations (add `configs:` or `grid:` entries)")
    configs = []
    for given_id, strategy, params, where in entries:
        spec = registry.get(strategy)
        spec.resolve_params(params, where=f"{where} {strategy}.")  # fail now, not after an hour of indexing
        configs.append(SweepConfig(str(given_id) if given_id else _default_id(strategy, params), strategy, params))
    ids = [c.id for c in configs]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise StudyInputError(f"{path}: configuration ids {duplicates} appear twice; give each entry its own `id:`")
    evidence = data.get("evidence")
    budgets = data.get("budgets")
    if budgets is not None:
        if not isinstance(budgets, list) or not budgets or any(not isinstance(b, int) or b <= 0 for b in budgets):
            raise StudyInputError(f"{path}: budgets must be a list of positive integers, got {budgets!r}")
        budgets = tuple(budgets)
    evidence_path = None
    if evidence:
        evidence_path = Path(evidence)
        if not evidence_path.is_absolute():
            evidence_path = path.parent / evidence_path  # relative to the sweep file
    return SweepFile(path, tuple(configs), evidence_path, budgets)


def metric_columns(labels: list[str]) -> list[str]:
    return [f"{metric}@{label}" for label in labels for metric in SWEEP_METRICS]


def run_sweep(config, sweep_file: str | Path, evidence: str | Path | None = None, plots: bool = True
              ) -> list[dict[str, Any]]:
    """Run every configuration of `sweep_file` retrieval-only and write the sweep tables (and, with `plots`, the
    hit-rate plot); `evidence` overrides the sweep file's. Returns the summary rows."""
    import pandas as pd

    from Postprocessing.retrieval_eval import PER_QUESTION_COLUMNS, evaluate_folder, load_evidence
    from . import registry
    from .io import atomic_write_text
    from .pipeline import read_questions, run_facts
    from .results import ResultsFolder, write_config
    from .retrieval import budget_labels, lazy_embedding, llm_measure, retrieve_strategy
    from .textlayer import load_documents

    sweep = load_sweep(sweep_file)
    if sweep.budgets:
        config = replace(config, budgets=sweep.budgets)
    evidence_path = Path(evidence) if evidence else sweep.evidence or DEFAULT_EVIDENCE
    evidence_items = load_evidence(evidence_path)
    documents = load_documents(Path(config.documents))
    questions = read_questions(config.questions, config.limit)
    output_dir = ResultsFolder(config.output_dir).prepare().path  # inputs first: a bad one leaves no folder behind
    measure = llm_measure(config)
    embedding = lazy_embedding(config)
    labels = budget_labels(config.budgets)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for number, item in enumerate(sweep.configs, start=1):
        spec = registry.get(item.strategy)
        params = spec.resolve_params(item.params, where=f"{sweep.path} {item.id}: {item.strategy}.")
        folder = output_dir / "sweep" / item.id
        folder.mkdir(parents=True, exist_ok=True)
        run_config = replace(config, strategies=(item.strategy,), strategy_params={item.strategy: params},
                             output_dir=str(folder))
        logger.info("sweep %d/%d: %s (%s %s)", number, len(sweep.configs), item.id, item.strategy,
                    json.dumps(item.params, sort_keys=True))
        write_config(folder, run_config, {**run_facts(run_config, documents), "sweep_config": item.id,
                                          "sweep_params": item.params})
        run = retrieve_strategy(run_config, item.strategy, documents, questions, embedding, folder, measure)
        frame, notes, _ = evaluate_folder(folder, evidence_items, config.budgets, measure, [item.strategy])
        atomic_write_text(folder / "retrieval_per_question.csv", frame[list(PER_QUESTION_COLUMNS)].to_csv(index=False))
        row: dict[str, Any] = {"config": item.id, "strategy": item.strategy,
                               "params": json.dumps(item.params, sort_keys=True, ensure_ascii=False),
                               "chunks": run.chunks, "chars_mean": run.chars_mean, "chars_cv": run.chars_cv,
                               "index_seconds": run.index_seconds, "embedded": run.embedded, "reused": run.reused}
        for label in labels:
            part = frame[frame["budget"] == label]
            for metric in SWEEP_METRICS:
                column = "reciprocal_rank" if metric == "mrr" else metric
                row[f"{metric}@{label}"] = float(part[column].mean()) if len(part) else float("nan")
        rows.append(row)
        logger.info("%s: %s", item.id, "; ".join(notes))
    summary = pd.DataFrame(rows, columns=[*FIXED_COLUMNS, *metric_columns(labels)])
    atomic_write_text(output_dir / "sweep_summary.csv", summary.to_csv(index=False))
    best = best_configs(summary, labels)
    atomic_write_text(output_dir / "sweep_best.csv", best.to_csv(index=False))
    if plots:
        _plot(summary, labels, output_dir)
    print(summary.to_string(index=False, max_colwidth=40))
    print(f"\nsweep of {len(rows)} configurations in {time.perf_counter() - started:.0f} s; evidence {evidence_path}; "
          f"tables in {output_dir}/sweep_summary.csv and sweep_best.csv")
    return rows


def best_configs(summary, labels: list[str]):
    """The best configuration per metric and budget (highest mean; ties: the first in the sweep file)."""
    import pandas as pd

    records = []
    for label in labels:
        for metric in SWEEP_METRICS:
            column = f"{metric}@{label}"
            values = summary[column]
            if values.notna().any():
                best = summary.loc[values.idxmax()]
                records.append({"metric": metric, "budget": label, "config": best["config"],
                                "strategy": best["strategy"], "params": best["params"], "value": best[column]})
    return pd.DataFrame(records, columns=list(BEST_COLUMNS))


def _plot(summary, labels: list[str], output_dir: Path) -> None:
    """Hit rate against the budget, one line per configuration in its strategy's colour (HTML; PNG and PDF when
    Chromium is there)."""
    import plotly.graph_objects as go

    from Postprocessing.retrieval_eval import write_plots
    from . import registry

    budgets = [label for label in labels if label.isdigit()]
    dashes = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
    seen: dict[str, int] = {}
    fig = go.Figure()
    for _, row in summary.iterrows():
        spec = registry.get(row["strategy"])
        n = seen[row["strategy"]] = seen.get(row["strategy"], -1) + 1
        fig.add_trace(go.Scatter(x=[int(b) for b in budgets], y=[row[f"hit@{b}"] for b in budgets],
                                 mode="lines+markers", name=f"{row['config']} ({spec.display_name})",
                                 line=dict(color=spec.color, dash=dashes[n % len(dashes)], width=2),
                                 hovertemplate=f"{row['config']}<br>{row['params']}<br>budget %{{x}}<br>"
                                               "hit %{y:.3f}<extra></extra>"))
    fig.update_layout(title="Sweep: hit rate against the context budget, one line per configuration", width=1000,
                      height=600, plot_bgcolor="white", font=dict(size=13),
                      xaxis=dict(title="context budget (log scale)", type="log", tickvals=[int(b) for b in budgets],
                                 gridcolor="lightgrey"),
                      yaxis=dict(title="hit rate", range=[0, 1.02], gridcolor="lightgrey"))
    notes: list[str] = []
    write_plots(fig, output_dir, "sweep_hit_rate", notes)
    for note in notes:
        logger.warning("%s", note)
