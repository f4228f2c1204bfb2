"""server: answers from OpenAI-compatible servers (vLLM, `transformers serve`, ...) instead of an in-process model,
through the official `openai` client and its retries with backoff (docs/scale.md). What a server answers is checked:
anything but an OpenAI-shaped answer (HTML, garbage, another JSON shape) is an error naming the URL and quoting it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any
from urllib.parse import urlparse

from ragstudy.errors import StudyInputError, excerpt
from ragstudy.io import sha256_text, stable_json
from ragstudy.llms import register_engine, server_urls
from ragstudy.llms.cache import AnswerCache, CachingGeneratorBase, GenerationParams, clean_answer

logger = logging.getLogger(__name__)

BACKEND = "openai-chat-completions"  # part of the cache key: server answers never mix with in-process ones
REQUEST_TIMEOUT_S = 600.0  # one answer of the paper's profile (up to 5000 tokens) on a busy server; --llm-timeout
MAX_RETRIES = 2  # the openai client's own backoff (~0.5 s, then ~1 s, with jitter): a hung server costs 3 timeouts
CHECK_TIMEOUT_S = 10.0


def api_base(url: str, flag: str = "--llm-server") -> str:
    """`http://host:port` or `http://host:port/v1` -> the client's base URL (`.../v1`)."""
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise StudyInputError(f"{flag} {url!r} is not an http(s) URL; pass e.g. http://127.0.0.1:8000")
    base = url.strip().rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def make_client(url: str, timeout: float = REQUEST_TIMEOUT_S, max_retries: int = MAX_RETRIES):
    from openai import OpenAI

    # local servers ignore the key; a hosted one reads OPENAI_API_KEY
    return OpenAI(base_url=api_base(url), api_key=os.environ.get("OPENAI_API_KEY") or "EMPTY", timeout=timeout,
                  max_retries=max_retries)


def served_models(url: str, timeout: float = CHECK_TIMEOUT_S) -> list[str]:
    """The model names `GET /v1/models` lists."""
    import openai

    endpoint = f"{api_base(url)}/models"
    try:
        raw = make_client(url, timeout=timeout, max_retries=1).models.with_raw_response.list()
    except openai.APIConnectionError as exc:  # also timeouts
        raise StudyInputError(f"LLM server {url} is unreachable ({exc}). Start it (e.g. `vllm serve MODEL "
                              "--port 8000`) or fix --llm-server.") from None
    except openai.APIStatusError as exc:
        raise StudyInputError(f"LLM server {url}: GET {endpoint} answered HTTP {exc.status_code} "
                              f"({excerpt(exc.response.text)}); is it an OpenAI-compatible server?") from None
    body = raw.http_response.text
    data = _json_object(body)
    models = data.get("data") if data else None
    if not isinstance(models, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in models):
        raise StudyInputError(f"LLM server {url}: GET {endpoint} answered {excerpt(body)}, not an OpenAI model list "
                              '({"data": [{"id": ...}, ...]}); is it an OpenAI-compatible server? Fix --llm-server.')
    return [model["id"] for model in models]


def _json_object(body: str) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def completion_text(body: str) -> str | None:
    """The answer in a chat completion's JSON body (`choices[0].message.content`; null content is ""), or None
    when the body is not a chat completion."""
    data = _json_object(body)
    choices = data.get("choices") if data else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    content = message.get("content", "") if isinstance(message, dict) else None
    if content is None:
        return ""
    return content if isinstance(content, str) else None


def check_servers(urls: Sequence[str], model: str | None) -> None:
    """Fail before any work when a server is down or does not serve `model` (also for a ServerGenerator made
    without a StudyConfig, whose validation names a model)."""
    if not urls:
        raise StudyInputError("no LLM server given (--llm-server URL)")
    if not model:
        raise StudyInputError("--llm-server needs --llm-server-model NAME (the model name the server serves)")
    for url in urls:
        names = served_models(url)
        if model not in names:
            raise StudyInputError(f"LLM server {url} does not serve model {model!r}; it serves: "
                                  f"{', '.join(names) or 'no models'}. Fix --llm-server-model.")


