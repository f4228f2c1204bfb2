"""The chunk-quality table (strategy x metric, mean with a seeded bootstrap CI where per-item values exist) and
the Spearman correlations between per-question chunk metrics and answer metrics (HOPE's analysis)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from Postprocessing import formatting, metric_catalogue
from ragstudy.scoring import stats
from ragstudy.scoring.stats import CiSettings
from Postprocessing.formatting import markdown_table

# metric name -> (group, description, higher is better (None: neither)), from the one metric catalogue
METRICS: dict[str, tuple[str, str, bool | None]] = {
    info.name: (info.group, info.description, info.higher_is_better)
    for group in ("intrinsic", "retrieval", "hope") for info in metric_catalogue.in_group(group)
}


GROUP_TITLES = {"intrinsic": "Intrinsic chunk statistics", "retrieval": "Retrieval from evidence (answerable questions)",
                "hope": "HOPE (failed = LLM output that could not be parsed; left out of the mean)"}


@dataclass(frozen=True)
class MetricRow:
    strategy: str
    group: str
    metric: str
    n: int
    mean: float
    ci_low: float
    ci_high: float
    failures: int = 0
    note: str = ""


def estimate(strategy: str, metric: str, values: Sequence[float], ci: CiSettings, failures: int = 0,
             note: str = "") -> MetricRow:
    """Mean of per-item values with its bootstrap CI (NaN mean when there are no values)."""
    group = METRICS[metric][0]
    values = [float(v) for v in values]
    if not values:
        return MetricRow(strategy, group, metric, 0, math.nan, math.nan, math.nan, failures, note or "no items")
    mean, low, high = stats.bootstrap_ci(values, ci.n_resamples, ci.seed, ci.confidence)
    return MetricRow(strategy, group, metric, len(values), mean, low, high, failures, note)


def difference(strategy: str, metric: str, values: Sequence[float], floor: Sequence[float], ci: CiSettings
               ) -> MetricRow:
    """mean(values) - mean(floor) of two independent samples, with its two-sample bootstrap CI (NaN when either is
    empty); n is the strategy's items, the note gives the floor's."""
    group = METRICS[metric][0]
    if not len(values) or not len(floor):
        return MetricRow(strategy, group, metric, 0, math.nan, math.nan, math.nan, 0, "no items")
    diff, low, high = stats.two_sample_bootstrap(values, floor, ci.n_resamples, ci.seed, ci.confidence)
    return MetricRow(strategy, group, metric, len(values), diff, low, high, 0, f"floor: {len(floor)} items")


def point(strategy: str, metric: str, value: float, n: int, failures: int = 0, note: str = "") -> MetricRow:
    """A value without per-item spread (a count, a variance, a ratio over all characters): no CI."""
    return MetricRow(strategy, METRICS[metric][0], metric, n, float(value), math.nan, math.nan, failures, note)


def to_frame(rows: Sequence[MetricRow]) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in rows], columns=list(MetricRow.__dataclass_fields__))


def _digits(metric: str) -> int:
    if metric in ("chunks",) or metric.endswith(("_mean", "_variance")):
        return 1
    return 3


def format_cell(row: MetricRow) -> str:
    if row.n == 0 or math.isnan(row.mean):
        text = "–"
    elif row.metric == "chunks":
        text = f"{int(row.mean)}"
    elif math.isnan(row.ci_low):
        text = f"{row.mean:,.{_digits(row.metric)}f}"
    else:
        text = formatting.format_estimate(row.mean, row.ci_low, row.ci_high, _digits(row.metric))
    if row.failures:
        text += f" ({row.failures} failed)"
    return text


def markdown_summary(rows: Sequence[MetricRow], strategies: Sequence[str], display: Mapping[str, str]) -> str:
    """Metrics as rows, strategies as columns, one section per group."""
    by_key = {(r.strategy, r.metric): r for r in rows}
    out = []
    for group in ("intrinsic", "retrieval", "hope"):
        metrics = [m for m, (g, _, _) in METRICS.items() if g == group and any((s, m) in by_key for s in strategies)]
        if not metrics:
            continue
        body = []
        for metric in metrics:
            better = METRICS[metric][2]
            arrow = " ↑" if better else " ↓" if better is False else ""
            cells = [format_cell(by_key[(s, metric)]) if (s, metric) in by_key else "–" for s in strategies]
            ns = [str(by_key[(s, metric)].n) if (s, metric) in by_key else "–" for s in strategies]
            body.append([f"{metric}{arrow}", *cells, ns[0] if len(set(ns)) == 1 else "/".join(ns)])
        headers = ["metric", *[display.get(s, s) for s in strategies], "n"]
        out.append(f"### {GROUP_TITLES[group]}\n\n" + markdown_table(headers, body, "l" + "r" * (len(strategies) + 1)))
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------- correlation

@dataclass(frozen=True)
class Correlation:
    chunk_metric: str
    answer_metric: str
    n: int
    rho: float
    p: float
    note: str = ""


def spearman_table(frame: pd.DataFrame, chunk_metrics: Sequence[str], answer_metrics: Sequence[str]
                   ) -> list[Correlation]:
    """Spearman's rho of every chunk metric with every answer metric over the rows of `frame` (question x
    strategy). A constant column gives NaN with a note instead of a scipy warning."""
    from scipy.stats import spearmanr

    results = []
    for chunk_metric in chunk_metrics:
        for answer_metric in answer_metrics:
            pair = frame[[chunk_metric, answer_metric]].dropna()
            x, y = pair[chunk_metric].to_numpy(float), pair[answer_metric].to_numpy(float)
            if len(pair) < 3:
                results.append(Correlation(chunk_metric, answer_metric, len(pair), math.nan, math.nan,
                                           "fewer than 3 pairs"))
            elif np.ptp(x) == 0 or np.ptp(y) == 0:
                constant = chunk_metric if np.ptp(x) == 0 else answer_metric
                results.append(Correlation(chunk_metric, answer_metric, len(pair), math.nan, math.nan,
                                           f"{constant} is constant"))
            else:
                rho, p = spearmanr(x, y)
                results.append(Correlation(chunk_metric, answer_metric, len(pair), float(rho), float(p)))
    return results


def markdown_correlations(results: Sequence[Correlation], answer_metrics: Sequence[str]) -> str:
    chunk_metrics = list(dict.fromkeys(r.chunk_metric for r in results))
    by_key = {(r.chunk_metric, r.answer_metric): r for r in results}
    body = []
    for chunk_metric in chunk_metrics:
        cells = []
        for answer_metric in answer_metrics:
            r = by_key.get((chunk_metric, answer_metric))
            if r is None or math.isnan(r.rho):
                cells.append("–" if r is None else f"– ({r.note})")
            else:
                cells.append(f"{r.rho:+.2f} ({formatting.format_p(r.p)})")
        body.append([chunk_metric, *cells])
    n = max((r.n for r in results), default=0)
    return (f"Spearman's ρ over question × strategy pairs (n = {n}):\n\n"
            + markdown_table(["chunk metric", *answer_metrics], body, "l" + "r" * len(answer_metrics)))
