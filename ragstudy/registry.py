"""Strategy registry: `--strategies paragraph,fixed-size,newline` maps names to chunkers and their parameters.

Each strategy folder (RAGParagraph/, RAGFixedSize/, RAGNewLine/) registers itself on import; it holds only what
differs between strategies: its splitter and its parameters.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from .chunks import Chunker
from .errors import StudyInputError

BUILTIN_STRATEGY_PACKAGES = ("RAGParagraph", "RAGFixedSize", "RAGNewLine")


@dataclass(frozen=True)
class StrategyParams:
    """Parameters of one strategy: its parent splitter's and the child windows indexed in Chroma."""

    parent: dict[str, Any] = field(default_factory=dict)
    child_chunk_size: int = 200
    child_chunk_overlap: int = 0
    k: int = 4

    def __post_init__(self) -> None:
        if self.child_chunk_size <= 0:
            raise StudyInputError(f"child_chunk_size must be positive, got {self.child_chunk_size}")
        if not 0 <= self.child_chunk_overlap < self.child_chunk_size:
            raise StudyInputError(
                f"child_chunk_overlap ({self.child_chunk_overlap}) must be >= 0 and less than child_chunk_size "
                f"({self.child_chunk_size})")
        if self.k <= 0:
            raise StudyInputError(f"k (retrieved child windows) must be positive, got {self.k}")

    def with_overrides(self, overrides: dict[str, Any]) -> "StrategyParams":
        """Return a copy with top-level fields and/or `parent` keys replaced (unknown keys are errors)."""
        top = {k: v for k, v in overrides.items() if k in {"child_chunk_size", "child_chunk_overlap", "k"}}
        parent = dict(self.parent)
        for key, value in overrides.items():
            if key in top:
                continue
            if key == "parent":
                parent.update(value)
            elif key in parent:
                parent[key] = value
            else:
                known = sorted(["child_chunk_size", "child_chunk_overlap", "k", *self.parent])
                raise StudyInputError(f"unknown strategy parameter {key!r}; known: {', '.join(known)}")
        return replace(self, parent=parent, **top)


@dataclass(frozen=True)
class StrategySpec:
    name: str  # registry name, e.g. "fixed-size"
    dataset_name: str  # the paper's output file stem, e.g. "DatasetFixedSize"
    folder: str  # the strategy folder, where its Chroma db lives
    defaults: StrategyParams
    make_chunker: Callable[[StrategyParams], Chunker]
    description: str = ""
    display_name: str = ""  # for tables and plots, e.g. "Blank-line"


_REGISTRY: dict[str, StrategySpec] = {}


def register(spec: StrategySpec) -> StrategySpec:
    existing = _REGISTRY.get(spec.name)
    if existing is not None and existing.make_chunker is not spec.make_chunker:
        raise ValueError(f"strategy {spec.name!r} is already registered by {existing.folder}")
    _REGISTRY[spec.name] = spec
    return spec


def load_builtin_strategies() -> None:
    """Import the strategy folders so that they register themselves."""
    for package in BUILTIN_STRATEGY_PACKAGES:
        importlib.import_module(package)


def available() -> list[str]:
    """Registered strategy names in the paper's order (paragraph, fixed-size, newline)."""
    load_builtin_strategies()
    order = {name: i for i, name in enumerate(("paragraph", "fixed-size", "newline"))}
    return sorted(_REGISTRY, key=lambda name: (order.get(name, len(order)), name))


def get(name: str) -> StrategySpec:
    load_builtin_strategies()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise StudyInputError(
            f"unknown strategy {name!r}; registered strategies: {', '.join(available())}") from None


def parse_strategies(value: str | None) -> tuple[str, ...]:
    """`"paragraph,fixed-size"` -> validated names; None or "all" -> every registered strategy."""
    if value is None or value.strip().lower() == "all":
        return tuple(available())
    names = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    if not names:
        raise StudyInputError("--strategies is empty; give names such as paragraph,fixed-size,newline")
    for name in names:
        get(name)
    return names
