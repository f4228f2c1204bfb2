"""Strategy registry: everything the study knows about a chunking strategy lives in its registration.

A strategy is a top-level `RAG*` folder holding its chunker, its parameters dataclass and one
`register_strategy(...)` call; the registry imports every such folder on first use, and everything else finds the
strategy here (docs/strategies.md, "Adding a strategy"). `STRATEGIES` is a ragstudy.plugins `Registry`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Literal, Sequence

from ragstudy.errors import StudyInputError
from ragstudy.io import PROJECT_ROOT, check_name
from ragstudy.params import build_params
from ragstudy.plugins import Registry, guarded_import
from ragstudy.text.chunks import Chunker

STRATEGY_FOLDER_PREFIX = "RAG"
_TOP_LEVEL = ("child_chunk_size", "child_chunk_overlap", "k")

# What a strategy's `start_end_idx` indexes: the shared PyMuPDF text layer (baselines), the strategy's own text
# (paragraphs joined by blank lines), or Markdown made from the PDF.
SourceKind = Literal["text-layer", "paragraphs", "markdown"]


@dataclass(frozen=True)
class StrategyParams:
    """Parameters of one strategy: its parent splitter's and the child windows indexed in Chroma."""

    parent: dict[str, Any] = field(default_factory=dict)
    child_chunk_size: int = 200
    child_chunk_overlap: int = 0
    k: int = 4  # the paper's number of retrieved child windows (retrieval-only runs also use context budgets)

    def __post_init__(self) -> None:
        for name in _TOP_LEVEL:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise StudyInputError(f"{name} must be an integer, got {value!r}")
        if self.child_chunk_size <= 0:
            raise StudyInputError(f"child_chunk_size must be positive, got {self.child_chunk_size}")
        if not 0 <= self.child_chunk_overlap < self.child_chunk_size:
            raise StudyInputError(
                f"child_chunk_overlap ({self.child_chunk_overlap}) must be >= 0 and less than child_chunk_size "
                f"({self.child_chunk_size})")
        if self.k <= 0:
            raise StudyInputError(f"k (retrieved child windows) must be positive, got {self.k}")


@dataclass
class ChunkerContext:
    """What a chunker may need besides its parameters, built lazily by the caller.

    `embedding()` returns the study's embedding model (a CustomEmbedding, whose vectors may be cached);
    `tokenizer()` the embedding model's tokenizer (a transformers tokenizer, without loading the model). Only
    chunkers that need them (semantic, token) call them, so `--chunks-only` of the others loads no model.
    """

    embedding: Callable[[], Any] = field(default=lambda: _no_embedding())
    tokenizer: Callable[[], Any] = field(default=lambda: _no_embedding())
    embedding_label: str = ""


def _no_embedding():
    raise StudyInputError("this chunker needs the study's embedding model, but none was configured")


@dataclass(frozen=True)
class StrategySpec:
    name: str  # registry name, e.g. "fixed-size"
    dataset_name: str  # the paper's output file stem, e.g. "DatasetFixedSize"
    folder: str  # the strategy folder, where its Chroma db lives
    defaults: StrategyParams
    make_chunker: Callable[[StrategyParams, ChunkerContext], Chunker]
    display_name: str  # for tables and plots, e.g. "Blank-line"
    color: str  # plot colour, fixed per strategy so every plot agrees
    order: float = 100.0  # position in tables and plots (paper's strategies first)
    source_kind: SourceKind = "text-layer"
    parent_type: type | None = None  # dataclass that validates `defaults.parent` and user overrides
    description: str = ""
    paper: bool = False  # one of the paper's three strategies (the default of runs that answer with the LLM)
    # optional: start the strategy's slow bulk step for these documents in the background and return at once with
    # a function that stops it (its chunker's `prepare` waits for what was started); see pipeline.chunking_ahead
    prefetch: Callable[[StrategyParams, Sequence[Any]], Callable[[], None]] | None = None
    needs_tokenizer: bool = False  # its chunker counts with the embedding model's tokenizer (ChunkerContext)
    needs_embedding: bool = False  # its chunker embeds with the study's embedding model (ChunkerContext)

    def resolve_params(self, overrides: dict[str, Any], where: str | None = None) -> StrategyParams:
        """The defaults with `overrides` applied (top-level fields and/or parent keys), type- and range-checked."""
        where = where or f"--set {self.name}."
        top = {key: value for key, value in overrides.items() if key in _TOP_LEVEL}
        parent = dict(self.defaults.parent)
        for key, value in overrides.items():
            if key in top:
                continue
            if key == "parent" and isinstance(value, dict):
                parent.update(value)
            elif key in parent:
                parent[key] = value
            else:
                known = sorted([*_TOP_LEVEL, *self.defaults.parent])
                raise StudyInputError(f"unknown strategy parameter {where}{key}; known: {', '.join(known)}")
        if self.parent_type is not None:
            parent = dataclasses.asdict(build_params(self.parent_type, parent, where))
        try:
            return replace(self.defaults, parent=parent, **top)
        except StudyInputError as exc:
            raise StudyInputError(f"{where.rstrip('.')}: {exc}") from None


