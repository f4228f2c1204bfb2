"""ragstudy.grid.executors: the same variants in this process, in worker processes and as Ray tasks land the same files;
a failing or killed variant is reported by its id and the others are kept; a re-run computes only what is missing;
caches and Chroma folders stay safe with two worker processes at once."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from ragstudy.errors import StudyInputError
from ragstudy.grid.executors import VARIANT_DONE, Executor, Outcome, Task, pending, run_tasks, translate


@dataclass(frozen=True)
class Spec:
    name: str
    factor: int
    fail: str = ""  # "raise" | "kill" | "kill-once" (killed unless `once` exists, which it creates first)
    calls: str = ""  # a file each call appends the variant's name to
    once: str = ""


def write_variant(spec: Spec, output_dir: Path, inputs: dict[str, Path]) -> None:
    """A tiny deterministic variant: counts words of the documents and questions, records the paths it was given."""
    if spec.calls:
        with open(spec.calls, "a", encoding="utf-8") as log:
            log.write(spec.name + "\n")
    if spec.fail == "raise":
        raise ValueError(f"factor {spec.factor} is not allowed")
    if spec.fail == "kill" or (spec.fail == "kill-once" and not Path(spec.once).exists()):
        if spec.once:
            Path(spec.once).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    documents = sorted(p for p in Path(inputs["documents"]).rglob("*") if p.is_file())
    words = sum(len(p.read_text(encoding="utf-8").split()) for p in documents)
    questions = Path(inputs["questions"]).read_text(encoding="utf-8").splitlines()
    (output_dir / "rankings").mkdir(parents=True, exist_ok=True)
    (output_dir / "config.json").write_text(json.dumps({
        "variant": spec.name, "documents": str(inputs["documents"]), "questions": str(inputs["questions"]),
        "output_dir": str(output_dir)}, indent=2), encoding="utf-8")
    rows = [f"{i},{q},{(words * spec.factor + i) % 97}" for i, q in enumerate(questions)]
    (output_dir / "rankings" / "retrieval.csv").write_text("index,question,score\n" + "\n".join(rows) + "\n",
                                                          encoding="utf-8")
    (output_dir / "vector.bin").write_bytes(np.arange(8, dtype=np.float32).tobytes() * spec.factor)


@pytest.fixture()
def inputs(tmp_path: Path) -> dict[str, Path]:
    documents = tmp_path / "in" / "Documents"
    (documents / "sub").mkdir(parents=True)
    (documents / "a.txt").write_text("uno due tre quattro", encoding="utf-8")
    (documents / "sub" / "b.txt").write_text("cinque sei", encoding="utf-8")
    questions = tmp_path / "in" / "Questions.csv"
    questions.write_text("Quanti?\nDove?\n", encoding="utf-8")
    return {"documents": documents, "questions": questions}


def make_tasks(out: Path, inputs: dict[str, Path], specs: list[Spec]) -> list[Task]:
    return [Task(s.name, write_variant, s, out / "variants" / s.name, inputs) for s in specs]


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def ok_specs() -> list[Spec]:
    return [Spec("paragraph-dense", 1), Spec("fixed-size-dense", 2), Spec("paragraph-bm25", 3)]


def test_inprocess_runs_each_variant_and_marks_it_done(tmp_path, inputs):
    tasks = make_tasks(tmp_path / "out", inputs, ok_specs())
    assert run_tasks(tasks, Executor()) == [Outcome(t.id, None) for t in tasks]
    for task in tasks:
        assert json.loads((task.output_dir / VARIANT_DONE).read_text())["variant"] == task.id
        config = json.loads((task.output_dir / "config.json").read_text())
        assert config["documents"] == str(inputs["documents"]) and config["output_dir"] == str(task.output_dir)
    assert pending(tasks) == []


def test_workers_land_the_same_files_as_inprocess(tmp_path, inputs):
    serial = make_tasks(tmp_path / "serial", inputs, ok_specs())
    parallel = make_tasks(tmp_path / "parallel", inputs, ok_specs())
    assert all(o.error is None for o in run_tasks(serial, Executor()))
    assert all(o.error is None for o in run_tasks(parallel, Executor("workers", 2)))
    for a, b in zip(serial, parallel):
        expected = {k: v.replace(str(tmp_path / "serial").encode(), str(tmp_path / "parallel").encode())
                    for k, v in folder_files(a.output_dir).items()}
        assert folder_files(b.output_dir) == expected


def test_a_raising_variant_is_reported_by_id_and_the_others_kept(tmp_path, inputs):
    specs = [Spec("good-1", 1), Spec("bad", 5, fail="raise"), Spec("good-2", 2)]
    for kind in ("inprocess", "workers"):
        tasks = make_tasks(tmp_path / kind, inputs, specs)
        outcomes = run_tasks(tasks, Executor(kind, 2))
        assert [o.id for o in outcomes] == ["good-1", "bad", "good-2"]
        assert outcomes[0].error is None and outcomes[2].error is None
        assert outcomes[1].error == "variant bad: ValueError: factor 5 is not allowed"
        assert (tasks[0].output_dir / VARIANT_DONE).is_file() and (tasks[2].output_dir / VARIANT_DONE).is_file()
        assert not (tasks[1].output_dir / VARIANT_DONE).exists()
        assert pending(tasks) == [tasks[1]]


def test_a_killed_worker_costs_only_its_variant_and_the_rerun_computes_only_it(tmp_path, inputs):
    calls = tmp_path / "calls.log"
    specs = [Spec("v1", 1, calls=str(calls)), Spec("v2", 2, calls=str(calls)),
             Spec("killed", 3, fail="kill-once", calls=str(calls), once=str(tmp_path / "killed-once")),
             Spec("v4", 4, calls=str(calls)), Spec("v5", 5, calls=str(calls))]
    tasks = make_tasks(tmp_path / "out", inputs, specs)
    outcomes = run_tasks(tasks, Executor("workers", 2))
    errors = {o.id: o.error for o in outcomes}
    assert errors["killed"] == "variant killed: its worker process was killed by SIGKILL"
    assert all(errors[t] is None for t in ("v1", "v2", "v4", "v5"))
    assert [t.id for t in pending(tasks)] == ["killed"]
    assert sorted(calls.read_text().split()) == ["killed", "v1", "v2", "v4", "v5"]
    before = {t.id: folder_files(t.output_dir) for t in tasks if t.id != "killed"}

    calls.unlink()
    assert all(o.error is None for o in run_tasks(tasks, Executor("workers", 2)))
    assert calls.read_text().split() == ["killed"]  # the re-run computed only the missing variant
    assert {t.id: folder_files(t.output_dir) for t in tasks if t.id != "killed"} == before
    assert pending(tasks) == []


def test_bad_executor_settings_are_one_line(tmp_path, inputs):
    tasks = make_tasks(tmp_path, inputs, ok_specs())
    with pytest.raises(StudyInputError, match="is not one of inprocess, workers, ray"):
        run_tasks(tasks, Executor("threads"))
    with pytest.raises(StudyInputError, match="--workers 0"):
        run_tasks(tasks, Executor("workers", 0))
    with pytest.raises(StudyInputError, match="'paragraph-dense' is given twice"):
        run_tasks(tasks + tasks[:1], Executor())


def test_ray_missing_is_one_line_naming_the_fix(tmp_path, inputs, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(StudyInputError, match=r"pip install ray==2\.60\.0"):
        run_tasks(make_tasks(tmp_path, inputs, ok_specs()), Executor("ray"))


def test_a_ray_address_where_nothing_answers_is_one_line_at_once(tmp_path, inputs):
    pytest.importorskip("ray", reason="Ray is not installed (requirements.txt pins it)")
    import socket

    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    began = time.monotonic()
    with pytest.raises(StudyInputError, match=rf"--ray 127\.0\.0\.1:{port}: nothing answers at 127\.0\.0\.1:{port}"):
        run_tasks(make_tasks(tmp_path, inputs, ok_specs()), Executor("ray", address=f"127.0.0.1:{port}"))
    assert time.monotonic() - began < 10
    assert pending(make_tasks(tmp_path, inputs, ok_specs()))  # nothing ran


def test_translate_replaces_worker_paths_in_text_files_only():
    files = {"a.json": b'{"d": "/tmp/w/in/Docs", "o": "/tmp/w/out/x"}', "b.bin": b"\0/tmp/w/out"}
    out = translate(files, {"/tmp/w/in/Docs": "/home/d/Docs", "/tmp/w/out": "/res/v1"})
    assert out == {"a.json": b'{"d": "/home/d/Docs", "o": "/res/v1/x"}', "b.bin": b"\0/tmp/w/out"}


@pytest.mark.slow
def test_ray_lands_the_same_files_and_reports_failures_by_id(tmp_path, inputs):
    ray = pytest.importorskip("ray", reason="Ray is not installed (requirements.txt pins it)")
    assert not ray.is_initialized()
    serial = make_tasks(tmp_path / "serial", inputs, ok_specs())
    assert all(o.error is None for o in run_tasks(serial, Executor()))
    specs = [*ok_specs(), Spec("raises", 7, fail="raise"), Spec("killed", 8, fail="kill")]
    remote = make_tasks(tmp_path / "ray", inputs, specs)
    # no address: run_tasks starts a local Ray (2 CPUs) and stops it at the end
    outcomes = {o.id: o.error for o in run_tasks(remote, Executor("ray", workers=2))}
    assert not ray.is_initialized()
    assert outcomes["raises"] == "variant raises: ValueError: factor 7 is not allowed"
    assert outcomes["killed"].startswith("variant killed: its Ray worker died")
    for a, b in zip(serial, remote):
        assert outcomes[b.id] is None
        expected = {k: v.replace(str(tmp_path / "serial").encode(), str(tmp_path / "ray").encode())
                    for k, v in folder_files(a.output_dir).items()}
        assert folder_files(b.output_dir) == expected  # the driver's paths, not the worker's temporary ones
    assert [t.id for t in pending(remote)] == ["raises", "killed"]
    assert not [p for p in (tmp_path / "ray" / "variants").iterdir() if p.name.startswith(".")]


# ------------------------------------------------------------------------------------- caches under two workers

@dataclass(frozen=True)
class CacheSpec:
    first: int
    last: int
    cache: str
    rendezvous: str


def _rendezvous(folder: Path, me: str, parties: int = 2, deadline: float = 60) -> None:
    """Wait until `parties` processes have arrived, so the work after it runs at the same time."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / me).touch()
    end = time.monotonic() + deadline
    while len(list(folder.iterdir())) < parties:
        if time.monotonic() > end:
            raise TimeoutError("the other worker never arrived")
        time.sleep(0.01)


