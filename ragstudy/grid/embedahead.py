"""Embed ahead: before a grid's variants run, every distinct text they will embed is embedded once per embedder.

`plan` makes the batches, `run` hands them to the grid's executor (`embed_batch`), and the variants then find their
vectors in the vector cache, the same to the bit: docs/scale.md, "Embedding ahead".
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragstudy.grid.records import Variant
from ragstudy.io import atomic_write_json, sha256_text, stable_json
from ragstudy.pipeline import lazy_embedding

logger = logging.getLogger(__name__)

BATCH = 256  # texts per batch: knowledge_base.ADD_BATCH and retrievers.units.EMBED_BATCH, what a variant embeds at once
REPORT = "embedded.json"  # what one batch task writes into its folder


@dataclass(frozen=True)
class EmbedBatch:
    """One task of the phase: texts for the embedder of `config` (a variant's StudyConfig), passages or questions."""

    config: Any  # config.StudyConfig
    texts: tuple[str, ...]
    queries: bool = False
    owner: str = ""  # the variant that would have embedded these texts first without this phase


@dataclass(frozen=True)
class AheadReport:
    """What the phase did: the distinct passages (windows, parents) and questions it saw, those it ran through a
    model (cache misses), its batches and wall seconds; `by_variant`: passages embedded for the variant that would
    have embedded them first (run in-process without this phase)."""

    passages: int = 0
    questions: int = 0
    passages_embedded: int = 0
    questions_embedded: int = 0
    batches: int = 0
    seconds: float = 0.0
    by_variant: Mapping[str, int] = field(default_factory=dict)

    @property
    def embedded(self) -> int:
        return self.passages_embedded + self.questions_embedded


def embedder_key(config: Any) -> str:
    """What tells two variants' embedders apart: the model's id (its label and variant) and the settings that choose
    how it runs (shared_embedding keys one loaded model per process by these and its threads)."""
    return stable_json([config.embedder.model_id(), config.profile.embedding, config.embedding_backend,
                        config.embedding_dtype, config.embedding_server, config.embedding_server_model])


def unit_texts(unit: str, chunked: Sequence[Any], params: Any) -> list[str]:
    """The texts a retriever of `unit` embeds for one strategy's chunks, in its order: child windows as the dense
    index and the unit retrievers cut them, or whole parents."""
    from ragstudy.stores.knowledge_base import child_splitter, child_windows

    parents = [chunk.to_document() for item in chunked for chunk in item.chunks]
    if unit == "parents":
        return [doc.page_content for doc in parents]
    windows, _ = child_windows(parents, child_splitter(params))
    return [window.page_content for window in windows]


def plan(variants: Sequence[Variant], configs: Mapping[str, Any], questions: Sequence[str],
         chunked: Callable[[Any, str], Sequence[Any]]) -> list[EmbedBatch]:
    """The batches of `variants` (those still to compute, in grid order; `configs`: variant id -> its StudyConfig):
    per embedder, the texts of each variant whose retriever has vectors, BATCH at a time, each distinct text in the
    first batch that holds it, then the questions. `chunked(config, strategy)`: the grid's pipeline.chunk_cached."""
    from ragstudy import retrievers

    seen: dict[str, set[str]] = {}
    batches: list[EmbedBatch] = []
    first: dict[str, Any] = {}
    for variant in variants:
        member = retrievers.get(variant.value("retriever"))
        if not member.vectors:
            continue
        config = configs[variant.id]
        key = embedder_key(config)
        done = seen.setdefault(key, set())
        first.setdefault(key, config)
        texts = unit_texts(member.unit, chunked(config, variant.strategy), config.strategy_params[variant.strategy])
        for start in range(0, len(texts), BATCH):
            part = [text for text in dict.fromkeys(texts[start:start + BATCH]) if text not in done]
            done.update(part)
            if part:
                batches.append(EmbedBatch(config, tuple(part), owner=variant.id))
    if questions:
        batches += [EmbedBatch(config, tuple(dict.fromkeys(questions)), queries=True) for config in first.values()]
    return batches


_EMBEDDINGS: dict[str, Callable[[], Any]] = {}


def shared_embedding(config: Any) -> Callable[[], Any]:
    """One lazily loaded embedding model per process and model settings, shared by the variants and batches it runs:
    loaded once, on the first vector missing from the vector cache (a process that finds every vector never does)."""
    from ragstudy.io import cache_dir

    key = stable_json([str(cache_dir()), config.profile.embedding, config.profile.device, config.embedding_backend,
                       config.embedding_dtype, config.embedding_batch_size, config.embedding_server,
                       config.embedding_server_model, config.threads, config.embedding_threads])
    if key not in _EMBEDDINGS:
        _EMBEDDINGS[key] = lazy_embedding(config.embedder, config.resolved_threads(), deferred=True)
    return _EMBEDDINGS[key]


def embed_batch(batch: EmbedBatch, output_dir: Path, inputs: dict[str, Path]) -> None:
    """One batch into the vector cache (a task), through shared_embedding; writes how many texts the model ran."""
    embedding = shared_embedding(batch.config)()
    before = getattr(embedding, "texts_embedded", 0)
    (embedding.embed_queries if batch.queries else embedding.embed_documents)(list(batch.texts))
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(output_dir / REPORT, {"texts": len(batch.texts),
                                            "embedded": getattr(embedding, "texts_embedded", before) - before},
                      "embed-ahead batch")


def run(variants: Sequence[Variant], configs: Mapping[str, Any], questions: Sequence[str], executor: Any,
        chunked: Callable[[Any, str], Sequence[Any]]) -> AheadReport:
    """Plan the grid's embedding and run its batches with `executor` (inside the grid's executors.session). A batch
    that fails is logged and left to the variants, which embed what the cache lacks, as without this phase."""
    from ragstudy.grid.executors import Task, run_tasks

    began = time.perf_counter()
    batches = plan(variants, configs, questions, chunked)
    if not batches:
        return AheadReport()
    passages = sum(len(b.texts) for b in batches if not b.queries)
    asked = sum(len(b.texts) for b in batches if b.queries)
    embedded = {True: 0, False: 0}
    by_variant: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="ragstudy-embed-ahead-") as tmp:
        tasks = [Task(f"embed-{n:04d}", embed_batch, batch, Path(tmp) / f"{n:04d}", {},
                      sha256_text(stable_json([embedder_key(batch.config), batch.queries, list(batch.texts)])))
                 for n, batch in enumerate(batches)]
        for task, outcome in zip(tasks, run_tasks(tasks, executor, label="embedding ahead", unit="batch")):
            if outcome.error is not None:
                logger.warning("%s; its variants embed what it did not", outcome.error)
                continue
            count = int(json.loads((Path(task.output_dir) / REPORT).read_text(encoding="utf-8"))["embedded"])
            embedded[task.spec.queries] += count
            if not task.spec.queries:
                by_variant[task.spec.owner] = by_variant.get(task.spec.owner, 0) + count
    report = AheadReport(passages, asked, embedded[False], embedded[True], len(batches), time.perf_counter() - began,
                         by_variant)
    logger.info("embedded ahead: %d distinct passages and %d questions in %d batches; %d passages and %d questions "
                "run through the model (%.1f s)", passages, asked, len(batches), report.passages_embedded,
                report.questions_embedded, report.seconds)
    return report
