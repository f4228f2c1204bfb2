"""Answers from OpenAI-compatible servers (vLLM, `transformers serve`, ...) instead of an in-process model.

The study's prompt is sent as one user chat message with temperature 0 and max_tokens = max_new_tokens, through
the official `openai` client, which retries connection errors, 408/409/429 and 5xx with exponential backoff.
Requests are spread over one or several servers (each new request goes to the server with the fewest requests in
flight) with `concurrency` requests in flight in all; servers that batch continuously (vLLM) answer them together.
Answers are cached under the served model's name, not a local path, and apart from in-process answers.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict
from typing import Any
from urllib.parse import urlparse

from .errors import StudyInputError
from .generation import AnswerCache, CachingGeneratorBase, GenerationParams, clean_answer
from .io import sha256_text, stable_json

logger = logging.getLogger(__name__)

BACKEND = "openai-chat-completions"  # part of the cache key: server answers never mix with in-process ones
REQUEST_TIMEOUT_S = 900.0  # one answer of the paper's profile (up to 5000 tokens) on a busy server
MAX_RETRIES = 5  # the openai client's own backoff: ~0.5 s doubling to 8 s, with jitter
CHECK_TIMEOUT_S = 10.0


def api_base(url: str) -> str:
    """`http://host:port` or `http://host:port/v1` -> the client's base URL (`.../v1`)."""
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise StudyInputError(f"--llm-server {url!r} is not an http(s) URL; pass e.g. http://127.0.0.1:8000")
    base = url.strip().rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def make_client(url: str, timeout: float = REQUEST_TIMEOUT_S, max_retries: int = MAX_RETRIES):
    from openai import OpenAI

    # local servers ignore the key; a hosted one reads OPENAI_API_KEY
    return OpenAI(base_url=api_base(url), api_key=os.environ.get("OPENAI_API_KEY") or "EMPTY", timeout=timeout,
                  max_retries=max_retries)


def served_models(url: str, timeout: float = CHECK_TIMEOUT_S) -> list[str]:
    """The model names `GET /v1/models` lists; StudyInputError naming the URL when the server cannot answer."""
    import openai

    try:
        return [model.id for model in make_client(url, timeout=timeout, max_retries=1).models.list()]
    except openai.APIConnectionError as exc:  # also timeouts
        raise StudyInputError(f"LLM server {url} is unreachable ({exc}). Start it (e.g. `vllm serve MODEL "
                              "--port 8000`) or fix --llm-server.") from exc
    except openai.APIStatusError as exc:
        raise StudyInputError(f"LLM server {url}: GET {api_base(url)}/models answered HTTP {exc.status_code} "
                              f"({exc.message}); is it an OpenAI-compatible server?") from exc


def check_servers(urls: Sequence[str], model: str | None) -> None:
    """Fail before any work when a server is down or does not serve `model`."""
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
        super().__init__()
        if not servers:
            raise ValueError("ServerGenerator needs at least one server URL")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        for url in servers:
            api_base(url)  # reject a malformed URL before anything else
        self.servers = tuple(servers)
        self.model = model
        self.model_label = model
        self.params = params
        self.cache = cache
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
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
        try:
            response = self._client(url).chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": prompt}],
                temperature=1.0 if params.do_sample else 0.0, max_tokens=params.max_new_tokens)
            answered = True
        except openai.APIConnectionError as exc:  # also timeouts, after the client's retries
            raise StudyInputError(f"LLM server {url} stopped answering ({exc}) after {self.max_retries} retries. "
                                  "Answers so far are cached: restart the server and re-run to resume.") from exc
        except openai.APIStatusError as exc:
            raise StudyInputError(f"LLM server {url} refused a request for model {self.model!r}: HTTP "
                                  f"{exc.status_code} ({exc.message}). Answers so far are cached.") from exc
        finally:
            self._release(url, answered)
        if not response.choices:
            raise StudyInputError(f"LLM server {url} returned no choices for model {self.model!r}")
        return clean_answer(response.choices[0].message.content or "")

    def _generate_missing(self, prompts: Sequence[str], params: GenerationParams, batch_size: int | None,
                          done: Callable[[int, str], None]) -> None:
        self.check()
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts)), thread_name_prefix="llm-server")
        try:
            pending = {pool.submit(self.complete, prompt, params): position for position, prompt in enumerate(prompts)}
            while pending:
                finished, _ = wait(pending, return_when=FIRST_EXCEPTION)
                # successes first, so every answer that exists is cached before a failure is raised
                for future in sorted(finished, key=lambda f: f.exception() is not None):
                    position = pending.pop(future)
                    done(position, future.result())  # cached here, in this thread, as each answer arrives
        finally:
            # on an error or Ctrl-C, queued requests are dropped and in-flight ones are not waited for
            pool.shutdown(wait=False, cancel_futures=True)