class HashEncoder:
    """A deterministic stand-in model: a text's vector from its sha256."""

    variant = "float32"

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[:16].astype(np.float32) + 1
                for t in texts]
        matrix = np.stack(rows)
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def fill_cache(spec: CacheSpec, output_dir: Path, inputs: dict[str, Path]) -> None:
    """Embed texts first..last in batches of 5 through the shared vector cache, at the same time as the other."""
    from customembedding import CustomEmbedding

    _rendezvous(Path(spec.rendezvous), str(os.getpid()))
    embedding = CustomEmbedding("hash-model", encoder=HashEncoder(), cache_dir=spec.cache)
    texts = [f"passage {i}" for i in range(spec.first, spec.last)]
    vectors = []
    for start in range(0, len(texts), 5):  # many small transactions, interleaved with the other writer's
        vectors += embedding.embed_documents(texts[start:start + 5])
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "vectors.json").write_text(json.dumps(vectors))


def test_two_workers_fill_one_vector_cache_at_once(tmp_path):
    from customembedding import VectorCache, text_key

    cache = tmp_path / "vectors"  # created by the workers themselves, at the same time
    specs = [CacheSpec(0, 300, str(cache), str(tmp_path / "meet")), CacheSpec(150, 450, str(cache),
                                                                              str(tmp_path / "meet"))]
    tasks = [Task(f"w{i}", fill_cache, s, tmp_path / f"w{i}", {}) for i, s in enumerate(specs)]
    assert [o.error for o in run_tasks(tasks, Executor("workers", 2))] == [None, None]
    stored = VectorCache(cache)
    assert stored.count("hash-model") == 450
    texts = [f"passage {i}" for i in range(450)]
    expected = HashEncoder().encode(texts)
    found = stored.get_many("hash-model", "float32", [text_key(t) for t in texts])
    assert np.allclose([found[text_key(t)] for t in texts], expected, atol=1e-7)
    for task, spec in zip(tasks, specs):
        got = json.loads((task.output_dir / "vectors.json").read_text())
        assert np.allclose(got, expected[spec.first:spec.last], atol=1e-7)


