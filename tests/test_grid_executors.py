"""The grid's executors from the command line (`ragstudy retrieve --workers N`, `--ray [ADDRESS]`): one real grid
on the bundled sample lands the same variants, rankings and verdict files whichever runs it; a worker killed in the
middle of a variant costs only that variant, named, and the re-run computes only it; a variant is skipped only when
its done marker carries its key (settings, questions, documents, code), so a re-run with other settings recomputes
and one with the same settings (or only other threads or workers) computes nothing."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import DONE, REPO_ROOT, landed, markers, open_chroma_systems, seed_built_models

SAMPLE = ["--profile", "lite", "--documents", str(REPO_ROOT / "Documents"), "--questions",
          str(REPO_ROOT / "Questions.csv"), "--limit", "3", "--budgets", "300,900"]


def retrieve(out: Path, *flags: str) -> int:
    """`ragstudy retrieve` on the bundled sample (3 questions) into `out`, with its own Chroma root beside it."""
    from ragstudy_cli import app

    return app.main(["retrieve", *SAMPLE, "--output-dir", str(out), "--db-dir", f"{out}-db", *flags])


def score(out: Path) -> int:
    """The study's retrieval scoring (`ragstudy score-retrieval`, the bundled evidence) of a run."""
    from ragstudy_cli import app

    return app.main(["score-retrieval", "--results-dir", str(out), "--evidence",
                     str(REPO_ROOT / "sample" / "evidence.json"), "--no-plot", "--n-resamples", "200"])


