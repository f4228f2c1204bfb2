"""Analyse the raters' survey (``interview_answers.xlsx``): preference counts overall, per question and per
rater (with and without "Nessuna delle precedenti"), plots (PDF + PNG), a chi-square test against equal
preference, pairwise sign tests, Fleiss' kappa, and a Markdown summary.

Options are mapped back to strategies with ``answer_key.csv`` (written by preprocessing_files.py). Without a
key the paper's fixed order is assumed (Opzione 1/2/3 = Paragraph/Fixed-size/Blank-line) and the summary says so.

Run from the repository root::

    python Postprocessing/interview_analysis.py --results-dir results
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pandas as pd

from Postprocessing import common, stats
from Postprocessing.common import DataError
from Postprocessing.preprocessing_files import (KEY_NAME, NONE_LABEL, TEMPLATE_NAME, AnswerKey,
                                                KeyRow, question_id, read_answer_key)

logger = logging.getLogger(__name__)

NONE = "none"  # category name of "Nessuna delle precedenti"
NONE_DISPLAY = "None of the above"
CHROME_PACKAGE = "chromium"
NONE_COLOR = "#BBBBBB"  # strategies' colours come from their registrations, so every plot agrees
RATER_HEADERS = {"valutatore", "rater", "user", "utente"}
IGNORED_HEADERS = {"timestamp", "informazioni cronologiche", "indirizzo email", "email", "email address"}
_OPTION_RE = re.compile(r"^opzione\s*(\d+)$")


@dataclass(frozen=True)
class Choice:
    """One rater's choice for one question."""

    rater: str
    question_id: str
    question_index: int
    category: str  # a strategy name or NONE
    cell: str  # e.g. "C5"


@dataclass
class Survey:
    choices: list[Choice]
    raters: list[str]
    questions: list[KeyRow]
    categories: list[str]  # strategies in registry order, then NONE
    key_used: bool
    missing_cells: list[str] = field(default_factory=list)
    skipped_cells: list[str] = field(default_factory=list)


def category_colors(categories: Sequence[str]) -> dict[str, str]:
    """Plot colour per displayed category: the strategy's registered colour, light grey for "none"."""
    return {display(c): NONE_COLOR if c == NONE else common.strategy(c).color for c in categories}


def display(category: str) -> str:
    return NONE_DISPLAY if category == NONE else common.strategy(category).display


def parse_cell(value: object, n_options: int) -> int | None | str:
    """``Opzione k`` → k, ``Nessuna delle precedenti`` → 0, empty → None, anything else → the text (malformed)."""
    if value is None:
        return None
    text = " ".join(str(value).split()).strip(" .;").casefold()
    if not text:
        return None
    if text == NONE_LABEL.casefold():
        return 0
    match = _OPTION_RE.match(text)
    if match and 1 <= int(match.group(1)) <= n_options:
        return int(match.group(1))
    return str(value)


def paper_key(question_ids: Sequence[str]) -> AnswerKey:
    """The paper's fixed option order for every question (used when no answer key exists)."""
    rows = []
    for qid in question_ids:
        m = re.fullmatch(r"Q(\d+)", qid)
        rows.append(KeyRow(qid, int(m.group(1)) - 1 if m else -1, "", common.PAPER_SURVEY_ORDER))
    return AnswerKey(tuple(rows), None, "fixed (paper order, assumed: no answer key)")


def _header_columns(ws, where: str) -> tuple[int | None, list[tuple[str, int, str]]]:
    """The rater column (if any) and the question columns (coordinate, column, title) of row 1."""
    rater_col, question_cols = None, []
    for cell in ws[1]:
        title = "" if cell.value is None else str(cell.value).strip()
        low = title.casefold()
        if not title:
            continue
        if low in RATER_HEADERS and rater_col is None:
            rater_col = cell.column
        elif low not in IGNORED_HEADERS:
            question_cols.append((cell.coordinate, cell.column, title))
    if not question_cols:
        raise DataError(f"{where}: no question columns in row 1")
    return rater_col, question_cols


