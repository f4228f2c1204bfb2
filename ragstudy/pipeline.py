"""The study: chunk every PDF with each strategy, index it, answer every question, write the paper's Dataset files.

Chunks go through one cache that every run shares (`chunk_cached`, keyed by `chunk_cache_path`): the answering chain,
retrieval-only runs and sweeps chunk a strategy once."""

from __future__ import annotations

import functools
import json
import logging
from contextlib import contextmanager
from datetime import datetime, timezone
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ragstudy import registry
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.grid import axes
from ragstudy.grid.records import DatasetRow, Source
from ragstudy.grid.runidentity import check_output_folder, record
from ragstudy.io import PROJECT_ROOT, atomic_write_text, cache_dir, sha256_file, sha256_text, stable_json
from ragstudy.llms import answering_model, check_generator, make_generator
from ragstudy.models import model_label
from ragstudy.results import (ResultsFolder, read_questions, warn_long_questions, write_chunks, write_config,
                              write_dataset)
from ragstudy.stores.cachefile import json_object
from ragstudy.text.chunks import Chunk, ChunkedDocument, prepare_chunker
from ragstudy.text.textlayer import PdfDocument, SourceText, load_documents, with_text_layer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StageSettings:
    """One strategy's values under one run, resolved once from its StudyConfig (`of`): what the chunk, index and rank
    stages and the retriever members (RetrievalInputs.stage) read, for a grid variant or the answering chain."""

    strategy: str
    params: Any  # registry.StrategyParams: chunking, child windows, k
    text_layer: str  # raw or clean, read by the strategies that chunk the PDF text layer
    retriever: str
    embedding: str  # the embedding model as the run names it
    embedder: Any  # embedders.Embedder: that model's ids, tokenizer and loading
    embedding_dtype: str
    largest: int  # the largest context budget
    threads: int  # torch's CPU threads
    db_dir: Path | None  # the strategy's Chroma folder under --db-dir (None: its own folder's db/)
    chroma_server: str | None  # --chroma-server, which replaces the local folders

    @classmethod
    def of(cls, config: StudyConfig, strategy: str) -> "StageSettings":
        from ragstudy.stores.knowledge_base import db_dir_of

        return cls(strategy, config.strategy_params[strategy], axes.get("text_layer").values(config)[0],
                   config.retriever, config.profile.embedding, config.embedder, config.embedding_dtype,
                   max(config.budgets), config.resolved_threads(), db_dir_of(config, registry.get(strategy)),
                   config.chroma_server or None)


def lazy_embedding(embedder: Any, threads: int, deferred: bool = False) -> Callable[[], Any]:
    """The study's embedding model (an embedders.Embedder), loaded with torch's threads set on the first call only (a
    warm run whose rankings are cached imports neither torch nor Chroma). `deferred`: the first call opens the vector
    cache only, and the model is loaded on its first cache miss (Embedder.load_deferred)."""

    def set_threads() -> None:
        import torch

        torch.set_num_threads(threads)

    def load() -> Any:
        if deferred:
            return embedder.load_deferred(set_threads)
        set_threads()
        return embedder.load()

    return functools.cache(load)


def chunker_context(stage: StageSettings, embedding: Callable[[], Any] | None = None) -> registry.ChunkerContext:
    """What chunkers may ask for: the study's embedding model (`embedding`, a shared lazy_embedding loader, so that
    chunking and indexing use one model; else a new one) and its tokenizer, each loaded on first request."""
    return registry.ChunkerContext(embedding=embedding or lazy_embedding(stage.embedder, stage.threads),
                                   tokenizer=functools.cache(stage.embedder.tokenizer),
                                   embedding_label=model_label(stage.embedding))


def chunk_documents(documents: Sequence[PdfDocument], stage: StageSettings,
                    context: registry.ChunkerContext | None = None) -> list[ChunkedDocument]:
    from tqdm.auto import tqdm

    strategy = stage.strategy
    if axes.reads_text_layer(strategy) and stage.text_layer != "raw":  # paragraphs and Markdown read their own text
        documents = [with_text_layer(doc, stage.text_layer) for doc in documents]
    chunker = registry.get(strategy).make_chunker(stage.params, context or chunker_context(stage))
    prepare_chunker(chunker, documents)  # the chunker's optional bulk step (markdown: PDFs converted in parallel)
    chunked = [chunker.chunk(doc, strategy) for doc in tqdm(documents, desc=f"Chunking {strategy}", unit="pdf",
                                                             disable=len(documents) < 2)]
    check_chunked(documents, chunked, strategy)
    return chunked


