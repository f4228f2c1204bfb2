"""Postprocessing on results it did not write itself: the paper's own Dataset files (matched by position), and a
strategy registered by a test alone (every table, key and plot picks it up from the registry)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from openpyxl import load_workbook

from Postprocessing import plots as pl
from Postprocessing import review as rf
from Postprocessing import survey as sv
from ragstudy import registry
from ragstudy_cli import app

REPO = Path(__file__).resolve().parents[1]
BASIC = REPO / "tests" / "fixtures" / "postprocessing" / "basic"
STEMS = ("DatasetCustom", "DatasetFixedSize", "DatasetNewLine")


def _as_papers_files(folder: Path) -> None:
    """Rewrite the Dataset files exactly as the paper's code did: `datasets`' to_csv / to_json, 3 columns."""
    datasets = pytest.importorskip("datasets", reason="the paper's files are written with Hugging Face datasets")
    for stem in STEMS:
        rows = json.loads((folder / f"{stem}.json").read_text(encoding="utf-8"))
        data = datasets.Dataset.from_dict({"question": [r["question"] for r in rows],
                                           "answer": [r["answer"] for r in rows],
                                           "contexts": [r["contexts"] for r in rows]})
        data.to_csv(str(folder / f"{stem}.csv"))
        data.to_json(str(folder / f"{stem}.json"))


def _inputs(results: Path) -> list[str]:
    return ["--questions", str(results / "Questions.csv"), "--oracle", str(results / "Oracle.csv")]


def _metrics(results: Path, fmt: str) -> pd.DataFrame:
    out = results / f"metrics-{fmt}"
    code = app.main(["score-answers", "--results-dir", str(results), *_inputs(results), "--out-dir", str(out),
                     "--format", fmt,
                    "--metrics", "bleu,rouge", "--n-resamples", "200"])
    assert code == 0
    return pd.read_csv(out / "metrics_per_question.csv")


def _fill_survey(results: Path) -> pd.DataFrame:
    """Raters pick the same strategies whatever the file format; returns the overall counts."""
    key = rf.read_answer_key(results / rf.KEY_NAME)
    wb = load_workbook(results / rf.TEMPLATE_NAME)
    ws = wb["Risposte"]
    names = [s.name for s in registry.specs() if (results / f"{s.dataset_name}.csv").is_file()]
    for r in range(2, 5):
        for c, krow in enumerate(key.rows, start=2):
            pick = names[(r + c) % len(names)]
            ws.cell(row=r, column=c).value = f"Opzione {krow.order.index(pick) + 1}"
    wb.save(results / rf.TEMPLATE_NAME)
    assert app.main(["survey", "--results-dir", str(results), "--answers", str(results / rf.TEMPLATE_NAME)]) == 0
    return pd.read_csv(results / "survey" / "survey_counts_overall.csv")


@pytest.mark.slow
def test_papers_files_give_the_same_numbers_as_this_projects(tmp_path: Path) -> None:
    ours, papers = tmp_path / "ours", tmp_path / "papers"
    shutil.copytree(BASIC, ours)
    shutil.copytree(BASIC, papers)
    (papers / "config.json").unlink()  # the paper's runs wrote none
    _as_papers_files(papers)
    assert "question_index" not in (papers / "DatasetCustom.csv").read_text(encoding="utf-8").splitlines()[0]

    for fmt in ("csv", "json"):
        pd.testing.assert_frame_equal(_metrics(ours, fmt), _metrics(papers, fmt))
    said = (papers / "metrics-csv" / "metrics_summary.md").read_text(encoding="utf-8")
    assert "`DatasetCustom.csv`: the paper's format" in said and "No config.json" in said
    assert "the paper's format" not in (ours / "metrics-csv" / "metrics_summary.md").read_text(encoding="utf-8")

    for folder in (ours, papers):
        assert app.main(["review", "--results-dir", str(folder), *_inputs(folder), "--raters", "3"]) == 0
    assert (ours / rf.KEY_NAME).read_text(encoding="utf-8") == (papers / rf.KEY_NAME).read_text(encoding="utf-8")
    ours_cells = [[c.value for c in row] for row in load_workbook(ours / "output.xlsx").active.iter_rows()]
    papers_cells = [[c.value for c in row] for row in load_workbook(papers / "output.xlsx").active.iter_rows()]
    assert ours_cells == papers_cells
    pd.testing.assert_frame_equal(_fill_survey(ours), _fill_survey(papers))


def test_a_mismatched_papers_file_is_an_error_naming_the_row(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    shutil.copytree(BASIC, papers)
    _as_papers_files(papers)
    rows = [json.loads(line) for line in (papers / "DatasetNewLine.json").read_text(encoding="utf-8").splitlines()]
    rows[1], rows[2] = rows[2], rows[1]
    (papers / "DatasetNewLine.json").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert app.main(["score-answers", "--results-dir", str(papers), *_inputs(papers), "--format", "json", "--metrics",
                     "bleu"]) == 2


@pytest.fixture()
def toy_strategy():
    """A strategy that exists only in this test: nothing in Postprocessing names it."""
    from RAGNewLine.strategy import make_chunker

    spec = registry.register(registry.StrategySpec(
        name="toy", dataset_name="DatasetToy", folder="RAGToy", defaults=registry.StrategyParams(),
        make_chunker=make_chunker, display_name="Toy chunks", color="#123456", order=50))
    yield spec
    registry.unregister("toy")


def test_a_newly_registered_strategy_shows_up_in_every_postprocessing_output(tmp_path: Path, toy_strategy) -> None:
    results = tmp_path / "results"
    shutil.copytree(BASIC, results)
    for suffix in (".csv", ".json"):
        text = (results / f"DatasetNewLine{suffix}").read_text(encoding="utf-8")
        (results / f"DatasetToy{suffix}").write_text(text.replace("newline", "toy"), encoding="utf-8")

    assert app.main(["score-answers", "--results-dir", str(results), *_inputs(results), "--metrics", "bleu,rouge",
                    "--n-resamples", "200"]) == 0
    summary = pd.read_csv(results / "metrics_summary.csv")
    assert "Toy chunks" in set(summary["strategy_display"])
    paired = pd.read_csv(results / "metrics_paired.csv")
    assert {"toy"} <= set(paired["strategy_a"]) | set(paired["strategy_b"])
    assert "Toy chunks" in (results / "metrics_summary.md").read_text(encoding="utf-8")

    assert app.main(["review", "--results-dir", str(results), *_inputs(results), "--raters", "3"]) == 0
    key = pd.read_csv(results / rf.KEY_NAME)
    assert "toy" in " ".join(key.astype(str).to_numpy().ravel())
    counts = _fill_survey(results)
    assert "Toy chunks" in set(counts["category"])
    figures = pl.survey_figures(sv.read_survey(results / rf.TEMPLATE_NAME, rf.read_answer_key(results / rf.KEY_NAME)))
    colours = {trace.name: trace.marker.color for fig in figures.values() for trace in fig.data
               if getattr(trace, "name", None)}
    assert colours.get("Toy chunks") == "#123456"