@pytest.mark.slow
def test_in_process_workers_and_ray_land_the_same_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       session_cache_reused: Path) -> None:
    """fixed-size, newline x dense, bm25 on the bundled sample, run in-process, with --workers 2 and with --ray (a
    local Ray started and stopped by the run), then scored: variants.csv, every variant's rankings and chunk tables,
    the scores and verdicts of each group and the check across them are the same bytes. Each executor has its own
    project cache (its own chunks, indexes and rankings: computed, never read from the in-process run's), with the
    vectors the in-process run embedded copied in: the same vectors give the same scores to the last digit (a vector
    embedded in another ONNX batch differs in its 7th decimal, BENCHMARKS.md "Executors": not the executor)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (requirements.txt pins it)")
    grid = ["--strategies", "fixed-size,newline", "--retriever", "dense,bm25"]
    found = {}
    for name, flags in (("inprocess", []), ("workers", ["--workers", "2"]), ("ray", ["--ray"])):
        cache = tmp_path / f"cache-{name}"
        first = tmp_path / "cache-inprocess"
        seed_built_models(cache, session_cache_reused if name == "inprocess" else first, link=True)  # models built once
        if name != "inprocess":
            shutil.copytree(first / "vectors", cache / "vectors")
        monkeypatch.setenv("RAGSTUDY_CACHE", str(cache))  # worker processes and a local Ray start with it
        out = tmp_path / name
        assert retrieve(out, *grid, *flags) == 0, name
        assert not ray.is_initialized()  # the run stopped the Ray it started
        db = Path(f"{out}-db")
        assert open_chroma_systems(db) == []  # each variant closed its Chroma clients
        if name == "workers":  # two worker processes at once on one Chroma root: each indexed into its own slot
            indexed = sorted({p.relative_to(db).parts[0] for p in db.rglob("*.sqlite3")})
            assert indexed and all("-worker-" in folder for folder in indexed), indexed
        assert len(markers(out)) == 4
        assert score(out) == 0, name
        found[name] = landed(out)
        assert len(list((cache / "rankings").glob("*.json"))) == 4  # each executor ranked every variant itself
    names = set(found["inprocess"])
    assert "variants.csv" in names and sum(n.endswith("retrieval_verdict.csv") for n in names) >= 2
    assert sum(n.startswith("variants/") and "/retrieval_" in n for n in names) == 4
    for name in ("workers", "ray"):
        differ = sorted(n for n in names | set(found[name]) if found[name].get(n) != found["inprocess"].get(n))
        assert differ == [], (name, differ)


# ------------------------------------------------------------------- a killed worker, a re-run, the done markers

KILLER = '''
"""A dense retriever that kills its own process (SIGKILL) at the second question of one strategy, once: a worker
process dying in the middle of a variant."""

import os
import signal
from pathlib import Path

from ragstudy.retrievers import register_retriever
from ragstudy.retrievers.dense import ChromaDense


@register_retriever("dense-killed", unit="children", vectors=True, description="dense; kills its process once")
class KilledOnce(ChromaDense):
    def rank(self, question, question_index, largest, measure):
        trigger = Path(os.environ["GRID_KILL_TRIGGER"])
        if self.inputs.stage.strategy == os.environ["GRID_KILL_STRATEGY"] and question_index == 1 and trigger.exists():
            trigger.unlink()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().rank(question, question_index, largest, measure)
'''


@pytest.mark.slow
def test_a_killed_worker_costs_its_variant_only_and_the_rerun_computes_only_it(
        tmp_path: Path, session_cache_reused: Path, pdf_dir: Path, questions_csv: Path) -> None:
    """`ragstudy retrieve --workers 2` (a process of its own; two small generated PDFs, three questions) over
    fixed-size, newline x bm25 and a dense retriever registered from outside that kills its worker process in the
    middle of newline's ranking: the run ends with one error line naming that variant, the three others are done and
    kept; the same command again computes only the killed variant (the others' done markers are untouched) and ends
    well."""
    (tmp_path / "grid_plugin").mkdir()
    (tmp_path / "grid_plugin" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "grid_plugin" / "killed.py").write_text(textwrap.dedent(KILLER), encoding="utf-8")
    cache = tmp_path / "cache"
    seed_built_models(cache, session_cache_reused, link=True)
    trigger = tmp_path / "kill-once"
    trigger.touch()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)]), "RAGSTUDY_CACHE": str(cache),
           "RAGSTUDY_PLUGIN_PACKAGES": "grid_plugin", "GRID_KILL_TRIGGER": str(trigger),
           "GRID_KILL_STRATEGY": "newline"}
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ragstudy_cli", "retrieve", "--profile", "lite", "--documents", str(pdf_dir),
               "--questions", str(questions_csv), "--budgets", "300,900", "--strategies", "fixed-size,newline",
               "--retriever", "bm25,dense-killed", "--workers", "2", "--output-dir", str(out), "--db-dir",
               f"{out}-db"]

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)

    first = run()
    assert first.returncode == 2, first.stderr[-3000:]
    assert not trigger.exists()  # the worker really reached the kill
    errors = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    killed = "newline__dense-killed__raw__multilingual-e5-small"
    assert len(errors) == 1 and errors[0].startswith("error: 1 of 4 variants failed (variant "
                                                     f"{killed}: its worker process was killed by SIGKILL)"), errors
    assert f"the others are kept in {out / 'variants'}" in errors[0]
    kept = markers(out)
    assert sorted(kept) == sorted({"fixed-size__bm25__raw", "newline__bm25__raw",
                                   "fixed-size__dense-killed__raw__multilingual-e5-small"}), kept
    assert (out / "variants" / killed).is_dir() and not (out / "variants" / killed / DONE).exists()

    second = run()
    assert second.returncode == 0, second.stderr[-3000:]
    assert "3 of 4 variants already done" in second.stderr and "computing 1" in second.stderr
    after = markers(out)
    assert {k: after[k] for k in kept} == kept  # the kept variants were not computed again
    assert killed in after
    with open(out / "variants" / killed / "retrieval_newline.csv", encoding="utf-8", newline="") as handle:
        assert {row["question_index"] for row in csv.DictReader(handle)} == {"0", "1", "2"}  # all ranked this time


def test_the_key_changes_with_what_changes_results_only(tmp_path: Path) -> None:
    """runidentity.variant_key: threads, workers, Ray, timeouts and the Chroma root leave it as it is; budgets, the
    questions, the documents, the variant and the code change it. executors.is_done compares a marker's key."""
    from ragstudy.config import StudyConfig
    from ragstudy.grid.executors import Task, _mark_done, is_done
    from ragstudy.grid.runidentity import variant_key

    questions = ["Dove?", "Quando?"]
    facts = {"documents_sha256": {"a.pdf": "0" * 64}}
    row = {"id": "fixed-size__bm25__raw", "strategy": "fixed-size"}

    def key(questions=questions, facts=facts, row=row, code="c", **flags) -> str:
        config = StudyConfig.resolve(profile="lite", retrieval_only=True, strategies="fixed-size", retriever="bm25",
                                     warn_unused=False, **flags)
        return variant_key(config, questions, facts, row, code)

    base = key()
    assert key(threads=1, embedding_threads=1, workers=2, db_dir="elsewhere", embedding_timeout=5.0) == base
    assert key(ray="local") == base
    assert len({base, key(budgets="500,2000"), key(questions=questions[:1]), key(row={**row, "id": "x"}),
                key(facts={"documents_sha256": {"a.pdf": "1" * 64}}), key(code="d")}) == 6

    task = Task("v", print, None, tmp_path, {}, base)
    assert not is_done(task)
    _mark_done(tmp_path, Task("v", print, None, tmp_path, {}, key(code="d")))
    assert not is_done(task)  # done under another key: stale
    _mark_done(tmp_path, task)
    assert is_done(task)
    (tmp_path / DONE).write_text("{", encoding="utf-8")
    assert not is_done(task)  # a damaged marker is no marker


@pytest.mark.slow
def test_a_variant_is_skipped_only_under_its_own_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """BM25 over fixed-size and newline (no model to load) on a copy of the bundled PDFs: an unchanged re-run computes
    nothing, nor does one with only other threads (they never change results); a re-run with other budgets (the
    same largest one) computes every variant again and records them; a marker written under another key (an earlier
    version's, without one) makes only its variant run again; an edited PDF computes every variant again."""
    import logging

    from conftest import write_test_pdf

    documents = tmp_path / "Documents"
    shutil.copytree(REPO_ROOT / "Documents", documents)
    out = tmp_path / "out"
    grid = ["--strategies", "fixed-size,newline", "--retriever", "bm25", "--documents", str(documents)]
    assert retrieve(out, *grid) == 0
    first = markers(out)
    assert len(first) == 2
    keys = {v: json.loads((out / "variants" / v / DONE).read_text())["key"] for v in first}
    assert all(len(key) == 64 for key in keys.values()) and len(set(keys.values())) == 2

    with caplog.at_level(logging.INFO, logger="ragstudy.grid.executors"):
        assert retrieve(out, *grid) == 0
        assert retrieve(out, *grid, "--threads", "1", "--embedding-threads", "1") == 0
    assert markers(out) == first
    assert [r.getMessage() for r in caplog.records].count("2 of 2 variants already done (their variant.done.json): "
                                                          "computing 0") == 2

    assert retrieve(out, *grid, "--budgets", "600,900") == 0
    second = markers(out)
    assert all(second[v] != first[v] for v in first)  # both computed again
    for v in first:
        assert json.loads((out / "variants" / v / "config.json").read_text())["budgets"] == [600, 900]
        assert json.loads((out / "variants" / v / DONE).read_text())["key"] != keys[v]

    stale = out / "variants" / "newline__bm25__raw" / DONE
    stale.write_text(json.dumps({"variant": "newline__bm25__raw", "format": 1}), encoding="utf-8")  # no key
    assert retrieve(out, *grid, "--budgets", "600,900") == 0
    third = markers(out)
    assert third["fixed-size__bm25__raw"] == second["fixed-size__bm25__raw"]
    assert third["newline__bm25__raw"] != second["newline__bm25__raw"]
    assert json.loads(stale.read_text(encoding="utf-8"))["key"] != ""  # marked again, under its key

    write_test_pdf(next(documents.glob("*.pdf")))  # one PDF replaced by another under the same name
    assert retrieve(out, *grid, "--budgets", "600,900") == 0
    fourth = markers(out)
    assert all(fourth[v] != third[v] for v in first)


def test_the_executor_settings_come_from_flags_or_the_config_file(tmp_path: Path) -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.grid.executors import Executor

    def executor(**flags) -> Executor:
        return StudyConfig.resolve(profile="lite", retrieval_only=True, warn_unused=False, **flags).executor()

    from ragstudy_cli.app import BY_NAME

    parser = BY_NAME["retrieve"].parser()
    assert parser.parse_args(["--ray"]).ray == "local" and parser.parse_args(["--ray", "h:6379"]).ray == "h:6379"
    assert parser.parse_args(["--workers", "3"]).workers == 3 and parser.parse_args([]).ray is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--workers", "two"])
    assert executor() == Executor()
    assert executor(workers=2) == Executor("workers", 2)
    assert executor(ray="local") == Executor("ray")
    assert executor(ray="10.0.0.5:6379") == Executor("ray", address="10.0.0.5:6379")
    config_file = tmp_path / "run.yaml"
    config_file.write_text("ray: ray://head:10001\n", encoding="utf-8")
    assert executor(config_file=str(config_file)) == Executor("ray", address="ray://head:10001")
    config_file.write_text("ray: true\n", encoding="utf-8")
    from ragstudy.errors import StudyInputError

    with pytest.raises(StudyInputError, match=f"`ray:` in {config_file} must be a Ray cluster's address"):
        executor(config_file=str(config_file))


@pytest.mark.parametrize(("flags", "said"), [
    (["--workers", "2", "--ray"], "--workers and --ray exclude each other"),
    (["--workers", "0"], "--workers must be a positive integer, got 0"),
])
def test_bad_executor_flags_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, flags, said) -> None:
    assert retrieve(tmp_path / "out", "--strategies", "fixed-size", "--retriever", "bm25", *flags) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and said in errors[0], errors
    assert not (tmp_path / "out" / "variants").exists()