def _map_columns(question_cols, key: AnswerKey, where: str) -> list:
    """Pair each question column with its key row: by question id or text, else by position when counts agree."""
    by_id = key.by_id()
    by_text = {common.normalize_ws(r.question).casefold(): r for r in key.rows if r.question}
    col_rows, unknown = [], []
    for coord, col, title in question_cols:
        row = by_id.get(title) or by_text.get(common.normalize_ws(title).casefold())
        if row is None:
            unknown.append(f"{coord} {title!r}")
        col_rows.append(((coord, col, title), row))
    if unknown and len(question_cols) == len(key.rows):
        logger.warning("%s: headers %s do not match the key's question ids; mapping columns by position",
                       where, ", ".join(unknown))
        return list(zip(question_cols, key.rows))
    if unknown:
        raise DataError(f"{where}: header cells {', '.join(unknown)} match no question of the answer key "
                        f"({len(key.rows)} questions, ids {key.rows[0].question_id}..{key.rows[-1].question_id})")
    return col_rows


@dataclass
class _Cells:
    """What the rater rows hold: choices, raters, empty and malformed cells."""

    choices: list[Choice] = field(default_factory=list)
    raters: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)


def _read_rater_rows(ws, where: str, rater_col: int | None, col_rows, n_options: int) -> _Cells:
    found = _Cells()
    for r in range(2, ws.max_row + 1):
        cells = {col: ws.cell(row=r, column=col) for (_, col, _), _ in col_rows}
        if all(parse_cell(c.value, n_options) is None for c in cells.values()):
            continue  # an unused rater row of the template
        rater = str(ws.cell(row=r, column=rater_col).value or "").strip() if rater_col else ""
        rater = rater or f"row {r}"
        if rater in found.raters:
            raise DataError(f"{where} row {r}: rater {rater!r} appears twice")
        found.raters.append(rater)
        for (_, col, _), krow in col_rows:
            cell = cells[col]
            parsed = parse_cell(cell.value, n_options)
            if parsed is None:
                found.missing.append(cell.coordinate)
            elif isinstance(parsed, str):
                found.malformed.append(f"{cell.coordinate} {parsed!r}")
            else:
                category = NONE if parsed == 0 else krow.order[parsed - 1]
                found.choices.append(Choice(rater, krow.question_id, krow.question_index, category, cell.coordinate))
    return found


def read_survey(path: Path, key: AnswerKey | None, skip_malformed: bool = False) -> Survey:
    """Read the raters' workbook (first sheet, header row 1) and map every choice to a strategy."""
    from openpyxl import load_workbook

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} not found: raters fill {TEMPLATE_NAME} (made by preprocessing_files.py)")
    wb = load_workbook(path, data_only=True, read_only=False)
    ws = wb["Risposte"] if "Risposte" in wb.sheetnames else wb.worksheets[0]
    where = f"{path.name}!{ws.title}"
    key_used = key is not None
    rater_col, question_cols = _header_columns(ws, where)
    if key is None:
        key = paper_key([question_id(i) for i in range(len(question_cols))])
        col_rows = list(zip(question_cols, key.rows))
    else:
        col_rows = _map_columns(question_cols, key, where)
    n_options = len(key.rows[0].order)
    found = _read_rater_rows(ws, where, rater_col, col_rows, n_options)
    allowed = ", ".join([f"Opzione 1..{n_options}", NONE_LABEL])
    if found.malformed and not skip_malformed:
        raise DataError(f"{where}: malformed cells (allowed: {allowed}): {'; '.join(found.malformed)}. Fix them, "
                        "or pass --skip-malformed to count them as unanswered")
    if found.malformed:
        logger.warning("%s: ignoring malformed cells %s", where, "; ".join(found.malformed))
    if found.missing:
        logger.warning("%s: %d empty cells in filled rater rows: %s", where, len(found.missing),
                       ", ".join(found.missing))
    if not found.choices:
        raise DataError(f"{where}: no rater has filled any cell")
    strategies = common.strategy_order({s for r in key.rows for s in r.order})
    return Survey(found.choices, found.raters, [krow for _, krow in col_rows], [*strategies, NONE],
                  key_used=key_used, missing_cells=found.missing, skipped_cells=found.malformed)


# ---------------------------------------------------------------------------------------------- counting

def counts_frame(survey: Survey, by: str | None) -> pd.DataFrame:
    """Counts per category (columns, display names), overall or per ``question_id`` / ``rater``."""
    frame = pd.DataFrame([c.__dict__ for c in survey.choices])
    cats = survey.categories
    if by is None:
        counts = frame["category"].value_counts().reindex(cats, fill_value=0)
        return pd.DataFrame({"category": [display(c) for c in cats], "count": counts.to_numpy()})
    order = [q.question_id for q in survey.questions] if by == "question_id" else survey.raters
    table = pd.crosstab(frame[by], frame["category"]).reindex(index=order, columns=cats, fill_value=0)
    table.columns = [display(c) for c in cats]
    table.index.name = by
    return table.reset_index()


