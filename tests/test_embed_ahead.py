"""The grid's embed-ahead phase (ragstudy.grid.embedahead): before the variants run, each distinct child window and
question is embedded once per embedder, in this process or split across the worker processes, and the variants only
read vectors. Rankings are those of a run without the phase, to the byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import seed_built_models

GRID = dict(profile="lite", strategies="fixed-size,newline", retriever="dense", budgets="300,900")


def grid_run(tmp_path: Path, name: str, pdf_dir: Path, questions_csv: Path, monkeypatch: pytest.MonkeyPatch,
             source_cache: Path, executor=None):
    """The grid from a cold project cache of its own (the built models copied in): (GridRun, the texts its vector
    cache holds, each variant's rankings file's bytes, the run's config)."""
    from customembedding import VectorCache
    from ragstudy.config import StudyConfig
    from ragstudy.ranking import run_retrieval

    cache = tmp_path / f"cache-{name}"
    seed_built_models(cache, source_cache, link=True)
    monkeypatch.setenv("RAGSTUDY_CACHE", str(cache))  # worker processes are spawned with it
    config = StudyConfig.resolve(documents=str(pdf_dir), questions=str(questions_csv), retrieval_only=True,
                                 output_dir=str(tmp_path / name), db_dir=str(tmp_path / f"db-{name}"), **GRID)
    grid = run_retrieval(config, executor=executor)
    vectors = VectorCache(cache / "vectors")
    stored = vectors.count()
    vectors.close()
    rankings = {v.id: (grid.folders[v.id] / f"retrieval_{v.strategy}.csv").read_bytes() for v in grid.variants}
    return grid, stored, rankings, config


@pytest.mark.slow
def test_each_distinct_window_is_embedded_once_and_rankings_are_unchanged(tmp_path, pdf_dir, questions_csv,
                                                                          monkeypatch, session_cache_reused):
    """fixed-size and newline (which cut some identical windows) x dense: in-process and with two worker processes,
    the phase runs every distinct window and question through the model once (texts embedded == vectors in the cold
    cache, fewer windows than the two variants index) and the variants embed nothing; every ranking equals, to the
    byte, that of an in-process run without the phase (each variant embedding what the cache lacks, as before), and
    so the workers' equal the in-process ones."""
    from ragstudy.grid import embedahead
    from ragstudy.grid.executors import Executor

    runs = {}
    for name, executor in (("inprocess", Executor()), ("workers", Executor("workers", 2))):
        runs[name] = grid_run(tmp_path, name, pdf_dir, questions_csv, monkeypatch, session_cache_reused, executor)
    with monkeypatch.context() as patch:
        patch.setattr(embedahead, "plan", lambda *args: [])  # the grid as it ran before the phase
        runs["without"] = grid_run(tmp_path, "without", pdf_dir, questions_csv, monkeypatch, session_cache_reused)

    without, stored_without, rankings_without, _ = runs["without"]
    assert without.ahead.batches == 0 and without.windows_embedded() > 0
    windows = {v.id: without.runs[v.id].embedded + without.runs[v.id].reused
               for v in without.variants if v.value("retriever") != "bm25"}
    for name in ("inprocess", "workers"):
        grid, stored, rankings, _ = runs[name]
        ahead = grid.ahead
        assert [grid.runs[v.id].embedded for v in grid.variants] == [0] * len(grid.variants), name
        assert ahead.questions == 3 and ahead.questions_embedded == 3, name
        assert ahead.passages_embedded == ahead.passages == grid.windows_embedded(), name
        assert ahead.embedded == stored == stored_without, name  # no text run through the model twice
        # the strategies share windows: fewer distinct ones than the two variants index
        assert ahead.passages < sum(windows[v.id] for v in without.variants if v.value("retriever") == "dense"), name
        assert ahead.by_variant == {v.id: without.runs[v.id].embedded for v in without.variants
                                    if without.runs[v.id].embedded}, name
        assert rankings == rankings_without, name

    # a process that finds every vector it needs in the cache never loads the model (the variants after the phase)
    from ragstudy.pipeline import lazy_embedding
    from ragstudy.results import read_questions

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache-inprocess"))
    config = runs["inprocess"][3]
    model = lazy_embedding(config.embedder, config.resolved_threads(), deferred=True)()
    model.embed_queries(read_questions(str(questions_csv)))
    assert model.encoder.encoder is None and model.cache_hits == 3 and model.texts_embedded == 0
    model.embed_query("Una domanda che nessuno ha ancora posto?")
    assert model.encoder.encoder is not None and model.texts_embedded == 1


def record_pid(spec: str, output_dir: Path, inputs: dict[str, Path]) -> None:
    """A task that writes the id of the process it ran in."""
    import os

    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "pid").write_text(str(os.getpid()))


@pytest.mark.slow
def test_a_session_keeps_its_worker_processes_across_phases(tmp_path):
    """Two run_tasks calls inside one executors.session run on the same two worker processes (the embed-ahead phase
    and the variants share them); outside a session, each call starts its own."""
    from ragstudy.grid.executors import Executor, Task, run_tasks, session

    def pids(phase: str) -> set[str]:
        tasks = [Task(f"{phase}-{n}", record_pid, "", tmp_path / phase / str(n), {}) for n in range(4)]
        assert [o.error for o in run_tasks(tasks, executor)] == [None] * 4
        return {(t.output_dir / "pid").read_text() for t in tasks}

    executor = Executor("workers", 2)
    with session(executor):
        first, second = pids("first"), pids("second")
    assert first == second and len(first) <= 2
    assert pids("alone").isdisjoint(first)
