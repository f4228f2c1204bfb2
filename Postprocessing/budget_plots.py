"""Plots of retrieval at equal context budgets (retrieval_eval.py) and of sweeps (evaluation_chain.py --sweep):
hit rate against the budget, from the tables ragstudy.scoring.budget_eval computed. Strategy colours and names are the
registry's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from ragstudy.io import atomic_write_text


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def hit_rate_figure(summary: pd.DataFrame, frame: pd.DataFrame, strategies: Sequence[str], unit: str,
                    strategy_of: Callable[[str], str] = str):
    """Hit rate against the budget, a line per strategy (or a sweep's configuration: `strategy_of` its strategy, in
    whose colour it is drawn) with its CI band; each one's own k as a hollow marker at its mean context size."""
    import plotly.graph_objects as go

    from ragstudy import registry

    from ragstudy.scoring.budget_metrics import HIT
    from ragstudy.scoring.stats import ci_label, recorded_confidence

    from ragstudy.results import RETRIEVAL_SUMMARY

    ci = ci_label(recorded_confidence(summary, RETRIEVAL_SUMMARY.name))
    fig = go.Figure()
    hit = summary[summary["metric"] == HIT]
    budgets = sorted({int(b) for b in hit["budget"] if b.isdigit()})
    for s in strategies:
        spec = registry.get(strategy_of(s))
        name = spec.display_name if strategy_of(s) == s else s
        part = hit[(hit["strategy"] == s) & hit["budget"].str.isdigit()].copy()
        if part.empty:
            continue
        part["x"] = part["budget"].astype(int)
        part = part.sort_values("x")
        x = part["x"].tolist()
        fig.add_trace(go.Scatter(x=x + x[::-1], y=part["ci_high"].tolist() + part["ci_low"].tolist()[::-1],
                                 mode="lines", fill="toself", fillcolor=_rgba(spec.color, 0.10), line=dict(width=0),
                                 hoverinfo="skip", showlegend=False, legendgroup=s))
        fig.add_trace(go.Scatter(x=x, y=part["mean"], mode="lines+markers", name=name,
                                 line=dict(color=spec.color, width=2), legendgroup=s,
                                 hovertemplate=f"{name}<br>budget %{{x}} {unit}<br>hit %{{y:.3f}}"
                                               "<extra></extra>"))
        own = hit[(hit["strategy"] == s) & (hit["budget"] == "k")]
        sizes = frame[(frame["strategy"] == s) & (frame["budget"] == "k")]["context_units"]
        if len(own) and len(sizes):
            k = own.iloc[0]
            fig.add_trace(go.Scatter(
                x=[max(float(sizes.mean()), 1.0)], y=[k["mean"]], mode="markers", legendgroup=s, showlegend=False,
                marker=dict(symbol="circle-open", size=12, color=spec.color, line=dict(width=2)),
                error_y=dict(type="data", symmetric=False, array=[k["ci_high"] - k["mean"]],
                             arrayminus=[k["mean"] - k["ci_low"]], color=spec.color, thickness=1),
                hovertemplate=f"{name}, own k<br>mean context %{{x:.0f}} {unit}<br>hit %{{y:.3f}}"
                              "<extra></extra>"))
    fig.update_layout(
        title="Evidence in the context vs context budget (hollow: each strategy's own k)",
        width=900, height=560, plot_bgcolor="white", font=dict(size=14), legend=dict(title="strategy"),
        xaxis=dict(title=f"context budget ({unit}, log scale)", type="log", tickvals=budgets,
                   ticktext=[str(b) for b in budgets], gridcolor="lightgrey"),
        yaxis=dict(title=f"hit rate ({ci} CI band)", range=[0, 1.02], gridcolor="lightgrey"))
    return fig


def write_plots(fig, out_dir: Path, stem: str, notes: list[str]) -> list[Path]:
    """HTML always; PNG and PDF through kaleido when a Chromium is installed (else a note says why not)."""
    from Postprocessing.plots import write_figures

    html = Path(out_dir) / f"{stem}.html"
    atomic_write_text(html, fig.to_html(include_plotlyjs=True, full_html=True))
    written = [html]
    try:
        written += write_figures({stem: fig}, Path(out_dir))
    except RuntimeError as exc:
        notes.append(f"PNG/PDF plots skipped: {exc}")
    return written


def sweep_figure(summary: pd.DataFrame, labels: Sequence[str]):
    """Hit rate against the budget, one line per sweep configuration in its strategy's colour."""
    import plotly.graph_objects as go

    from ragstudy import registry

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
    return fig
