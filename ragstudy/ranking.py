"""Retrieval-only runs: chunk (cached), index and rank the parents of every question, and write
`retrieval_<strategy>.csv` (ragstudy.results owns the file).

A retrieval-only run ranks the parents of every question (by their best child window, `KnowledgeBase.rank`) deep
enough to fill the largest context budget, and marks the parents the paper's k child windows retrieve (`in_k`, from
the strategy's own retriever, exactly as the chain does). ragstudy.budget_eval then packs and scores the budgets.

`config.retriever` chooses the ranking: `dense` (above: Chroma, the paper's design), or, without Chroma,
`dense-parents` (whole parents embedded), `bm25` / `bm25-parents` (ragstudy.lexical over the child windows or whole
parents) and `hybrid` (RRF of exact dense and BM25 child-window rankings); parents by their best unit (UnitRanker).

Chunks are cached as JSON under a hash of (strategy, parameters, PDF bytes, embedding model, chunking code); a
cache file that does not parse is treated as absent (a warning names it) and replaced.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from .budget_eval import CHARS, Measure, llm_measure
from .chunks import Chunk, ChunkedDocument
from .config import StudyConfig
from .pipeline import (StrategyReport, check_vector_store, chunk_documents, chunker_context, chunking_ahead,
                       lazy_embedding, make_knowledge_base, reads_text_layer, run_facts)
from .results import ResultsFolder, RetrievedParent, read_questions, write_config, write_retrieval
from .textlayer import SourceText, load_documents

logger = logging.getLogger(__name__)

INITIAL_DEPTH = 8  # parents ranked first; doubled until the largest budget is overfilled


# ------------------------------------------------------------------------------------------------ ranking

def rank_question(kb, retriever, question: str, question_index: int, largest: int, measure: Measure = CHARS
                  ) -> list[RetrievedParent]:
    """Parents of one question in rank order, deep enough that the largest budget is overfilled (or every parent
    is ranked), with `in_k` set from the chain's own retriever."""
    vector = kb.embedding.embed_query(question)
    depth = max(INITIAL_DEPTH, kb.params.k)
    while True:
        ranked = kb.rank_vector(vector, depth)
        total = sum(measure.length(r.document.page_content) for r in ranked)
        if total > largest or len(ranked) < depth:
            break
        depth *= 2
    in_k = {doc.id or doc.metadata.get("doc_id") for doc in retriever.invoke(question)}
    rows = []
    for r in ranked:
        meta = r.document.metadata
        doc_id = str(r.document.id or meta["doc_id"])
        rows.append(RetrievedParent(question_index=question_index, rank=r.rank, doc_id=doc_id, path=str(meta["path"]),
                                    page_start=int(meta["page_start"]), page_end=int(meta["page_end"]),
                                    score=float(r.score), in_k=doc_id in in_k, contents=r.document.page_content))
    found = {row.doc_id for row in rows if row.in_k}
    if found != in_k:
        logger.warning("question %d: the retriever returned %d parent(s) outside the ranking", question_index,
                       len(in_k - found))
    return rows


@dataclass
class RetrievalRun:
    """What one strategy (or one sweep configuration) did in a retrieval-only run."""

    strategy: str
    documents: int
    chunks: int
    chars_mean: float
    chars_cv: float
    index_seconds: float
    embedded: int
    reused: int
    outputs: list[str] = field(default_factory=list)
    # stage -> (wall seconds, CPU seconds of this process and its finished children): chunk, index, rank
    stages: dict[str, tuple[float, float]] = field(default_factory=dict)


def stage_clock() -> tuple[float, float]:
    """(wall clock, CPU seconds used so far by this process and its reaped children, e.g. chunking workers)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter(), time.process_time() + children.ru_utime + children.ru_stime


def stage_since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) since `start`, a stage_clock() reading."""
    now = stage_clock()
    return now[0] - start[0], now[1] - start[1]


def chunk_length_stats(chunked) -> tuple[int, float, float]:
    """(chunks, mean length, coefficient of variation of the length) of the parents, in characters."""
    lengths = [len(chunk.contents) for item in chunked for chunk in item.chunks]
    if not lengths:
        return 0, math.nan, math.nan
    mean = statistics.fmean(lengths)
    cv = statistics.pstdev(lengths) / mean if mean else math.nan
    return len(lengths), mean, cv


