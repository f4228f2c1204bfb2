"""One knowledge base for every strategy: parent chunks -> LangChain ParentDocumentRetriever.

Parents live in an InMemoryStore (refilled from the deterministic chunks on every run: cheap); child windows live
in a persistent Chroma collection, under `<strategy folder>/db` or on a Chroma server (`chroma_server`), named by a
hash of everything that determines its contents (the parent chunks, the child splitter, the embedding model; not
`k` nor context budgets, which only change what is read back). Child ids are deterministic, so a re-run embeds
only the windows that are missing: nothing when nothing changed, the rest after an interrupted run. Vectors are
also shared across collections through the embedding's own cache (customembedding.VectorCache).

Besides the retriever (k child windows -> their parents, as in the paper), `KnowledgeBase.rank` orders parents by
their best child window for retrieval-only runs.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

from .chunks import ChunkedDocument, window_text
from .errors import StoreError, StudyInputError, excerpt, store_error
from .io import (PROJECT_ROOT, build_lock, cache_dir, lock_folder, release_folder, set_aside, sha256_text, stable_json,
                 worker_folder)
from .registry import StrategyParams, StrategySpec, get as strategy_spec

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
    embedded: int  # child windows run through the embedding model in this run (cache misses)
    reused: int  # the other child windows: already in the collection, or their vector was in the embedding cache
    added: int = 0  # child windows written to the collection in this run (embedded or read from the cache)


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
    """Chroma collection named by a hash of what determines its vectors and ids (not `k`: see the module doc).

    Parent doc_ids are content hashes (strategy, PDF sha256, offsets, text), so they stand for the strategy's
    parameters and the PDF bytes; path and pages are the child windows' metadata; a heading path (section
    context) is part of the windows' text.
    """
    key = sha256_text(stable_json({
        "embedding": embedding_id, "hnsw": HNSW_SETTINGS,
        "children": {"splitter": CHILD_SPLITTER, "chunk_size": params.child_chunk_size,
                     "chunk_overlap": params.child_chunk_overlap},
        "parents": sorted(window_text(f"{chunk.doc_id}:{chunk.path}:{chunk.page_start}:{chunk.page_end}",
                                      chunk.metadata) for item in chunked for chunk in item.chunks),
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

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    _OPEN_CLIENTS.append(client)
    return client


@contextmanager
def chroma_clients_closed() -> Iterator[None]:
    """Close, when the block ends (normally, on an error or on Ctrl-C), the local Chroma clients opened inside it.
    chromadb keeps each folder's System (its SQLite connections, HNSW readers, about six threads and eleven open
    files) until its last client is closed, so a process that runs many variants (an in-process grid) or runs
    again after Ctrl-C kept every earlier run's Systems open, and one interrupted run's System then served its
    re-run. The folder locks stay (io.lock_folder keeps them for the life of the process)."""
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
    """A client on the locked Chroma folder `path`. A folder Chroma cannot open as a database (a corrupt or foreign
    chroma.sqlite3) is set aside as `<folder>.corrupt-<timestamp>` and rebuilt, with a warning; any other failure
    (disk full, read-only) is a StoreError naming the folder."""
    from chromadb.api.shared_system_client import SharedSystemClient
    from chromadb.errors import ChromaError

    prepare_db_dir(path)
    try:
        return _open_chroma_folder(path)
    except ChromaError as exc:
        SharedSystemClient.clear_system_cache()  # chromadb keeps the failed system per path
        if "not a database" not in str(exc) and "malformed" not in str(exc):
            raise store_error("Chroma folder", path, "cannot open it", exc, REBUILD_DB) from None
        release_folder(path, DB_LOCK)
        aside = set_aside(path)
        logger.warning("Chroma folder %s could not be read (%s): set aside as %s and rebuilt", path, exc, aside)
        prepare_db_dir(path)
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
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
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
    """The strategy's Chroma folder under a run's --db-dir (None: its own folder's db/). `config`: a
    config.StudyConfig (its `db_dir`)."""
    return Path(config.db_dir) / spec.folder if config.db_dir else None


def chroma_folder(db_dir: Path | None, spec: StrategySpec) -> Path:
    """The strategy's local Chroma folder: `db_dir` (a run's --db-dir/<strategy folder>, see db_dir_of), else
    `<strategy folder>/db`. In a worker process of ragstudy.executors, that folder's own `-worker-<k>` slot
    (io.worker_folder): a Chroma folder admits one process, and parallel variants may index the same strategy."""
    return worker_folder(Path(db_dir) if db_dir is not None else KnowledgeBase.default_db_dir(spec), DB_LOCK)


class KnowledgeBase:
    """Index a strategy's parent chunks; expose them as a ParentDocumentRetriever and as parent rankings.

    Child windows go to a local Chroma folder (`db_dir`, default `<strategy folder>/db`, locked against a second
    process) or, with `chroma_server="http://host:port"`, to that server, under the same collection names and ids.
    """

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
        self.vectorstore = None
        self.docstore = None
        self._parent_of: dict[str, str] = {}  # child id -> parent id, for rank
        self._twins: dict[str, list[str]] = {}  # text -> ids of the child windows with exactly that text (>1)

    @classmethod
    def of_run(cls, config: Any, strategy: str, embedding) -> "KnowledgeBase":
        """The strategy's knowledge base under a run's settings (`config`: a config.StudyConfig; its parameters,
        --db-dir or --chroma-server), for the chain and for a retriever member alike: a member makes its own from
        RetrievalInputs instead of reaching up into the run stages."""
        spec = strategy_spec(strategy)
        return cls(spec, config.strategy_params[strategy], embedding, embedding.model_id,
                   db_dir=db_dir_of(config, spec), chroma_server=config.chroma_server)

    @staticmethod
    def default_db_dir(spec: StrategySpec) -> Path:
        """`<strategy folder>/db` in the repository."""
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

    def child_splitter(self):
        return child_splitter(self.params)

    def build(self, chunked: Sequence[ChunkedDocument]):
        """Return (retriever, stats), embedding only the child windows not already stored (nor cached).

        Under a lock named by the collection (io.build_lock in the project cache): two processes indexing the same
        collection at once (parallel variants that differ only in retriever) take turns, and the second finds every
        vector in the embedding cache, so no window is embedded twice."""
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
        splitter = self.child_splitter()
        retriever = stable_retriever_class()(vectorstore=vectorstore, docstore=docstore, child_splitter=splitter,
                                            search_kwargs={"k": self.params.k})
        parents = [chunk.to_document() for item in chunked for chunk in item.chunks]
        docstore.mset([(doc.id, doc) for doc in parents])
        children, child_ids = child_windows(parents, splitter)
        existing: set[str] = set()
        with self._store(f"reading collection {name}"):
            for start in range(0, len(child_ids), 5000):
                existing.update(vectorstore.get(ids=child_ids[start:start + 5000], include=[])["ids"])
        missing = [i for i, cid in enumerate(child_ids) if cid not in existing]
        if existing:  # its vectors' size: a backend whose size changed is named before Chroma refuses it
            from .vectorcheck import expect_collection

            with self._store(f"reading collection {name}"):
                expect_collection(self.embedding, vectorstore, sorted(existing), f"the Chroma collection {name} in "
                                  f"{self.location}")
        counted = hasattr(self.embedding, "texts_embedded")
        before = self.embedding.texts_embedded if counted else 0
        bar = tqdm(total=len(missing), desc=f"Embedding {self.spec.name}", unit="window", disable=not missing)
        try:
            for start in range(0, len(missing), ADD_BATCH):
                batch = missing[start:start + ADD_BATCH]
                with self._store(f"adding child windows to collection {name}"):
                    vectorstore.add_documents([children[i] for i in batch], ids=[child_ids[i] for i in batch])
                bar.update(len(batch))
        finally:
            bar.close()
        embedded = self.embedding.texts_embedded - before if counted else len(missing)
        stats = IndexStats(collection=name, parents=len(parents), children=len(children), embedded=embedded,
                           reused=len(children) - embedded, added=len(missing))
        self.vectorstore, self.docstore = vectorstore, docstore
        self._parent_of = {cid: child.metadata["doc_id"] for cid, child in zip(child_ids, children)}
        groups: dict[str, list[str]] = {}
        for cid, child in zip(child_ids, children):
            groups.setdefault(child.page_content, []).append(cid)
        self._twins = {text: cids for text, cids in groups.items() if len(cids) > 1}
        logger.info("%s: %d parents, %d child windows (%d embedded now, %d reused, %d added) in %s/%s",
                    self.spec.name, stats.parents, stats.children, stats.embedded, stats.reused, stats.added,
                    self.location, name)
        return retriever, stats

    def rank(self, query: str, depth: int) -> list[RankedParent]:
        """The `depth` best parents for `query` (fewer if the collection has fewer), ordered by their best child
        window; ties (equal to TIE_DECIMALS) broken by child id, as the retriever does. Windows with the same text
        as a fetched one are ranked with it even where the HNSW search skipped them, so the order does not depend on
        how the index happened to be built."""
        return self.rank_vector(self.embedding.embed_query(query), depth)

    def rank_many(self, queries: Sequence[str], depth: int) -> list[list[RankedParent]]:
        """`rank` for each query. Queries are embedded one at a time on purpose (see CustomEmbedding.embed_query):
        batching them would save < 1 s for the study's 49 questions but shift vectors in the 7th decimal."""
        embed = getattr(self.embedding, "embed_queries", None)
        vectors = embed(list(queries)) if embed else [self.embedding.embed_query(q) for q in queries]
        return [self.rank_vector(vector, depth) for vector in vectors]

    def rank_vector(self, vector: Sequence[float], depth: int) -> list[RankedParent]:
        """Rank parents for an already embedded query: fetch child windows, doubling their number until `depth`
        distinct parents are settled (no unfetched window can beat or tie them) or the collection is exhausted."""
        if self.vectorstore is None:
            raise RuntimeError("KnowledgeBase.rank needs build(chunked) first")
        if depth <= 0:
            raise StudyInputError(f"ranking depth must be positive, got {depth}")
        with self._store("counting child windows"):
            total = self.vectorstore._collection.count()
        if total == 0:
            return []
        fetch = min(total, max(2 * depth, self.params.k) + TIE_EXTRA)
        while True:
            with self._store("searching child windows"):
                found = self.vectorstore.similarity_search_by_vector_with_relevance_scores(list(vector), k=fetch)
            exhausted = fetch >= total or len(found) < fetch
            # Windows with the same text have the same vector (one cache entry) and so the same distance, but
            # HNSW links exact duplicates poorly and may return any subset of them: add the missing twins.
            fetched = {doc.id: distance for doc, distance in found}
            windows = dict(fetched)
            for doc, distance in found:
                for cid in self._twins.get(doc.page_content, ()):
                    if cid not in fetched:
                        windows[cid] = min(distance, windows.get(cid, distance))
            scored = sorted(windows.items(), key=lambda item: (round(item[1], TIE_DECIMALS), item[0]))
            # windows tied with the farthest one fetched may have unfetched twins that sort first by id
            frontier = None if exhausted or not found else round(max(d for _, d in found), TIE_DECIMALS)
            best: dict[str, float] = {}
            for cid, distance in scored:
                if frontier is not None and round(distance, TIE_DECIMALS) >= frontier:
                    break
                parent = self._parent_of.get(cid)
                if parent is not None and parent not in best:
                    best[parent] = distance
            if exhausted or len(best) >= depth:
                break
            fetch = min(total, 2 * fetch)
        ids = list(best)[:depth]
        ranked = [(doc, best[pid]) for pid, doc in zip(ids, self.docstore.mget(ids)) if doc is not None]
        return [RankedParent(document=doc, score=float(score), rank=number)
                for number, (doc, score) in enumerate(ranked, start=1)]
