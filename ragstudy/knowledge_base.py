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
from .io import PROJECT_ROOT, sha256_text, stable_json
from .registry import StrategyParams, StrategySpec

logger = logging.getLogger(__name__)

ADD_BATCH = 256


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
        "strategy": spec.name, "params": asdict(params), "embedding": embedding_id,
        "documents": sorted(item.source.sha256 for item in chunked),
        "parents": sorted(chunk.doc_id for item in chunked for chunk in item.chunks),
    }))
    return f"{spec.name}-{key[:24]}"


def _chroma_client(path: Path):
    import chromadb
    from chromadb.config import Settings

    path.mkdir(parents=True, exist_ok=True)
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
        from langchain_classic.retrievers import ParentDocumentRetriever
        from langchain_core.stores import InMemoryStore
        from tqdm.auto import tqdm

        name = collection_name(self.spec, self.params, chunked, self.embedding_id)
        vectorstore = Chroma(client=_chroma_client(self.db_dir), collection_name=name,
                             embedding_function=self.embedding)
        docstore = InMemoryStore()
        splitter = self.child_splitter()
        retriever = ParentDocumentRetriever(vectorstore=vectorstore, docstore=docstore, child_splitter=splitter,
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