def _code_hash(*paths: Path) -> str:
    """Hash of the Python sources that determine a cached stage, so that editing them invalidates the cache."""
    from .io import sha256_text

    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*.py")))
    return sha256_text(*(f.read_text(encoding="utf-8") for f in files))[:16]


CHUNK_CACHE_FORMAT = 1


def chunked_to_json(chunked: Sequence[ChunkedDocument]) -> str:
    """The chunk cache's JSON: every document's source text and its chunk records."""
    return json.dumps({"format": CHUNK_CACHE_FORMAT, "documents": [
        {"source": item.source.to_record(), "chunks": [asdict(chunk) for chunk in item.chunks]} for item in chunked]},
        ensure_ascii=False)


def _record(value, keys: tuple[str, ...], what: str) -> dict:
    """`value` as a JSON object with `keys`; ValueError naming `what` otherwise (a damaged cache)."""
    if not isinstance(value, dict) or any(k not in value for k in keys):
        raise ValueError(f"{what} is not an object with {', '.join(keys)}")
    return value


def chunked_from_json(text: str) -> list[ChunkedDocument]:
    """Inverse of chunked_to_json; ValueError when the text is not such a file."""
    data = _record(json.loads(text), ("format", "documents"), "the file")
    if data["format"] != CHUNK_CACHE_FORMAT or not isinstance(data["documents"], list):
        raise ValueError(f"not a chunk cache of format {CHUNK_CACHE_FORMAT}")
    result = []
    for item in data["documents"]:
        item = _record(item, ("source", "chunks"), "a document")
        raw = _record(item["source"], ("path", "sha256", "text", "page_starts"), "a source")
        if not isinstance(raw["page_starts"], list) or not isinstance(item["chunks"], list):
            raise ValueError("page_starts and chunks must be lists")
        source = SourceText.from_record(raw)
        chunks = []
        for c in item["chunks"]:
            c = _record(c, ("doc_id", "contents", "path", "start", "end", "page_start", "page_end", "strategy",
                            "extra"), "a chunk")
            if not isinstance(c["extra"], dict) or not all(isinstance(c[k], int) for k in
                                                           ("start", "end", "page_start", "page_end")):
                raise ValueError(f"chunk {c['doc_id']!r}: extra must be an object and offsets and pages integers")
            chunk = Chunk(doc_id=str(c["doc_id"]), contents=str(c["contents"]), path=str(c["path"]),
                          start=c["start"], end=c["end"], page_start=c["page_start"],
                          page_end=c["page_end"], strategy=str(c["strategy"]), extra=dict(c["extra"]))
            if source.text[chunk.start:chunk.end] != chunk.contents:
                raise ValueError(f"chunk {chunk.doc_id} does not match its source text")
            chunks.append(chunk)
        result.append(ChunkedDocument(source=source, chunks=tuple(chunks)))
    return result


def chunk_cache_path(config, strategy: str, documents) -> Path:
    """Where the chunks of (strategy, its parameters, these PDFs, the embedding model, the chunking code) live."""
    from . import registry
    from .io import PROJECT_ROOT, cache_dir, sha256_text, stable_json
    from .models import embedding_id

    spec = registry.get(strategy)
    code = _code_hash(PROJECT_ROOT / spec.folder, PROJECT_ROOT / "ragstudy" / "chunks.py",
                      PROJECT_ROOT / "ragstudy" / "textlayer.py", PROJECT_ROOT / "ragstudy" / "textnorm.py",
                      PROJECT_ROOT / "ragstudy" / "cleaning")
    layer = {"text_layer": config.text_layer} if reads_text_layer(spec) else {}  # raw and clean never share one
    key = sha256_text(stable_json({"strategy": strategy, "params": asdict(config.strategy_params[strategy]),
                                   "pdfs": [doc.sha256 for doc in documents], "code": code,
                                   "embedding": embedding_id(config),
                                   "embedding_dtype": config.embedding_dtype, **layer}))
    return cache_dir() / "chunks" / f"{strategy}-{key[:32]}.json"


def chunk_cached(config, strategy: str, documents, embedding: Callable[[], Any] | None = None) -> list:
    """`pipeline.chunk_documents`, cached as JSON (chunk_cache_path): a warm retrieval-only run or sweep re-chunks
    nothing (the markdown and semantic chunkers take seconds per PDF). A cache file that does not parse, or was
    made for PDFs at other paths, is recomputed and replaced."""
    from .io import atomic_write_text

    path = chunk_cache_path(config, strategy, documents)
    if path.is_file():
        try:
            chunked = chunked_from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            logger.warning("%s: unreadable chunk cache (%s); chunking again and replacing it", path, exc)
        else:
            if [item.source.path for item in chunked] == [doc.path for doc in documents]:
                return chunked
    chunked = chunk_documents(documents, strategy, config, chunker_context(config, embedding))
    atomic_write_text(path, chunked_to_json(chunked))
    return chunked


