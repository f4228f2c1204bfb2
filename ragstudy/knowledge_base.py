"""One knowledge base for every strategy: parent chunks -> LangChain ParentDocumentRetriever.

Parents live in an InMemoryStore (refilled from the deterministic chunks on every run: cheap); child windows live
in a persistent Chroma collection under `<strategy folder>/db`, named by a hash of everything that determines its
contents (strategy parameters, PDF bytes, embedding model). Child ids are deterministic, so a re-run embeds only
the windows that are missing: nothing when nothing changed, the rest after an interrupted run.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Sequence

from .chunks import ChunkedDocument
from .errors import StudyInputError
from .io import PROJECT_ROOT, sha256_text, stable_json
from .registry import StrategyParams, StrategySpec

logger = logging.getLogger(__name__)

ADD_BATCH = 256
# Large HNSW search/construction beams make Chroma's approximate search exact in practice on study-sized
# collections; with the defaults, a freshly built index and the same index reloaded from disk returned different
# neighbours for 1 of 49 questions, so a warm re-run regenerated an answer.
HNSW_SETTINGS = {"hnsw:search_ef": 512, "hnsw:construction_ef": 512, "hnsw:M": 32}


@dataclass(frozen=True)
class IndexStats:
    collection: str
    parents: int
    children: int
    embedded: int  # child windows embedded in this run
    reused: int  # child windows found already in the collection


def collection_name(spec: StrategySpec, params: StrategyParams, chunked: Sequence[ChunkedDocument],
                    embedding_id: str) -> str:
    """Chroma collection named by a hash of what determines its vectors."""
    key = sha256_text(stable_json({
        "strategy": spec.name, "params": asdict(params), "embedding": embedding_id, "hnsw": HNSW_SETTINGS,
        "documents": sorted(item.source.sha256 for item in chunked),
        "parents": sorted(chunk.doc_id for item in chunked for chunk in item.chunks),
    }))
    return f"{spec.name}-{key[:24]}"


TIE_DECIMALS = 5  # distances equal to this many decimals are ties, broken by child id
TIE_EXTRA = 8  # extra neighbours fetched so that ties at the k-th place are seen


def stable_retriever_class():
    """ParentDocumentRetriever whose child search is reproducible: ties are broken by child id.

    Identical child windows (running headers, repeated table rows) have identical distances, and Chroma orders
    them differently in a freshly built index and in the same index reloaded from disk; a warm re-run would then
    put other parents in the prompt and regenerate answers.
    """
    from langchain_classic.retrievers import ParentDocumentRetriever

    class StableParentDocumentRetriever(ParentDocumentRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager=None):
            k = self.search_kwargs.get("k", 4)
            scored = self.vectorstore.similarity_search_with_score(query, k=k + TIE_EXTRA)
            scored.sort(key=lambda pair: (round(pair[1], TIE_DECIMALS), pair[0].id or ""))
            ids: list[str] = []
            for doc, _ in scored[:k]:
                parent = doc.metadata.get(self.id_key)
                if parent is not None and parent not in ids:
                    ids.append(parent)
            return [doc for doc in self.docstore.mget(ids) if doc is not None]

    return StableParentDocumentRetriever


_LOCKS: dict[Path, int] = {}


def _lock_db_dir(path: Path) -> None:
    """Hold an exclusive lock on a Chroma folder for this process's lifetime.

    Two processes writing one persistent Chroma folder corrupt each other ("attempt to write a readonly
    database"); the second run stops at once with a clear message instead.
    """
    import fcntl
    import os

    path = path.resolve()
    if path in _LOCKS:
        return
    fd = os.open(path / ".ragstudy.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StudyInputError(f"{path}: another run is using this Chroma folder. Wait for it to finish, or give "
                              "this run its own folder with --db-dir DIR.") from None
    _LOCKS[path] = fd


def _chroma_client(path: Path):
    import chromadb
    from chromadb.config import Settings

    path.mkdir(parents=True, exist_ok=True)
    _lock_db_dir(path)
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


class KnowledgeBase:
    """Index a strategy's parent chunks and expose them as a ParentDocumentRetriever."""

    def __init__(self, spec: StrategySpec, params: StrategyParams, embedding, embedding_id: str,
                 db_dir: Path | None = None) -> None:
        self.spec = spec
        self.params = params
        self.embedding = embedding
        self.embedding_id = embedding_id
        self.db_dir = Path(db_dir) if db_dir is not None else PROJECT_ROOT / spec.folder / "db"

    def child_splitter(self):
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        return RecursiveCharacterTextSplitter(chunk_size=self.params.child_chunk_size,
                                              chunk_overlap=self.params.child_chunk_overlap)

    def build(self, chunked: Sequence[ChunkedDocument]):
        """Return (retriever, stats), embedding only the child windows not already stored."""
        from langchain_chroma import Chroma
        from langchain_core.stores import InMemoryStore
        from tqdm.auto import tqdm

        name = collection_name(self.spec, self.params, chunked, self.embedding_id)
        vectorstore = Chroma(client=_chroma_client(self.db_dir), collection_name=name,
                             embedding_function=self.embedding, collection_metadata=HNSW_SETTINGS)
        docstore = InMemoryStore()
        splitter = self.child_splitter()
        retriever = stable_retriever_class()(vectorstore=vectorstore, docstore=docstore, child_splitter=splitter,
                                            search_kwargs={"k": self.params.k})
        parents = [chunk.to_document() for item in chunked for chunk in item.chunks]
        docstore.mset([(doc.id, doc) for doc in parents])
        children, child_ids = [], []
        for parent in parents:
            for number, child in enumerate(splitter.split_documents([parent])):
                child.metadata = {"doc_id": parent.id, "path": parent.metadata["path"],
                                  "page_start": parent.metadata["page_start"],
                                  "page_end": parent.metadata["page_end"]}
                children.append(child)
                child_ids.append(f"{parent.id}-{number:04d}")
        existing: set[str] = set()
        for start in range(0, len(child_ids), 5000):
            existing.update(vectorstore.get(ids=child_ids[start:start + 5000], include=[])["ids"])
        missing = [i for i, cid in enumerate(child_ids) if cid not in existing]
        bar = tqdm(total=len(missing), desc=f"Embedding {self.spec.name}", unit="window", disable=not missing)
        for start in range(0, len(missing), ADD_BATCH):
            batch = missing[start:start + ADD_BATCH]
            vectorstore.add_documents([children[i] for i in batch], ids=[child_ids[i] for i in batch])
            bar.update(len(batch))
        bar.close()
        stats = IndexStats(collection=name, parents=len(parents), children=len(children), embedded=len(missing),
                           reused=len(children) - len(missing))
        logger.info("%s: %d parents, %d child windows (%d embedded now, %d reused) in %s/%s", self.spec.name,
                    stats.parents, stats.children, stats.embedded, stats.reused, self.db_dir, name)
        return retriever, stats


class PaperKnowledgeBase:
    """The paper's entry points, kept for familiarity: MyKnowledgeBase(path); initiate_document_injetion_pipeline().

    Subclasses set `strategy`. Uses the study's defaults for the profile picked by the machine (or `profile`).
    """

    strategy: ClassVar[str] = ""

    def __init__(self, pdf_source_folder_path: str, profile: str | None = None, db_dir: str | None = None) -> None:
        self.pdf_source_folder_path = pdf_source_folder_path
        self.profile = profile
        self.db_dir = db_dir
        self.retriever = None

    def initiate_document_injetion_pipeline(self):
        from .config import StudyConfig
        from .pipeline import build_retriever

        config = StudyConfig.resolve(documents=self.pdf_source_folder_path, profile=self.profile,
                                     strategies=self.strategy, db_dir=self.db_dir)
        self.retriever, _ = build_retriever(config, self.strategy)
        return self.retriever