def check_chunked(documents: Sequence[PdfDocument], chunked: Sequence[ChunkedDocument], strategy: str) -> None:
    """Name each PDF the strategy cut no chunk from (a warning: its text is in no index of the strategy); when no PDF
    gives one, a StudyInputError: the strategy would rank nothing for every question, and scoring could only take
    its empty rankings for a damaged file."""
    empty = [(doc.path, len(doc.text_layer.text.strip())) for doc, item in zip(documents, chunked) if not item.chunks]
    why = "no body text the strategy keeps: only page numbers, running heads or images?"
    if empty and len(empty) == len(chunked):
        shown = ", ".join(f"{path} (text layer: {chars} characters)" for path, chars in empty[:3])
        raise StudyInputError(f"no PDF yields a {strategy} chunk: {shown}{' and more' if len(empty) > 3 else ''} "
                              f"({why}); OCR a scanned PDF (ocrmypdf in.pdf out.pdf), add PDFs with body text, or "
                              f"leave {strategy} out of --strategies")
    for path, chars in empty:
        logger.warning("%s: yields no %s chunk (text layer: %d characters; %s): its text is in no %s index, so no "
                       "question can be answered from it under %s", path, strategy, chars, why, strategy, strategy)


def code_hash_of(*paths: Path) -> str:
    """Hash of the Python sources that determine a cached stage, so that editing them invalidates the cache."""
    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*.py")))
    return sha256_text(*(f.read_text(encoding="utf-8") for f in files))[:16]


CHUNK_CACHE_FORMAT = 1
_CHUNK_TEXTS, _CHUNK_OFFSETS = ("doc_id", "contents", "path", "strategy"), ("start", "end", "page_start", "page_end")
# The code that shapes chunks besides the strategy's own folder, hashed into the chunk cache's key: an edit to any
# of it makes the cached chunks stale. Every ragstudy module a strategy (or this code) imports is here or in
# CHUNKING_PLUMBING, modules that shape no chunk (tests/test_chunk_cache_key.py checks every import).
CHUNKING_CODE = ("ragstudy/text/chunks.py", "ragstudy/text/textlayer.py", "ragstudy/text/textnorm.py",
                 "ragstudy/text/cleaning", "ragstudy/text/sentences.py", "ragstudy/params.py")
CHUNKING_PLUMBING = ("ragstudy/registry.py", "ragstudy/errors.py", "ragstudy/io.py", "ragstudy/stores/cachefile.py")


def chunked_to_json(chunked: Sequence[ChunkedDocument]) -> str:
    """The chunk cache's JSON: every document's source text and its chunk records."""
    return json.dumps({"format": CHUNK_CACHE_FORMAT, "documents": [
        {"source": item.source.to_record(), "chunks": [asdict(chunk) for chunk in item.chunks]} for item in chunked]},
        ensure_ascii=False)


def chunked_from_json(text: str) -> list[ChunkedDocument]:
    """Inverse of chunked_to_json; ValueError when the text is not such a file."""
    data = json_object(json.loads(text), ("format", "documents"), "the file")
    if data["format"] != CHUNK_CACHE_FORMAT or not isinstance(data["documents"], list):
        raise ValueError(f"not a chunk cache of format {CHUNK_CACHE_FORMAT}")
    result = []
    for item in data["documents"]:
        item = json_object(item, ("source", "chunks"), "a document")
        raw = json_object(item["source"], ("path", "sha256", "text", "page_starts"), "a source")
        if not isinstance(raw["page_starts"], list) or not isinstance(item["chunks"], list):
            raise ValueError("page_starts and chunks must be lists")
        source = SourceText.from_record(raw)
        chunks = []
        for c in item["chunks"]:
            c = json_object(c, (f.name for f in fields(Chunk)), "a chunk")
            if not isinstance(c["extra"], dict) or not all(isinstance(c[k], int) for k in _CHUNK_OFFSETS):
                raise ValueError(f"chunk {c['doc_id']!r}: extra must be an object and offsets and pages integers")
            chunk = Chunk(**{k: str(c[k]) for k in _CHUNK_TEXTS}, **{k: c[k] for k in _CHUNK_OFFSETS},
                          extra=dict(c["extra"]))
            if source.text[chunk.start:chunk.end] != chunk.contents:
                raise ValueError(f"chunk {chunk.doc_id} does not match its source text")
            chunks.append(chunk)
        result.append(ChunkedDocument(source=source, chunks=tuple(chunks)))
    return result


