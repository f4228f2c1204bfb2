"""Retrieval-only runs: rank parents per question, pack them into equal context budgets, read and write the
`retrieval_<strategy>.csv` files.

The paper compares strategies that hand the LLM very different amounts of context (paragraph k=1 parent, the
baselines k=4 child windows -> up to 4 parents). A retrieval-only run ranks the parents of every question (by their
best child window, `KnowledgeBase.rank`) deep enough to fill the largest budget, and marks the parents the paper's k
child windows retrieve (`in_k`, from the strategy's own retriever, exactly as the chain does). Budgets are then
filled from that ranking by `pack_budget`: whole parents in rank order while the total stays <= B; a first parent
longer than B is cut at B. One module writes and reads the file, so what is written is what is read back.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .config import StudyConfig
from .errors import StudyInputError
from .pipeline import StrategyReport, chunk_documents, chunker_context, run_facts
from .results import ResultsFolder, read_questions, write_config
from .textlayer import load_documents

logger = logging.getLogger(__name__)

RETRIEVAL_COLUMNS = ("question_index", "rank", "doc_id", "path", "page_start", "page_end", "score", "in_k",
                     "contents")
PAPER_K_LABEL = "k"  # the budget label of "the parents the strategy's own k child windows retrieve"
INITIAL_DEPTH = 8  # parents ranked first; doubled until the largest budget is overfilled


def retrieval_path(output_dir: str | Path, strategy: str) -> Path:
    return Path(output_dir) / f"retrieval_{strategy}.csv"


@dataclass(frozen=True)
class RetrievedParent:
    """One ranked parent of one question: `score` is its best child window's Chroma distance (lower is better);
    `in_k` says whether the chain's retriever (k child windows) returns it."""

    question_index: int
    rank: int
    doc_id: str
    path: str
    page_start: int
    page_end: int
    score: float
    in_k: bool
    contents: str

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row["in_k"] = int(self.in_k)
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "RetrievedParent":
        return cls(question_index=int(row["question_index"]), rank=int(row["rank"]), doc_id=str(row["doc_id"]),
                   path=str(row["path"]), page_start=int(row["page_start"]), page_end=int(row["page_end"]),
                   score=float(row["score"]), in_k=str(row["in_k"]).strip().lower() in ("1", "true"),
                   contents=str(row["contents"]))


# ------------------------------------------------------------------------------------------------ budgets

@dataclass(frozen=True)
class Measure:
    """How a budget is counted: `length(text)` in the budget's unit and `cut(text, n)`, the longest prefix of
    `text` of at most n units."""

    unit: str
    length: Callable[[str], int]
    cut: Callable[[str, int], str]
    name: str = ""  # which tokenizer, for cache keys


CHARS = Measure("chars", len, lambda text, n: text[:n])