class ServerGenerator(CachingGeneratorBase):
    """`CachedGenerator`'s interface over OpenAI-compatible servers: the same cache file, prompts and counters."""

    def __init__(self, servers: Sequence[str], model: str, params: GenerationParams, cache: AnswerCache,
                 concurrency: int = 4, timeout: float = REQUEST_TIMEOUT_S, max_retries: int = MAX_RETRIES) -> None:
        super().__init__(model, params, cache)
        if not servers:
            raise ValueError("ServerGenerator needs at least one server URL")
        if concurrency < 1 or not timeout > 0:
            raise ValueError(f"concurrency and timeout must be positive, got {concurrency}, {timeout}")
        for url in servers:
            api_base(url)  # reject a malformed URL before anything else
        self.servers = tuple(servers)
        self.model = model
        self.concurrency, self.timeout, self.max_retries = concurrency, timeout, max_retries
        self.requests = Counter()  # URL -> requests answered (how the load was spread)
        self._clients: dict[str, Any] = {}
        self._in_flight = Counter()
        self._lock = threading.Lock()
        self._checked = False

    def key(self, prompt: str, params: GenerationParams | None = None, batch_size: int | None = None) -> str:
        # no URL in the key: every server serving the same model name shares the answers
        return sha256_text(stable_json({"prompt": prompt, "model": self.model, "backend": BACKEND,
                                        "params": asdict(params or self.params)}))

    def _cache_meta(self) -> dict[str, Any]:
        return {"model": self.model, "backend": BACKEND}

    def check(self) -> None:
        """GET /v1/models on every server, once: down servers and unknown model names fail here."""
        if not self._checked:
            check_servers(self.servers, self.model)
            self._checked = True

    def _client(self, url: str):
        with self._lock:
            if url not in self._clients:
                self._clients[url] = make_client(url, self.timeout, self.max_retries)
            return self._clients[url]

    def _acquire(self) -> str:
        with self._lock:
            url = min(self.servers, key=lambda u: (self._in_flight[u], self.requests[u]))
            self._in_flight[url] += 1
            return url

    def _release(self, url: str, answered: bool) -> None:
        with self._lock:
            self._in_flight[url] -= 1
            if answered:
                self.requests[url] += 1

    def complete(self, prompt: str, params: GenerationParams) -> str:
        """One chat completion (greedy) on the least busy server."""
        import openai

        url = self._acquire()
        answered = False
        endpoint = f"{api_base(url)}/chat/completions"
        try:
            raw = self._client(url).chat.completions.with_raw_response.create(
                model=self.model, messages=[{"role": "user", "content": prompt}],
                temperature=1.0 if params.do_sample else 0.0, max_tokens=params.max_new_tokens)
            body = raw.http_response.text
            answered = True
        except openai.APITimeoutError:
            raise StudyInputError(f"LLM server {url} did not answer within {self.timeout:g} s ({self.max_retries + 1} "
                                  "tries). Answers so far are cached: check the server, raise --llm-timeout if "
                                  "answers are that slow, and re-run to resume.") from None
        except openai.APIConnectionError as exc:  # after the client's retries
            raise StudyInputError(f"LLM server {url} stopped answering ({exc}) after {self.max_retries} retries. "
                                  "Answers so far are cached: restart the server and re-run to resume.") from None
        except openai.APIStatusError as exc:
            raise StudyInputError(f"LLM server {url} refused a request for model {self.model!r}: HTTP "
                                  f"{exc.status_code} ({excerpt(exc.response.text)}). Answers so far are "
                                  "cached.") from None
        finally:
            self._release(url, answered)
        text = completion_text(body)
        if text is None:
            raise StudyInputError(f"LLM server {url}: POST {endpoint} answered {excerpt(body)}, not a chat completion "
                                  '({"choices": [{"message": {"content": ...}}]}); is it an OpenAI-compatible '
                                  "server? Answers so far are cached.")
        return clean_answer(text)

    def _generate_missing(self, prompts: Sequence[str], params: GenerationParams, batch_size: int | None,
                          done: Callable[[int, str], None]) -> None:
        """Answer `prompts` with `concurrency` requests in flight, caching each answer in this thread as it comes.
        The workers are daemon threads: on an error or Ctrl-C the run stops at once (in-flight requests are
        abandoned, not waited for), and answers that arrived before are cached first."""
        self.check()
        todo = deque(enumerate(prompts))  # popleft is atomic: the workers share it without a lock
        results: queue.SimpleQueue = queue.SimpleQueue()
        stop = threading.Event()

        def work() -> None:
            while not stop.is_set():
                try:
                    position, prompt = todo.popleft()
                except IndexError:
                    return
                try:
                    results.put((position, self.complete(prompt, params), None))
                except BaseException as exc:  # handed to the main thread, which raises it
                    results.put((position, None, exc))
                    return

        for number in range(min(self.concurrency, len(prompts))):
            threading.Thread(target=work, name=f"llm-server-{number}", daemon=True).start()
        try:
            failure = None
            for _ in range(len(prompts)):
                position, answer, error = results.get()
                if error is not None:
                    failure = error
                    break
                done(position, answer)
            while failure is not None:  # cache the answers that arrived meanwhile, then fail
                try:
                    position, answer, error = results.get_nowait()
                except queue.Empty:
                    raise failure
                if error is None:
                    done(position, answer)
        finally:
            stop.set()


@contextmanager
def local_server(folder: str, device: str = "cpu", dtype: str | None = None, threads: int = 1,
                 continuous: bool = False, wait_s: float = 300.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """(url, process) of `transformers serve FOLDER` on a free port of 127.0.0.1, once its /health answers; stopped
    on leaving (the tests and benchmarks start theirs with it)."""
    with socket.socket() as sock:  # a free port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", folder, "--host", "127.0.0.1",
               "--port", str(port), "--device", device]
    command += ["--dtype", dtype] if dtype else []
    command += ["--continuous-batching"] if continuous else []
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)}
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as stderr:  # a file, not a pipe: a pipe nobody reads blocks a talkative server
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                if process.poll() is not None:
                    stderr.seek(0)
                    raise RuntimeError(f"transformers serve {folder} exited ({process.returncode}): "
                                       f"{stderr.read().decode(errors='replace')[-2000:]}")
                try:
                    with urllib.request.urlopen(url + "/health", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"transformers serve {folder} did not answer {url}/health within "
                                           f"{wait_s:.0f} s") from None
                    time.sleep(0.5)
            logger.info("transformers serve %s answers at %s", folder, url)
            yield url, process
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


SPEC = register_engine("server", None, generator=lambda config, params, cache: ServerGenerator(
                           server_urls(config), config.llm_server_model, params, cache,
                           concurrency=config.concurrency, timeout=config.llm_timeout),
                       check=lambda config: check_servers(server_urls(config), config.llm_server_model),
                       model_name=lambda config: config.llm_server_model,
                       listing=lambda config: tuple((url, tuple(served_models(url))) for url in server_urls(config)),
                       claims=lambda config: bool(config.llm_servers), needs="--llm-server URL", order=2,
                       description="OpenAI-compatible chat-completions servers (--llm-server, e.g. vLLM)")
