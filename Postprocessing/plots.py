"""Figures of the Postprocessing scripts and their export: the survey plots (colours from the strategies'
registrations) and ``write_figures``, which writes any plotly figures as PDF and PNG with kaleido."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from Postprocessing.survey import NONE_DISPLAY, Survey, category_colors, counts_frame

CHROME_PACKAGE = "chromium"


def survey_figures(survey: Survey) -> dict[str, object]:
    """The survey's plotly figures (pies, bars per question and rater, box per option), keyed by file stem."""
    import plotly.graph_objects as go

    font = dict(family="Arial", size=16, color="black")
    overall = counts_frame(survey, None)
    figs: dict[str, object] = {}
    COLORS = category_colors(survey.categories)  # noqa: N806  (a constant for the figures below)

    def pie(frame: pd.DataFrame, title: str) -> go.Figure:
        total = max(1, int(frame["count"].sum()))
        text = [f"{v} ({v / total:.1%})" if v else "" for v in frame["count"]]  # no label on empty slices
        fig = go.Figure(go.Pie(labels=frame["category"], values=frame["count"], sort=False, direction="clockwise",
                               marker=dict(colors=[COLORS[c] for c in frame["category"]]),
                               text=text, textinfo="text"))
        fig.update_layout(title=title, font=font, width=800, height=600,
                          legend=dict(orientation="h", yanchor="top", y=-0.05, xanchor="center", x=0.5))
        return fig

    n = len(survey.choices)
    figs["pie_overall"] = pie(overall, f"Preferred answer, all choices (n={n})")
    without = overall[overall["category"] != NONE_DISPLAY]
    figs["pie_overall_without_none"] = pie(
        without, f"Preferred answer, excluding \"{NONE_DISPLAY}\" (n={int(without['count'].sum())})")

    def grouped_bars(table: pd.DataFrame, by: str, axis_title: str, title: str, stacked: bool = False) -> go.Figure:
        cats = [c for c in table.columns if c != by]
        labels = table[by].astype(str).tolist()
        fig = go.Figure([go.Bar(name=c, y=labels, x=table[c], orientation="h", marker_color=COLORS[c])
                         for c in cats])
        # many questions: one stacked bar each stays readable; few raters: grouped bars compare better
        rows = len(labels) if stacked else len(labels) * len(cats)
        top = (table[cats].sum(axis=1) if stacked else table[cats].max(axis=1)).max()
        fig.update_layout(barmode="stack" if stacked else "group", bargap=0.25, font=font, plot_bgcolor="white",
                          title=dict(text=title, y=0.98, yanchor="top"), margin=dict(t=130),
                          width=1000, height=max(500, 200 + (24 if stacked else 14) * rows),
                          xaxis=dict(title="Count", gridcolor="lightgrey", dtick=1 if top <= 12 else None),
                          yaxis=dict(title=axis_title, autorange="reversed"),
                          legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0.0,
                                      traceorder="normal"))
        return fig

    figs["bars_per_question"] = grouped_bars(counts_frame(survey, "question_id"), "question_id", "Question",
                                             "Choices per question", stacked=True)
    figs["bars_per_rater"] = grouped_bars(counts_frame(survey, "rater"), "rater", "Rater", "Choices per rater")
    per_rater = counts_frame(survey, "rater")
    fig = go.Figure()
    for cat in [c for c in per_rater.columns if c != "rater"]:
        fig.add_trace(go.Box(y=per_rater[cat], name=cat, marker_color=COLORS[cat], boxpoints="all", jitter=0.3,
                             pointpos=0, text=per_rater["rater"], hovertemplate="%{text}: %{y}"))
    fig.update_layout(title=f"Times each option was chosen, per rater ({len(survey.raters)} raters)", font=font,
                      plot_bgcolor="white", width=900, height=600, showlegend=False,
                      yaxis=dict(title="Choices per rater", gridcolor="lightgrey", rangemode="tozero"))
    figs["box_per_strategy"] = fig
    return figs


def find_chrome() -> str | None:
    """The Chrome/Chromium kaleido would use, or None."""
    from choreographer.browsers.chromium import Chromium

    return Chromium.find_browser(skip_local=False)


def write_figures(figs: dict[str, object], out_dir: Path) -> list[Path]:
    """Export every figure as PDF and PNG with kaleido (one browser session for all)."""
    import plotly.io as pio

    if find_chrome() is None:
        raise RuntimeError(
            "no Chrome/Chromium found, which kaleido needs to write PDF/PNG plots: install the Debian package "
            f"{CHROME_PACKAGE!r} (apt-get install -y --no-install-recommends {CHROME_PACKAGE}) or set BROWSER_PATH")
    pio.defaults.mathjax = None  # otherwise kaleido tries a CDN
    out_dir.mkdir(parents=True, exist_ok=True)
    targets = [(fig, out_dir / f"{stem}.{ext}", ext) for stem, fig in figs.items() for ext in ("pdf", "png")]
    tmp = [path.with_name(f".{path.stem}.tmp.{ext}") for _, path, ext in targets]
    # kaleido ignores the layout's size unless it is passed explicitly
    pio.write_images([f for f, _, _ in targets], tmp, format=[e for _, _, e in targets],
                     width=[f.layout.width for f, _, _ in targets], height=[f.layout.height for f, _, _ in targets],
                     scale=[2 if e == "png" else 1 for _, _, e in targets])
    for t, (_, path, _) in zip(tmp, targets):
        t.replace(path)
    return [path for _, path, _ in targets]
