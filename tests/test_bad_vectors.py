"""Vectors are checked before they are kept (ragstudy.stores.vectorcheck), against a real OpenAI-compatible embedding
server: a small HTTP server on a free 127.0.0.1 port that passes the start-up check, then answers each batch wrong
(NaN, infinite or all-zero vectors, fewer vectors than texts, a ragged batch, another vector size, or no answer at
all). Each case stops with one line naming the server and the fix, and nothing of the bad batch is cached."""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import write_test_pdf
from test_servers_misbehave import HANG, FakeServer, assert_one_error_line, run_chain

MODEL = "fake-embed"
ROUTE = "POST /v1/embeddings"


def fake_vector(text: str, size: int = 8) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [(digest[i % len(digest)] - 127.5) / 127.5 + 0.01 * i for i in range(size)]


class EmbeddingAnswers:
    """The /v1/embeddings route: good vectors for the start-up check ("ping"), then vectors spoiled by `mode`."""

    def __init__(self, mode: str = "ok", size: int = 8) -> None:
        self.mode, self.size = mode, size
        self.batches = 0

    def __call__(self, body: bytes):
        texts = json.loads(body)["input"]
        texts = [texts] if isinstance(texts, str) else texts
        mode = "ok" if texts == ["ping"] else self.mode
        if mode == "hang":
            return HANG
        self.batches += texts != ["ping"]
        rows = [fake_vector(text, self.size) for text in texts]
        if mode == "nan":
            rows[-1][0] = math.nan
        elif mode == "inf":
            rows[0][1] = math.inf
        elif mode == "zero":
            rows = [[0.0] * self.size for _ in rows]
        elif mode == "fewer":
            rows = rows[:-1]
        elif mode == "ragged":
            rows[-1] = rows[-1][:-2]
        data = [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)]
        return 200, "application/json", json.dumps({"object": "list", "model": MODEL, "data": data, "usage": {
            "prompt_tokens": 1, "total_tokens": 1}})


@pytest.fixture
def embedding_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    with FakeServer() as server:
        server.answers = EmbeddingAnswers()
        server.routes[ROUTE] = server.answers
        yield server


def server_model(url: str, **settings):
    from ragstudy.config import StudyConfig

    config = StudyConfig.resolve(profile="lite", strategies="newline", embedding_server=url,
                                 embedding_server_model=MODEL, embedding_batch_size=4, concurrency=2, **settings)
    return config.embedder.load()


PASSAGES = [f"Paragrafo {i} del manuale di prova." for i in range(6)]


@pytest.mark.parametrize("mode, said", [
    ("nan", "vectors with NaN components"),
    ("inf", "vectors with infinite components"),
    ("zero", "returned all-zero vectors"),
    ("fewer", "returned 3 vectors for 4 texts"),
    ("ragged", "vectors of different lengths in one batch (6, 8 components)"),
])
def test_a_bad_batch_is_named_and_never_cached(embedding_server: FakeServer, mode: str, said: str) -> None:
    from ragstudy.stores.vectorcheck import BadVectors

    model = server_model(embedding_server.url)
    embedding_server.answers.mode = mode
    with pytest.raises(BadVectors, match="nothing of that batch was kept") as caught:
        model.embed_documents(PASSAGES)
    assert f"embedding server {embedding_server.url} (model '{MODEL}')" in str(caught.value)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)
    assert model.cache.count() == 0  # the bad batch (and the ones in flight with it) were not kept
    with pytest.raises(BadVectors):
        model.embed_query("Come si accede al portale?")
    embedding_server.answers.mode = "ok"  # fixed: the same texts are embedded (nothing bad was cached)
    vectors = np.array(model.embed_documents(PASSAGES))
    assert np.isfinite(vectors).all() and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert model.cache.count() == len(PASSAGES)


def test_a_server_whose_vector_size_changed_names_the_vector_cache(embedding_server: FakeServer) -> None:
    from ragstudy.stores.vectorcheck import BadVectors

    first = server_model(embedding_server.url)
    first.embed_documents(PASSAGES[:2])
    embedding_server.answers.size = 16  # another model served under the same name
    with pytest.raises(BadVectors) as caught:  # at start-up, before anything is embedded
        server_model(embedding_server.url)
    message = str(caught.value)
    assert "returned 16-dimension vectors (its answer at start-up), but the vector cache" in message
    assert "holds 8-dimension" in message and "--embedding-server-model" in message
    assert f"delete the vector cache {first.cache.path}" in message
    assert first.cache.count() == 2


