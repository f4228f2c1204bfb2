"""One run, many variants: the strategies (and their parameters) times the axes of ragstudy.grid.axes are one grid.

`expand` turns the run's lists (or a sweep file's entries) into `records.Variant`s with stable, readable ids, an axis
a variant does not depend on being n/a; `groups` puts the variants that differ only in strategy together: the verdict
compares strategies inside each group (docs/retrieval.md, "One run, many variants").
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.grid import axes
from ragstudy.grid.records import NOT_APPLICABLE, Variant
from ragstudy.io import sha256_text


# ------------------------------------------------------------------------------------------------ the grid

@dataclass(frozen=True)
class Entry:
    """One line of the grid before expansion: a strategy, its parameter overrides and each axis's values."""

    strategy: str
    params: Mapping[str, Any] = field(default_factory=dict)
    axes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    id: str | None = None


def derived_id(variant: Variant) -> str:
    """`strategy[_param-value...]__<each axis's value in its short form>` (n/a axes left out), filesystem-safe."""
    head = "_".join([variant.strategy, *(f"{key}-{value}" for key, value in variant.params)])
    return "__".join([axes.safe(head), *(axes.safe(axes.shown(name, value)) for name, value in variant.values
                                         if value != NOT_APPLICABLE)])


def run_axes(config: Any) -> dict[str, tuple[str, ...]]:
    """The run's value list of every axis (--retriever, --text-layer, --embedding, ...)."""
    return {axis.name: axis.values(config) for axis in axes.grid_axes()}


def entries_of(config: Any, sweep: Any = None) -> list[Entry]:
    """The grid's entries: one per configured strategy, or per sweep configuration (its axes over the run's lists)."""
    lists = run_axes(config)
    if sweep is None:
        return [Entry(strategy, {}, lists) for strategy in config.strategies]
    return [Entry(item.strategy, dict(item.params), {**lists, **{a: (v,) for a, v in item.axes.items()}}, item.id)
            for item in sweep.configs]


def entry_variants(entry: Entry) -> list[Variant]:
    """The distinct variants of one entry, in its axes' order, each axis n/a where the variant does not depend on it."""
    params = tuple(sorted(entry.params.items()))
    made = []
    grid = axes.grid_axes()
    for combo in itertools.product(*(entry.axes[axis.name] for axis in grid)):
        chosen = dict(zip(axes.names(), combo))
        values = tuple((axis.name, value if axis.applies(entry.strategy, chosen) else NOT_APPLICABLE)
                       for axis, value in zip(grid, combo))
        made.append(Variant(entry.strategy, params, values))
    return list(dict.fromkeys(made))


def expand(config: Any, sweep: Any = None) -> list[Variant]:
    """Every distinct variant of the run, in order (entries, then the axes' product), with unique ids; a sweep's
    `id:` names its entry (suffixed with the axes it expands over when it expands to several)."""
    variants: list[Variant] = []
    given: set[str] = set()  # the ids a sweep entry's `id:` makes: never renamed
    for entry in entries_of(config, sweep):
        made = entry_variants(entry)
        for variant in made:
            name = derived_id(variant)
            if entry.id is not None:
                name = entry.id if len(made) == 1 else "__".join([entry.id, *name.split("__")[1:]])
                given.add(name)
            variants.append(replace(variant, id=name))
    return unique_ids(list(dict.fromkeys(variants)), given)


def unique_ids(variants: list[Variant], given: Set[str] = frozenset()) -> list[Variant]:
    """Ids made unique: two variants whose readable ids meet, or differ only in case (one folder on macOS and
    Windows), get a short hash of their values appended (two embedders with one short name); an id a sweep entry
    gives (`given`) is never renamed: one that another variant's id meets is an error, as is an id given twice."""
    counts = Counter(v.id.casefold() for v in variants)
    met = [v for v in variants if v.id in given and counts[v.id.casefold()] > 1]
    if met:
        raise StudyInputError(f"sweep id {met[0].id!r} is also the id of another configuration of the grid (given, or "
                              "made from its strategy, parameters and axes; case aside): it would be renamed. Give "
                              "one of them another `id:`")
    out = [v if counts[v.id.casefold()] == 1 else
           replace(v, id=f"{v.id}-{sha256_text(*(str(x) for x in (v.strategy, v.params, *v.context())))[:6]}")
           for v in variants]
    twice = sorted(i for i, n in Counter(v.id for v in out).items() if n > 1)
    if twice:
        raise StudyInputError(f"variant ids {twice} appear twice; give each sweep entry its own `id:`")
    return out


def variant_config(base: Any, variant: Variant, output_dir: str | Path) -> Any:
    """The StudyConfig of one variant's run: one strategy with its parameters and one value per axis (an n/a axis
    takes the run's first value: it changes nothing), written into `output_dir`."""
    from ragstudy import registry

    spec = registry.get(variant.strategy)
    params = (spec.resolve_params(dict(variant.params), where=f"variant {variant.id}: {variant.strategy}.")
              if variant.params else base.strategy_params[variant.strategy])
    config = replace(base, strategies=(variant.strategy,), strategy_params={variant.strategy: params},
                     output_dir=str(output_dir))
    for axis in axes.grid_axes():
        value = variant.value(axis.name)
        config = axis.set(config, variant.strategy, value if value != NOT_APPLICABLE else axis.values(base)[0])
    return config


# ------------------------------------------------------------------------------------------------ the groups

