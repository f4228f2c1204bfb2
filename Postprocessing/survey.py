"""The raters' survey (``interview_answers.xlsx``): reading it and mapping every choice back to a strategy through
the answer key, preference counts overall / per question / per rater, the tests (chi-square against equal
preference, pairwise sign tests, Fleiss' kappa) and the Markdown summary. Plots: ``plots.survey_figures``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pandas as pd

from Postprocessing import common, survey_stats
from ragstudy.grid.records import normalize_ws
from ragstudy.scoring.stats import HOLM_COLUMN, holm
from Postprocessing.common import DataError
from Postprocessing.formatting import format_p, markdown_table
from Postprocessing.review import NONE_LABEL, TEMPLATE_NAME, AnswerKey, KeyRow, question_id

logger = logging.getLogger(__name__)

NONE = "none"  # category name of "Nessuna delle precedenti"
NONE_DISPLAY = "None of the above"
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
    return {display(c): NONE_COLOR if c == NONE else common.color(c) for c in categories}


def display(category: str) -> str:
    """How a category is shown: the strategy's display name, or "None of the above"."""
    return NONE_DISPLAY if category == NONE else common.display_name(category)


def parse_cell(value: object, n_options: int) -> int | None | str:
    """``Opzione k`` → k, ``Nessuna delle precedenti`` → 0, empty → None, anything else → the text
    (malformed)."""
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
    by_text = {normalize_ws(r.question).casefold(): r for r in key.rows if r.question}
    col_rows, unknown = [], []
    for coord, col, title in question_cols:
        row = by_id.get(title) or by_text.get(normalize_ws(title).casefold())
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
    from ragstudy.errors import StudyInputError
    from ragstudy.workbook import open_workbook

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} not found: raters fill {TEMPLATE_NAME} (made by ragstudy review)")
    try:
        wb = open_workbook(path, "raters' workbook", f"ragstudy review ({TEMPLATE_NAME})", data_only=True,
                           read_only=False)
    except StudyInputError as exc:
        raise DataError(str(exc)) from None
    ws = wb["Risposte"] if "Risposte" in wb.sheetnames else wb.worksheets[0]
    where = f"{path.name}!{ws.title}"
    key_used = key is not None
    rater_col, question_cols = _header_columns(ws, where)
    if key is None:
        key = paper_key([question_id(i) for i in range(len(question_cols))])
        col_rows = list(zip(question_cols, key.rows))
    else:
        col_rows = _map_columns(question_cols, key, where)
        mapped = {krow.question_id for _, krow in col_rows}
        absent = [r.question_id for r in key.rows if r.question_id not in mapped]
        if absent:  # never read as a survey of fewer questions
            raise DataError(f"{path}: no column for question(s) {', '.join(absent)} of the answer key "
                            f"({len(key.rows)} questions, {len(col_rows)} columns in row 1 of {ws.title}); restore "
                            f"the column(s) from {TEMPLATE_NAME} (made by ragstudy review), empty if no rater "
                            "answered them")
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
    chi2: survey_stats.ChiSquare | None
    pairwise: pd.DataFrame
    kappa: float
    kappa_questions: int
    kappa_raters: int


def survey_tests(survey: Survey) -> SurveyTests:
    """Chi-square vs equal preference (strategies only), pairwise sign tests (Holm), Fleiss' kappa."""
    strategies = survey.categories[:-1]
    counts = {c: sum(1 for ch in survey.choices if ch.category == c) for c in survey.categories}
    chi2 = survey_stats.chisquare_equal([counts[s] for s in strategies]) if len(strategies) >= 2 and sum(
        counts[s] for s in strategies) > 0 else None
    rows = []
    for a, b in combinations(strategies, 2):
        n = counts[a] + counts[b]
        rows.append({"strategy_a": a, "strategy_b": b, "count_a": counts[a], "count_b": counts[b], "n": n,
                     "share_a": counts[a] / n if n else float("nan"), "p_sign": survey_stats.sign_test_p(counts[a], n)})
    pairwise = pd.DataFrame(rows, columns=["strategy_a", "strategy_b", "count_a", "count_b", "n", "share_a",
                                           "p_sign"])
    pairwise[HOLM_COLUMN] = holm(pairwise["p_sign"].tolist()) if len(pairwise) else []
    # Fleiss' kappa over questions that every rater answered (subjects), categories incl. "none".
    per_q: dict[str, list[str]] = {}
    for ch in survey.choices:
        per_q.setdefault(ch.question_id, []).append(ch.category)
    n_raters = len(survey.raters)
    complete = [cats for cats in per_q.values() if len(cats) == n_raters]
    kappa = float("nan")
    if n_raters >= 2 and complete:
        table = [[cats.count(c) for c in survey.categories] for cats in complete]
        kappa = survey_stats.fleiss_kappa(table)
    return SurveyTests(chi2, pairwise, kappa, len(complete), n_raters)


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
    lines.append(markdown_table(["Choice", "Count", "Share", f"Share excl. \"{NONE_DISPLAY}\""], rows,
                                       "lrrr"))
    lines.append("## Tests\n")
    if tests.chi2:
        lines.append(f"- Chi-square goodness of fit against equal preference among the strategies (excluding "
                     f"\"{NONE_DISPLAY}\"): χ²={tests.chi2.statistic:.3f}, df={tests.chi2.df}, "
                     f"{format_p(tests.chi2.p)}.")
    for _, r in tests.pairwise.iterrows():
        lines.append(f"- {display(r['strategy_a'])} vs {display(r['strategy_b'])}: {int(r['count_a'])} vs "
                     f"{int(r['count_b'])} choices, share {r['share_a']:.1%} for {display(r['strategy_a'])}, exact "
                     f"sign test {format_p(r['p_sign'])} (Holm {format_p(r['p_holm'])}).")
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


def write_tables(out_dir: Path, survey: Survey, overall: pd.DataFrame, tests: SurveyTests) -> None:
    """The survey's CSV tables (counts overall / per question / per rater, every choice, pairwise tests)."""
    from ragstudy import results

    results.write_table(out_dir, results.SURVEY_OVERALL, overall)
    results.write_table(out_dir, results.SURVEY_PER_QUESTION, counts_frame(survey, "question_id"))
    results.write_table(out_dir, results.SURVEY_PER_RATER, counts_frame(survey, "rater"))
    results.write_table(out_dir, results.SURVEY_CHOICES, pd.DataFrame([c.__dict__ for c in survey.choices],
                                                                      columns=list(results.SURVEY_CHOICES.columns)))
    results.write_table(out_dir, results.SURVEY_PAIRWISE, tests.pairwise)
