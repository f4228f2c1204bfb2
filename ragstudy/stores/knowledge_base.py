"""One knowledge base for every strategy: parent chunks -> LangChain ParentDocumentRetriever.

Parents live in an InMemoryStore (refilled from the deterministic chunks on every run: cheap); child windows live
in a persistent Chroma collection, under `<strategy folder>/db` or on a Chroma server (`chroma_server`), named by a
hash of everything that determines its contents (the parent chunks, the child splitter, the embedding model; not
`k` nor context budgets, which only change what is read back). Child ids are deterministic, so a re-run embeds
only the windows that are missing: nothing when nothing changed, the rest after an interrupted run. Vectors are
also shared across collections through the embedding's own cache (customembedding.VectorCache).

Besides the retriever (k child windows -> their parents, as in the paper), `KnowledgeBase.rank` orders parents by
their best child window for retrieval-only runs. Both search the child windows exhaustively (ExactWindows), not
through Chroma's approximate HNSW index (why: docs/retrieval.md, Retrievers); stored vectors that are not the vector
cache's are written again first (docs/troubleshooting.md).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

from ragstudy.errors import StoreError, StudyInputError, excerpt, store_error
from ragstudy.io import (PROJECT_ROOT, build_lock, cache_dir, lock_folder, release_folder, set_aside, sha256_text,
                         stable_json, worker_folder)
from ragstudy.registry import StrategyParams, StrategySpec, get as strategy_spec
from ragstudy.text.chunks import ChunkedDocument, window_text

logger = logging.getLogger(__name__)

ADD_BATCH = 256
READ_BATCH = 5000  # ids per Chroma get
# Chroma builds an HNSW graph for every collection; the study's searches do not read it (ExactWindows). The settings
# stay because collection names hash them: Chroma's defaults would build faster (4.6 s instead of 6.3 s for 7,843
# windows) but re-add every existing collection's windows once.
HNSW_SETTINGS = {"hnsw:search_ef": 512, "hnsw:construction_ef": 512, "hnsw:M": 32}


@dataclass(frozen=True)
class IndexStats:
    collection: str
    parents: int
    children: int
    embedded: int  # child windows run through the embedding model in this run (cache misses)
    reused: int  # the other child windows: already in the collection, or their vector was in the embedding cache
    added: int = 0  # child windows written to the collection in this run (embedded or read from the cache)
    replaced: int = 0  # stored windows whose vector was not the vector cache's for their text, written again


@dataclass(frozen=True)
class RankedParent:
    """One parent chunk of a ranking: `score` is the Chroma distance of its best child window (squared L2 between
    normalised vectors, i.e. 2 - 2 cos: lower is better), `rank` its 1-based place."""

    document: Any  # langchain_core.documents.Document, metadata doc_id, path, page_start, page_end, ...
    score: float
    rank: int


CHILD_SPLITTER = "RecursiveCharacterTextSplitter"


def collection_name(spec: StrategySpec, params: StrategyParams, chunked: Sequence[ChunkedDocument],
                    embedding_id: str) -> str:
    """Chroma collection named by a hash of what determines its vectors and ids (not `k`). Parent doc_ids hash the
    strategy, PDF sha256, offsets and text, so they stand for the parameters and the PDF bytes; path and pages are
    the windows' metadata; a heading path (section context) is part of the windows' text."""
    key = sha256_text(stable_json({
        "embedding": embedding_id, "hnsw": HNSW_SETTINGS,
        "children": {"splitter": CHILD_SPLITTER, "chunk_size": params.child_chunk_size,
                     "chunk_overlap": params.child_chunk_overlap},
        "parents": sorted(window_text(f"{chunk.doc_id}:{chunk.path}:{chunk.page_start}:{chunk.page_end}",
                                      chunk.metadata) for item in chunked for chunk in item.chunks),
    }))
    return f"{spec.name}-{key[:24]}"


TIE_DECIMALS = 5  # distances equal to this many decimals are ties, broken by id (child id, or unit position)
SEARCH_BLOCK = 8192  # windows whose distances are computed at once (bounds the float64 temporaries)


@dataclass(frozen=True)
class ExactWindows:
    """A collection's child windows, searched exhaustively (why not HNSW: the module doc). Distance is Chroma's "l2"
    (squared Euclidean; 2 - 2 cos between normalised vectors), in float64 from the stored float32 vectors; ties to
    TIE_DECIMALS broken by child id. Memory: windows x dimensions x 4 bytes (13,000 windows of 384: 20 MB)."""

    ids: tuple[str, ...]
    matrix: Any  # numpy float32, one row per window, in `ids` order
    id_order: Any  # numpy int, each row's place among the ids sorted (the tie-break)

    @classmethod
    def of(cls, ids: Sequence[str], vectors: Any, tie_order: Sequence[int] | None = None) -> "ExactWindows":
        """`tie_order`: each row's place among ties (default: its id's place among the ids sorted)."""
        import numpy as np

        matrix = np.asarray(vectors, dtype=np.float32) if len(ids) else np.zeros((0, 0), dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids):
            raise ValueError(f"ExactWindows: {len(ids)} ids but vectors of shape {matrix.shape}")
        if tie_order is None:  # the ids are unique (child ids)
            place = {cid: i for i, cid in enumerate(sorted(ids))}
            tie_order = [place[cid] for cid in ids]
        return cls(tuple(ids), matrix, np.asarray(tie_order, dtype=np.int64))

    def nearest_rows(self, vector: Sequence[float]) -> Iterator[tuple[int, float]]:
        """(row, distance) of every window, best first; ties to TIE_DECIMALS in `id_order`."""
        import numpy as np

        query = np.asarray(vector, dtype=np.float64)
        if not self.ids:
            return
        if query.shape != (self.matrix.shape[1],):
            raise StudyInputError(f"the query vector has {query.size} dimensions, the collection's windows "
                                  f"{self.matrix.shape[1]}: rank with the embedding model that indexed them")
        distances = np.empty(len(self.ids), dtype=np.float64)
        for start in range(0, len(self.ids), SEARCH_BLOCK):
            diff = self.matrix[start:start + SEARCH_BLOCK].astype(np.float64) - query
            distances[start:start + SEARCH_BLOCK] = np.einsum("ij,ij->i", diff, diff)
        for row in np.lexsort((self.id_order, np.round(distances, TIE_DECIMALS))):
            yield int(row), float(distances[row])

    def nearest(self, vector: Sequence[float]) -> Iterator[tuple[str, float]]:
        """(child id, distance) of every window, best first; ties to TIE_DECIMALS in child id order."""
        for row, distance in self.nearest_rows(vector):
            yield self.ids[row], distance


def stable_retriever_class():
    """ParentDocumentRetriever whose child search is exact (`windows`: ExactWindows): the k nearest child windows,
    ties by child id, then their parents. Chroma's own search orders identical windows (running headers) differently
    in a fresh index and the same index reloaded: a warm re-run would put other parents in the prompt."""
    from langchain_classic.retrievers import ParentDocumentRetriever

    class StableParentDocumentRetriever(ParentDocumentRetriever):
        windows: Any
        parent_of: dict[str, str]

        def _get_relevant_documents(self, query: str, *, run_manager=None):
            k = self.search_kwargs.get("k", 4)
            vector = self.vectorstore.embeddings.embed_query(query)
            ids = list(dict.fromkeys(self.parent_of[cid] for cid, _ in islice(self.windows.nearest(vector), k)))
            return [doc for doc in self.docstore.mget(ids) if doc is not None]

    return StableParentDocumentRetriever


DB_LOCK = ".ragstudy.lock"


def prepare_db_dir(path: Path) -> None:
    """Create a Chroma folder, check it is writable and lock it; a clear error naming it otherwise."""
    import os

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StudyInputError(f"{path}: cannot create the Chroma folder ({exc.strerror}). Pass a writable --db-dir "
                              "DIR.") from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise StudyInputError(f"{path}: the Chroma folder is not a writable folder. Pass a writable --db-dir DIR.")
    # two processes writing one Chroma folder corrupt each other ("attempt to write a readonly database")
    lock_folder(path, DB_LOCK, "Chroma folder", "--db-dir DIR")


REBUILD_DB = "its child windows are embedded again, or read back from the embedding cache"


# local Chroma clients this process opened, in order (chroma_clients_closed closes a run's own)
_OPEN_CLIENTS: list[Any] = []


def _open_chroma_folder(path: Path):
    import chromadb
    from chromadb.config import Settings

    prepare_db_dir(path)
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    _OPEN_CLIENTS.append(client)
    return client


@contextmanager
def chroma_clients_closed() -> Iterator[None]:
    """Close, when the block ends (also on an error or Ctrl-C), the local Chroma clients opened inside it: chromadb
    keeps each folder's System (SQLite connections, threads, open files) until its last client closes, so an
    in-process grid, or a re-run after Ctrl-C, kept every earlier run's open. The folder locks stay."""
    start = len(_OPEN_CLIENTS)
    try:
        yield
    finally:
        opened, _OPEN_CLIENTS[start:] = _OPEN_CLIENTS[start:], []
        for client in reversed(opened):
            try:
                client.close()
            except Exception as exc:  # closing is clean-up: it never hides the run's own outcome
                logger.debug("closing a Chroma client failed: %s", exc)