def token_measure(tokenizer) -> Measure:
    """Budgets in tokens of `tokenizer` (a transformers fast tokenizer: cuts use its character offsets)."""

    def length(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def cut(text: str, n: int) -> str:
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        return text if len(offsets) <= n else text[:offsets[n - 1][1]] if n > 0 else ""

    return Measure("tokens", length, cut, str(getattr(tokenizer, "name_or_path", "")))


@dataclass(frozen=True)
class PackedContext:
    """What fills one budget: the included parents in rank order and their texts (the first one possibly cut)."""

    budget: str  # "500", …, or "k"
    parents: tuple[RetrievedParent, ...]
    texts: tuple[str, ...]
    used: int  # size in the budget's unit
    cut: bool = False  # the first parent was longer than the budget and was cut

    @property
    def chars(self) -> int:
        return sum(len(text) for text in self.texts)


def pack_budget(ranked: Sequence[RetrievedParent], budget: int, measure: Measure = CHARS) -> PackedContext:
    """Fill `budget` with whole parents in rank order while the total stays <= budget; stop at the first parent
    that does not fit. A first parent longer than the budget is cut at the budget."""
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    parents: list[RetrievedParent] = []
    texts: list[str] = []
    used = 0
    for parent in sorted(ranked, key=lambda p: p.rank):
        size = measure.length(parent.contents)
        if used + size <= budget:
            parents.append(parent)
            texts.append(parent.contents)
            used += size
            continue
        if not parents:
            text = measure.cut(parent.contents, budget)
            return PackedContext(str(budget), (parent,), (text,), measure.length(text), cut=True)
        break
    return PackedContext(str(budget), tuple(parents), tuple(texts), used)


def pack_paper_k(ranked: Sequence[RetrievedParent], measure: Measure = CHARS) -> PackedContext:
    """The parents the strategy's own k child windows retrieve, whole, in rank order (what the chain prompts with)."""
    parents = tuple(p for p in sorted(ranked, key=lambda p: p.rank) if p.in_k)
    return PackedContext(PAPER_K_LABEL, parents, tuple(p.contents for p in parents),
                         sum(measure.length(p.contents) for p in parents))


def budget_labels(budgets: Sequence[int]) -> list[str]:
    """Budget labels in table order: the numeric budgets ascending, then "k"."""
    return [str(b) for b in sorted(set(budgets))] + [PAPER_K_LABEL]


def pack_all(ranked: Sequence[RetrievedParent], budgets: Sequence[int], measure: Measure = CHARS
             ) -> dict[str, PackedContext]:
    packed = {str(b): pack_budget(ranked, b, measure) for b in sorted(set(budgets))}
    packed[PAPER_K_LABEL] = pack_paper_k(ranked, measure)
    return packed


# ------------------------------------------------------------------------------------------------ the file

def write_retrieval(rows: Sequence[RetrievedParent], output_dir: str | Path, strategy: str) -> Path:
    import pandas as pd

    from .io import atomic_write_text

    path = retrieval_path(output_dir, strategy)
    frame = pd.DataFrame([row.to_dict() for row in rows], columns=list(RETRIEVAL_COLUMNS))
    atomic_write_text(path, frame.to_csv(index=False))
    return path


def read_retrieval(path: str | Path) -> dict[int, list[RetrievedParent]]:
    """`retrieval_<strategy>.csv` -> question_index -> parents in rank order; errors name the file and row."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise StudyInputError(f"{path}: not found; run `python3 evaluation_chain.py --retrieval-only` first")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in RETRIEVAL_COLUMNS if c not in frame.columns]
    if missing:
        raise StudyInputError(f"{path}: missing columns {missing}; is it a retrieval file of evaluation_chain.py "
                              "--retrieval-only?")
    result: dict[int, list[RetrievedParent]] = {}
    for i, row in enumerate(frame.to_dict("records")):
        try:
            parent = RetrievedParent.from_dict(row)
        except (TypeError, ValueError) as exc:
            raise StudyInputError(f"{path} row {i + 2}: {exc}") from exc
        result.setdefault(parent.question_index, []).append(parent)
    for question, parents in result.items():
        parents.sort(key=lambda p: p.rank)
        if [p.rank for p in parents] != list(range(1, len(parents) + 1)):
            raise StudyInputError(f"{path}: question_index {question} has ranks {[p.rank for p in parents]}, "
                                  "expected 1..n; the file was edited or comes from two runs")
    return result


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


def chunk_cached(config, strategy: str, documents, embedding: Callable[[], Any] | None = None) -> list:
    """`pipeline.chunk_documents`, cached under a hash of (strategy, parameters, PDF bytes, embedding model, the
    chunking code): a warm retrieval-only run or sweep re-chunks nothing (the markdown and semantic chunkers take
    seconds per PDF)."""
    import pickle
    from dataclasses import asdict as _asdict

    from . import registry
    from .io import PROJECT_ROOT, atomic_write_bytes, cache_dir, sha256_text, stable_json
    from .models import embedding_id

    spec = registry.get(strategy)
    code = _code_hash(PROJECT_ROOT / spec.folder, PROJECT_ROOT / "ragstudy" / "chunks.py",
                      PROJECT_ROOT / "ragstudy" / "textlayer.py", PROJECT_ROOT / "ragstudy" / "textnorm.py")
    key = sha256_text(stable_json({"strategy": strategy, "params": _asdict(config.strategy_params[strategy]),
                                   "pdfs": [doc.sha256 for doc in documents], "code": code,
                                   "embedding": embedding_id(config),
                                   "embedding_dtype": config.embedding_dtype}))
    path = cache_dir() / "chunks" / f"{strategy}-{key[:32]}.pkl"
    if path.is_file():
        try:
            with open(path, "rb") as handle:
                chunked = pickle.load(handle)
            # the cache holds chunks, not paths: re-point them at this run's PDF paths
            if [item.source.path for item in chunked] == [doc.path for doc in documents]:
                return chunked
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as exc:
            logger.warning("%s: unreadable chunk cache (%s); chunking again", path, exc)
    chunked = chunk_documents(documents, strategy, config, chunker_context(config, embedding))
    atomic_write_bytes(path, pickle.dumps(chunked, protocol=pickle.HIGHEST_PROTOCOL))
    return chunked


def _ranking_cache_path(collection: str, params, questions: Sequence[str], largest: int, measure: Measure) -> Path:
    from .io import PROJECT_ROOT, cache_dir, sha256_text, stable_json
    from .knowledge_base import TIE_DECIMALS, TIE_EXTRA

    code = _code_hash(PROJECT_ROOT / "ragstudy" / "knowledge_base.py", Path(__file__))
    key = sha256_text(stable_json({"collection": collection, "k": params.k, "largest": largest,
                                   "unit": [measure.unit, measure.name], "questions": list(questions), "code": code,
                                   "tie": [TIE_DECIMALS, TIE_EXTRA], "depth": INITIAL_DEPTH}))
    return cache_dir() / "rankings" / f"{collection}-{key[:24]}.json"


def lazy_embedding(config) -> Callable[[], Any]:
    """The study's embedding model, loaded (and torch's threads set) on the first call only: a warm retrieval-only
    run whose rankings are cached imports neither torch nor sentence-transformers nor Chroma."""
    loaded: list[Any] = []

    def get():
        if not loaded:
            import torch

            from .models import make_embedding

            torch.set_num_threads(config.resolved_threads())
            loaded.append(make_embedding(config))
        return loaded[0]

    return get


def retrieve_strategy(config, strategy: str, documents, questions: Sequence[str], embedding: Callable[[], Any],
                      output_dir: Path, measure: Measure = CHARS) -> RetrievalRun:
    """Chunk, export, index and rank one strategy; write chunks_/sources_/retrieval_<strategy> into output_dir.

    `embedding()` returns the study's embedding model (see lazy_embedding). Rankings are cached under a hash of
    (Chroma collection name — itself a hash of the parents, child windows and embedding model —, k, questions,
    largest budget and its unit, ranking code): a warm re-run neither opens Chroma nor loads the model, and reports
    every child window as reused.
    """
    import json

    from tqdm.auto import tqdm

    from . import registry
    from .io import atomic_write_text
    from .knowledge_base import KnowledgeBase, collection_name
    from .models import embedding_id
    from .results import write_chunks

    spec = registry.get(strategy)
    params = config.strategy_params[strategy]
    started = time.perf_counter()
    chunked = chunk_cached(config, strategy, documents, embedding)
    outputs = [str(p) for p in write_chunks(chunked, strategy, output_dir)]
    largest = max(config.budgets)
    collection = collection_name(spec, params, chunked, embedding_id(config))
    cache = _ranking_cache_path(collection, params, questions, largest, measure)
    if cache.is_file():
        cached = json.loads(cache.read_text(encoding="utf-8"))
        rows = [RetrievedParent.from_dict(r) for r in cached["rows"]]
        embedded, reused, index_seconds = 0, int(cached["children"]), time.perf_counter() - started
        logger.info("%s: rankings of %d questions read from %s", strategy, len(questions), cache)
    else:
        model = embedding()
        db_dir = Path(config.db_dir) / spec.folder if config.db_dir else None
        kb = KnowledgeBase(spec, params, model, model.model_id, db_dir=db_dir,
                           chroma_server=getattr(config, "chroma_server", None))
        retriever, stats = kb.build(chunked)
        index_seconds = time.perf_counter() - started
        embedded, reused = stats.embedded, stats.reused
        rows = []
        for index, question in enumerate(tqdm(questions, desc=f"Ranking {strategy}", unit="question")):
            rows += rank_question(kb, retriever, question, index, largest, measure)
        atomic_write_text(cache, json.dumps({"children": stats.children, "rows": [r.to_dict() for r in rows]},
                                            ensure_ascii=False))
    outputs.append(str(write_retrieval(rows, output_dir, strategy)))
    chunks, chars_mean, chars_cv = chunk_length_stats(chunked)
    return RetrievalRun(strategy, len(documents), chunks, chars_mean, chars_cv, index_seconds, embedded, reused,
                        outputs)


def llm_measure(config) -> Measure:
    """The budget measure of a config: characters, or tokens of the study's LLM tokenizer (no model weights)."""
    if config.budget_unit == "chars":
        return CHARS
    from transformers import AutoTokenizer

    from .models import resolve_llm

    origin = config.origins.get("llm", "config")
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolve_llm(config.profile.llm, origin))
    except OSError as exc:
        raise StudyInputError(f"budget_unit tokens needs the LLM's tokenizer ({config.profile.llm}, set by {origin}),"
                              f" which could not be loaded: {exc}") from exc
    tokenizer.model_max_length = 10 ** 9  # counting only
    return token_measure(tokenizer)


# ------------------------------------------------------------------------------------- retrieval-only runs

def run_retrieval(config: StudyConfig) -> list[StrategyReport]:
    """Index every configured strategy and rank parents per question (retrieval_<strategy>.csv); no LLM is loaded.

    Postprocessing/retrieval_eval.py then fills equal context budgets from these rankings (ragstudy/retrieval.py).
    """
    documents = load_documents(Path(config.documents))
    questions = read_questions(config.questions, config.limit)
    output_dir = ResultsFolder(config.output_dir).prepare().path  # locked before anything is written in it
    measure = llm_measure(config)
    write_config(output_dir, config, run_facts(config, documents))
    embedding = lazy_embedding(config)
    reports = []
    for strategy in config.strategies:
        run = retrieve_strategy(config, strategy, documents, questions, embedding, output_dir, measure)
        reports.append(StrategyReport(strategy, run.documents, run.chunks, embedded=run.embedded, reused=run.reused,
                                      outputs=run.outputs))
    return reports