def _ranking_cache_path(collection: str, params, questions: Sequence[str], largest: int, measure: Measure,
                        retriever: str = "dense", lexical_key: str | None = None) -> Path:
    """Where the rankings of (collection, retriever, BM25 index, k, questions, largest budget, code) live."""
    from .io import PROJECT_ROOT, cache_dir, sha256_text, stable_json
    from .knowledge_base import TIE_DECIMALS, TIE_EXTRA

    code = _code_hash(PROJECT_ROOT / "ragstudy" / "knowledge_base.py", PROJECT_ROOT / "ragstudy" / "lexical.py",
                      Path(__file__))
    key = sha256_text(stable_json({"collection": collection, "k": params.k, "largest": largest,
                                   "unit": [measure.unit, measure.name], "questions": list(questions), "code": code,
                                   "tie": [TIE_DECIMALS, TIE_EXTRA], "depth": INITIAL_DEPTH,
                                   "retriever": retriever, "lexical": lexical_key}))
    suffix = "" if retriever == "dense" else f"-{retriever}"
    return cache_dir() / "rankings" / f"{collection}{suffix}-{key[:24]}.json"


def _read_rankings(path: Path, count_key: str, questions: int) -> tuple[list[RetrievedParent], int] | None:
    """(rows, children or units) of a ranking cache, None when absent; a damaged one is set aside and rebuilt."""
    from .cachefile import read_json

    def parse(data: Any) -> tuple[list[RetrievedParent], int]:
        rows = [RetrievedParent.from_dict(r) for r in data["rows"]]
        count = data[count_key]
        if not isinstance(count, int) or count < 0 or any(not 0 <= r.question_index < questions for r in rows):
            raise ValueError(f"{count_key} or question indexes out of range")
        return rows, count

    return read_json(path, parse, "ranking cache")


# ------------------------------------------------------------------------- dense-parents, BM25 and hybrid

DENSE_TIE_DECIMALS = 5  # exact cosine scores equal to this many decimals are ties, broken by unit position


@dataclass
class UnitRanker:
    """The units one retriever scores for one strategy (child windows or whole parents) and how to rank them.

    Child windows are cut by knowledge_base.child_windows, exactly as the dense index cuts them. `lexical` is the
    BM25 index (bm25, bm25-parents, hybrid), `matrix` the units' normalised vectors (dense-parents, hybrid)."""

    retriever: str
    corpus: Any  # lexical.UnitCorpus
    parents: dict  # doc_id -> lexical.ParentInfo
    lexical: Any = None
    matrix: Any = None
    embedded: int = 0

    @property
    def dense(self) -> bool:
        return self.retriever in ("dense-parents", "hybrid")

    def embed(self, model) -> None:
        """The units' vectors (through the model's vector cache), for the retrievers that score them densely."""
        import numpy as np

        before = getattr(model, "texts_embedded", 0)
        self.matrix = np.asarray(model.embed_documents(list(self.corpus.texts)), dtype=np.float32)
        self.embedded = getattr(model, "texts_embedded", before + len(self.corpus.texts)) - before

    @property
    def key(self) -> str | None:
        return self.lexical.key if self.lexical is not None else None

    def unit_ranking(self, question: str, embedding) -> list[tuple[int, float]]:
        """(unit position, score) of every unit for `question`, best first (higher is better)."""
        from .lexical import reciprocal_rank_fusion

        if self.retriever in ("bm25", "bm25-parents"):
            return self.lexical.ranking(question)
        dense = _dense_ranking(self.matrix, embedding.embed_query(question))
        if self.retriever == "dense-parents":
            return dense
        lexical = self.lexical.ranking(question)
        fused = reciprocal_rank_fusion([[str(u) for u, _ in dense], [str(u) for u, _ in lexical]])
        return [(int(u), score) for u, score in fused]


def _dense_ranking(matrix, vector) -> list[tuple[int, float]]:
    import numpy as np

    scores = matrix @ np.asarray(vector, dtype=np.float32)
    order = np.lexsort((np.arange(len(scores)), -np.round(scores, DENSE_TIE_DECIMALS)))
    return [(int(i), float(scores[i])) for i in order]