def chunk_cache_path(stage: StageSettings, documents) -> Path:
    """Where the chunks of (strategy, its parameters, these PDFs, the embedding model, the chunking code) live."""
    strategy = stage.strategy
    code = code_hash_of(PROJECT_ROOT / registry.get(strategy).folder, *(PROJECT_ROOT / e for e in CHUNKING_CODE))
    layer = {"text_layer": stage.text_layer} if axes.reads_text_layer(strategy) else {}  # raw, clean: two caches
    key = sha256_text(stable_json({"strategy": strategy, "params": asdict(stage.params),
                                   "pdfs": [doc.sha256 for doc in documents], "code": code,
                                   "embedding": stage.embedder.model_id(), "embedding_dtype": stage.embedding_dtype,
                                   **layer}))
    return cache_dir() / "chunks" / f"{strategy}-{key[:32]}.json"


def chunk_cached(stage: StageSettings, documents, embedding: Callable[[], Any] | None = None) -> list:
    """chunk_documents, cached as JSON (chunk_cache_path); a cache file that does not parse, or was made for PDFs at
    other paths, is recomputed and replaced."""
    path = chunk_cache_path(stage, documents)
    if path.is_file():
        try:
            chunked = chunked_from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            logger.warning("%s: unreadable chunk cache (%s); chunking again and replacing it", path, exc)
        else:
            if [item.source.path for item in chunked] == [doc.path for doc in documents]:
                check_chunked(documents, chunked, stage.strategy)  # as chunk_documents: a PDF without chunks is named
                return chunked
    chunked = chunk_documents(documents, stage, chunker_context(stage, embedding))
    atomic_write_text(path, chunked_to_json(chunked))
    return chunked


@contextmanager
def chunking_ahead(config: StudyConfig, documents: Sequence[PdfDocument],
                   needed: Callable[[str], bool] = lambda strategy: True) -> Iterator[None]:
    """Start in the background the `prefetch` (the markdown strategy's PDF conversion) of every configured strategy
    that has one and is `needed` (e.g. its chunks are not cached); its chunker waits for it in `prepare`. Whatever is
    still running when the block ends (an error, Ctrl-C) is stopped."""
    stops = []
    try:
        for strategy in config.strategies:
            spec = registry.get(strategy)
            if spec.prefetch is not None and needed(strategy):
                stops.append(spec.prefetch(config.strategy_params[strategy], documents))
        yield
    finally:
        for stop in stops:
            stop()


def check_vector_store(config: StudyConfig) -> None:
    """Fail fast, before chunking and embedding: the Chroma server answers, or every Chroma folder is writable."""
    from ragstudy.stores.knowledge_base import check_chroma_server, chroma_folder, db_dir_of, prepare_db_dir

    if config.chroma_server:
        check_chroma_server(config.chroma_server)
        return
    for spec in map(registry.get, config.strategies):
        prepare_db_dir(chroma_folder(db_dir_of(config, spec), spec))


def build_retriever(config: StudyConfig, strategy: str):
    """Read the documents, chunk and index them with one strategy; returns (ParentDocumentRetriever, IndexStats)."""
    from ragstudy.stores.knowledge_base import KnowledgeBase

    embedding = lazy_embedding(config.embedder, config.resolved_threads())
    stage = StageSettings.of(config, strategy)
    chunked = chunk_cached(stage, load_documents(Path(config.documents)), embedding)
    return KnowledgeBase.of_stage(stage, embedding()).build(chunked)


def build_prompt(template: str, context: str, query: str) -> str:
    # replace, not str.format: questions and contexts may contain braces
    return template.replace("{context}", context).replace("{query}", query)


@dataclass
class StrategyReport:
    strategy: str
    documents: int
    chunks: int
    embedded: int = 0
    reused: int = 0
    generated: int = 0
    cached: int = 0
    outputs: list[str] = field(default_factory=list)


def answer_questions(retriever, generator, questions: Sequence[str], template: str, strategy: str
                     ) -> list[DatasetRow]:
    """Retrieve for every question, then answer all prompts (cached answers are not regenerated)."""
    from tqdm.auto import tqdm

    retrieved = [retriever.invoke(question)
                 for question in tqdm(questions, desc=f"Retrieving {strategy}", unit="question")]
    prompts = [build_prompt(template, "\n\n".join(doc.page_content for doc in docs), question)
               for question, docs in zip(questions, retrieved)]
    answers = generator.generate_many(prompts, desc=f"Answering {strategy}")
    rows = []
    for index, (question, docs, answer) in enumerate(zip(questions, retrieved, answers)):
        if not answer:
            logger.warning("%s: empty answer to question %d", strategy, index)
        sources = tuple(Source(doc.id or doc.metadata.get("doc_id"), doc.metadata.get("path"),
                               doc.metadata.get("page_start"), doc.metadata.get("page_end")) for doc in docs)
        rows.append(DatasetRow(index, question, answer, tuple(doc.page_content for doc in docs), sources, strategy))
    return rows