def overall_table(survey: Survey) -> pd.DataFrame:
    """Overall counts with shares including and excluding "none"."""
    overall = counts_frame(survey, None)
    total = overall["count"].sum()
    strategies_total = overall.loc[overall["category"] != NONE_DISPLAY, "count"].sum()
    overall["share_all"] = overall["count"] / total
    overall["share_without_none"] = [
        (c / strategies_total if strategies_total else float("nan")) if cat != NONE_DISPLAY else float("nan")
        for cat, c in zip(overall["category"], overall["count"])]
    return overall


@dataclass(frozen=True)
class SurveyTests:
    chi2: stats.ChiSquare | None
    pairwise: pd.DataFrame
    kappa: float
    kappa_questions: int
    kappa_raters: int


def survey_tests(survey: Survey) -> SurveyTests:
    """Chi-square vs equal preference (strategies only), pairwise sign tests (Holm), Fleiss' kappa."""
    strategies = survey.categories[:-1]
    counts = {c: sum(1 for ch in survey.choices if ch.category == c) for c in survey.categories}
    chi2 = stats.chisquare_equal([counts[s] for s in strategies]) if len(strategies) >= 2 and sum(
        counts[s] for s in strategies) > 0 else None
    rows = []
    for a, b in combinations(strategies, 2):
        n = counts[a] + counts[b]
        rows.append({"strategy_a": a, "strategy_b": b, "count_a": counts[a], "count_b": counts[b], "n": n,
                     "share_a": counts[a] / n if n else float("nan"), "p_sign": stats.sign_test_p(counts[a], n)})
    pairwise = pd.DataFrame(rows, columns=["strategy_a", "strategy_b", "count_a", "count_b", "n", "share_a",
                                           "p_sign"])
    if len(pairwise):
        pairwise["p_sign_holm"] = stats.holm(pairwise["p_sign"].tolist())
    # Fleiss' kappa over questions that every rater answered (subjects), categories incl. "none".
    per_q: dict[str, list[str]] = {}
    for ch in survey.choices:
        per_q.setdefault(ch.question_id, []).append(ch.category)
    n_raters = len(survey.raters)
    complete = [cats for cats in per_q.values() if len(cats) == n_raters]
    kappa = float("nan")
    if n_raters >= 2 and complete:
        table = [[cats.count(c) for c in survey.categories] for cats in complete]
        kappa = stats.fleiss_kappa(table)
    return SurveyTests(chi2, pairwise, kappa, len(complete), n_raters)


# ---------------------------------------------------------------------------------------------- plots

def build_figures(survey: Survey) -> dict[str, object]:
    """The plotly figures, keyed by file stem."""
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


# ---------------------------------------------------------------------------------------------- report