def _chroma_client(path: Path):
    """A client on the locked Chroma folder `path`; one Chroma cannot open as a database is set aside and rebuilt,
    with a warning; any other failure (disk full, read-only) is a StoreError naming the folder."""
    from chromadb.api.shared_system_client import SharedSystemClient
    from chromadb.errors import ChromaError

    try:
        return _open_chroma_folder(path)
    except ChromaError as exc:
        SharedSystemClient.clear_system_cache()  # chromadb keeps the failed system per path
        if "not a database" not in str(exc) and "malformed" not in str(exc):
            raise store_error("Chroma folder", path, "cannot open it", exc, REBUILD_DB) from None
        release_folder(path, DB_LOCK)
        aside = set_aside(path)
        logger.warning("Chroma folder %s could not be read (%s): set aside as %s and rebuilt", path, exc, aside)
        return _open_chroma_folder(path)


def parse_chroma_server(url: str) -> tuple[str, int, bool]:
    """`http://host:port` (or `https://…`, or bare `host:port`) -> (host, port, ssl); port defaults to 8000/443."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise StudyInputError(f"--chroma-server {url!r} is not a server address; give http://HOST:PORT, e.g. "
                              "http://127.0.0.1:8000")
    ssl = parts.scheme == "https"
    return parts.hostname, port or (443 if ssl else 8000), ssl


def check_chroma_server(url: str, timeout: float = 5.0) -> None:
    """Raise StudyInputError naming `url` unless a Chroma server answers its heartbeat there (call before chunking):
    down, answering an HTTP error, or answering something that is not a Chroma heartbeat (another kind of server)."""
    import json
    import urllib.error
    import urllib.request

    host, port, ssl = parse_chroma_server(url)
    heartbeat = f"{'https' if ssl else 'http'}://{host}:{port}/api/v2/heartbeat"
    start = f"Start it with `chroma run --path DIR --host {host} --port {port}`, or drop --chroma-server to use " \
            "local folders."
    try:
        with urllib.request.urlopen(heartbeat, timeout=timeout) as response:
            body = response.read(2000)
    except urllib.error.HTTPError as exc:
        raise StudyInputError(f"Chroma server {url}: GET {heartbeat} answered HTTP {exc.code} ({exc.reason}); is it "
                              f"a Chroma server? {start}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise StudyInputError(f"Chroma server {url} is not reachable ({reason}). {start}") from None
    answer = None
    with suppress(ValueError):
        answer = json.loads(body)
    if not isinstance(answer, dict) or "nanosecond heartbeat" not in answer:
        raise StudyInputError(f"Chroma server {url}: GET {heartbeat} answered {excerpt(body)}, not a Chroma "
                              f"heartbeat; is it a Chroma server? {start}")


_SERVER_CLIENTS: dict[str, Any] = {}


def _server_client(url: str):
    if url not in _SERVER_CLIENTS:
        import chromadb
        from chromadb.config import Settings

        check_chroma_server(url)
        host, port, ssl = parse_chroma_server(url)
        try:
            _SERVER_CLIENTS[url] = chromadb.HttpClient(host=host, port=port, ssl=ssl,
                                                       settings=Settings(anonymized_telemetry=False))
        except ValueError as exc:  # chromadb: "Could not connect to a Chroma server. Are you sure it is running?"
            raise StudyInputError(f"Chroma server {url}: {exc}") from None
    return _SERVER_CLIENTS[url]


def child_windows(parents: Sequence, splitter) -> tuple[list, list[str]]:
    """Child windows of the parent Documents, with the parent's id and location, and their deterministic ids;
    their text is what `window_text` embeds (the parent's heading path first, when it has one)."""
    children, child_ids = [], []
    for parent in parents:
        for number, child in enumerate(splitter.split_documents([parent])):
            child.page_content = window_text(child.page_content, parent.metadata)
            child.metadata = {"doc_id": parent.id, "path": parent.metadata["path"],
                              "page_start": parent.metadata["page_start"],
                              "page_end": parent.metadata["page_end"]}
            children.append(child)
            child_ids.append(f"{parent.id}-{number:04d}")
    return children, child_ids


def child_splitter(params: StrategyParams):
    """The splitter that cuts a strategy's parents into child windows (its child_chunk_size / overlap)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=params.child_chunk_size,
                                          chunk_overlap=params.child_chunk_overlap)


def db_dir_of(config: Any, spec: StrategySpec) -> Path | None:
    """The strategy's Chroma folder under a config.StudyConfig's --db-dir (None: its own folder's db/)."""
    return Path(config.db_dir) / spec.folder if config.db_dir else None


def chroma_folder(db_dir: Path | None, spec: StrategySpec) -> Path:
    """The strategy's local Chroma folder (`db_dir`, see db_dir_of, else `<strategy folder>/db`); in a grid worker
    process its own `-worker-<k>` slot: a Chroma folder admits one process, and variants may share a strategy."""
    return worker_folder(Path(db_dir) if db_dir is not None else KnowledgeBase.default_db_dir(spec), DB_LOCK)


class KnowledgeBase:
    """Index a strategy's parent chunks; expose them as a ParentDocumentRetriever and as parent rankings. Child
    windows go to a local, locked Chroma folder (`db_dir`) or to `chroma_server`, under the same names and ids."""

    def __init__(self, spec: StrategySpec, params: StrategyParams, embedding, embedding_id: str,
                 db_dir: Path | None = None, *, chroma_server: str | None = None) -> None:
        self.spec = spec
        self.params = params
        self.embedding = embedding
        self.embedding_id = embedding_id
        self.chroma_server = chroma_server or None
        self.db_dir = (Path(db_dir) if db_dir is not None else self.default_db_dir(spec)) if self.chroma_server \
            else chroma_folder(db_dir, spec)
        if self.chroma_server:
            parse_chroma_server(self.chroma_server)
        self.vectorstore = self.docstore = None  # Chroma and the parents' InMemoryStore, after build
        self._parent_of: dict[str, str] = {}  # child id -> parent id, for rank
        self.windows: ExactWindows | None = None  # the child windows' vectors as the collection stores them

    @classmethod
    def of_stage(cls, stage: Any, embedding) -> "KnowledgeBase":
        """The strategy's knowledge base under a run's settings (`stage`: pipeline.StageSettings), chain and member."""
        return cls(strategy_spec(stage.strategy), stage.params, embedding, embedding.model_id, db_dir=stage.db_dir,
                   chroma_server=stage.chroma_server)

    @staticmethod
    def default_db_dir(spec: StrategySpec) -> Path:
        return PROJECT_ROOT / spec.folder / "db"

    @property
    def location(self) -> str:
        return self.chroma_server or str(self.db_dir)

    def _client(self):
        return _server_client(self.chroma_server) if self.chroma_server else _chroma_client(self.db_dir)

    @contextmanager
    def _store(self, action: str) -> Iterator[None]:
        """Turn a failing Chroma call into one StoreError naming the server or folder and the fix. Child windows
        added before the failure stay in the collection: the re-run embeds only the missing ones."""
        import httpx
        from chromadb.errors import ChromaError

        try:
            yield
        except StudyInputError:
            raise
        except (ChromaError, httpx.HTTPError, OSError, ValueError) as exc:
            if isinstance(exc, ValueError) and not isinstance(exc, ChromaError) and not self.chroma_server:
                raise  # a local ValueError is a bug, not a store failure
            if self.chroma_server:
                raise StoreError(f"Chroma server {self.chroma_server}: {action} failed ({type(exc).__name__}: "
                                 f"{str(exc).strip()[:200] or 'no details'}); is the server still running? Restart "
                                 "it and re-run: windows already added are kept and not embedded again") from None
            raise store_error("Chroma folder", self.db_dir, f"{action} failed", exc, REBUILD_DB) from None

    def build(self, chunked: Sequence[ChunkedDocument]):
        """Return (retriever, stats), embedding only the child windows not already stored (nor cached). Under a lock
        named by the collection: two processes indexing it at once (variants that differ only in retriever) take
        turns, and the second finds every vector in the embedding cache."""
        name = collection_name(self.spec, self.params, chunked, self.embedding_id)
        with build_lock(cache_dir() / "index-locks" / name):
            return self._build(chunked, name)

    def _build(self, chunked: Sequence[ChunkedDocument], name: str):
        from langchain_chroma import Chroma
        from langchain_core.stores import InMemoryStore
        from tqdm.auto import tqdm

        client = self._client()
        with self._store(f"opening collection {name}"):
            vectorstore = Chroma(client=client, collection_name=name, embedding_function=self.embedding,
                                 collection_metadata=HNSW_SETTINGS)
        docstore = InMemoryStore()
        splitter = child_splitter(self.params)
        parents = [chunk.to_document() for item in chunked for chunk in item.chunks]
        docstore.mset([(doc.id, doc) for doc in parents])
        children, child_ids = child_windows(parents, splitter)
        stored = self._stored_vectors(vectorstore, child_ids, f"reading collection {name}")
        missing = [i for i, cid in enumerate(child_ids) if cid not in stored]
        check = getattr(self.embedding, "check", None)  # vectorcheck.VectorCheck: a backend whose vectors changed
        if stored and check is not None:  # size under this model name is named before Chroma refuses them
            check.expect(len(stored[min(stored)]), f"the Chroma collection {name} in {self.location}")
        before = getattr(self.embedding, "texts_embedded", 0)
        replaced = self._replace_damaged(vectorstore, children, child_ids, stored, name)
        with tqdm(total=len(missing), desc=f"Embedding {self.spec.name}", unit="window", disable=not missing) as bar:
            for start in range(0, len(missing), ADD_BATCH):
                batch = missing[start:start + ADD_BATCH]
                with self._store(f"adding child windows to collection {name}"):
                    vectorstore.add_documents([children[i] for i in batch], ids=[child_ids[i] for i in batch])
                bar.update(len(batch))
        embedded = getattr(self.embedding, "texts_embedded", before + len(missing)) - before
        stats = IndexStats(collection=name, parents=len(parents), children=len(children), embedded=embedded,
                           reused=len(children) - embedded, added=len(missing), replaced=len(replaced))
        self._parent_of = {cid: child.metadata["doc_id"] for cid, child in zip(child_ids, children)}
        stored.update(self._stored_vectors(vectorstore, [child_ids[i] for i in missing + replaced],
                                           f"reading the vectors of collection {name}"))
        absent = [cid for cid in child_ids if cid not in stored]
        if absent:
            raise StoreError(f"{self._where}: collection {name} lacks {len(absent)} of its {len(child_ids)} child "
                             f"windows after indexing (first: {absent[0]}); delete that collection and re-run: "
                             f"{REBUILD_DB}")
        self.windows = ExactWindows.of(child_ids, [stored[cid] for cid in child_ids])
        self.vectorstore, self.docstore = vectorstore, docstore
        retriever = stable_retriever_class()(vectorstore=vectorstore, docstore=docstore, child_splitter=splitter,
                                            search_kwargs={"k": self.params.k}, windows=self.windows,
                                            parent_of=self._parent_of)
        logger.info("%s: %d parents, %d child windows (%d embedded now, %d reused, %d added, %d replaced) in %s/%s",
                    self.spec.name, stats.parents, stats.children, stats.embedded, stats.reused, stats.added,
                    stats.replaced, self.location, name)
        return retriever, stats

    @property
    def _where(self) -> str:
        return f"Chroma server {self.chroma_server}" if self.chroma_server else f"Chroma folder {self.db_dir}"

    def _replace_damaged(self, vectorstore, children: Sequence, child_ids: Sequence[str], stored: dict[str, Any],
                         name: str) -> list[int]:
        """Write again, from the vector cache, the stored windows whose vector is not the cache's for their text (a
        damaged collection, or another model's under this name); returns their indexes. Windows the cache lacks are
        not checked (said once), nor anything without a vector cache (`cached_documents`)."""
        from ragstudy.stores.vectorcheck import differing_vectors

        cached_of = getattr(self.embedding, "cached_documents", None)
        at = [i for i, cid in enumerate(child_ids) if cid in stored]
        if cached_of is None or not at:
            return []
        reference = {child_ids[i]: vector for i, vector in zip(at, cached_of([children[i].page_content for i in at]))
                     if vector is not None}
        if len(reference) < len(at):
            logger.info("%s: collection %s: %d of its %d stored child windows not checked (the vector cache holds "
                        "no vector of their text)", self._where, name, len(at) - len(reference), len(at))
        wrong = set(differing_vectors(stored, reference))
        damaged = [i for i in at if child_ids[i] in wrong]
        if not damaged:
            return []
        logger.warning("%s: collection %s held other vectors than the vector cache's for %d of its %d child windows "
                       "(a damaged store, or one built by another model under this model's name); they are written "
                       "again from the vector cache", self._where, name, len(damaged), len(at))
        for start in range(0, len(damaged), ADD_BATCH):
            batch = damaged[start:start + ADD_BATCH]
            with self._store(f"replacing damaged vectors in collection {name}"):
                vectorstore.update_documents(ids=[child_ids[i] for i in batch], documents=[children[i] for i in batch])
        return damaged

    def _stored_vectors(self, vectorstore, ids: Sequence[str], action: str) -> dict[str, Any]:
        """Child id -> vector, for those of `ids` the collection holds (read READ_BATCH ids at a time)."""
        vectors: dict[str, Any] = {}
        with self._store(action):
            for start in range(0, len(ids), READ_BATCH):
                got = vectorstore.get(ids=list(ids[start:start + READ_BATCH]), include=["embeddings"])
                vectors.update(zip(got["ids"], got["embeddings"]))
        return vectors

    def rank(self, query: str, depth: int) -> list[RankedParent]:
        """The `depth` best parents for `query` (fewer if the collection has fewer): the first of ranked_parents."""
        if depth <= 0:
            raise StudyInputError(f"ranking depth must be positive, got {depth}")
        return list(islice(self.ranked_parents(self.embedding.embed_query(query)), depth))

    def ranked_parents(self, vector: Sequence[float]) -> Iterator[RankedParent]:
        """Every parent, best first by its nearest child window (ties to TIE_DECIMALS by child id, as the retriever),
        lazily: reading deeper and deeper (dense's budget fill) searches the windows once per query."""
        if self.windows is None or self.docstore is None:
            raise RuntimeError("KnowledgeBase.rank needs build(chunked) first")
        seen: set[str] = set()
        for cid, distance in self.windows.nearest(vector):
            parent = self._parent_of[cid]
            if parent not in seen:  # _build stores every parent of a window: mget never answers None here
                seen.add(parent)
                yield RankedParent(document=self.docstore.mget([parent])[0], score=float(distance), rank=len(seen))
