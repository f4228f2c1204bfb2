"""LLM engines: what answers the study's prompts (config `llm_engine`), over one answer cache: one module per member
(`torch`, the paper's; `onnxruntime`; `server`), each one `register_engine(...)` call. The family's layout, the cache
keys and how an engine from outside the repository registers: docs/architecture-plugins.md (LLM engines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.grid.records import AnsweringModel
from ragstudy.llms.cache import AnswerCache, CachingGeneratorBase, GenerationParams, clean_answer, length_batches
from ragstudy.llms.in_process import CachedGenerator
from ragstudy.plugins import Registry, members_of

__all__ = ["AnswerCache", "CachedGenerator", "CachingGeneratorBase", "EngineSpec", "GenerationParams",
           "answering_model", "check_generator", "clean_answer", "get", "length_batches", "make_generator", "names",
           "register_engine", "resolved_engine", "server_urls"]


@dataclass(frozen=True)
class EngineSpec:
    name: str  # the config value, e.g. "onnxruntime"
    # in-process engines: (resolved model path, device, dtype, threads) -> a chat model with generate(prompt,
    # params), generate_batch(prompts, params) and prompt_ids(prompt) (in_process.ChatTemplate), and optionally
    # generate_each(prompts, params, done) when it answers a list itself (onnxruntime: worker processes); None otherwise
    load: Callable[[str, str, str, int], Any] | None
    batches: bool = False  # generates several prompts together (--llm-batch-size; the batch size keys answers)
    runs: Callable[[str, str], None] | None = None  # (device, dtype) -> StudyInputError where it cannot run
    preferred: Callable[[Any], bool] | None = None  # config -> the default engine for it when none was chosen
    claims: Callable[[Any], bool] | None = None  # config -> chosen by another setting (server URLs)
    needs: str = ""  # what --llm-engine NAME needs when nothing claims it
    generator: Callable[[Any, GenerationParams, AnswerCache], CachingGeneratorBase] | None = None  # not in-process
    check: Callable[[Any], None] | None = None  # fail fast, before chunking and embedding
    # engines that do not load the profile's LLM: config -> the name of the model that answers (servers: the served
    # name), and config -> (URL, model names its GET /v1/models lists) per server, recorded with the answers
    model_name: Callable[[Any], str] | None = None
    listing: Callable[[Any], tuple[tuple[str, tuple[str, ...]], ...]] | None = None
    description: str = ""
    order: float = 100.0


ENGINES: Registry[EngineSpec] = Registry("LLM engine", EngineSpec, setting="llm_engine",
                                         builtins=members_of(__name__))


def register_engine(name: str, load: Callable[[str, str, str, int], Any] | None, *, description: str,
                    order: float = 100.0, **fields: Any) -> EngineSpec:
    """Register an engine (one call in its module). See EngineSpec."""
    return ENGINES.register(EngineSpec(name, load, description=description, order=order, **fields))


names, get = ENGINES.names, ENGINES.get  # the family's look-ups, as every plug-in family names them


def _claimer(config) -> EngineSpec | None:
    return ENGINES.find(lambda spec: spec.claims is not None and spec.claims(config))


def resolved_engine(config) -> str:
    """The engine that answers: the one another setting chooses (servers), else `llm_engine`, else the first
    engine that prefers this config (onnxruntime for the lite profile's SmolLM2), else torch."""
    claimer = _claimer(config)
    if claimer is not None:
        return claimer.name
    if config.llm_engine is not None:
        return config.llm_engine
    preferred = ENGINES.find(lambda spec: spec.preferred is not None and spec.preferred(config))
    return preferred.name if preferred is not None else "torch"


def validate(config, named: Callable[[str], str]) -> None:
    """`llm_engine` names a registered engine whose needs are met."""
    if config.llm_engine is None:
        return
    spec = get(config.llm_engine, named("llm_engine"))
    if spec.claims is not None and _claimer(config) is not spec:
        raise StudyInputError(f"{named('llm_engine')} {spec.name} needs {spec.needs}")


def answering_model(config, listed: bool = False) -> AnsweringModel:
    """The model that answers `config`'s prompts, as config.json, the run identity and the report name it: the
    served model name with servers, else the in-process model's own name (a wheel: model's title; else `--llm` as
    given). `listed`: also ask each server for its GET /v1/models list (one request each)."""
    from ragstudy.models import model_label, wheel_llm

    spec = get(resolved_engine(config))
    if spec.model_name is not None:
        name = label = spec.model_name(config)
    else:
        wheel = wheel_llm(config.profile.llm)
        name, label = wheel.title if wheel else str(config.profile.llm), model_label(config.profile.llm)
    servers = spec.listing(config) if listed and spec.listing is not None else ()
    return AnsweringModel(name, label, spec.name, servers)


def server_urls(config) -> tuple[str, ...]:
    """`--llm-server` values, each of which may itself be a comma-separated list."""
    return tuple(url.strip() for entry in config.llm_servers for url in entry.split(",") if url.strip())


def make_generator(config) -> CachingGeneratorBase:
    """The study's generator on the config's engine; all share the answer cache and the generate_many interface."""
    from customembedding import resolve_device

    from ragstudy.io import cache_dir
    from ragstudy.models import model_label, resolve_llm

    profile = config.profile
    params = GenerationParams(max_new_tokens=profile.max_new_tokens)
    cache = AnswerCache(cache_dir() / "answers" / "answers.jsonl")
    spec = get(resolved_engine(config))
    if spec.generator is not None:
        return spec.generator(config, params, cache)
    return CachedGenerator(model_spec=profile.llm, model_label=model_label(profile.llm),
                           device=resolve_device(profile.device), dtype=profile.dtype, params=params, cache=cache,
                           loader=lambda: resolve_llm(profile.llm, config.origins.get("llm", "config")),
                           origin=config.origins.get("llm", "config"), batch_size=config.llm_batch_size,
                           engine=spec.name, threads=config.resolved_threads())


def check_generator(config) -> None:
    """Fail fast, before chunking and embedding, when the LLM cannot be reached (a model folder, wheel or engine
    missing, a server down); Hub ids are not checked here (loading them reports a clear error)."""
    from ragstudy.models import check_llm_model

    spec = get(resolved_engine(config))
    if spec.load is not None:
        check_llm_model(config)
    if spec.check is not None:
        spec.check(config)
