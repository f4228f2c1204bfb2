"""preprocessing_files.py (blinded workbook, answer key, rater template) and interview_analysis.py, including a
round trip: raters fill the template, the analysis maps every option back to the right strategy."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]

from openpyxl import Workbook, load_workbook

from Postprocessing import common
from Postprocessing import plots as pl
from Postprocessing import review as rf
from Postprocessing import survey as sv
from ragstudy_cli import app

FIXTURES = REPO / "tests" / "fixtures" / "postprocessing"
BASIC = FIXTURES / "basic"
SYNTHETIC = FIXTURES / "survey_synthetic"  # SYNTHETIC survey: invented raters, see its README.md
STRATEGY_NAMES = ("paragraph", "fixed-size", "newline")


@pytest.fixture()
def review(tmp_path) -> Path:
    """Run preprocessing_files.py on the basic fixture into tmp_path/results."""
    results = tmp_path / "results"
    shutil.copytree(BASIC, results)
    code = app.main(["review", "--results-dir", str(results), "--questions", str(results / "Questions.csv"),
                    "--oracle", str(results / "Oracle.csv"), "--raters", "3"])
    assert code == 0
    return results


def _synthetic_xlsx(path: Path, csv: Path = SYNTHETIC / "interview_answers.csv", edit=None) -> Path:
    """Write the SYNTHETIC survey CSV as the xlsx raters would return."""
    frame = pd.read_csv(csv, dtype=str, keep_default_na=False)
    if edit:
        frame = edit(frame)
    wb = Workbook()
    ws = wb.active
    ws.title = "Risposte"
    ws.append(list(frame.columns))
    for row in frame.itertuples(index=False):
        ws.append(list(row))
    wb.save(path)
    return path


# ------------------------------------------------------------------------------------------ shuffling and key

def test_balanced_orders_vary_across_questions_and_balance_positions():
    orders = rf.balanced_orders(12, STRATEGY_NAMES, seed=3)
    assert len(set(orders)) == 6  # every permutation used
    assert orders[0] != orders[1]
    for position in range(3):
        assert Counter(o[position] for o in orders) == {s: 4 for s in STRATEGY_NAMES}
    assert rf.balanced_orders(12, STRATEGY_NAMES, seed=3) == orders
    assert rf.balanced_orders(12, STRATEGY_NAMES, seed=4) != orders


def test_workbook_is_blind_and_key_maps_every_option_back(review):
    key = rf.read_answer_key(review / rf.KEY_NAME)
    assert key.seed == 0 and len(key.rows) == 6
    assert len({row.order for row in key.rows}) > 1  # the order differs across questions
    datasets = {s: pd.read_csv(review / f"{stem}.csv") for s, stem in
                [("paragraph", "DatasetCustom"), ("fixed-size", "DatasetFixedSize"), ("newline", "DatasetNewLine")]}
    oracle = pd.read_csv(review / "Oracle.csv")["oracle"]
    ws = load_workbook(review / rf.WORKBOOK_NAME)["Valutazione"]
    header = [c.value for c in ws[1]]
    assert header == ["ID", "Domanda", "Risposta attesa (oracolo)", "Opzione 1", "Opzione 2", "Opzione 3"]
    for r, krow in enumerate(key.rows, start=2):
        cells = [ws.cell(row=r, column=c).value for c in range(1, 7)]
        assert cells[0] == krow.question_id
        assert cells[2] == oracle[krow.question_index]
        for k, strategy in enumerate(krow.order):
            assert cells[3 + k] == datasets[strategy]["answer"][krow.question_index]
    text = " ".join(str(c.value) for sheet in load_workbook(review / rf.WORKBOOK_NAME) for row in sheet
                    for c in row if c.value is not None)
    for leak in ("paragraph", "fixed-size", "newline", "Paragraph", "Blank-line", "DatasetCustom"):
        assert leak not in text  # nothing in the raters' workbook names a strategy
    assert "Perché è necessario il riversamento dei file?" in text  # accents kept


def test_workbook_cells_are_wrapped_and_sized(review):
    ws = load_workbook(review / rf.WORKBOOK_NAME)["Valutazione"]
    assert ws["D3"].alignment.wrap_text and ws["B2"].alignment.vertical == "top"
    assert ws.column_dimensions["D"].width >= 40 and ws.column_dimensions["B"].width >= 30
    assert ws.row_dimensions[3].height > 15  # long answers get taller rows
    assert ws.freeze_panes == "C2"


def test_template_has_one_column_per_question_and_validated_cells(review):
    ws = load_workbook(review / rf.TEMPLATE_NAME)["Risposte"]
    assert [c.value for c in ws[1]] == ["Valutatore", "Q1", "Q2", "Q3", "Q4", "Q5", "Q6"]
    assert [ws.cell(row=r, column=1).value for r in (2, 3, 4)] == ["R01", "R02", "R03"]
    (validation,) = ws.data_validations.dataValidation
    assert validation.formula1 == '"Opzione 1,Opzione 2,Opzione 3,Nessuna delle precedenti"'
    assert str(validation.sqref) == "B2:G4"
    assert ws["B1"].comment.text.startswith("Qual è la porta")


def test_formula_like_answer_stays_text(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(BASIC, results)
    path = results / "DatasetNewLine.csv"
    frame = pd.read_csv(path)
    frame.loc[0, "answer"] = "=SUM(A1:A2) non è una formula"
    frame.to_csv(path, index=False)
    assert app.main(["review", "--results-dir", str(results), "--questions", str(results / "Questions.csv"),
                    "--oracle", str(results / "Oracle.csv"), "--fixed-order"]) == 0
    ws = load_workbook(results / rf.WORKBOOK_NAME)["Valutazione"]
    assert ws["F2"].value == "=SUM(A1:A2) non è una formula" and ws["F2"].data_type == "s"
    assert rf.read_answer_key(results / rf.KEY_NAME).rows[0].order == STRATEGY_NAMES  # paper order


def test_round_trip_template_to_analysis(review):
    """Raters pick a known strategy per question; the analysis must recover exactly those strategies."""
    key = rf.read_answer_key(review / rf.KEY_NAME)
    wanted = {  # rater -> strategy chosen for every question
        "R01": ["paragraph"] * 6,
        "R02": ["fixed-size", "newline", "paragraph", "paragraph", "newline", "fixed-size"],
        "R03": ["newline", "none", "paragraph", "fixed-size", "paragraph", "paragraph"],
    }
    wb = load_workbook(review / rf.TEMPLATE_NAME)
    ws = wb["Risposte"]
    for r, (rater, picks) in enumerate(wanted.items(), start=2):
        assert ws.cell(row=r, column=1).value == rater
        for c, (krow, pick) in enumerate(zip(key.rows, picks), start=2):
            ws.cell(row=r, column=c).value = (rf.NONE_LABEL if pick == "none"
                                              else f"Opzione {krow.order.index(pick) + 1}")
    wb.save(review / rf.TEMPLATE_NAME)
    survey = sv.read_survey(review / rf.TEMPLATE_NAME, key)
    got = {(c.rater, c.question_id): c.category for c in survey.choices}
    for rater, picks in wanted.items():
        for krow, pick in zip(key.rows, picks):
            assert got[(rater, krow.question_id)] == pick


# ------------------------------------------------------------------------------------------ survey analysis

def test_synthetic_survey_counts_and_tests_match_hand_computation(tmp_path):
    survey = sv.read_survey(_synthetic_xlsx(tmp_path / "a.xlsx"), rf.read_answer_key(SYNTHETIC / "answer_key.csv"))
    overall = sv.overall_table(survey).set_index("category")["count"].to_dict()
    assert overall == {"Paragraph": 12, "Fixed-size": 6, "Blank-line": 3, "None of the above": 3}
    per_rater = sv.counts_frame(survey, "rater").set_index("rater")
    assert per_rater.loc["R04"].tolist() == [1, 4, 0, 1]
    assert per_rater.loc["R03"].tolist() == [3, 0, 2, 1]
    per_q = sv.counts_frame(survey, "question_id").set_index("question_id")
    assert per_q.loc["Q5"].tolist() == [1, 2, 1, 0] and per_q.loc["Q6"].tolist() == [1, 1, 1, 1]
    tests = sv.survey_tests(survey)
    assert tests.chi2.statistic == pytest.approx(6.0) and tests.chi2.p == pytest.approx(0.0497871, abs=1e-7)
    p = tests.pairwise.set_index(["strategy_a", "strategy_b"])
    assert p.loc[("paragraph", "fixed-size"), "p_sign"] == pytest.approx(0.2378845, abs=1e-7)
    assert p.loc[("paragraph", "newline"), "p_sign"] == pytest.approx(0.0351563, abs=1e-7)
    assert p.loc[("fixed-size", "newline"), "p_sign"] == pytest.approx(0.5078125, abs=1e-7)
    assert p.loc[("paragraph", "newline"), "p_holm"] == pytest.approx(0.1054688, abs=1e-7)
    assert tests.kappa == pytest.approx(-1 / 7) and tests.kappa_questions == 6


def test_without_key_the_papers_fixed_order_is_assumed_and_said(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    _synthetic_xlsx(results / rf.TEMPLATE_NAME)
    assert app.main(["survey", "--results-dir", str(results), "--no-plots"]) == 0
    overall = pd.read_csv(results / "survey" / "survey_counts_overall.csv").set_index("category")["count"]
    assert overall.to_dict() == {"Paragraph": 10, "Fixed-size": 6, "Blank-line": 5, "None of the above": 3}
    assert "No answer key: the paper's fixed order was assumed" in capsys.readouterr().out


def test_malformed_cells_are_reported_with_their_address(tmp_path):
    def spoil(frame):
        frame.loc[1, "Q3"] = "Opzione 4"
        frame.loc[3, "Q6"] = "la prima"
        return frame

    path = _synthetic_xlsx(tmp_path / "bad.xlsx", edit=spoil)
    key = rf.read_answer_key(SYNTHETIC / "answer_key.csv")
    with pytest.raises(common.DataError, match=r"D3 'Opzione 4'; G5 'la prima'"):
        sv.read_survey(path, key)
    survey = sv.read_survey(path, key, skip_malformed=True)
    assert len(survey.choices) == 22 and survey.skipped_cells == ["D3 'Opzione 4'", "G5 'la prima'"]


def test_cell_parsing_tolerates_case_and_spaces():
    assert sv.parse_cell("  opzione   2 ", 3) == 2
    assert sv.parse_cell("NESSUNA delle precedenti", 3) == 0
    assert sv.parse_cell(None, 3) is None and sv.parse_cell("  ", 3) is None
    assert sv.parse_cell("Opzione 4", 3) == "Opzione 4"


def test_plots_are_written_as_pdf_and_png(tmp_path):
    if pl.find_chrome() is None:
        pytest.skip("no Chrome/Chromium for kaleido (Debian package 'chromium')")
    results = tmp_path / "results"
    results.mkdir()
    _synthetic_xlsx(results / rf.TEMPLATE_NAME)
    shutil.copy(SYNTHETIC / "answer_key.csv", results / rf.KEY_NAME)
    assert app.main(["survey", "--results-dir", str(results)]) == 0
    plots = results / "survey" / "plots"
    for stem in ("pie_overall", "pie_overall_without_none", "bars_per_question", "bars_per_rater",
                 "box_per_strategy"):
        assert (plots / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
        png = (plots / f"{stem}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    summary = (results / "survey" / "survey_summary.md").read_text(encoding="utf-8")
    assert "Fleiss' κ = -0.143" in summary and "χ²=6.000, df=2, p=0.050" in summary


def test_missing_chrome_still_writes_tables_and_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(pl, "find_chrome", lambda: None)
    results = tmp_path / "results"
    results.mkdir()
    _synthetic_xlsx(results / rf.TEMPLATE_NAME)
    assert app.main(["survey", "--results-dir", str(results)]) == 3
    summary = (results / "survey" / "survey_summary.md").read_text(encoding="utf-8")
    assert "'chromium'" in summary
    assert (results / "survey" / "survey_counts_per_rater.csv").exists()