def test_a_batch_of_another_size_than_the_start_up_answer_is_refused(embedding_server: FakeServer) -> None:
    from ragstudy.stores.vectorcheck import BadVectors

    model = server_model(embedding_server.url)
    embedding_server.answers.size = 16
    with pytest.raises(BadVectors, match=r"returned 16-dimension vectors \(now\), but its answer at start-up holds 8"):
        model.embed_query("Come si accede al portale?")
    assert model.cache.count() == 0


def test_poisoned_vectors_from_an_older_cache_are_embedded_again(embedding_server: FakeServer,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    from customembedding import text_key

    model = server_model(embedding_server.url)
    model.cache.put_many(MODEL, "server", [(text_key(PASSAGES[0]), [math.nan] * 8),
                                           (text_key(PASSAGES[1]), [0.0] * 8)])
    vectors = np.array(model.embed_documents(PASSAGES[:3]))
    assert np.isfinite(vectors).all() and model.texts_embedded == 3
    assert "2 vector(s)" in caplog.text and "embedding them again" in caplog.text
    again = server_model(embedding_server.url)
    assert np.allclose(again.embed_documents(PASSAGES[:3]), vectors) and again.texts_embedded == 0  # replaced


def test_a_server_that_hangs_after_the_check_is_bounded_by_embedding_timeout(embedding_server: FakeServer) -> None:
    from ragstudy.errors import StudyInputError

    model = server_model(embedding_server.url, embedding_timeout=1.0)
    embedding_server.answers.mode = "hang"
    started = time.monotonic()
    with pytest.raises(StudyInputError, match=rf"embedding server {embedding_server.url} did not answer within 1 s "
                                              r"\(3 tries\).*--embedding-timeout"):
        model.embed_documents(PASSAGES * 4)  # 6 batches, 2 in flight: the queued ones are not sent
    assert time.monotonic() - started < 15
    assert sum(route == ROUTE for route, _ in embedding_server.requests) <= 1 + 2 * 3


def test_embedding_timeout_must_be_a_positive_number() -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError

    with pytest.raises(StudyInputError, match="--embedding-timeout must be a positive number of seconds, got 0"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding_timeout=0)


@pytest.fixture
def one_pdf_run(tmp_path: Path) -> list[str]:
    (tmp_path / "docs").mkdir()
    write_test_pdf(tmp_path / "docs" / "manuale.pdf", pages=1)
    (tmp_path / "questions.csv").write_text("questions\nPer quanti anni si conservano i fascicoli?\n",
                                            encoding="utf-8")
    return ["--documents", str(tmp_path / "docs"), "--questions", str(tmp_path / "questions.csv"), "--strategies",
            "newline", "--retrieval-only", "--db-dir", str(tmp_path / "db")]


@pytest.mark.slow
@pytest.mark.parametrize("retriever", ["dense", "dense-parents", "hybrid"])
def test_cli_nan_vectors_stop_every_retriever_with_one_line(embedding_server: FakeServer, one_pdf_run: list[str],
                                                            tmp_path: Path, retriever: str) -> None:
    embedding_server.answers.mode = "nan"
    result = run_chain(*one_pdf_run, "--output-dir", str(tmp_path / "out"), "--retriever", retriever,
                       "--embedding-server", embedding_server.url, "--embedding-server-model", MODEL,
                       env={"RAGSTUDY_CACHE": str(tmp_path / "cache")})
    assert_one_error_line(result, f"embedding server {embedding_server.url}", "NaN components",
                          "nothing of that batch was kept")
    assert not list((tmp_path / "out").glob("retrieval_*.csv"))


@pytest.mark.slow
def test_cli_a_collection_of_another_vector_size_is_named(embedding_server: FakeServer, one_pdf_run: list[str],
                                                          tmp_path: Path) -> None:
    """The vector cache was deleted (as the message says) but the Chroma folder still holds the old size."""
    import shutil

    env = {"RAGSTUDY_CACHE": str(tmp_path / "cache")}
    flags = [*one_pdf_run, "--embedding-server", embedding_server.url, "--embedding-server-model", MODEL]
    first = run_chain(*flags, "--output-dir", str(tmp_path / "out1"), env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    shutil.rmtree(tmp_path / "cache" / "vectors")
    shutil.rmtree(tmp_path / "cache" / "rankings")
    embedding_server.answers.size = 16
    result = run_chain(*flags, "--output-dir", str(tmp_path / "out2"), env=env)
    assert_one_error_line(result, "returned 16-dimension vectors (its answer at start-up), but the Chroma collection",
                          "holds 8-dimension", "delete that Chroma folder")
