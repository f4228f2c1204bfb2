"""The axes of the grid, each declared once: an `Axis` holds everything the grid needs about one thing a run compares
besides the strategy and its parameters: the retriever, the text layer and the embedding model, compared by the
retrieval stage, and the LLM, compared by the answering stage. ragstudy.grid.variants expands the product of the
retrieval axes (`grid_axes`); ragstudy.config checks them all with one rule (`check_run`). A new axis is one
`register_axis(Axis(...))` plus the code that reads its value (tests/test_axis_added.py).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragstudy.errors import StudyInputError

RETRIEVAL, ANSWERS = "retrieval", "answers"  # the stages: a retrieval-only grid, and the answering chain
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def split_values(value: Any, where: str) -> tuple[str, ...]:
    """A list as a user writes it ("a,b", a YAML list, one value) -> its values, stripped, duplicates dropped, in
    order; empty is an error naming `where`."""
    parts = [str(part) for part in value] if isinstance(value, (list, tuple)) else str(value).split(",")
    chosen = tuple(dict.fromkeys(part.strip() for part in parts if str(part).strip()))
    if not chosen:
        raise StudyInputError(f"{where} is empty; give one value or several comma-separated")
    return chosen


@dataclass(frozen=True)
class Axis:
    name: str
    word: str  # in sentences: "checked across retrievers"
    field: str | None  # where a run config lists its values (its setting: the last part); None: sweep files only
    parse: Callable[[Any, str], tuple[str, ...]]  # the values as written -> checked ones, or one line naming `where`
    applies: Callable[[str, Mapping[str, str]], bool] = lambda strategy, values: True  # else n/a: variants collapse
    short: Callable[[str], str] = str  # its form in ids and group labels
    assign: Callable[[Any, str, str], Any] | None = None  # (config, strategy, value) -> one variant's; None: `field`
    pick: Callable[[Sequence[str]], str] = lambda values: values[0]  # the value of a run that compares none
    stages: tuple[str, ...] = (RETRIEVAL,)  # the stages that compare several values (a later LLM axis: ANSWERS)
    default: tuple[str, ...] = ()  # the values of an axis without a field
    identity: tuple[str, ...] = ()  # the fields of a run's identity (ragstudy.grid.runidentity) that record its value

    @property
    def setting(self) -> str | None:
        return self.field.rsplit(".", 1)[-1] if self.field else None

    def values(self, config: Any, where: str | None = None) -> tuple[str, ...]:
        """The run's values of this axis (its declared default when no setting lists them)."""
        if self.field is None:
            return self.default
        raw = functools.reduce(getattr, self.field.split("."), config)
        return self.parse(raw, where or f"--{self.setting.replace('_', '-')}")

    def one(self, value: Any, where: str) -> str:
        """One value (a sweep entry's): a list is a grid axis, `key: [a, b]`, never "a,b"."""
        if isinstance(value, (list, tuple)) or "," in str(value):
            raise StudyInputError(f"{where}: {self.name} {value!r} is not one value (a list is a grid axis: "
                                  f"`{self.name}: [a, b]`)")
        return self.parse(value, f"{where}: {self.name}")[0]

    def set(self, config: Any, strategy: str, value: str) -> Any:
        if self.assign is not None:
            return self.assign(config, strategy, value)
        return _replaced(config, self.field.split("."), value)


def _replaced(record: Any, path: list[str], value: Any) -> Any:
    head, *rest = path
    return dataclasses.replace(record, **{head: _replaced(getattr(record, head), rest, value) if rest else value})


# ------------------------------------------------------------------------------------------ the declarations

def _retrievers(value: Any, where: str) -> tuple[str, ...]:
    from ragstudy import retrievers

    return retrievers.parse(value, where)


def _chain_retriever(values: Sequence[str]) -> str:
    """The answering chain's retriever (registered chain=True: dense), whatever the retrieval stage ranks with."""
    from ragstudy import retrievers

    return next(name for name in retrievers.names() if retrievers.get(name).chain)


def _text_layers(value: Any, where: str) -> tuple[str, ...]:
    from ragstudy.text.textlayer import TEXT_LAYERS

    chosen = split_values(value, where)
    wrong = next((layer for layer in chosen if layer not in TEXT_LAYERS), None)
    if wrong is not None:
        raise StudyInputError(f"{where} {wrong!r} is not one of {', '.join(TEXT_LAYERS)} (several: comma-separated)")
    return chosen


def _embeddings(value: Any, where: str) -> tuple[str, ...]:
    """Model names; a `wheel:` one must ship in a wheel (models.check_wheel_embedding), checked before anything runs."""
    from ragstudy.models import check_wheel_embedding

    chosen = split_values(value, where)
    for model in chosen:
        check_wheel_embedding(model, where)
    return chosen


def reads_text_layer(strategy: str, values: Mapping[str, str] | None = None) -> bool:
    """Whether a strategy chunks the PDF text layer (raw or clean); paragraph and markdown read their own text."""
    from ragstudy import registry

    return registry.get(strategy).source_kind == "text-layer"


