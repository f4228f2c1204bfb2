"""Servers that misbehave, for real: a small HTTP server on 127.0.0.1 (a free port) started in the test answers
`/v1/models`, `/v1/chat/completions` and Chroma's heartbeat each wrong way (garbage, HTML, other JSON shapes, no
answer at all). Every case is an error naming the URL and quoting what it answered; through evaluation_chain.py it
is one stderr line and exit 2, never a traceback; a hung server is bounded by --llm-timeout; one Ctrl-C stops the
run at once; and a run resumed after the server is fixed regenerates only the answers that are missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import (REPO_ROOT, assert_stopped_by_ctrl_c, own_db_dir, tiny_llm, ctrl_c_when, sigint_default,
    write_test_pdf)
from ragstudy.errors import StudyInputError
from ragstudy.llms import AnswerCache, GenerationParams
from ragstudy.llms.server_engine import ServerGenerator, check_servers, served_models
from ragstudy.stores.knowledge_base import check_chroma_server

MODEL = "fake-model"
MODELS_OK = (200, "application/json", json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}))
HANG = "hang"


def completion(text: str) -> tuple[int, str, str]:
    return 200, "application/json", json.dumps({"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})


class FakeServer:
    """A real HTTP server in a thread. `routes` maps "GET /path" to (status, content type, body), to HANG (hold
    the connection until the server stops), or to a callable(request body) returning one of those."""

    def __init__(self) -> None:
        self.routes: dict[str, object] = {}
        self.requests: list[tuple[str, bytes]] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                route = f"{method} {self.path}"
                outer.requests.append((route, body))
                answer = outer.routes.get(route, (404, "text/html", "<html><body>Not Found</body></html>"))
                if callable(answer):
                    answer = answer(body)
                if answer == HANG:
                    outer.release.wait(60)
                    return
                status, kind, text = answer
                data = text.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self._answer("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._answer("POST")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def chats(self) -> int:
        return sum(route == "POST /v1/chat/completions" for route, _ in self.requests)

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_server():
    with FakeServer() as server:
        yield server


# ------------------------------------------------------------------------------------------- GET /v1/models

MODEL_LISTS = {
    "garbage": (200, "application/json", "}{ not json"),
    "html": (200, "text/html", "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>"),
    "data is not a list": (200, "application/json", '{"data": "nope"}'),
    "a JSON list": (200, "application/json", "[1, 2, 3]"),
    "models without ids": (200, "application/json", '{"data": [{"name": "x"}]}'),
}


@pytest.mark.parametrize("case", list(MODEL_LISTS))
def test_a_models_list_that_is_not_one_names_the_url_and_quotes_it(fake_server: FakeServer, case: str) -> None:
    fake_server.routes["GET /v1/models"] = MODEL_LISTS[case]
    body = MODEL_LISTS[case][2]
    with pytest.raises(StudyInputError) as caught:
        check_servers([fake_server.url], MODEL)
    message = str(caught.value)
    assert f"LLM server {fake_server.url}: GET {fake_server.url}/v1/models answered" in message
    assert body[:20] in message and "not an OpenAI model list" in message


def test_an_http_error_page_is_named_with_its_status(fake_server: FakeServer) -> None:
    with pytest.raises(StudyInputError, match=r"answered HTTP 404 \('<html><body>Not Found"):
        served_models(fake_server.url)


def test_a_models_list_that_never_comes_is_bounded(fake_server: FakeServer) -> None:
    fake_server.routes["GET /v1/models"] = HANG
    started = time.monotonic()
    with pytest.raises(StudyInputError, match=rf"LLM server {fake_server.url} is unreachable \(Request timed out"):
        served_models(fake_server.url, timeout=0.5)
    assert time.monotonic() - started < 10


def test_a_good_models_list_is_read(fake_server: FakeServer) -> None:
    fake_server.routes["GET /v1/models"] = MODELS_OK
    assert served_models(fake_server.url) == [MODEL]


# ----------------------------------------------------------------------------------- POST /v1/chat/completions

COMPLETIONS = {
    "garbage": (200, "application/json", "{'choices': oops"),
    "html": (200, "text/html", "<html><body>502 Bad Gateway</body></html>"),
    "no choices": (200, "application/json", '{"id": "x", "choices": []}'),
    "another shape": (200, "application/json", '{"result": {"text": "ciao"}}'),
    "content not a string": (200, "application/json", '{"choices": [{"message": {"content": 42}}]}'),
}


def generator(server: FakeServer, cache_path: Path, **kwargs) -> ServerGenerator:
    return ServerGenerator([server.url], MODEL, GenerationParams(max_new_tokens=8), AnswerCache(cache_path),
                           **kwargs)


@pytest.mark.parametrize("case", list(COMPLETIONS))
def test_a_completion_that_is_not_one_names_the_url_and_quotes_it(fake_server: FakeServer, tmp_path: Path,
                                                                  case: str) -> None:
    fake_server.routes["GET /v1/models"] = MODELS_OK
    fake_server.routes["POST /v1/chat/completions"] = COMPLETIONS[case]
    gen = generator(fake_server, tmp_path / "answers.jsonl", max_retries=0)
    with pytest.raises(StudyInputError) as caught:
        gen.generate_many(["una domanda"])
    message = str(caught.value)
    assert f"LLM server {fake_server.url}: POST {fake_server.url}/v1/chat/completions answered" in message
    assert COMPLETIONS[case][2][:20] in message and "not a chat completion" in message
    assert len(AnswerCache(tmp_path / "answers.jsonl")) == 0  # nothing wrong was cached


def test_a_hung_server_fails_after_the_timeout_and_its_retries(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.routes["GET /v1/models"] = MODELS_OK
    fake_server.routes["POST /v1/chat/completions"] = HANG
    gen = generator(fake_server, tmp_path / "answers.jsonl", timeout=0.5, max_retries=1)
    started = time.monotonic()
    with pytest.raises(StudyInputError, match=rf"LLM server {fake_server.url} did not answer within 0.5 s \(2 tries"):
        gen.generate_many(["una domanda"])
    assert time.monotonic() - started < 10
    assert fake_server.chats() == 2


def test_resume_after_the_server_is_fixed_regenerates_only_the_missing_answers(fake_server: FakeServer,
                                                                                tmp_path: Path) -> None:
    prompts = [f"domanda {i}" for i in range(5)]

    def answer(body: bytes):
        prompt = json.loads(body)["messages"][0]["content"]
        return COMPLETIONS["garbage"] if prompt == "domanda 3" else completion(f"risposta a {prompt}")

    fake_server.routes["GET /v1/models"] = MODELS_OK
    fake_server.routes["POST /v1/chat/completions"] = answer
    cache = tmp_path / "answers.jsonl"
    with pytest.raises(StudyInputError, match="not a chat completion"):
        generator(fake_server, cache, concurrency=1, max_retries=0).generate_many(prompts)
    assert len(AnswerCache(cache)) == 3  # answers 0-2 arrived before the bad one and are kept
    fake_server.routes["POST /v1/chat/completions"] = lambda body: completion(
        f"risposta a {json.loads(body)['messages'][0]['content']}")
    before = fake_server.chats()
    resumed = generator(fake_server, cache, concurrency=2)
    assert resumed.generate_many(prompts) == [f"risposta a {p}" for p in prompts]
    assert (resumed.generated, resumed.cached, fake_server.chats() - before) == (2, 3, 2)


# --------------------------------------------------------------------------------------- not a Chroma server

@pytest.mark.parametrize("answer, said", [
    ((200, "text/html", "<html><body>hello</body></html>"), "answered '<html><body>hello</body></html>', not a "
                                                            "Chroma heartbeat"),
    ((200, "application/json", '{"status": "ok"}'), "answered '{\"status\": \"ok\"}', not a Chroma heartbeat"),
    (None, "answered HTTP 404"),
])
def test_a_url_that_is_not_a_chroma_server_is_named(fake_server: FakeServer, answer, said: str) -> None:
    if answer is not None:
        fake_server.routes["GET /api/v2/heartbeat"] = answer
    with pytest.raises(StudyInputError) as caught:
        check_chroma_server(fake_server.url)
    assert str(caught.value).startswith(f"Chroma server {fake_server.url}: GET {fake_server.url}/api/v2/heartbeat")
    assert said in str(caught.value)


# ------------------------------------------------------------------------------ through evaluation_chain.py

def run_chain(*args: str, env: dict | None = None, timeout: float = 400) -> subprocess.CompletedProcess:
    """evaluation_chain.py --profile lite ARGS, as a user runs it (`env` is added to this process's environment)."""
    return subprocess.run([sys.executable, "evaluation_chain.py", "--profile", "lite", *tiny_llm(args),
                           *own_db_dir(args)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def assert_one_error_line(result: subprocess.CompletedProcess, *expected: str) -> str:
    """Exit 2, no traceback, exactly one `error:` line on stderr, holding every `expected` text."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert len(lines) == 1, result.stderr[-3000:]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Flags of a one-strategy, one-question run on a small generated PDF (its own output and Chroma folders)."""
    folder = tmp_path_factory.mktemp("small-run")
    (folder / "docs").mkdir()
    write_test_pdf(folder / "docs" / "manuale.pdf", pages=1)
    (folder / "questions.csv").write_text("questions\nPer quanti anni si conservano i fascicoli?\n", encoding="utf-8")
    return ["--documents", str(folder / "docs"), "--questions", str(folder / "questions.csv"), "--strategies",
            "fixed-size", "--output-dir", str(folder / "out"), "--db-dir", str(folder / "db")]


@pytest.mark.slow
def test_cli_a_garbage_models_list_is_one_line_and_exit_2(fake_server: FakeServer, small_run: list[str]) -> None:
    fake_server.routes["GET /v1/models"] = MODEL_LISTS["data is not a list"]
    result = run_chain(*small_run, "--llm-server", fake_server.url, "--llm-server-model", MODEL)
    assert_one_error_line(result, f"LLM server {fake_server.url}", """answered '{"data": "nope"}'""")


@pytest.mark.slow
def test_cli_a_hung_server_is_bounded_by_llm_timeout(fake_server: FakeServer, small_run: list[str]) -> None:
    fake_server.routes["GET /v1/models"] = MODELS_OK
    fake_server.routes["POST /v1/chat/completions"] = HANG
    started = time.monotonic()
    result = run_chain(*small_run, "--llm-server", fake_server.url, "--llm-server-model", MODEL,
                       "--llm-timeout", "1")
    assert_one_error_line(result, f"LLM server {fake_server.url} did not answer within 1 s (3 tries)")
    assert fake_server.chats() == 3
    assert time.monotonic() - started < 200


@pytest.mark.slow
def test_cli_one_ctrl_c_stops_a_run_waiting_on_a_hung_server(fake_server: FakeServer, small_run: list[str]) -> None:
    fake_server.routes["GET /v1/models"] = MODELS_OK
    fake_server.routes["POST /v1/chat/completions"] = HANG
    process = subprocess.Popen([sys.executable, "evaluation_chain.py", "--profile", "lite", *small_run,
                                "--llm-server", fake_server.url, "--llm-server-model", MODEL], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    # once the run is waiting on the hung request
    stderr, stopped = ctrl_c_when(process, lambda: fake_server.chats() > 0)
    assert_stopped_by_ctrl_c(process, stderr)
    assert stopped < 5, f"the run went on for {stopped:.1f} s after Ctrl-C"


@pytest.mark.slow
def test_cli_a_url_that_is_not_a_chroma_server(fake_server: FakeServer, small_run: list[str]) -> None:
    fake_server.routes["GET /api/v2/heartbeat"] = (200, "text/html", "<html>an LLM dashboard</html>")
    result = run_chain(*small_run, "--retrieval-only", "--chroma-server", fake_server.url)
    assert_one_error_line(result, f"Chroma server {fake_server.url}", "not a Chroma heartbeat")