def run_facts(config: StudyConfig, documents: Sequence[PdfDocument]) -> dict:
    """What config.json records besides the settings: PDF hashes and pages, model labels, the model that answers
    (an answering run: llms.answering_model, with each server's /v1/models list), resolved paths."""
    # a questions file make-qa wrote (its sidecar beside it)
    from ragstudy.qagen.outputs import generated_questions_info

    answers = not (config.chunks_only or config.retrieval_only)
    return {
        **({"answering_model": answering_model(config, listed=True).to_record()} if answers else {}),
        "documents_sha256": {doc.path: doc.sha256 for doc in documents},
        "documents_pages": {doc.path: doc.page_count for doc in documents},
        "model_labels": model_labels(config),
        "questions_resolved": str(Path(config.questions).resolve()),
        **({"questions_sha256": sha256_file(Path(config.questions))} if Path(config.questions).is_file() else {}),
        "documents_resolved": str(Path(config.documents).resolve()),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": code_version(),
        **({"questions_generated": info} if (info := generated_questions_info(config.questions)) else {}),
    }


def model_labels(config: StudyConfig) -> dict[str, str]:
    """The models' stable names (models.model_label) as config.json records them; the LLM's: llms.answering_model."""
    return {"llm": answering_model(config).label, "embedding": model_label(config.profile.embedding)}


def code_version() -> str | None:
    """The repository's commit (with "+dirty" when files differ from it), or None outside a git checkout."""
    import subprocess

    try:
        commit = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def check_question_lengths(config: StudyConfig) -> list[int]:
    """Warn once about the questions the embedding model would cut (longer than the tokens it reads), when the run
    embeds its questions and the local model's limit is known (Embedder.query_reader). Returns their 0-based indices."""
    from ragstudy import retrievers

    if config.chunks_only or (config.retrieval_only and not any(
            retrievers.get(name).vectors for name in axes.get("retriever").values(config))):
        return []
    if (reader := config.embedder.query_reader()) is None:  # else (count, limit)
        return []
    return warn_long_questions(config.questions, config.limit, *reader, config.profile.embedding)


def run_study(config: StudyConfig) -> list[StrategyReport]:
    """Run every configured strategy end to end; returns what each did (for the summary and tests)."""
    import torch

    from ragstudy.stores.knowledge_base import chroma_clients_closed

    torch.set_num_threads(config.resolved_threads())
    if not config.chunks_only:
        check_generator(config)  # also an engine that is not installed, before chunking
        check_vector_store(config)
    documents = load_documents(Path(config.documents))
    questions = [] if config.chunks_only else read_questions(config.questions, config.limit)
    check_question_lengths(config)
    output_dir = ResultsFolder(config.output_dir, config.documents).prepare().path  # locked before anything is written
    check_output_folder(output_dir, config, questions)  # never beside another configuration's files
    facts = run_facts(config, documents)
    write_config(output_dir, config, facts)
    embedding = lazy_embedding(config.embedder, config.resolved_threads())  # one model for chunkers and the index
    with chunking_ahead(config, documents), chroma_clients_closed():
        return _run_strategies(config, documents, questions, output_dir, embedding, facts.get("answering_model"))


def _run_strategies(config: StudyConfig, documents: Sequence[PdfDocument], questions: Sequence[str],
                    output_dir: Path, embedding: Callable[[], Any], answered_by: dict | None = None
                    ) -> list[StrategyReport]:
    """Each strategy chunked, indexed and answered; `answered_by`: the model that answered, as config.json has it."""
    from ragstudy.stores.knowledge_base import KnowledgeBase

    generator = None
    reports = []
    for strategy in config.strategies:
        stage = StageSettings.of(config, strategy)  # resolved once, for chunking and the index
        chunked = chunk_cached(stage, documents, embedding)
        report = StrategyReport(strategy, len(documents), sum(len(c.chunks) for c in chunked))
        report.outputs += [str(p) for p in write_chunks(chunked, strategy, output_dir)]
        if not config.chunks_only:
            generator = generator or make_generator(config)
            retriever, stats = KnowledgeBase.of_stage(stage, embedding()).build(chunked)
            report.embedded, report.reused = stats.embedded, stats.reused
            before = (generator.generated, generator.cached)
            rows = answer_questions(retriever, generator, questions, config.prompt_template, strategy)
            report.generated, report.cached = generator.generated - before[0], generator.cached - before[1]
            record(output_dir, config, questions, strategy, report.outputs)
            answers = [str(p) for p in write_dataset(rows, output_dir, registry.get(strategy).dataset_name)]
            record(output_dir, config, questions, strategy, answers, answering_model=answered_by)
            report.outputs += answers
        reports.append(report)
    return reports