def markdown_summary(survey: Survey, overall: pd.DataFrame, tests: SurveyTests, plots: list[Path],
                     plot_error: str | None, key_path: Path | None) -> str:
    lines = ["# Human preference survey\n"]
    if survey.key_used:
        lines.append(f"- Options mapped to strategies with the answer key `{key_path}`.")
    else:
        lines.append("- **No answer key: the paper's fixed order was assumed** (Opzione 1 = Paragraph, "
                     "Opzione 2 = Fixed-size, Opzione 3 = Blank-line).")
    lines.append(f"- {len(survey.raters)} raters, {len(survey.questions)} questions, {len(survey.choices)} choices"
                 + (f"; {len(survey.missing_cells)} empty cells" if survey.missing_cells else "")
                 + (f"; {len(survey.skipped_cells)} malformed cells skipped" if survey.skipped_cells else ""))
    lines.append("")
    rows = [[r["category"], int(r["count"]), f"{r['share_all']:.1%}",
             "–" if pd.isna(r["share_without_none"]) else f"{r['share_without_none']:.1%}"]
            for _, r in overall.iterrows()]
    lines.append(common.markdown_table(["Choice", "Count", "Share", f"Share excl. \"{NONE_DISPLAY}\""], rows,
                                       "lrrr"))
    lines.append("## Tests\n")
    if tests.chi2:
        lines.append(f"- Chi-square goodness of fit against equal preference among the strategies (excluding "
                     f"\"{NONE_DISPLAY}\"): χ²={tests.chi2.statistic:.3f}, df={tests.chi2.df}, "
                     f"{stats.format_p(tests.chi2.p)}.")
    for _, r in tests.pairwise.iterrows():
        lines.append(f"- {display(r['strategy_a'])} vs {display(r['strategy_b'])}: {int(r['count_a'])} vs "
                     f"{int(r['count_b'])} choices, share {r['share_a']:.1%} for {display(r['strategy_a'])}, exact "
                     f"sign test {stats.format_p(r['p_sign'])} (Holm {stats.format_p(r['p_sign_holm'])}).")
    kappa = "undefined" if pd.isna(tests.kappa) else f"{tests.kappa:.3f}"
    lines.append(f"- Inter-rater agreement, Fleiss' κ = {kappa} over {tests.kappa_questions} questions answered by "
                 f"all {tests.kappa_raters} raters (categories: strategies and \"{NONE_DISPLAY}\").")
    lines.append("- Caveat: the tests treat every choice as independent; choices by the same rater or on the same "
                 "question are correlated, so p-values are optimistic.\n")
    lines.append("## Plots\n")
    lines += [f"- `{p}`" for p in plots]
    if plot_error:
        lines.append(f"- Not written: {plot_error}")
    lines.append("")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    results_dir = Path(args.results_dir)
    out_dir = Path(args.out_dir or results_dir / "survey")
    answers_path = Path(args.answers or results_dir / TEMPLATE_NAME)
    key_path = Path(args.key or results_dir / KEY_NAME)
    key = None
    if args.no_key:
        logger.warning("--no-key: assuming the paper's fixed option order")
    elif key_path.is_file():
        key = read_answer_key(key_path)
    elif args.key:
        raise DataError(f"answer key {key_path} not found")
    else:
        logger.warning("No answer key at %s: assuming the paper's fixed order (Opzione 1/2/3 = Paragraph/"
                       "Fixed-size/Blank-line)", key_path)
    survey = read_survey(answers_path, key, skip_malformed=args.skip_malformed)
    overall = overall_table(survey)
    tests = survey_tests(survey)
    common.atomic_write_csv(out_dir / "survey_counts_overall.csv", overall)
    common.atomic_write_csv(out_dir / "survey_counts_per_question.csv", counts_frame(survey, "question_id"))
    common.atomic_write_csv(out_dir / "survey_counts_per_rater.csv", counts_frame(survey, "rater"))
    common.atomic_write_csv(out_dir / "survey_choices.csv", pd.DataFrame([c.__dict__ for c in survey.choices]))
    common.atomic_write_csv(out_dir / "survey_pairwise_tests.csv", tests.pairwise)
    plots, plot_error = [], None
    if not args.no_plots:
        try:
            plots = write_figures(build_figures(survey), out_dir / "plots")
        except RuntimeError as exc:  # no Chrome: everything else is still written
            plot_error = str(exc)
    else:
        plot_error = "--no-plots given"
    report = markdown_summary(survey, overall, tests, plots, plot_error, key_path if key else None)
    common.atomic_write_text(out_dir / "survey_summary.md", report)
    print(report)
    print(f"Outputs in {out_dir}")
    if plot_error and not args.no_plots:
        logger.error("Plots not written: %s", plot_error)
        return 3
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Analyse interview_answers.xlsx (one row per rater, one column per question, cells 'Opzione k' "
                    "or 'Nessuna delle precedenti'): counts, plots (PDF+PNG), chi-square, sign tests, Fleiss' kappa.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--results-dir", default=str(common.DEFAULT_RESULTS_DIR),
                        help="folder holding interview_answers.xlsx and answer_key.csv")
    parser.add_argument("--answers", default=None, help="raters' workbook (default: <results-dir>/interview_answers.xlsx)")
    parser.add_argument("--key", default=None, help="answer key (default: <results-dir>/answer_key.csv)")
    parser.add_argument("--no-key", action="store_true", help="ignore any key; assume the paper's fixed order")
    parser.add_argument("--out-dir", default=None, help="outputs (default: <results-dir>/survey)")
    parser.add_argument("--skip-malformed", action="store_true",
                        help="count malformed cells as unanswered (listed) instead of failing")
    parser.add_argument("--no-plots", action="store_true", help="skip the PDF/PNG plots")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_script(build_parser, run, argv)


if __name__ == "__main__":
    sys.exit(main())
