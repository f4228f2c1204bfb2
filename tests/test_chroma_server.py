"""`--chroma-server`: the same collections, ids, resume and retrieval through a `chroma run` server on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ragstudy import registry
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.pipeline import StageSettings, chunk_documents
from ragstudy.stores.knowledge_base import KnowledgeBase, check_chroma_server
from ragstudy.text.textlayer import load_documents

QUERIES = ["Come ci si autentica per accedere al portale? SPID", "Per quanti anni si conservano i fascicoli?",
           "Entro quanti giorni risponde l'assistenza?", "firma digitale certificato qualificato",
           "Manuale di prova"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def chroma_cli() -> str:
    beside = Path(sys.executable).with_name("chroma")  # the CLI installed with chromadb in this interpreter
    found = str(beside) if beside.is_file() else shutil.which("chroma")
    if not found:
        pytest.fail("the `chroma` CLI (installed with chromadb) is missing: pip install -r requirements.txt")
    return found


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory):
    """A `chroma run` server on a free local port, in its own process group, stopped (and checked gone) after."""
    port = free_port()
    folder = tmp_path_factory.mktemp("chroma-server")
    log = open(folder / "server.log", "wb")
    process = subprocess.Popen([chroma_cli(), "run", "--path", str(folder / "data"), "--host", "127.0.0.1",
                                "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma server did not start: {(folder / 'server.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
        log.close()
    assert process.returncode is not None


def newline_chunks(pdf_dir: Path):
    config = StudyConfig.resolve(profile="lite", strategies="newline")
    return config.strategy_params["newline"], chunk_documents(load_documents(pdf_dir),
                                                              StageSettings.of(config, "newline"))


def test_server_retrieval_equals_the_local_folder(chroma_server: str, pdf_dir: Path, tmp_path: Path,
                                                  minilm_embedding) -> None:
    params, chunked = newline_chunks(pdf_dir)
    spec = registry.get("newline")
    local = KnowledgeBase(spec, params, minilm_embedding, minilm_embedding.model_id, db_dir=tmp_path / "db")
    remote = KnowledgeBase(spec, params, minilm_embedding, minilm_embedding.model_id, db_dir=tmp_path / "unused",
                           chroma_server=chroma_server)
    local_retriever, local_stats = local.build(chunked)
    remote_retriever, remote_stats = remote.build(chunked)
    assert remote_stats.collection == local_stats.collection and remote_stats.added == remote_stats.children
    assert not (tmp_path / "unused").exists()  # nothing written locally
    assert local_retriever.vectorstore.get(include=[])["ids"] == remote_retriever.vectorstore.get(include=[])["ids"]
    for query in QUERIES:
        assert [d.id for d in remote_retriever.invoke(query)] == [d.id for d in local_retriever.invoke(query)]
        near, far = local.rank(query, 8), remote.rank(query, 8)
        assert [r.document.id for r in far] == [r.document.id for r in near]
        assert [r.document.metadata for r in far] == [r.document.metadata for r in near]
        assert max(abs(a.score - b.score) for a, b in zip(near, far)) < 1e-6


def test_server_resume_embeds_only_missing_windows(chroma_server: str, pdf_dir: Path, minilm_embedding) -> None:
    params, chunked = newline_chunks(pdf_dir)
    kb = KnowledgeBase(registry.get("newline"), params, minilm_embedding, minilm_embedding.model_id,
                       chroma_server=chroma_server)
    retriever, first = kb.build(chunked)  # may already exist from the test above: same name, same ids
    retriever.vectorstore.delete(ids=retriever.vectorstore.get(include=[])["ids"][:3])
    before = minilm_embedding.texts_embedded
    _, resumed = kb.build(chunked)
    assert resumed.collection == first.collection and resumed.added == resumed.embedded == 3
    assert minilm_embedding.texts_embedded - before == 3
    _, again = kb.build(chunked)
    assert again.added == again.embedded == 0 and again.reused == again.children


def test_a_server_that_is_down_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StudyInputError, match=f"Chroma server {url} is not reachable"):
        check_chroma_server(url)
    kb = KnowledgeBase(registry.get("newline"), registry.get("newline").defaults, None, "none", chroma_server=url)
    with pytest.raises(StudyInputError, match="chroma run"):
        kb.build([])
    for bad in ("ftp://127.0.0.1:1", "http://:80", "http://127.0.0.1:port"):
        with pytest.raises(StudyInputError, match="not a server address"):
            check_chroma_server(bad)