COLD_OPENERS, COLD_ROUNDS = 4, 1000  # measured on the old VectorCache: a failed open in 10 of 10 runs, see below


def open_cold_caches(root: str, barrier, rounds: int) -> None:
    """In a forked process: open round k's cold vector cache at the moment the other processes do, for each round;
    a failed open is written to `<root>/failed-<pid>` and breaks the barrier (the others stop)."""
    from threading import BrokenBarrierError

    from customembedding import VectorCache

    for number in range(rounds):
        try:
            barrier.wait(timeout=60)
        except BrokenBarrierError:
            return
        try:
            VectorCache(Path(root) / f"round-{number}").close()
        except sqlite3.Error as exc:
            (Path(root) / f"failed-{os.getpid()}").write_text(f"round {number}: {type(exc).__name__}: {exc}")
            barrier.abort()
            return


@pytest.mark.slow  # 3-9 s: 1,000 rounds
def test_many_processes_open_one_cold_vector_cache_at_once(tmp_path):
    """Switching a cold cache to WAL reads the file, then asks to write it: SQLite refuses at once (no busy wait)
    a second connection that does the same at that moment ("database is locked"). On the old VectorCache one round
    in about 100 lost a process; here every process of every round opens it."""
    import multiprocessing
    import tempfile

    from customembedding import CACHE_FILE, VectorCache

    context = multiprocessing.get_context("fork")  # started in milliseconds, so the rounds are many
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else tmp_path  # a tmpfs: no fsync, a round takes ~3 ms
    with tempfile.TemporaryDirectory(dir=base) as root:
        barrier = context.Barrier(COLD_OPENERS)
        processes = [context.Process(target=open_cold_caches, args=(root, barrier, COLD_ROUNDS))
                     for _ in range(COLD_OPENERS)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(120)
        failed = sorted(p.read_text() for p in Path(root).glob("failed-*"))
        assert (failed, [p.exitcode for p in processes]) == ([], [0] * COLD_OPENERS)
        last = Path(root) / f"round-{COLD_ROUNDS - 1}"
        assert VectorCache(last).count() == 0
        with sqlite3.connect(last / CACHE_FILE) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@dataclass(frozen=True)
class ChromaSpec:
    db_dir: str
    rendezvous: str


def claim_chroma_folder(spec: ChromaSpec, output_dir: Path, inputs: dict[str, Path]) -> None:
    """Which Chroma folder this worker process gets for the paragraph strategy, while the other holds one too."""
    from ragstudy.registry import get
    from ragstudy.stores.knowledge_base import chroma_folder, prepare_db_dir

    folder = chroma_folder(Path(spec.db_dir), get("paragraph"))
    prepare_db_dir(folder)  # what indexing does first: lock it (it must not be the other worker's)
    _rendezvous(Path(spec.rendezvous), str(os.getpid()))
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "folder.txt").write_text(str(folder))


