"""The Python API (docs/python.md): each job takes its typed, frozen settings and returns what it wrote; the page's
code blocks run as written, and the command line writes the same files as the call under it."""

from __future__ import annotations

import re
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pandas as pd
import pytest

from Postprocessing.score_retrieval import ScoreRetrievalSettings, build_parser, score_retrieval
from ragstudy.errors import StudyInputError
from ragstudy_cli import app

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "python.md"
SAMPLE = ("Documents", "Questions.csv", "Oracle.csv")  # what the page reads, relative to the repository root


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """docs/python.md's code blocks executed in order, in one namespace, in a folder that holds the bundled sample
    as the repository root does (the names the page uses are its own, not the repository's)."""
    import os

    here = tmp_path_factory.mktemp("notebook")
    for name in SAMPLE:
        (here / name).symlink_to(REPO / name)
    namespace: dict = {"__name__": "__notebook__"}
    previous = Path.cwd()
    os.chdir(here)
    try:
        for number, block in enumerate(_blocks(), 1):
            exec(compile(block, f"{PAGE.name} block {number}", "exec"), namespace)  # noqa: S102 (the page's code)
    finally:
        os.chdir(previous)
    return here, namespace


@pytest.mark.slow
def test_the_python_page_runs_as_written_and_reads_the_verdict_as_dataframes(session) -> None:
    here, names = session
    assert len(_blocks()) >= 4
    verdict, per_question = names["verdict"], names["per_question"]
    assert isinstance(verdict, pd.DataFrame) and isinstance(per_question, pd.DataFrame)
    assert set(per_question["strategy"]) == set(verdict["strategy"]) == {"paragraph", "fixed-size"}
    counts = per_question.groupby(["strategy", "budget"]).size()  # two variants, four budgets and own k
    assert len(counts) == 2 * 5 and set(counts) == {per_question["question_index"].nunique()}
    assert names["short"].folder.name == "notebook-short"
    assert set(pd.read_csv(here / "notebook-short" / "retrieval_verdict.csv", dtype=str)["budget"]) == {"500", "1000", "k"}
    assert {path.name for path in names["page"].files} == {"report.html", "report.md"}
    assert "Paragraph" in (here / "notebook" / "report.md").read_text(encoding="utf-8")
    with pytest.raises(FrozenInstanceError):
        names["scoring"].budgets = "500"


@pytest.mark.slow
def test_the_command_line_writes_what_the_call_under_it_writes(session, capsys) -> None:
    here, _ = session
    cli_out, api_out = here / "by-cli", here / "by-api"
    argv = ["--results-dir", str(here / "notebook"), "--no-plot", "--n-resamples", "500", "--budgets", "500,2000"]
    assert app.main(["score-retrieval", *argv, "--out-dir", str(cli_out)]) == 0, capsys.readouterr().err
    settings = ScoreRetrievalSettings(results_dir=here / "notebook", no_plot=True, n_resamples=500,
                                      budgets=(500, 2000), out_dir=api_out)
    wrote = score_retrieval(settings)  # the budgets as a tuple, the flag's as a string: the same budgets
    by_cli = {p.name: p.read_bytes() for p in sorted(cli_out.iterdir())}
    by_api = {p.name: p.read_bytes() for p in wrote.files}
    assert by_api.keys() == by_cli.keys() and "retrieval_verdict.csv" in by_api
    differ = [name for name in by_api if by_api[name] != by_cli[name] and name != "retrieval_summary.md"]
    assert differ == []
    strip = re.compile(rb"by-(cli|api)")  # the summary names its own folder
    assert strip.sub(b"", by_api["retrieval_summary.md"]) == strip.sub(b"", by_cli["retrieval_summary.md"])


def test_a_settings_record_is_the_parsers_defaults_and_refuses_what_the_parser_refuses() -> None:
    from Postprocessing import analyse_survey, build_review, judge_chunks, score_answers, write_report

    for module, record in ((score_answers, score_answers.ScoreAnswersSettings),
                           (judge_chunks, judge_chunks.ChunkQualitySettings),
                           (build_review, build_review.ReviewSettings),
                           (analyse_survey, analyse_survey.SurveySettings),
                           (write_report, write_report.ReportSettings)):
        assert record() == record.of(module.build_parser().parse_args([])), record.__name__
    assert ScoreRetrievalSettings() == ScoreRetrievalSettings.of(build_parser().parse_args([]))
    assert ScoreRetrievalSettings(results_dir=Path("run")).results_dir == "run"  # a Path is a folder's name
    for given, problem in (({"n_resamples": 0}, "must be at least 1"), ({"seed": "1"}, "must be int"),
                           ({"verdict_metric": "recall"}, "must be one of hit,"), ({"no_plot": 1}, "True or False")):
        with pytest.raises(StudyInputError, match=re.escape(f"ScoreRetrievalSettings({next(iter(given))}=")
                           + ".*" + re.escape(problem)):
            ScoreRetrievalSettings(**given)
    with pytest.raises(StudyInputError, match="confidence=1.0"):
        replace(ScoreRetrievalSettings(), confidence=1.0)