def unit_ranker(retriever: str, params, chunked: Sequence[ChunkedDocument]) -> UnitRanker:
    """The units of `retriever` over a strategy's parents: child windows (bm25, hybrid) or whole parents
    (dense-parents, bm25-parents), with their BM25 index where the retriever uses one (not yet embedded)."""
    from .knowledge_base import child_splitter, child_windows
    from .lexical import LexicalIndex, ParentInfo, UnitCorpus

    documents = [chunk.to_document() for item in chunked for chunk in item.chunks]
    parents = {str(doc.id): ParentInfo(str(doc.metadata["path"]), int(doc.metadata["page_start"]),
                                       int(doc.metadata["page_end"]), doc.page_content) for doc in documents}
    corpus = UnitCorpus()
    if retriever in ("dense-parents", "bm25-parents"):
        for doc in documents:
            corpus.add(str(doc.id), [doc.page_content])
    else:
        windows, _ = child_windows(documents, child_splitter(params))
        for window in windows:
            corpus.add(str(window.metadata["doc_id"]), [window.page_content])
    ranker = UnitRanker(retriever, corpus, parents)
    if retriever in ("bm25", "bm25-parents", "hybrid"):
        ranker.lexical = LexicalIndex(corpus.texts)
    return ranker


def rank_with(ranker: UnitRanker, embedding, question: str, question_index: int, k: int, largest: int,
              measure: Measure = CHARS) -> list[RetrievedParent]:
    """Parents of one question ranked by their best unit, deep enough to overfill the largest budget; `in_k`
    marks the parents of the k best units (the paper's k child windows; k whole parents for the -parents
    retrievers). Scores are negated (lower is better, as the dense rankings' distances)."""
    from .lexical import fill_depth, paper_k_parents, parents_by_best_unit, to_retrieved

    units = ranker.unit_ranking(question, embedding)
    ranked = parents_by_best_unit(units, ranker.corpus.parents)
    lengths = {pid: measure.length(info.contents) for pid, info in ranker.parents.items()}
    return to_retrieved(question_index, fill_depth(ranked, lengths, largest), ranker.parents,
                        paper_k_parents(units, ranker.corpus.parents, k))


def retrieve_strategy(config, strategy: str, documents, questions: Sequence[str], embedding: Callable[[], Any],
                      output_dir: Path, measure: Measure = CHARS) -> RetrievalRun:
    """Chunk, export, index and rank one strategy; write chunks_/sources_/retrieval_<strategy> into output_dir.

    `embedding()` returns the study's embedding model (see lazy_embedding). Rankings are cached under a hash of
    (Chroma collection name — itself a hash of the parents, child windows and embedding model —, k, questions,
    largest budget and its unit, ranking code): a warm re-run neither opens Chroma nor loads the model, and reports
    every child window as reused.
    """
    from tqdm.auto import tqdm

    from . import registry
    from .io import atomic_write_text
    from .knowledge_base import collection_name
    from .models import embedding_id
    from .results import write_chunks

    spec = registry.get(strategy)
    params = config.strategy_params[strategy]
    started = time.perf_counter()
    clock = stage_clock()
    chunked = chunk_cached(config, strategy, documents, embedding)
    stages = {"chunk": stage_since(clock)}
    outputs = [str(p) for p in write_chunks(chunked, strategy, output_dir)]
    largest = max(config.budgets)
    collection = collection_name(spec, params, chunked, embedding_id(config))
    retriever = config.retriever
    if retriever != "dense":
        rows, embedded, units = _rank_units(config, strategy, chunked, questions, embedding, collection, largest,
                                            measure)
        index_seconds = time.perf_counter() - started
        outputs.append(str(write_retrieval(rows, output_dir, strategy)))
        chunks, chars_mean, chars_cv = chunk_length_stats(chunked)
        return RetrievalRun(strategy, len(documents), chunks, chars_mean, chars_cv, index_seconds, embedded,
                            units - embedded if retriever in ("dense-parents", "hybrid") else 0, outputs)
    cache = _ranking_cache_path(collection, params, questions, largest, measure)
    cached = _read_rankings(cache, "children", len(questions))
    if cached is not None:
        rows, reused = cached
        embedded, index_seconds = 0, time.perf_counter() - started
        logger.info("%s: rankings of %d questions read from %s", strategy, len(questions), cache)
    else:
        clock = stage_clock()
        kb = make_knowledge_base(config, strategy, embedding())
        retriever, stats = kb.build(chunked)
        index_seconds = time.perf_counter() - started
        stages["index"] = stage_since(clock)
        embedded, reused = stats.embedded, stats.reused
        rows = []
        clock = stage_clock()
        for index, question in enumerate(tqdm(questions, desc=f"Ranking {strategy}", unit="question")):
            rows += rank_question(kb, retriever, question, index, largest, measure)
        stages["rank"] = stage_since(clock)
        atomic_write_text(cache, json.dumps({"children": stats.children, "rows": [r.to_dict() for r in rows]},
                                            ensure_ascii=False))
    outputs.append(str(write_retrieval(rows, output_dir, strategy)))
    chunks, chars_mean, chars_cv = chunk_length_stats(chunked)
    return RetrievalRun(strategy, len(documents), chunks, chars_mean, chars_cv, index_seconds, embedded, reused,
                        outputs, stages)