def uses_embedding(strategy: str, values: Mapping[str, str]) -> bool:
    """Whether a variant's results depend on the embedding model: its retriever scores with vectors, or its chunker
    embeds (semantic) or counts with the model's tokenizer (token)."""
    from ragstudy import registry, retrievers

    spec = registry.get(strategy)
    return retrievers.get(values["retriever"]).vectors or spec.needs_tokenizer or spec.needs_embedding


def short_embedding(model: str) -> str:
    """A model's short name for ids and labels: the last part of a hub id, folder or `wheel:` name."""
    return _UNSAFE.sub("-", re.split(r"[/:\\]", model.rstrip("/\\"))[-1]) or "model"


def llm_id(spec: str) -> str:
    """An LLM's folder name (its answers' group): `wheel:qwen2.5-coder-0.5b` -> qwen2.5-coder-0.5b, a folder -> its
    name, a hub id `org/name` -> org--name; characters outside [A-Za-z0-9._-] become `-`."""
    name = spec[len("wheel:"):] if spec.startswith("wheel:") else spec
    name = name.rstrip("/").rsplit("/", 1)[-1] if name.startswith(("/", "./", "../", "~")) else name.replace("/", "--")
    return _UNSAFE.sub("-", name).strip(".-") or "llm"


AXES: list[Axis] = [
    Axis("retriever", "retriever", "retriever", _retrievers, pick=_chain_retriever, identity=("retriever",)),
    Axis("text_layer", "text layer", "text_layer", _text_layers, applies=reads_text_layer),
    Axis("embedding", "embedder", "profile.embedding", _embeddings, applies=uses_embedding, short=short_embedding,
         identity=("embedding", "embedding_backend")),
    Axis("llm", "LLM", "profile.llm", split_values, short=llm_id, stages=(ANSWERS,)),
]
COMPARED_BY = {RETRIEVAL: "`ragstudy retrieve` and `ragstudy study` (its retrieval stage)",
               ANSWERS: "`ragstudy answer` and `ragstudy study` (its answering stage)"}


def safe(text: Any, strip: bool = True) -> str:
    made = _UNSAFE.sub("-", str(text))
    return made.strip("-") if strip else made


def shown(name: str, value: str) -> str:
    """A value as ids and labels show it: its axis's short form (an undeclared axis's value as it is)."""
    declared = next((axis for axis in AXES if axis.name == name), None)
    return declared.short(value) if declared else value


def register_axis(axis: Axis) -> Axis:
    """Declare one more axis (after the others: ids and columns keep their order)."""
    if any(known.name == axis.name for known in AXES):
        raise ValueError(f"axis {axis.name!r} is declared twice")
    AXES.append(axis)
    return axis


def grid_axes(stage: str = RETRIEVAL) -> list[Axis]:
    """The axes a stage compares: the retrieval grid's (expanded into variants) or the answering stage's."""
    return [axis for axis in AXES if stage in axis.stages]


def names() -> tuple[str, ...]:
    """The retrieval grid's axes: the columns of variants.csv and the keys of a sweep entry."""
    return tuple(axis.name for axis in grid_axes())


def get(name: str) -> Axis:
    return next(axis for axis in AXES if axis.name == name)


def check_run(config: Any, named: Callable[[str], str]) -> None:
    """Every axis's values checked (`named(setting)`: the flag or config key as the user wrote it); a run of a stage
    that does not compare an axis takes its one value (`Axis.pick`): anything else is refused, in one line."""
    stage = RETRIEVAL if config.retrieval_only else None if config.chunks_only else ANSWERS
    for axis in AXES:
        if axis.field is None:
            continue
        given = axis.values(config, named(axis.setting))
        fixed = axis.pick(given)
        if stage not in axis.stages and given != (fixed,):
            doing = {RETRIEVAL: "a retrieval-only run", ANSWERS: "an answering run"}.get(stage, "a chunks-only run")
            raise StudyInputError(
                f"{named(axis.setting)} {','.join(given)}: {doing} takes one {axis.word} ({fixed}); {axis.word}s are "
                f"compared by {COMPARED_BY[axis.stages[0]]}: run one of those, or drop {named(axis.setting)}")


def canonical(config: Any, named: Callable[[str], str]) -> Any:
    """`config` with every axis's setting as its checked values, comma-separated (a YAML list, `all`, spaces)."""
    for axis in AXES:
        if axis.field is not None:
            config = _replaced(config, axis.field.split("."), ",".join(axis.values(config, named(axis.setting))))
    return config


def one_each(config: Any) -> dict[str, str]:
    """The settings a run that compares no axis changes: each axis's setting whose list is not just its pick ->
    that pick (`ragstudy study`'s answering run: the dense chain, the first text layer and embedding model)."""
    given = [(axis, axis.values(config)) for axis in grid_axes() if axis.field is not None]
    return {axis.setting: axis.pick(values) for axis, values in given if values and values != (axis.pick(values),)}
