"""An eighth strategy is one new folder with one registration: written here into a temporary folder (nothing in the
repository names it), discovered as the registry discovers strategies ($RAGSTUDY_PLUGIN_PACKAGES), and then
present in the chain's answers, retrieval-only output, the answer metrics table, the review workbook, the survey
plots and the report."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from openpyxl import load_workbook

from ragstudy import registry
from ragstudy.plugins import PLUGIN_PACKAGES_ENV
from ragstudy.results import open_run, read_retrieval, retrieval_path
from ragstudy_cli import app
from test_structure import LEAF_CORE

FOLDER = "RAGEveryLine"
NAME = "every-line"
DISPLAY = "Every line"
COLOR = "#AA3377"
# The whole strategy folder: a chunker, its parameters and one registration, importing only the core's blocks.
STRATEGY_SOURCE = f'''"""Every-line strategy (a test's): parents are the text layer's lines of at least `min_chars`."""

from dataclasses import dataclass

from langchain_text_splitters import TextSplitter

from ragstudy.text.chunks import SplitterChunker
from ragstudy.registry import ChunkerContext, register_strategy


@dataclass(frozen=True)
class LineParams:
    min_chars: int = 1


class LineSplitter(TextSplitter):
    def __init__(self, min_chars: int) -> None:
        super().__init__(chunk_size=1, chunk_overlap=0)
        self._min_chars = min_chars

    def split_text(self, text: str) -> list[str]:
        return [line.strip() for line in text.splitlines() if len(line.strip()) >= self._min_chars]


def make_chunker(config: LineParams, context: ChunkerContext) -> SplitterChunker:
    return SplitterChunker(LineSplitter(config.min_chars))


SPEC = register_strategy("{NAME}", make_chunker, LineParams, display_name="{DISPLAY}", color="{COLOR}", order=7,
                         description="one parent per line")
'''


@pytest.fixture()
def eighth_strategy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The folder, importable the way the registry finds packages outside the repository; removed afterwards."""
    packages = tmp_path / "strategies"
    (packages / FOLDER).mkdir(parents=True)
    (packages / FOLDER / "__init__.py").write_text(STRATEGY_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(packages))
    monkeypatch.setenv(PLUGIN_PACKAGES_ENV, FOLDER)
    registry.STRATEGIES.forget()  # discover again, as a fresh process would
    yield registry.get(NAME)
    registry.unregister(NAME)
    sys.modules.pop(FOLDER, None)


def _fill_survey(results: Path, template: Path, key_path: Path) -> None:
    """Three raters: rater r prefers the option at position r of every question (so each strategy gets votes)."""
    from Postprocessing import review

    key = review.read_answer_key(key_path)
    wb = load_workbook(template)
    ws = wb["Risposte"]
    for r in range(2, 5):
        for c, krow in enumerate(key.rows, start=2):
            ws.cell(row=r, column=c).value = f"Opzione {(r + c) % len(krow.order) + 1}"
    wb.save(template)


@pytest.mark.slow
def test_an_eighth_strategy_folder_shows_up_everywhere(eighth_strategy, pdf_dir: Path, questions_csv: Path,
                                                       tmp_path: Path, tiny_phi3: str) -> None:
    from Postprocessing import plots
    from Postprocessing import review
    from Postprocessing import survey

    spec = eighth_strategy
    imported = {node.module for node in ast.walk(ast.parse(STRATEGY_SOURCE)) if isinstance(node, ast.ImportFrom)}
    assert {name for name in imported if name.startswith("ragstudy")} <= LEAF_CORE  # a leaf, as the layers want
    assert (spec.folder, spec.dataset_name, spec.defaults.parent) == (FOLDER, "DatasetEveryLine", {"min_chars": 1})
    assert registry.available()[-1] == NAME and NAME in registry.parse_strategies("all")

    results, db = tmp_path / "results", tmp_path / "db"
    common = ["--profile", "lite", "--documents", str(pdf_dir), "--questions", str(questions_csv),
              "--db-dir", str(db), "--strategies", f"newline,{NAME}"]
    assert app.main(app.chain_subcommand([*common, "--output-dir", str(results), "--llm", tiny_phi3,
                                  "--max-new-tokens", "6"])) == 0
    rows = json.loads((results / "DatasetEveryLine.json").read_text(encoding="utf-8"))
    assert len(rows) == 3 and all(row["contexts"] for row in rows)
    chunks = pd.read_csv(results / f"chunks_{NAME}.csv", keep_default_na=False)
    assert len(chunks) > 0 and all("\n" not in text for text in chunks["contents"])

    ranked = tmp_path / "retrieval"
    assert app.main(app.chain_subcommand([*common, "--output-dir", str(ranked), "--retrieval-only", "--budgets",
                                          "300"])) == 0
    rankings = read_retrieval(retrieval_path(open_run(ranked).strategy_folder(NAME), NAME))
    assert sorted(rankings) == [0, 1, 2] and all(parents for parents in rankings.values())

    oracle = tmp_path / "Oracle.csv"
    oracle.write_text("oracle\nI fascicoli si conservano per dieci anni.\nSi accede al portale con SPID.\n"
                      "L'assistenza risponde entro due giorni.\n", encoding="utf-8")
    inputs = ["--questions", str(questions_csv), "--oracle", str(oracle)]
    assert app.main(["score-answers", "--results-dir", str(results), *inputs, "--metrics", "bleu,rouge",
                     "--n-resamples", "200"]) == 0
    summary = pd.read_csv(results / "metrics_summary.csv")
    assert DISPLAY in set(summary["strategy_display"])
    assert DISPLAY in (results / "metrics_summary.md").read_text(encoding="utf-8")

    assert app.main(["review", "--results-dir", str(results), *inputs, "--raters", "3"]) == 0
    key = pd.read_csv(results / review.KEY_NAME)
    assert NAME in " ".join(key.astype(str).to_numpy().ravel())
    _fill_survey(results, results / review.TEMPLATE_NAME, results / review.KEY_NAME)
    assert app.main(["survey", "--results-dir", str(results), "--answers", str(results / review.TEMPLATE_NAME)]) == 0
    counts = pd.read_csv(results / "survey" / "survey_counts_overall.csv")
    assert DISPLAY in set(counts["category"])
    figures = plots.survey_figures(survey.read_survey(results / review.TEMPLATE_NAME, review.read_answer_key(results / review.KEY_NAME)))
    colours = {trace.name: trace.marker.color for fig in figures.values() for trace in fig.data
               if getattr(trace, "name", None)}
    assert colours.get(DISPLAY) == COLOR

    page = tmp_path / "report.html"
    assert app.main(["report", "--results-dir", str(results), "--out", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert DISPLAY in html and COLOR.lower() in html.lower()