@dataclass(frozen=True)
class Group:
    """Variants that differ only in strategy (and its parameters): what the verdict compares. `context`: each axis's
    value (n/a where no member depends on it); `members`: compared name -> the folder of its run, the name being the
    strategy, or the variant's id where one strategy runs under several parameter settings (a sweep); `strategies`:
    such an id -> its strategy (whose retrieval_<strategy>.csv the folder holds)."""

    context: Mapping[str, str]
    members: Mapping[str, Path]
    variants: tuple[Variant, ...] = ()
    shown: tuple[str, ...] = ()  # the axes that tell the run's groups apart (its label names them)
    strategies: Mapping[str, str] = field(default_factory=dict)

    def strategy_of(self, name: str) -> str:
        return self.strategies.get(name, name)

    def unshared(self) -> set[str]:
        """The run-identity fields its members need not share: those of an axis some member does not depend on (a
        bm25 variant of paragraph records the run's first embedding model, which it never used)."""
        return {field for axis in axes.grid_axes() if any(v.value(axis.name) == NOT_APPLICABLE for v in self.variants)
                for field in axis.identity}

    def ranking(self, name: str) -> Path:
        """The rankings a compared name stands for: retrieval_<strategy>.csv in its member's folder."""
        from ragstudy.results import retrieval_path

        return retrieval_path(self.members[name], self.strategy_of(name))

    def parts(self, leave: str = "") -> list[str]:
        """The short values of the axes that tell the run's groups apart (n/a and the axis `leave` left out)."""
        return [axes.shown(axis, v) for axis, v in self.context.items()
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
        return "__".join(axes.safe(part, strip=False) for part in self.parts()) or "run"


def axis_word(groups: Sequence[Group]) -> str:
    """What the run's groups differ in, as the cross-check words it ("retriever", "text layer", "embedder"), or
    "setting" when they differ in several axes (or in an axis no longer declared)."""
    shown = {axis for g in groups for axis in g.shown}
    return axes.get(next(iter(shown))).word if len(shown) == 1 and set(shown) <= set(axes.names()) else "setting"


def varying_axes(variants: Sequence[Variant]) -> list[str]:
    """The axes with two or more values (n/a aside) among `variants`: what the verdict is checked across."""
    return [axis for axis in _axes_of(variants)
            if len({v.value(axis) for v in variants} - {NOT_APPLICABLE}) > 1]


def _axes_of(variants: Sequence[Variant]) -> list[str]:
    """The axes the variants were made with, in order (the declared ones for variants of this version)."""
    return list(dict.fromkeys(name for v in variants for name, _ in v.values)) or list(axes.names())


def _group_keys(variants: Sequence[Variant], names: Sequence[str]) -> dict[tuple[str, ...], list[Variant]]:
    """Each combination of axis values -> the variants that belong to it: a variant with n/a on an axis belongs to
    every value of it (paragraph reads the same text under raw and clean)."""
    values = {axis: list(dict.fromkeys(v.value(axis) for v in variants if v.value(axis) != NOT_APPLICABLE))
              for axis in names}
    keys: dict[tuple[str, ...], list[Variant]] = {}
    for v in variants:
        choices = [[v.value(axis)] if v.value(axis) != NOT_APPLICABLE or not values[axis] else values[axis]
                   for axis in names]
        for key in itertools.product(*choices):
            keys.setdefault(key, []).append(v)
    return keys


def groups(variants: Sequence[Variant], folder_of: Mapping[str, Path]) -> list[Group]:
    """The groups of `variants` (folder_of: variant id -> its folder), the first variant's first; same members: one."""
    names = _axes_of(variants)
    merged: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for key, members in _group_keys(variants, names).items():
        merged.setdefault(tuple(m.id for m in members), []).append(key)
    out = []
    for ids, group_keys in merged.items():
        members = [next(v for v in variants if v.id == i) for i in ids]
        context = {axis: group_keys[0][n] if len({k[n] for k in group_keys}) == 1
                   and any(m.value(axis) != NOT_APPLICABLE for m in members) else NOT_APPLICABLE
                   for n, axis in enumerate(names)}
        swept = len({m.strategy for m in members}) < len(members)  # a sweep: one strategy under several settings
        out.append(Group(context, {m.id if swept else m.strategy: folder_of[m.id] for m in members}, tuple(members),
                         strategies={m.id: m.strategy for m in members} if swept else {}))
    shown = tuple(axis for axis in names if len({g.context[axis] for g in out} - {NOT_APPLICABLE}) > 1)
    return [replace(g, shown=shown) for g in out]


GROUPS_FOLDER = "groups"  # <out>/groups/<group>/: one group's scores, when a run has several groups


def scores_folder(out_dir: str | Path, group: Group, groups_count: int) -> Path:
    """Where one group's scores (retrieval_summary.csv, retrieval_verdict.csv, ...) go: the run's folder itself when it
    has one group, else `<out>/groups/<group>/` (the run's folder then holds the check across the groups)."""
    return Path(out_dir) if groups_count == 1 else Path(out_dir) / GROUPS_FOLDER / group.id


def run_groups(run: Any) -> list[Group]:
    """The groups of a results folder (a results.Run): its grid's (variants.csv), or, for a folder without one (one
    variant's, or one written by hand), one group of the strategies ranked in it, as its config.json records them."""
    grid = run.variants()
    if grid:
        return groups(grid, run.variant_folders())
    context = {axis.name: _recorded(run.raw, axis.field) for axis in axes.grid_axes()}
    return [Group(context, {s: run.path for s in run.ranked_strategies()})]


def _recorded(raw: Mapping[str, Any], field: str | None) -> str:
    """A setting as a run's config.json records it (its profile's fields under `models`); n/a when it does not."""
    value: Any = raw
    for part in (field or "").split("."):
        value = value.get("models" if part == "profile" else part) if isinstance(value, Mapping) and part else None
    return str(value) if value else NOT_APPLICABLE
