"""The results folder's owner (ragstudy.results): strict CSV input tables, Dataset files in both formats, the
config round trip, and the output-folder lock. Each case of bad input is an error naming the file and line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.results import (DatasetRow, ResultsFolder, Source, parse_list_cell, read_config, read_dataset,
                              read_oracle, read_questions, read_text_csv, write_config, write_dataset)

REPO_ROOT = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ CSV input tables

BAD_TABLES = {  # (file, content, reader, the error it raises)
    # pandas read this row as an index plus 'i profili di GestiDoc 4?' and the run exited 0
    "unquoted comma in a one-column file": (
        "Questions.csv", "questions\nChe cos'è GestiDoc?\nQuali sono, in ordine, i profili di GestiDoc 4?\n",
        read_questions, r"Questions\.csv line 3: 3 fields but the header has 1 \(questions\)\. A cell that contains "
                        r"a comma must be quoted"),
    "unquoted comma in an oracle, not a truncated reference": (
        "Oracle.csv", "oracle\nLa dimensione massima per file, è di 200 MB.\n", read_oracle,
        r"Oracle\.csv line 2: 2 fields but the header has 1"),
    "uneven fields in a two-column file": (
        "Oracle.csv", "oracle,note\nSì,ok\nNo, mai,breve\n", read_oracle,
        r"Oracle\.csv line 3: 3 fields but the header has 2"),
    "Windows-1252": ("Oracle.csv", "oracle\nSì\nPerché no\n".encode("cp1252"), read_oracle,
                     r"Oracle\.csv line 2: not UTF-8 .*Windows-1252.*iconv"),
    "blank line between rows": ("q.csv", "questions\nUna?\n\nDue?\n", read_questions,
                                r"q\.csv line 3: blank line between rows"),
    "unclosed quote": ("q.csv", 'questions\n"Una?\nDue?\n', read_questions, r"q\.csv line \d: not valid CSV"),
    "repeated column names": ("q.csv", "questions,questions\nUna?,Due?\n", read_questions,
                              r"q\.csv line 1: repeated column names"),
    "no such column": ("q.csv", "domanda\nCome?\n", read_questions,
                       r"q\.csv: no 'questions' column \(found: domanda\)"),
    "empty file": ("q.csv", "", read_questions, r"q\.csv: the file is empty"),
    "header only": ("q.csv", "questions\n", read_questions, r"q\.csv: no rows under the header 'questions'"),
    "empty cell": ("q.csv", 'questions\nUna?\n""\nTre?\n', read_questions, r"q\.csv line 3: empty 'questions' cell"),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_a_malformed_table_is_an_error_naming_the_file_and_line(tmp_path: Path, case: str) -> None:
    name, content, reader, message = BAD_TABLES[case]
    with pytest.raises(StudyInputError, match=message):
        reader(_write(tmp_path, name, content))


def test_quoted_commas_are_kept_whole(tmp_path: Path) -> None:
    path = _write(tmp_path, "Questions.csv", 'questions\n"Quali sono, in ordine, i profili di GestiDoc 4?"\n')
    assert read_questions(path) == ["Quali sono, in ordine, i profili di GestiDoc 4?"]
    quoted = _write(tmp_path, "Oracle.csv", 'oracle\n"La dimensione massima per file, è di 200 MB."\n')
    assert read_oracle(quoted) == ["La dimensione massima per file, è di 200 MB."]


def test_semicolon_separated_files_from_italian_excel_are_read(tmp_path: Path) -> None:
    path = _write(tmp_path, "Questions.csv", "questions;note\nQuali sono, in ordine, i profili?;prima\n"
                                             "Quanto dura la firma?;seconda\n")
    assert read_questions(path) == ["Quali sono, in ordine, i profili?", "Quanto dura la firma?"]
    tabbed = _write(tmp_path, "Oracle.csv", "note\toracle\nx\tTre anni, rinnovabili.\n")
    assert read_oracle(tabbed) == ["Tre anni, rinnovabili."]


def test_utf8_with_bom_and_crlf_line_ends_are_fine(tmp_path: Path) -> None:
    path = _write(tmp_path, "Questions.csv", "\ufeffquestions\r\nUna?\r\n\"Due,\r\ntre?\"\r\n\r\n")
    table = read_text_csv(path, "questions")
    assert table.values == ("Una?", "Due,\r\ntre?") and table.lines == (2, 3)


# ------------------------------------------------------------------------------------------------ Dataset files

QUESTIONS = ["Quanto dura il certificato, in anni?", "Chi conserva i fascicoli?"]


def _rows(strategy: str = "fixed-size") -> list[DatasetRow]:
    return [DatasetRow(0, QUESTIONS[0], "Tre anni.", ("Il certificato dura tre anni.", "Altro, testo"),
                       (Source("a1", "d.pdf", 1, 1), Source("b2", "d.pdf", 2, 3)), strategy),
            DatasetRow(1, QUESTIONS[1], 'Il "responsabile".', ("Il responsabile\nconserva.",),
                       (Source("c3", "d.pdf", 4, 4),), strategy)]


def test_dataset_round_trips_through_csv_and_json(tmp_path: Path) -> None:
    write_dataset(_rows(), tmp_path, "DatasetFixedSize")
    for suffix in (".csv", ".json"):
        dataset = read_dataset(tmp_path / f"DatasetFixedSize{suffix}", "fixed-size", QUESTIONS, "Questions.csv")
        assert list(dataset.rows) == _rows() and not dataset.paper_format


def test_papers_datasets_files_are_read_by_position(tmp_path: Path) -> None:
    """Exactly what the paper's code wrote: Hugging Face `datasets`' to_csv (NumPy-style list cells) and to_json."""
    datasets = pytest.importorskip("datasets", reason="the paper's files are written with Hugging Face datasets")
    data = datasets.Dataset.from_dict({
        "question": QUESTIONS, "answer": ["Tre anni.", 'Il "responsabile".'],
        "contexts": [["Il certificato dura tre anni.", "Altro, testo con 'apici'" + " lungo" * 30],
                     ["Il responsabile\nconserva."]]})
    data.to_csv(str(tmp_path / "DatasetCustom.csv"))
    data.to_json(str(tmp_path / "DatasetCustom.json"))
    for suffix in (".csv", ".json"):
        dataset = read_dataset(tmp_path / f"DatasetCustom{suffix}", "paragraph", QUESTIONS, "Questions.csv")
        assert dataset.paper_format
        assert [r.question_index for r in dataset.rows] == [0, 1]
        assert dataset.rows[0].contexts == ("Il certificato dura tre anni.", "Altro, testo con 'apici'" + " lungo" * 30)
        assert dataset.rows[1].answer == 'Il "responsabile".' and dataset.rows[1].sources is None


def test_papers_file_with_another_question_is_an_error_naming_the_row(tmp_path: Path) -> None:
    _write(tmp_path, "DatasetNewLine.json", json.dumps([{"question": QUESTIONS[1], "answer": "x", "contexts": []}]))
    with pytest.raises(StudyInputError, match=r"DatasetNewLine\.json item 0 \(question_index 0\): question .* "
                                              r"differs from Questions\.csv row 2"):
        read_dataset(tmp_path / "DatasetNewLine.json", "newline", QUESTIONS, "Questions.csv")


def test_numpy_style_list_cells_never_join_strings() -> None:
    """Python's parser reads "['a' 'b']" as ['ab']: each literal is read on its own."""
    assert parse_list_cell("['a' 'b']", "x") == ["a", "b"]
    assert parse_list_cell("['a, b'\n 'c']", "x") == ["a, b", "c"]
    assert parse_list_cell('["a", "b"]', "x") == ["a", "b"]
    assert parse_list_cell("[]", "x") == []
    with pytest.raises(StudyInputError, match="not a list of strings"):
        parse_list_cell("['a' + 'b']", "x")


