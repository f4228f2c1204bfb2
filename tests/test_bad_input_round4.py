"""Bad input, round four (issue 38): a study never writes outside the folder it was given nor over another study, a
results folder is trusted only if whole, evidence that matches nothing is refused, and each user file fails with
one line. Each test injects the real fault: a real second process, a real YAML file, real leftover files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from Postprocessing import write_report
from ragstudy_cli import study
from test_report import make_full_results
from ragstudy_cli import app


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def one_error(capsys: pytest.CaptureFixture, code: int) -> str:
    err = capsys.readouterr().err
    lines = error_lines(err)
    assert code == 2 and "Traceback" not in err and len(lines) == 1, err[-3000:]
    return lines[0]


# ------------------------------------------------------------------------------------------- A. the study folder

def hold_study_lock(folder: Path) -> subprocess.Popen:
    """A second process holding `folder`'s study lock (as a running study does) until it is killed."""
    code = ("import sys, time; from pathlib import Path; from ragstudy.io import lock_folder; "
            "from ragstudy_cli.study import STUDY_LOCK; "
            f"Path({str(folder)!r}).mkdir(parents=True, exist_ok=True); "
            f"lock_folder(Path({str(folder)!r}), STUDY_LOCK, 'study folder', '--output-dir'); "
            "print('ready', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert holder.stdout.readline().strip() == "ready"
    return holder


def test_a_second_study_on_one_folder_is_refused_naming_the_folder_and_the_pid(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "study"
    holder = hold_study_lock(folder)
    try:
        code = study.main(["--output-dir", str(folder), "--profile", "lite"])
    finally:
        holder.kill()
        holder.wait()
    line = one_error(capsys, code)
    assert line == (f"error: {folder}: another run is using this study folder (pid {holder.pid}). Wait for it to "
                    "finish, or give this run its own --output-dir.")
    assert sorted(p.name for p in folder.iterdir()) == [study.STUDY_LOCK]  # no ledger, no log, no stage folder


def test_the_study_writes_into_the_config_files_output_dir(tmp_path: Path, capsys) -> None:
    """`ragstudy study --config FILE` takes its folder from the file's `output_dir:` (it wrote into ./results):
    the study meets the lock of a study running in that folder, so it was going to write there."""
    folder = tmp_path / "from-yaml"
    config = tmp_path / "study.yaml"
    config.write_text(f"output_dir: {folder}\nprofile: lite\n", encoding="utf-8")
    holder = hold_study_lock(folder)
    try:
        code = study.main(["--config", str(config)])
    finally:
        holder.kill()
        holder.wait()
    assert f"error: {folder}: another run is using this study folder (pid {holder.pid})" in one_error(capsys, code)
    args, _, chain_args = study.parse(["--config", str(config), "--output-dir", str(tmp_path / "flag")])
    assert study.study_root(args, chain_args) == tmp_path / "flag"  # the flag wins over the file
    args, _, chain_args = study.parse(["--profile", "lite"])
    assert study.study_root(args, chain_args) == Path("results")  # neither: the documented default


def test_a_study_rerun_with_fewer_strategies_refuses_the_earlier_runs_files(tmp_path: Path, capsys) -> None:
    """The earlier run's retrieval_paragraph.csv and DatasetCustom.json would be folded into the verdict and the
    answer scores of a `--strategies fixed-size` re-run: refused before any stage runs."""
    root = tmp_path / "study"
    (root / "retrieval").mkdir(parents=True)
    (root / "answers").mkdir()
    (root / "retrieval" / "retrieval_paragraph.csv").write_text("question_index\n", encoding="utf-8")
    (root / "answers" / "DatasetCustom.json").write_text("[]", encoding="utf-8")
    (root / "retrieval" / "retrieval_fixed-size.csv").write_text("question_index\n", encoding="utf-8")  # its own
    code = study.main(["--output-dir", str(root), "--profile", "lite", "--strategies", "fixed-size"])
    line = one_error(capsys, code)
    assert line == (f"error: {root}: holds retrieval/retrieval_paragraph.csv, answers/DatasetCustom.json of "
                    "strategies this study does not run (it runs fixed-size); they would be scored into its "
                    "verdict as if this run had made them. Give this study its own --output-dir, run it with "
                    "those strategies too, or move those files away")
    assert not (root / study.LEDGER).exists() and not (root / study.LOG).exists()


def study_folder(root: Path) -> Path:
    """A folder as `ragstudy study` leaves it: study.json, answers/ (scored) and retrieval/."""
    make_full_results(root / "answers")
    (root / "retrieval").mkdir()
    (root / "study.json").write_text('{"stages": {}}\n', encoding="utf-8")
    return root


def test_report_with_defaults_over_a_study_folder_reports_the_study(tmp_path: Path, monkeypatch, caplog) -> None:
    """`ragstudy report` in the folder holding `results/` (the study's root, its default) replaced the study's page
    with an empty one; it reports answers/ and retrieval/ into the study's report.html as the study does."""
    root = study_folder(tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    assert app.main(["report"]) == 0
    page = (root / "report.html").read_text(encoding="utf-8")
    expected, _, _ = write_report.build(root / "answers", generated="x", retrieval_dir=root / "retrieval")
    assert "Results folder results/answers" in page
    assert page.count("<section") == expected.count("<section") and "metrics" in page.lower()
    assert not (root / "answers" / "report.html").exists()
    assert "results is a study folder (study.json): reporting its answers/ and retrieval/ runs" in caplog.text


def test_report_of_an_empty_or_unscored_folder_is_refused(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_error(capsys, app.main(["report", "--results-dir", str(empty)]))
    assert line == (f"error: {empty}: nothing scored to report (no retrieval verdict, answer scores, chunk quality, "
                    "survey or sweep in it); score the run first (ragstudy score-retrieval, score-answers or "
                    f"chunk-quality --results-dir {empty}), or pass the folder that holds the scores. Nothing was "
                    "written")
    unscored = make_full_results(tmp_path / "unscored")  # a run's own files, every score table removed
    for name in ("retrieval_verdict.csv", "retrieval_summary.csv", "retrieval_paired.csv", "metrics_summary.csv",
                 "metrics_paired.csv", "metrics_per_question.csv", "chunk_quality.csv", "sweep_summary.csv",
                 "sweep_best.csv"):
        (unscored / name).unlink(missing_ok=True)
    shutil.rmtree(unscored / "survey")
    assert "nothing scored to report" in one_error(capsys, app.main(["report", "--results-dir", str(unscored)]))
    assert list(empty.iterdir()) == [] and not (unscored / "report.html").exists()


def test_report_out_naming_a_folder_is_refused(tmp_path: Path, capsys) -> None:
    results = make_full_results(tmp_path / "results")
    line = one_error(capsys, app.main(["report", "--results-dir", str(results), "--out", f"{tmp_path}/pages/"]))
    assert line == (f"error: --out {tmp_path}/pages/: a folder, not a file; give the HTML file to write, e.g. --out "
                    f"{tmp_path}/pages/report.html (report.md goes beside it)")
    assert not (tmp_path / "pages").exists()


def test_declared_retrieval_tables_are_never_taken_for_a_strategys_rankings(tmp_path: Path) -> None:
    """retrieval_verdict_across.csv (the parent folder of a run with several groups), its former name and every other
    declared retrieval_* table are tables, not the rankings of a strategy: the study's leftover check and every
    reader of rankings skip them."""
    from ragstudy import results as results_mod

    for table in results_mod.TABLES.values():
        (tmp_path / table.name).write_text("x\n", encoding="utf-8")
        if table.formerly:
            (tmp_path / table.formerly[0]).write_text("x\n", encoding="utf-8")
    (tmp_path / "retrieval_paragraph.csv").write_text("x\n", encoding="utf-8")
    assert results_mod.ranked_strategies(tmp_path) == ["paragraph"]
