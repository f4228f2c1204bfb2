"""The answer verdict across LLMs: with `--llm a,b` each LLM's answers are a group of their own (a complete answering
run in `<results>/groups/<id>/`, listed in answer_groups.csv) that `score-answers` scores with its floors and signal
check; this module then says, per LLM, which strategy scores best on each metric that carries signal and whether
its lead is significant, and, checked across the LLMs, whether the best strategy changes. An LLM whose answers carry
no signal is named as one that cannot compare the strategies, never counted for or against a strategy."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from Postprocessing import metric_catalogue
from Postprocessing.formatting import format_estimate, format_p
from ragstudy import results
from ragstudy.scoring import stats

ALPHA = 0.05


@dataclass(frozen=True)
class GroupScores:
    """One LLM's scored answers: its group id, the model that answered, and what score-answers wrote."""

    group: str
    model: str
    summary: pd.DataFrame  # metrics_summary.csv
    paired: pd.DataFrame  # metrics_paired.csv
    signal: dict | None  # metrics_run.json's signal check

    @property
    def with_signal(self) -> tuple[str, ...]:
        return tuple((self.signal or {}).get("with_signal") or ())

    @property
    def checked(self) -> tuple[str, ...]:
        return tuple((self.signal or {}).get("checked") or ())


def read_group(folder: Path, group: str) -> GroupScores:
    """The scores score-answers wrote into one group's folder, named by the model its signal check names."""
    signal = json.loads(results.METRICS_RUN.path(folder).read_text(encoding="utf-8")).get("signal")
    return GroupScores(group, str((signal or {}).get("model") or group),
                       results.read_table(folder, results.METRICS_SUMMARY),
                       results.read_table(folder, results.METRICS_PAIRED), signal)


def _best_row(group: GroupScores, metric: str) -> dict:
    """The best strategy on `metric` in one group and its lead over the runner-up (paired, Holm-adjusted)."""
    rows = group.summary[group.summary["metric"] == metric]
    higher = metric_catalogue.get(metric).higher_is_better
    ranked = rows.sort_values("mean", ascending=not higher, kind="stable")
    best = ranked.iloc[0]
    row = {"group": group.group, "model": group.model, "metric": metric, "signal": int(metric in group.with_signal),
           "best": best["strategy"], "best_display": best["strategy_display"], "best_mean": best["mean"],
           "best_ci_low": best["ci_low"], "best_ci_high": best["ci_high"], "runner_up": "", "diff": float("nan"),
           "diff_ci_low": float("nan"), "diff_ci_high": float("nan"), "p_holm": float("nan"), "significant": 0}
    if len(ranked) > 1:
        second = ranked.iloc[1]["strategy"]
        pair = group.paired[(group.paired["metric"] == metric)
                            & (group.paired[["strategy_a", "strategy_b"]].isin([best["strategy"], second]).all(axis=1))]
        if len(pair):
            p = pair.iloc[0]
            sign = 1.0 if p["strategy_a"] == best["strategy"] else -1.0
            low, high = sorted((sign * p["ci_low"], sign * p["ci_high"]))
            row.update(runner_up=second, diff=sign * p["mean_diff"], diff_ci_low=low, diff_ci_high=high,
                       p_holm=p[stats.HOLM_COLUMN], significant=int(p[stats.HOLM_COLUMN] < ALPHA))
    return row


def across_frame(groups: Sequence[GroupScores]) -> pd.DataFrame:
    """One row per (group, metric checked by its signal check): the best strategy, its lead, whether the metric
    carries signal for that LLM."""
    rows = [_best_row(group, metric) for group in groups for metric in group.checked
            if metric in set(group.summary["metric"])]
    return pd.DataFrame(rows, columns=list(results.ANSWER_VERDICT_ACROSS.columns))


def _lead(row: pd.Series) -> str:
    if not row["runner_up"]:
        return ""
    d = metric_catalogue.decimals(row["metric"])
    verdict = "significant" if row["significant"] else "not significant"
    return (f", ahead of {row['runner_up']} by {format_estimate(row['diff'], row['diff_ci_low'], row['diff_ci_high'], d, signed=True)}"
            f" ({verdict}, Holm {format_p(row['p_holm'])})")


def sentences(groups: Sequence[GroupScores], frame: pd.DataFrame) -> list[str]:
    """Per LLM, the best strategy on each metric with signal; then whether it changes across the LLMs with signal."""
    lines = []
    for group in groups:
        rows = frame[(frame["group"] == group.group) & (frame["signal"] == 1)]
        if rows.empty:
            lines.append(f"{group.model}: its answers carry no signal on any metric (not above the shuffled-oracle "
                         "floor and the context-copy baseline for every strategy): it cannot compare the strategies.")
            continue
        d = {row["metric"]: metric_catalogue.decimals(row["metric"]) for _, row in rows.iterrows()}
        lines.append(f"{group.model}: " + "; ".join(
            f"on {row['metric']} {row['best']} scores best ({row['best_mean']:.{d[row['metric']]}f}){_lead(row)}"
            for _, row in rows.iterrows()) + ".")
    lines.append(_across_sentence(groups, frame))
    return lines


def _across_sentence(groups: Sequence[GroupScores], frame: pd.DataFrame) -> str:
    able = [g for g in groups if g.with_signal]
    unable = [g.model for g in groups if not g.with_signal]
    if not able:
        return (f"Checked across {len(groups)} LLMs: none writes answers with signal, so the answer metrics compare "
                "no strategies here.")
    if len(able) == 1:
        rest = f" ({', '.join(unable)} cannot)" if unable else ""
        return f"Checked across {len(groups)} LLMs: only {able[0].model} writes answers with signal, so only it can " \
               f"compare the strategies{rest}."
    parts = []
    shared = [m for m in able[0].with_signal if all(m in g.with_signal for g in able)]
    for metric in shared:
        best = {g.model: frame[(frame["group"] == g.group) & (frame["metric"] == metric)]["best"].iloc[0] for g in able}
        if len(set(best.values())) == 1:
            parts.append(f"on {metric} {next(iter(best.values()))} is best under every one of them")
        else:
            parts.append(f"on {metric} the best strategy changes with the LLM: "
                         + ", ".join(f"{s} under {m}" for m, s in best.items()))
    rest = f"; {', '.join(unable)} cannot compare the strategies" if unable else ""
    head = f"Checked across the {len(able)} LLMs whose answers carry signal ({', '.join(g.model for g in able)}): "
    return head + ("; ".join(parts) if parts else "no metric carries signal for all of them") + rest + "."


def write_across(folder: Path, groups: Sequence[GroupScores]) -> str:
    """answer_verdict_across.csv and .md in `folder`; returns the Markdown."""
    from ragstudy.io import atomic_write_text

    frame = across_frame(groups)
    results.write_table(folder, results.ANSWER_VERDICT_ACROSS, frame)
    text = "# The answer verdict across LLMs\n\n" + "\n".join(f"- {line}" for line in sentences(groups, frame)) + "\n"
    atomic_write_text(results.ANSWER_VERDICT_ACROSS_MD.path(folder), text)
    return text