def _load_strategy_folders() -> None:
    """Import the repository's top-level `RAG*` folders that are Python packages."""
    for path in sorted(PROJECT_ROOT.iterdir()):
        if path.is_dir() and path.name.startswith(STRATEGY_FOLDER_PREFIX) and (path / "__init__.py").is_file():
            guarded_import(path.name, None)


def _same_strategy(old: StrategySpec, new: StrategySpec) -> bool:
    return old.make_chunker == new.make_chunker and old.folder == new.folder  # its module, imported again


# name, Dataset file stem and folder are each strategy's own (case-insensitively, as files on macOS and Windows
# are): two strategies writing one Dataset file or one Chroma folder would overwrite each other's results
STRATEGIES: Registry[StrategySpec] = Registry(
    "strategy", StrategySpec, builtins=_load_strategy_folders, same=_same_strategy,
    unique=lambda spec: (("dataset_name", spec.dataset_name), ("folder", spec.folder)),
    describe=lambda spec: f"strategy {spec.name!r} (package {spec.folder})",
    fix=lambda spec: (f": each strategy needs its own name, Dataset file and folder, or one would overwrite the "
                      f"other's files; rename it in {spec.folder}'s register_strategy call"))

# the family's look-ups
register = STRATEGIES.register  # a module imported twice may register its strategy again
unregister = STRATEGIES.unregister  # tests register throwaway strategies
available = STRATEGIES.names  # in registered order, the paper's three first
specs = STRATEGIES.members
get = STRATEGIES.get
parse_strategies = functools.partial(STRATEGIES.parse, where="--strategies")  # "a,b", a list, all (or None): names


def default_dataset_name(folder: str, name: str) -> str:
    """The Dataset file stem of a strategy: "Dataset" + the folder name after `RAG` ("RAGNewLine" ->
    "DatasetNewLine"), or + the registry name in CamelCase for a package not named RAG* ("my-way" -> "DatasetMyWay")."""
    if folder.startswith(STRATEGY_FOLDER_PREFIX) and len(folder) > len(STRATEGY_FOLDER_PREFIX):
        return "Dataset" + folder[len(STRATEGY_FOLDER_PREFIX):]
    return "Dataset" + "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", name))


@dataclass(frozen=True)
class _WithParentRecord:
    """A registration's `make_chunker(params, context)` or `prefetch(params, documents)`: calls the strategy's own
    function with its typed parent record in place of the StrategyParams."""

    spec_name: str
    parent_type: type | None
    function: Callable[[Any, Any], Any]

    def __call__(self, params: StrategyParams, argument: Any) -> Any:
        parent = dict(params.parent)
        record = parent if self.parent_type is None else build_params(self.parent_type, parent, f"{self.spec_name}.")
        return self.function(record, argument)


def register_strategy(name: str, chunker: Callable[[Any, ChunkerContext], Chunker], parent_type: type | None = None,
                      *, display_name: str, color: str, order: float = 100.0, description: str = "",
                      source_kind: SourceKind = "text-layer", dataset_name: str | None = None,
                      child_chunk_size: int = 200, child_chunk_overlap: int = 0, k: int = 4,
                      paper: bool = False, needs_tokenizer: bool = False, needs_embedding: bool = False,
                      prefetch: Callable[[Any, Sequence[Any]], Callable[[], None]] | None = None) -> StrategySpec:
    """Register a strategy folder's chunker: `chunker(parent_record, context)` gets the strategy's parameters as
    a `parent_type` instance (defaults: `parent_type()`). The folder is the chunker's top-level package, the
    Dataset file stem follows from it (`default_dataset_name`); child windows default to the baselines' 200/0, k=4.
    `prefetch(parent_record, documents)`, if given, starts the chunker's slow bulk step in the background at the
    start of a run and returns a function that stops it (pipeline.chunking_ahead).
    """
    folder = chunker.__module__.split(".")[0]
    parent = asdict(parent_type()) if parent_type is not None else {}
    check_name(name, f"register_strategy in {chunker.__module__}: strategy name")  # names chunks_<name>.csv
    dataset_name = check_name(dataset_name or default_dataset_name(folder, name),
                              f"register_strategy in {chunker.__module__}: dataset_name")
    return register(StrategySpec(
        name=name, dataset_name=dataset_name, folder=folder,
        defaults=StrategyParams(parent=parent, child_chunk_size=child_chunk_size,
                                child_chunk_overlap=child_chunk_overlap, k=k),
        make_chunker=_WithParentRecord(name, parent_type, chunker), display_name=display_name, color=color,
        order=order, source_kind=source_kind, parent_type=parent_type, description=description, paper=paper,
        needs_tokenizer=needs_tokenizer, needs_embedding=needs_embedding,
        prefetch=_WithParentRecord(name, parent_type, prefetch) if prefetch is not None else None))


def paper_strategies() -> list[str]:
    """The paper's strategies (registered with paper=True) in registered order."""
    return [spec.name for spec in STRATEGIES.members() if spec.paper]


def by_dataset_name(stem: str) -> StrategySpec | None:
    return STRATEGIES.find(lambda spec: spec.dataset_name == stem)
