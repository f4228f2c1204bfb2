"""Plotly figures of the report. Each takes tidy data plus the strategy styles and returns a Figure; colours and
order are the registry's, so every figure agrees with the tables and with the other Postprocessing plots."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from Postprocessing.reportkit.inputs import Strategies
from ragstudy.scoring.stats import ci_label, recorded_confidence


def _ci(frame: pd.DataFrame) -> str:
    """The confidence level the table records, as a label ("90 %")."""
    return ci_label(recorded_confidence(frame, "the summary table"))

LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=20, t=40, b=50), font=dict(size=12),
              legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))


def _rgba(color: str, alpha: float) -> str:
    color = color.lstrip("#")
    if len(color) != 6:
        return f"rgba(153,153,153,{alpha})"
    r, g, b = (int(color[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def chunk_lengths(lengths: Mapping[str, Sequence[int]], styles: Strategies) -> go.Figure:
    """One box per strategy on a shared character axis (points shown for small sets)."""
    fig = go.Figure()
    for name in reversed(styles.ordered(lengths)):
        values = list(lengths[name])
        fig.add_trace(go.Box(x=values, name=styles.display(name), marker_color=styles.color(name),
                             boxpoints="outliers" if len(values) > 60 else "all", jitter=0.4, pointpos=0,
                             orientation="h", showlegend=False))
    fig.update_layout(**LAYOUT, height=120 + 60 * len(lengths), xaxis_title="chunk length (characters)")
    return fig


def budget_curve(summary: pd.DataFrame, metric: str, styles: Strategies) -> go.Figure:
    """``metric`` against the context budget, one line per strategy with a CI band; the strategy's own paper k
    (budget "k") as a separate point with error bars."""
    frame = summary[summary["metric"] == metric]
    numeric = sorted({b for b in frame["budget"] if str(b).isdigit()}, key=int)
    categories = [*numeric, *(["k"] if (frame["budget"] == "k").any() else [])]
    fig = go.Figure()
    for name in styles.ordered(frame["strategy"]):
        color, display = styles.color(name), styles.display(name)
        rows = frame[frame["strategy"] == name].set_index("budget").reindex(numeric).dropna(subset=["mean"])
        if len(rows):
            x = [str(b) for b in rows.index]
            fig.add_trace(go.Scatter(x=x + x[::-1], y=list(rows["ci_high"]) + list(rows["ci_low"])[::-1],
                                     fill="toself", fillcolor=_rgba(color, 0.15), line=dict(width=0), mode="lines",
                                     hoverinfo="skip", showlegend=False, legendgroup=name))
            fig.add_trace(go.Scatter(x=x, y=rows["mean"], mode="lines+markers", name=display, legendgroup=name,
                                     line=dict(color=color, width=2)))
        k = frame[(frame["strategy"] == name) & (frame["budget"] == "k")]
        if len(k):
            r = k.iloc[0]
            fig.add_trace(go.Scatter(x=["k"], y=[r["mean"]], mode="markers", marker=dict(color=color, size=9,
                                     symbol="diamond"), legendgroup=name, showlegend=not len(rows), name=display,
                                     error_y=dict(type="data", array=[r["ci_high"] - r["mean"]],
                                                  arrayminus=[r["mean"] - r["ci_low"]])))
    fig.update_layout(**LAYOUT, height=380, yaxis_title=f"{metric} (mean, {_ci(frame)} CI)",
                      xaxis=dict(title="context budget (k = the strategy's own paper k)", type="category",
                                 categoryorder="array", categoryarray=categories))
    return fig


def compact_budget_curve(summary: pd.DataFrame, metric: str, styles: Strategies) -> go.Figure:
    """budget_curve small enough to sit beside the verdict's sentence: 280 px high, the legend below."""
    fig = budget_curve(summary, metric, styles)
    fig.update_layout(height=280, margin=dict(l=50, r=10, t=10, b=10), yaxis_title=metric, xaxis_title=None,
                      legend=dict(orientation="h", yanchor="top", y=-0.12, x=0, font=dict(size=11)))
    return fig


def dot_whisker(summary: pd.DataFrame, styles: Strategies, columns: int = 2) -> go.Figure:
    """One panel per metric: each strategy's mean with its CI (metrics keep their own scales)."""
    metrics = list(dict.fromkeys(summary["metric"]))
    names = styles.ordered(summary["strategy"])
    rows = math.ceil(len(metrics) / columns)
    height = 160 + rows * (80 + 28 * len(names))
    gap = min(0.9 / max(rows - 1, 1), 80 / (height - 120))  # about 80 px between panel rows, for their titles
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=metrics, horizontal_spacing=0.18,
                        vertical_spacing=gap)
    for i, metric in enumerate(metrics):
        part = summary[summary["metric"] == metric]
        for name in names:
            hit = part[part["strategy"] == name]
            if hit.empty:
                continue
            r = hit.iloc[0]
            fig.add_trace(go.Scatter(
                x=[r["mean"]], y=[styles.display(name)], mode="markers", name=styles.display(name),
                legendgroup=name, showlegend=i == 0, marker=dict(color=styles.color(name), size=9),
                error_x=dict(type="data", array=[r["ci_high"] - r["mean"]], arrayminus=[r["mean"] - r["ci_low"]],
                             color=styles.color(name), thickness=2),
                hovertemplate=f"{metric}<br>%{{y}}: %{{x:.3f}} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]<extra></extra>"),
                row=i // columns + 1, col=i % columns + 1)
        fig.update_yaxes(categoryorder="array", categoryarray=[styles.display(n) for n in reversed(names)],
                         row=i // columns + 1, col=i % columns + 1)
    fig.update_layout(**{**LAYOUT, "margin": dict(l=60, r=20, t=80, b=40)}, height=height)
    fig.update_layout(legend=dict(y=0.99, yanchor="top", yref="container"))
    return fig


def bars(categories: Sequence[str], values: Sequence[float], colors: Sequence[str], axis_title: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=list(categories), y=list(values), marker_color=list(colors), text=list(values),
                           textposition="outside"))
    fig.update_layout(**LAYOUT, height=340, yaxis_title=axis_title)
    return fig


def sweep_scatter(frame: pd.DataFrame, metric_column: str, styles: Strategies,
                  choices: Sequence[str] = ()) -> go.Figure:
    """Every sweep configuration: mean chunk length against ``metric_column``, coloured by strategy; a drop-down
    switches the y axis to any of ``choices`` (other metric@budget columns)."""
    fig = go.Figure()
    names = styles.ordered(frame["strategy"])
    for name in names:
        part = frame[frame["strategy"] == name]
        fig.add_trace(go.Scatter(x=part["chars_mean"], y=part[metric_column], mode="markers",
                                 name=styles.display(name), marker=dict(color=styles.color(name), size=9),
                                 text=[f"{c}<br>{p}" for c, p in zip(part["config"], part["params"], strict=True)],
                                 hovertemplate="%{text}<br>chars_mean %{x:.0f}<br>%{y:.3f}<extra></extra>"))
    fig.update_layout(**LAYOUT, height=400, xaxis_title="mean chunk length (characters)", yaxis_title=metric_column)
    if len(choices) > 1:
        buttons = [dict(label=c, method="update",
                        args=[{"y": [frame.loc[frame["strategy"] == n, c].tolist() for n in names]},
                              {"yaxis": {"title": {"text": c}}}]) for c in choices]
        fig.update_layout(margin={**LAYOUT["margin"], "t": 90},
                          updatemenus=[dict(buttons=buttons, x=1.0, xanchor="right", y=1.25,
                                            yanchor="top", active=list(choices).index(metric_column))])
    return fig