# ---------------------------------------------------------------------------------------------------- config

def test_config_round_trips_through_config_json(tmp_path: Path) -> None:
    config = StudyConfig.resolve(profile="lite", strategies="paragraph,fixed-size", budgets="300,900",
                                 set_params=["fixed-size.chunk_size=1000", "paragraph.k=2"])
    write_config(tmp_path, config, {"documents_sha256": {"d.pdf": "0" * 64}})
    record = read_config(tmp_path)
    assert StudyConfig.of_run(record).to_dict() == config.to_dict()
    assert record.raw["documents_sha256"] == {"d.pdf": "0" * 64}


# ------------------------------------------------------------------------------------------ the output folder

def test_output_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = _write(tmp_path, "out", "not a folder")
    with pytest.raises(StudyInputError, match=r"out: --output-dir is an existing file"):
        ResultsFolder(target).prepare()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_output_dir_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    with pytest.raises(StudyInputError, match="not writable"):
        ResultsFolder(folder).prepare()


def test_second_run_on_one_output_folder_is_refused_before_writing(tmp_path: Path, pdf_dir: Path) -> None:
    """The second run used to overwrite config.json and chunks_*.csv before the Chroma lock stopped it."""
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from ragstudy.results import ResultsFolder; "
         f"ResultsFolder({str(out)!r}).prepare(); print('locked', flush=True); time.sleep(60)"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = subprocess.run([sys.executable, "evaluation_chain.py", "--chunks-only", "--profile", "lite",
                                 "--documents", str(pdf_dir), "--output-dir", str(out)],
                                cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stderr
    assert "another run is using this output folder" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [ResultsFolder.LOCK_NAME]  # nothing written


def test_config_file_values_are_overridden_by_flags(tmp_path: Path) -> None:
    settings = _write(tmp_path, "s.yaml", "profile: paper\nstrategies: fixed-size\nprompt_file: nowhere.txt\n")
    prompt = _write(tmp_path, "p.txt", "Contesto: {context}\nDomanda: {query}")
    config = StudyConfig.resolve(config_file=str(settings), profile="lite", strategies="newline",
                                 prompt_file=str(prompt))
    assert config.profile.name == "lite" and config.strategies == ("newline",)
    assert config.prompt_template.startswith("Contesto:")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_db_dir_is_refused_before_chunking(tmp_path: Path, pdf_dir: Path, questions_csv: Path) -> None:
    db = tmp_path / "db"
    db.mkdir()
    db.chmod(0o555)
    result = subprocess.run([sys.executable, "evaluation_chain.py", "--profile", "lite", "--documents", str(pdf_dir),
                             "--questions", str(questions_csv), "--output-dir", str(tmp_path / "out"),
                             "--db-dir", str(db), "--strategies", "fixed-size"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Pass a writable --db-dir" in result.stderr


def test_db_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    from ragstudy.stores.knowledge_base import prepare_db_dir

    target = _write(tmp_path, "db", "a file")
    with pytest.raises(StudyInputError, match=r"db/RAGFixedSize: cannot create the Chroma folder"):
        prepare_db_dir(target / "RAGFixedSize")


def test_derived_tables_round_trip_through_their_one_owner(tmp_path):
    """write_table / read_table: declared columns first, budget labels read back as text ("500", "k"), an absent
    file is None, and a file lacking a declared column is an error naming it and the command that writes it."""
    import pandas as pd

    from ragstudy import results

    frame = pd.DataFrame([{"extra": 1, **{c: 0 for c in results.RETRIEVAL_SUMMARY.columns}, "budget": b}
                          for b in ("500", "1000", "k")])
    assert results.read_table(tmp_path, results.RETRIEVAL_SUMMARY) is None
    path = results.write_table(tmp_path, results.RETRIEVAL_SUMMARY, frame)
    assert path == tmp_path / "retrieval_summary.csv"
    back = results.read_table(tmp_path, results.RETRIEVAL_SUMMARY)
    assert list(back.columns) == [*results.RETRIEVAL_SUMMARY.columns, "extra"]
    assert back["budget"].tolist() == ["500", "1000", "k"]
    frame.drop(columns=["ci_high"]).to_csv(path, index=False)
    with pytest.raises(StudyInputError, match=r"retrieval_summary.csv: no column\(s\) \['ci_high'\].*"
                                              r"ragstudy score-retrieval --results-dir"):
        results.read_table(tmp_path, results.RETRIEVAL_SUMMARY)
    with pytest.raises(ValueError, match="lacks column"):
        results.write_table(tmp_path, results.RETRIEVAL_PAIRED, frame)
    assert set(results.TABLES) >= {"retrieval_per_question.csv", "retrieval_paired.csv", "sweep_summary.csv",
                                   "sweep_best.csv", "metrics_summary.csv", "chunk_quality.csv"}


def _string_literals() -> dict[str, set[str]]:
    """string constant (docstrings excepted) -> the modules of the library and scripts that spell it out."""
    import ast

    repo = Path(__file__).resolve().parents[1]
    files = [repo / "evaluation_chain.py", *(p for top in ("ragstudy", "ragstudy_cli", "Postprocessing",
                                                                                    "benchmarks")
                                             for p in sorted((repo / top).rglob("*.py")))]
    found: dict[str, set[str]] = {}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found.setdefault(node.value, set()).add(str(path.relative_to(repo)))
    return found


def test_each_results_file_and_metric_name_is_declared_in_one_module():
    """Every results file name (TABLES, OUTPUTS) is spelt out in ragstudy/results.py only, every budget metric's
    name and column in ragstudy/scoring/budget_metrics.py only, every answer metric's name in
    Postprocessing/answer_metrics.py only; everything else reads them from there. (config.json, CONFIG_NAME, is
    also the name of a Hugging Face model folder's own config, which the model loaders read, and make-qa's
    Questions.csv, Oracle.csv and evidence.csv are the names of the study's inputs, which many places read: not
    checked.)"""
    from Postprocessing import metric_catalogue
    from ragstudy import results
    from ragstudy.scoring import budget_metrics

    literals = _string_literals()
    inputs = {results.CONFIG_NAME, results.QA_QUESTIONS.name, results.QA_ORACLE.name, results.QA_EVIDENCE.name}
    expected = {name: {"ragstudy/results.py"} for name in (*results.TABLES, *results.OUTPUTS) if name not in inputs}
    for m in budget_metrics.metrics():
        expected[m.name] = expected[m.column] = {"ragstudy/scoring/budget_metrics.py"}
    for info in metric_catalogue.in_group("answers"):
        expected[info.name] = {"Postprocessing/answer_metrics.py"}
    assert len(expected) > 30
    wrong = {name: sorted(literals.get(name, set())) for name, where in expected.items()
             if literals.get(name, set()) != where}
    assert not wrong, f"declared elsewhere too (or nowhere): {wrong}"
