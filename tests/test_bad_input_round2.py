"""Bad input, round two (issue 21, classes 1, 2, 6 and 7), injected for real: real files, the real scripts run (in
this process, as `__main__`: conftest.run_script_in_process; one case as a process of its own). Each case ends
with exit code 2 and one stderr line naming the file or the setting as the user wrote it and the fix, no
traceback, and nothing written before the check; valid inputs still run (exit 0).

1. silently wrong numbers: evidence scored against another questions file (same questions, another order), a
   questions file that is not the run's (sha256), an evidence row past the last question, a report reading the
   repository's Oracle.csv, an oracle with another row count, Dataset files left by an earlier run, strategies
   compared over different question sets, a survey workbook missing a question column;
2. writes outside the output folder: a sweep id that is a path;
6. settings: sweep params as a list, --embedding a folder that is not a model, --n-resamples 0, --confidence 1.5, --strategies '', `limit: -3` in the YAML
   file, a prompt file without {context}, --sweep with --chunks-only;
7. messages: the unquoted-comma hint of a several-column file quotes only the cell, an unquoted comma in an
   evidence CSV is reported as such, an empty answer is not cached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, own_db_dir, tiny_llm, run_script_in_process
from ragstudy.errors import StudyInputError

SAMPLE_QUESTIONS = REPO_ROOT / "Questions.csv"
SAMPLE_EVIDENCE = REPO_ROOT / "sample" / "evidence.json"


def sample_count() -> int:
    from ragstudy.results import read_questions

    return len(read_questions(SAMPLE_QUESTIONS))


def cli(script: Path, *args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    """`python SCRIPT ARGS` in this process (the seconds of a subprocess's imports saved): exit code, stdout, stderr."""
    return run_script_in_process(script, *args, cwd=cwd)


def cli_process(*args: str, cwd: Path = REPO_ROOT, timeout: int = 600) -> subprocess.CompletedProcess:
    """`python ARGS` as a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def refused(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The one error line of a run that stopped with exit 2; each needle must be in it."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def chain(*args: str) -> subprocess.CompletedProcess:
    return cli(REPO_ROOT / "evaluation_chain.py", "--profile", "lite", *tiny_llm(args), *own_db_dir(args))


def questions_file(path: Path, rows: list[int]) -> Path:
    """A questions file with the sample's questions `rows`, in that order (quoted: they hold commas)."""
    from ragstudy.results import read_questions

    texts = read_questions(SAMPLE_QUESTIONS)
    path.write_text("questions\n" + "".join('"' + texts[i].replace('"', '""') + '"\n' for i in rows),
                    encoding="utf-8")
    return path


# ---------------------------------------------------------------- class 2 and 6: settings, checked before anything

def sweep_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(body, encoding="utf-8")
    return path


@pytest.mark.parametrize("sweep_id", ["../../escaped", "/tmp/escaped-absolute", "..", "a/b"])
@pytest.mark.slow
def test_a_sweep_id_that_is_a_path_is_refused_before_anything_is_written(tmp_path: Path, sweep_id: str) -> None:
    path = sweep_file(tmp_path, f"configs:\n  - id: {json.dumps(sweep_id)}\n    strategy: fixed-size\n"
                                "    params: {chunk_size: 300}\n")
    out = tmp_path / "deep" / "out"
    line = refused(chain("--sweep", path, "--output-dir", out), f"{path}: configs[0]: id", repr(sweep_id),
                   "not a name")
    assert "letters, digits" in line
    assert not (tmp_path / "deep").exists() and not Path("/tmp/escaped-absolute").exists()
    assert not (tmp_path / "escaped").exists() and not (REPO_ROOT.parent / "escaped").exists()


def test_sweep_params_given_as_a_list_name_the_entry(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, "configs:\n  - id: small\n    strategy: fixed-size\n"
                                "    params: [chunk_size, 300]\n")
    refused(chain("--sweep", path, "--output-dir", tmp_path / "out"), f"{path}: configs[0]: params must be a "
                                                                     "mapping", "chunk_size: 256")
    assert not (tmp_path / "out").exists()


def test_sweep_with_chunks_only_names_the_flags_given(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, "configs:\n  - id: small\n    strategy: fixed-size\n")
    line = refused(chain("--sweep", path, "--chunks-only", "--output-dir", tmp_path / "out"), "--chunks-only",
                   "`ragstudy sweep`", "`ragstudy chunks`")  # the script's --sweep runs `ragstudy sweep`
    assert "--retrieval-only" not in line
    assert not (tmp_path / "out").exists()


def test_an_empty_strategies_flag_is_an_error_not_all_seven(tmp_path: Path) -> None:
    """As a process of its own (the other cases run the script in this process): exit 2, one line, no traceback."""
    refused(cli_process(REPO_ROOT / "evaluation_chain.py", "--profile", "lite", "--chunks-only", "--strategies", "",
                        "--output-dir", tmp_path / "out"), "--strategies is empty")
    assert not (tmp_path / "out").exists()


def test_a_bad_limit_in_the_yaml_file_is_named_as_its_key_in_that_file(tmp_path: Path) -> None:
    config = tmp_path / "study.yaml"
    config.write_text("limit: -3\n", encoding="utf-8")
    line = refused(chain("--config", config, "--chunks-only", "--output-dir", tmp_path / "out"),
                   f"`limit:` in {config} must be a positive integer, got -3")
    assert "--limit" not in line
    assert not (tmp_path / "out").exists()


def test_a_prompt_file_without_context_is_named(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Rispondi alla domanda: {query}", encoding="utf-8")
    refused(chain("--prompt-file", prompt, "--chunks-only", "--output-dir", tmp_path / "out"),
            f"the prompt file {prompt} (--prompt-file) lacks the placeholder {{context}}")
    config = tmp_path / "study.yaml"
    config.write_text(f"prompt_file: {prompt}\n", encoding="utf-8")
    refused(chain("--config", config, "--chunks-only", "--output-dir", tmp_path / "out"),
            f"the prompt file {prompt} (`prompt_file:` in {config})")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make", ["folder", "file", "absent"])
@pytest.mark.slow
def test_an_embedding_path_that_is_not_a_model_is_refused_before_anything(tmp_path: Path, make: str) -> None:
    model = tmp_path / "not-a-model"
    if make == "folder":
        model.mkdir()
        (model / "README.txt").write_text("pesi altrove", encoding="utf-8")
    elif make == "file":
        model.write_text("nope", encoding="utf-8")
    needle = "does not exist" if make == "absent" else "is not a model folder (no config.json in it)"
    refused(chain("--retrieval-only", "--embedding", model, "--output-dir", tmp_path / "out"),
            f"embedding model path '{model}' (set by --embedding)", needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags, needle", [(["--n-resamples", "0"], "--n-resamples 0: must be at least 1"),
                                           (["--confidence", "1.5"], "--confidence 1.5: must be between 0 and 1")])
def test_resampling_flags_of_the_scripts_are_checked_first(tmp_path: Path, flags: list[str], needle: str) -> None:
    out = tmp_path / "tables"
    for script in ("retrieval_eval.py", "chunk_quality.py", "evaluation_metrics.py"):
        proc = cli(REPO_ROOT / "Postprocessing" / script, "--results-dir", tmp_path / "none", "--out-dir", out,
                   *flags)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert f"error: {needle}" in proc.stderr.splitlines()[-1]  # argparse: usage line, then the error
        assert not out.exists()


def test_a_registered_name_that_is_a_path_is_refused() -> None:
    from ragstudy.io import check_name

    for bad in ("../x", "/abs", "a/b", "..", ".", "", "a b"):
        with pytest.raises(StudyInputError, match="is not a name"):
            check_name(bad, "test")
    assert check_name("fixed-256_v1.2", "test") == "fixed-256_v1.2"


# ----------------------------------------------------------- class 1 and 7: a real retrieval-only run, then scoring

@pytest.fixture(scope="module")
def retrieval_runs(tmp_path_factory: pytest.TempPathFactory, minilm_path: str) -> dict[str, Path]:
    """Two real retrieval-only runs (fixed-size, bundled sample PDFs, MiniLM): `good` numbered by a copy of the
    sample's Questions.csv (--limit 3), `reordered` by a file holding the same first three questions in another
    order. One Chroma folder and vector cache: the second run embeds nothing again."""
    root = tmp_path_factory.mktemp("round2")
    good_q = root / "qa" / "Questions.csv"
    good_q.parent.mkdir()
    shutil.copyfile(SAMPLE_QUESTIONS, good_q)
    reordered_q = questions_file(root / "reordered.csv", [2, 0, 1])
    runs = {"good": root / "good", "reordered": root / "reordered", "questions": good_q}
    for name, questions, extra in (("good", good_q, ["--limit", "3"]), ("reordered", reordered_q, [])):
        proc = chain("--retrieval-only", "--strategies", "fixed-size", "--questions", questions, "--output-dir",
                     runs[name], "--db-dir", root / "db", "--budgets", "500,1000", *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return runs


def score(results: Path, *args: str) -> subprocess.CompletedProcess:
    return cli(REPO_ROOT / "Postprocessing" / "retrieval_eval.py", "--results-dir", results, "--no-plot",
               "--n-resamples", "200", *args)


@pytest.mark.slow
def test_evidence_for_the_same_questions_in_another_order_is_refused(retrieval_runs, tmp_path: Path) -> None:
    out = tmp_path / "tables"
    refused(score(retrieval_runs["reordered"], "--evidence", SAMPLE_EVIDENCE, "--out-dir", out),
            f"{SAMPLE_EVIDENCE} record 0: question 0 is", "but row 0 of", "reordered.csv",
            "another questions file (or another order)")
    assert not out.exists()
    good = score(retrieval_runs["good"], "--evidence", SAMPLE_EVIDENCE, "--out-dir", out)
    assert good.returncode == 0, good.stderr[-3000:]
    assert (out / "retrieval_summary.csv").is_file()


@pytest.mark.slow
def test_a_questions_file_that_is_not_the_runs_is_refused_unless_allowed(retrieval_runs, tmp_path: Path) -> None:
    evidence = tmp_path / "evidence.csv"  # hand-written: no question texts, so only the hash can tell
    evidence.write_text("question_index,evidence\n0,la dimensione massima di un singolo file\n", encoding="utf-8")
    other = questions_file(tmp_path / "other.csv", [1, 0, 2])
    out = tmp_path / "tables"
    refused(score(retrieval_runs["good"], "--evidence", evidence, "--questions", other, "--out-dir", out),
            f"{other} is not the file the run", "sha256", "--allow-questions-mismatch")
    assert not out.exists()
    allowed = score(retrieval_runs["good"], "--evidence", evidence, "--questions", other, "--out-dir", out,
                    "--allow-questions-mismatch")
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert "--allow-questions-mismatch given: scoring anyway" in allowed.stderr


@pytest.mark.slow
def test_a_questions_file_edited_after_the_run_is_refused(retrieval_runs, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(retrieval_runs["good"], run)
    edited = tmp_path / "Questions.csv"
    shutil.copyfile(retrieval_runs["questions"], edited)
    for path in [run / "config.json", *run.glob("variants/*/config.json")]:  # the run's and each variant's
        config = json.loads(path.read_text(encoding="utf-8"))
        config["questions"] = config["questions_resolved"] = str(edited)  # the run's file, as if it had been here
        path.write_text(json.dumps(config), encoding="utf-8")
    assert score(run, "--evidence", SAMPLE_EVIDENCE, "--out-dir", tmp_path / "ok").returncode == 0
    with edited.open("a", encoding="utf-8") as handle:
        handle.write("Una domanda aggiunta dopo la corsa?\n")
    refused(score(run, "--evidence", SAMPLE_EVIDENCE, "--out-dir", tmp_path / "tables"),
            f"{edited} has changed since the run", "sha256")


@pytest.mark.slow
@pytest.mark.parametrize("rows, needles", [
    ('0,la dimensione massima\n99,"un testo"\n', ["line 3: question_index 99 is not a row of", f"({sample_count()} questions"]),
    ("0,la dimensione massima, di un file,x.pdf\n", ["line 2: 4 fields but the header has 3",
                                                     "quote that cell only", "'evidence' cell as \"la dimensione "
                                                     "massima, di un file\"", "0,\"la dimensione"]),
])
def test_evidence_csv_rows_that_do_not_belong_are_named(retrieval_runs, tmp_path: Path, rows: str,
                                                        needles: list[str]) -> None:
    evidence = tmp_path / "evidence.csv"
    header = "question_index,evidence,pdf\n" if "x.pdf" in rows else "question_index,evidence\n"
    evidence.write_text(header + rows, encoding="utf-8")
    line = refused(score(retrieval_runs["good"], "--evidence", evidence, "--out-dir", tmp_path / "t"),
                   str(evidence), *needles)
    assert "is not a 0-based row number" not in line  # an unquoted comma is not reported as a bad index


@pytest.mark.slow
def test_the_report_never_falls_back_to_the_repositorys_oracle(retrieval_runs, tmp_path: Path) -> None:
    from Postprocessing.reportkit import inputs

    assert inputs.load(retrieval_runs["good"]).oracle is None  # no Oracle.csv beside the run's questions
    short = tmp_path / "Oracle.csv"
    short.write_text("oracle\nSolo una risposta.\n", encoding="utf-8")
    out = tmp_path / "report.html"
    refused(cli(REPO_ROOT / "Postprocessing" / "report.py", "--results-dir", retrieval_runs["good"], "--oracle",
                short, "--out", out), f"{short}: 1 oracle answers but the run's questions file", f"has {sample_count()} questions",
            "--oracle")
    assert not out.exists()
    beside = retrieval_runs["questions"].parent / "Oracle.csv"
    shutil.copyfile(REPO_ROOT / "Oracle.csv", beside)
    try:
        answers, path = inputs.load(retrieval_runs["good"]).oracle
        assert path == beside and len(answers) == sample_count()
    finally:
        beside.unlink()


@pytest.mark.slow
def test_dataset_files_left_by_an_earlier_run_are_named(retrieval_runs, tmp_path: Path) -> None:
    from ragstudy import registry
    from ragstudy.results import DatasetRow, dataset_files, find_datasets, write_dataset

    run = tmp_path / "run"
    shutil.copytree(retrieval_runs["good"], run)
    name = registry.get("fixed-size").dataset_name
    write_dataset([DatasetRow(0, "Domanda?", "Risposta.", ("contesto",), (), "fixed-size")], run, name)
    with pytest.raises(StudyInputError, match=rf"{name}\.json: the last run \(.*\) was retrieval-only"):
        find_datasets(run)
    assert [p.name for p in dataset_files(run)] == [f"{name}.json"]  # the report warns instead
    proc = cli(REPO_ROOT / "Postprocessing" / "chunk_quality.py", "--results-dir", run, "--no-hope", "--out-dir",
               tmp_path / "cq", "--strategies", "fixed-size", "--evidence", SAMPLE_EVIDENCE)
    refused(proc, f"{name}.json: the last run", "move or delete them")


# -------------------------------------------------------------------------------------------- units of the checks

def test_strategies_over_different_question_sets_are_named() -> None:
    from Postprocessing.judge_chunks import question_sets_note

    datasets = {"paragraph": [{"question_index": i} for i in range(3)],
                "fixed-size": [{"question_index": i} for i in (0, 2)]}
    paths = {"paragraph": Path("DatasetCustom.json"), "fixed-size": Path("DatasetFixedSize.json")}
    note = question_sets_note(datasets, paths)
    assert "DatasetCustom.json 3 questions" in note and "DatasetFixedSize.json 2 questions (lacks question_index 1)" \
        in note
    assert question_sets_note({"paragraph": datasets["paragraph"]}, paths) == ""


def test_a_one_column_file_still_shows_the_whole_cell_quoted(tmp_path: Path) -> None:
    from ragstudy.results import read_oracle

    path = tmp_path / "Oracle.csv"
    path.write_text("oracle,note\nSì,ok\nNo, mai,breve\n", encoding="utf-8")
    with pytest.raises(StudyInputError) as caught:
        read_oracle(path)
    assert "'oracle' cell as \"No, mai\" (the line then reads \"No, mai\",breve)" in str(caught.value)
    path.write_text('oracle,note\n"No, mai",breve\n', encoding="utf-8")  # following the hint works
    assert read_oracle(path) == ["No, mai"]


def test_an_empty_answer_is_not_cached_so_a_rerun_asks_again(tmp_path: Path) -> None:
    from test_servers_misbehave import MODEL, MODELS_OK, FakeServer, completion

    from ragstudy.llms import AnswerCache, GenerationParams
    from ragstudy.llms.server_engine import ServerGenerator

    answers = iter(["", "Tre anni."])
    with FakeServer() as server:
        server.routes["GET /v1/models"] = MODELS_OK
        server.routes["POST /v1/chat/completions"] = lambda body: completion(next(answers))
        cache_path = tmp_path / "answers.jsonl"

        def ask() -> str:
            generator = ServerGenerator([server.url], MODEL, GenerationParams(max_new_tokens=8),
                                        AnswerCache(cache_path), concurrency=1)
            return generator.generate_many(["Quanto dura?"])[0]

        assert ask() == ""
        assert not cache_path.exists() or cache_path.read_text(encoding="utf-8") == ""
        assert ask() == "Tre anni."  # asked again, not served from the cache
        assert server.chats() == 2
        assert ask() == "Tre anni." and server.chats() == 2  # a real answer is cached


def test_a_survey_workbook_missing_a_question_column_is_refused(tmp_path: Path) -> None:
    from test_postprocessing_review import SYNTHETIC, _synthetic_xlsx

    results = tmp_path / "results"
    results.mkdir()
    shutil.copyfile(SYNTHETIC / "answer_key.csv", results / "answer_key.csv")
    path = _synthetic_xlsx(results / "interview_answers.xlsx", edit=lambda frame: frame.drop(columns=["Q3"]))
    refused(cli(REPO_ROOT / "Postprocessing" / "interview_analysis.py", "--results-dir", results, "--no-plots"),
            f"{path}: no column for question(s) Q3 of the answer key", "restore the column")
    assert not (results / "survey").exists()