@pytest.mark.parametrize(("flags", "expected"), [
    (["--workers", "2"], ("workers", 2, None)),
    (["--ray", "--limit", "2"], ("ray", 1, None)),  # --ray alone: a local Ray, whatever flag follows
    (["--ray", "head:6379"], ("ray", 1, "head:6379")),
])
def test_the_study_hands_the_executor_to_its_retrieval_stage(tmp_path: Path, flags, expected) -> None:
    from ragstudy.grid.executors import Executor
    from ragstudy_cli import study

    args, rest, chain = study.parse(["--profile", "lite", *flags])
    stages = {stage.name: stage for stage in study.plan(args, chain, tmp_path)}
    assert stages["retrieval"].config.executor() == Executor(*expected)
    answers = stages["answers"].config  # no grid: the flags stay out
    assert answers.workers is None and answers.ray is None and answers.profile.name == "lite"
    assert answers.limit == (2 if "--limit" in flags else None)  # what follows a bare --ray is kept
    if "--limit" not in flags:  # the executor changes no result: the stages' keys are those of a run without it
        args, rest, chain = study.parse(["--profile", "lite"])
        plain = {stage.name: stage for stage in study.plan(args, chain, tmp_path)}
        for name in ("retrieval", "answers"):
            assert (stages[name].settings, stages[name].inputs) == (plain[name].settings, plain[name].inputs), name