@pytest.mark.slow
def test_each_worker_process_gets_its_own_chroma_folder(tmp_path):
    import ragstudy.stores.knowledge_base as kb
    from ragstudy.registry import get

    db = tmp_path / "db" / "RAGParagraph"
    tasks = [Task(f"t{i}", claim_chroma_folder, ChromaSpec(str(db), str(tmp_path / "meet")), tmp_path / f"t{i}", {})
             for i in range(2)]
    assert [o.error for o in run_tasks(tasks, Executor("workers", 2))] == [None, None]
    folders = sorted((t.output_dir / "folder.txt").read_text() for t in tasks)
    assert folders == [str(db.with_name("RAGParagraph-worker-0")), str(db.with_name("RAGParagraph-worker-1"))]
    assert kb.chroma_folder(db, get("paragraph")) == db  # in the driver (or in-process): the folder itself


def test_shipped_inputs_are_written_once_per_machine_and_land_replaces_an_unfinished_folder(tmp_path, inputs):
    from ragstudy.grid.executors import _pack_inputs, land, materialise

    assert materialise("0" * 64, {}, tmp_path / "node") == {}  # a task without inputs
    key, packed = _pack_inputs(inputs)
    local = materialise(key, packed, tmp_path / "node")
    assert local["questions"].read_bytes() == inputs["questions"].read_bytes()
    assert folder_files(local["documents"]) == folder_files(inputs["documents"])
    assert materialise(key, packed, tmp_path / "node") == local  # the second task on that machine reuses it
    unfinished = tmp_path / "variants" / "v1"
    (unfinished / "stale").mkdir(parents=True)
    (unfinished / "stale" / "half.csv").write_text("index\n")
    land({"config.json": b"{}", "rankings/r.csv": b"a\n"}, unfinished, Task("v1", write_variant, None, unfinished, {}))
    assert sorted(folder_files(unfinished)) == ["config.json", "rankings/r.csv", VARIANT_DONE]
    assert [p.name for p in unfinished.parent.iterdir()] == ["v1"]


# ---------------------------------------------------------------------------------------------- the real retrieval
# Real retrieval-only variants in worker processes are checked where the grid runs them: two workers' rankings, chunk
# tables and verdicts equal the in-process run's to the byte, each worker indexing into its own slot of one Chroma root
# (test_grid_executors.test_in_process_workers_and_ray_land_the_same_grid), and two workers embedding into one vector
# cache at once leave it and the rankings as one process does (test_embed_ahead.test_each_distinct_window_is_embedded_
# once_and_rankings_are_unchanged; test_two_workers_fill_one_vector_cache_at_once above for overlapping writers).


def test_workers_share_the_cores_instead_of_each_taking_all():
    from ragstudy.grid.executors import core_share

    assert [core_share(k, 2, [0, 1]) for k in range(2)] == [(0,), (1,)]
    assert [core_share(k, 3, [0, 1, 2, 3, 4, 5, 6]) for k in range(3)] == [(0, 1), (2, 3), (4, 5, 6)]
    assert [core_share(k, 3, [0, 1]) for k in range(3)] == [(0,), (1,), (0,)]
    assert core_share(0, 2, []) == ()