def _rank_units(config, strategy: str, chunked, questions: Sequence[str], embedding: Callable[[], Any],
                collection: str, largest: int, measure: Measure) -> tuple[list[RetrievedParent], int, int]:
    """(rows, units embedded now, units) of a non-dense retriever, from the ranking cache when it holds them. The
    cache key adds the retriever and the BM25 index's content key to the dense key (collection, k, questions,
    largest budget, code); a BM25 index is rebuilt to compute its key (seconds), vectors come from the vector
    cache."""
    from tqdm.auto import tqdm

    from .io import atomic_write_text

    params = config.strategy_params[strategy]
    ranker = unit_ranker(config.retriever, params, chunked)
    cache = _ranking_cache_path(collection, params, questions, largest, measure, config.retriever, ranker.key)
    cached = _read_rankings(cache, "units", len(questions))
    if cached is not None:
        logger.info("%s: %s rankings of %d questions read from %s", strategy, config.retriever, len(questions), cache)
        return cached[0], 0, cached[1]
    model = embedding() if ranker.dense else None
    if model is not None:
        ranker.embed(model)
    rows: list[RetrievedParent] = []
    for index, question in enumerate(tqdm(questions, desc=f"Ranking {strategy} ({config.retriever})",
                                          unit="question")):
        rows += rank_with(ranker, model, question, index, params.k, largest, measure)
    units = len(ranker.corpus.texts)
    atomic_write_text(cache, json.dumps({"units": units, "retriever": config.retriever,
                                         "rows": [r.to_dict() for r in rows]}, ensure_ascii=False))
    return rows, ranker.embedded, units


# ------------------------------------------------------------------------------------- retrieval-only runs

def run_retrieval(config: StudyConfig) -> list[StrategyReport]:
    """Index every configured strategy and rank parents per question (retrieval_<strategy>.csv); no LLM is loaded.

    Postprocessing/retrieval_eval.py then fills equal context budgets from these rankings (ragstudy.budget_eval).
    With several text layers (`--text-layer raw,clean`) the first is ranked into the output folder and each other
    one into `<output-dir>/text-layer-<layer>/` (ragstudy.decomposition), every strategy in each.
    """
    if len(config.text_layers) > 1:
        from .decomposition import text_layer_folder

        first, *others = config.text_layers
        reports = run_retrieval(replace(config, text_layer=first))
        for layer in others:
            folder = text_layer_folder(config.output_dir, layer)
            reports += [replace(r, strategy=f"{r.strategy} ({layer})")
                        for r in run_retrieval(replace(config, text_layer=layer, output_dir=str(folder)))]
        return reports
    documents = load_documents(Path(config.documents))
    questions = read_questions(config.questions, config.limit)
    check_vector_store(config)  # a Chroma server that is down stops the run before anything is written or chunked
    output_dir = ResultsFolder(config.output_dir).prepare().path  # locked before anything is written in it
    measure = llm_measure(config)
    write_config(output_dir, config, run_facts(config, documents))
    embedding = lazy_embedding(config)
    reports = []

    def not_cached(strategy: str) -> bool:
        return not chunk_cache_path(config, strategy, documents).is_file()

    with chunking_ahead(config, documents, not_cached):
        for strategy in config.strategies:
            run = retrieve_strategy(config, strategy, documents, questions, embedding, output_dir, measure)
            reports.append(StrategyReport(strategy, run.documents, run.chunks, embedded=run.embedded,
                                          reused=run.reused, outputs=run.outputs))
    return reports
