"""CustomEmbedding: the one embedding model every strategy uses, as a LangChain `Embeddings`.

The ground floor of the project: it imports no project module (callers pass the encoder and the cache folder in).
It runs the `Encoder` it is given (the backends live in ragstudy/embedders/: the paper's SentenceTransformer one in
torch_embedder.py), checks and caches vectors, and adds the prompts the model expects: e5-instruct's query prompt
("Instruct: ...\\nQuery: ...", passages without instruction, as that model card prescribes), plain e5's "query: " /
"passage: " prefixes. `embedding_id` is the one rule for the id that keys vectors (label@variant).

With `cache_dir`, every vector is also kept in a persistent `VectorCache`, so a text is run through the model once
across collections, strategies, sweep configurations and the semantic chunker's sentences.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from langchain_core.embeddings import Embeddings

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

E5_INSTRUCT_TASK = "Given a web search query, retrieve relevant passages that answer the query"
CACHE_FILE = "vectors.sqlite3"
CACHE_COMMIT_EVERY = 256  # texts encoded between commits: an interrupted run keeps what it embedded
_SQL_VARIABLES = 500  # keys per SELECT ... IN (...) (sqlite's limit is 999 in old builds)
FLOAT32 = "float32"  # the variant of the model's own torch float32 vectors: their id carries no suffix


def embedding_id(label: str, variant: str) -> str:
    """The id that keys a model's vectors (the vector cache, chunk and ranking caches, Chroma collection names): its
    label, with `@variant` when the vectors are not the model's torch float32 ones."""
    return label if variant == FLOAT32 else f"{label}@{variant}"


def is_e5_instruct(model: str) -> bool:
    """True for intfloat/multilingual-e5-*-instruct (by id or by a local folder's name)."""
    name = Path(model).name.lower() if Path(model).exists() else model.lower()
    return "e5" in name and "instruct" in name


def is_e5_plain(model: str) -> bool:
    """True for e5 models without instruction (multilingual-e5-small, e5-base-v2, ...): "query: "/"passage: "."""
    name = (Path(model).name if Path(model).exists() else model).lower()
    return "e5-" in name and "instruct" not in name


def resolve_device(device: str = "auto") -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def text_key(text: str) -> str:
    """Cache key of one text: sha256 of exactly the string given to the model (query instruction included)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _first_open_lock:
    """`with _first_open_lock(path):` holds an exclusive flock on `.<name>.lock` beside the SQLite file `path` while a
    cold cache is switched to WAL mode. That switch reads the file's header, then asks to write it; SQLite answers a
    connection that holds a read lock and asks to write while another connection already holds the write lock with
    SQLITE_BUSY at once, without waiting for its busy timeout (waiting could deadlock: see sqlite3_busy_handler), so
    two processes opening a cold cache at once lost one of them ("database is locked"). The lock makes them switch
    one at a time; later opens find WAL set in the file and take no lock. (The same lock as ragstudy.io.build_lock,
    which this module cannot import: it imports no project module.)"""

    def __init__(self, path: Path) -> None:
        self.key = path.with_name(f".{path.name}.lock")
        self.fd = -1

    def __enter__(self) -> None:
        import fcntl

        self.fd = os.open(self.key, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing the descriptor drops the flock


class VectorCache:
    """Normalised float32 vectors in one SQLite file, keyed by (model label, dtype, sha256 of the embedded text).

    Chosen over LangChain's `CacheBackedEmbeddings` + `LocalFileStore`: that stores one JSON file per vector
    (~50k small files for the paper's corpus, 8 KB of text for a 384-d vector, no de-duplication within a batch),
    while here one file holds exact float32 blobs (4 bytes a dimension), looks keys up in bulk, and SQLite's
    transactions make it safe for concurrent processes and for a run killed mid-write (a batch is all or nothing).
    The key is the exact text given to the model, so a passage and a query prompt never collide unless the model
    sees the same string; the vectors' format (normalised, float32) is fixed by CustomEmbedding.
    """

    def __init__(self, folder: str | Path, on_damaged: Callable[[Path, Exception], None] | None = None) -> None:
        """`on_damaged(path, error)` sets aside a file SQLite cannot read
        (ragstudy.stores.cachefile.vector_cache_damaged), and the cache starts empty (its vectors are embedded again);
        without it, such a file raises."""
        self.path = Path(folder) / CACHE_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._on_damaged = on_damaged
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            self._repair(exc)

    def _open(self) -> None:
        """Connect (the busy timeout is set as the connection opens, before any statement); a file not yet in WAL
        mode (a cold cache: the first opens) is switched and given its table under `_first_open_lock`."""
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        with self._lock:
            if self._in_wal_mode():
                self._make_table(switch=False)
                return
            with _first_open_lock(self.path):
                self._make_table(switch=not self._in_wal_mode())  # the process before may have switched it

    def _in_wal_mode(self) -> bool:
        """Whether the file is in WAL mode (a query: it reads the file's header, nothing is written)."""
        return self._db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"

    def _make_table(self, switch: bool) -> None:
        with self._db:
            if switch:  # WAL is kept in the file: every later connection finds it set
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, dtype TEXT NOT NULL, "
                             "key TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, dtype, key)) "
                             "WITHOUT ROWID")
            self._db.execute("SELECT key, vector FROM vectors LIMIT 1").fetchall()

    def _repair(self, exc: sqlite3.DatabaseError) -> None:
        """A damaged file (SQLite's "malformed", "not a database"; not a locked or full one) is handed to
        `on_damaged` and the cache reopened empty; anything else is raised."""
        if type(exc) is not sqlite3.DatabaseError or self._on_damaged is None:
            raise exc
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
        self._on_damaged(self.path, exc)
        self._open()

    def get_many(self, model: str, dtype: str, keys: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors among `keys` (absent keys are simply missing from the result)."""
        return {key: vector.tolist() for key, vector in self.get_arrays(model, dtype, keys).items()}

    def get_arrays(self, model: str, dtype: str, keys: Sequence[str]) -> dict[str, array]:
        """get_many's vectors as float32 arrays, for reading many at once (no Python float per component: 8,000
        vectors of 384 become one numpy matrix in 0.04 s, as lists in 0.5 s)."""
        try:
            return self._get_many(model, dtype, keys)
        except sqlite3.DatabaseError as exc:  # damaged since it was opened: set aside, start empty
            self._repair(exc)
            return {}

    def _get_many(self, model: str, dtype: str, keys: Sequence[str]) -> dict[str, array]:
        found: dict[str, array] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), _SQL_VARIABLES):
                part = unique[start:start + _SQL_VARIABLES]
                rows = self._db.execute(
                    f"SELECT key, vector FROM vectors WHERE model = ? AND dtype = ? AND key IN "
                    f"({','.join('?' * len(part))})", (model, dtype, *part))
                for key, blob in rows:
                    found[key] = array("f", blob)
        return found

    def put_many(self, model: str, dtype: str, items: Sequence[tuple[str, Sequence[float]]],
                 replace: bool = False) -> None:
        """Store vectors (as float32) in one transaction; keys already present are left as they are (`replace`:
        overwritten, for vectors found unusable)."""
        rows = [(model, dtype, key, array("f", vector).tobytes()) for key, vector in items]
        verb = "REPLACE" if replace else "IGNORE"
        with self._lock, self._db:
            self._db.executemany(f"INSERT OR {verb} INTO vectors (model, dtype, key, vector) VALUES (?, ?, ?, ?)",
                                 rows)

    def dimension(self, model: str, dtype: str) -> int | None:
        """Components of the vectors stored for (model, dtype), None when there are none."""
        with self._lock:
            row = self._db.execute("SELECT length(vector) FROM vectors WHERE model = ? AND dtype = ? LIMIT 1",
                                   (model, dtype)).fetchone()
        return row[0] // 4 if row else None

    def count(self, model: str | None = None) -> int:
        query, args = ("SELECT COUNT(*) FROM vectors", ()) if model is None else (
            "SELECT COUNT(*) FROM vectors WHERE model = ?", (model,))
        with self._lock:
            return self._db.execute(query, args).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class Encoder(Protocol):
    """An embedding backend: exactly the strings given (prompts included) in, one L2-normalised float32 row each.

    `variant` names what makes its vectors differ from the model's torch float32 ones (FLOAT32 for those):
    it is the cache's dtype column and the suffix of the model id that names Chroma collections (embedding_id)."""

    variant: str

    def encode(self, texts: list[str]) -> "np.ndarray": ...


class VectorCheck(Protocol):
    """What checks each batch before it is kept (ragstudy.stores.vectorcheck.VectorCheck): `batch` returns the float32
    matrix or raises; `expect` fixes the dimension; `screen` names the unusable keys among cached vectors."""

    def batch(self, vectors: "np.ndarray", count: int) -> "np.ndarray": ...

    def expect(self, dimension: int, holder: str) -> None: ...

    def screen(self, found: dict[str, list[float]]) -> list[str]: ...


class CustomEmbedding(Embeddings):
    """Normalised embeddings with the model's prompts and an optional cache, over the `Encoder` given (which
    batches).

    `cache_dir=None` (the default) embeds every text it is given, exactly as before; the study passes
    `<project cache>/vectors` (see ragstudy.embedders.Embedder.load). `texts_embedded` counts texts run through the
    model (cache misses), `cache_hits` the texts answered from the cache. The encoder's variant tells its vectors
    apart from the model's torch float32 ones; `model_id` (collections, cache keys) is `embedding_id(label, variant)`,
    the label being the `model_id` argument (default: the model's name or path).
    """

    def __init__(self, model_name_or_path: str, encoder: Encoder, query_instruction: str | None = None,
                 model_id: str | None = None, cache_dir: str | Path | None = None,
                 query_prefix: str | None = None, passage_prefix: str | None = None,
                 check: VectorCheck | None = None,
                 on_damaged_cache: Callable[[Path, Exception], None] | None = None) -> None:
        self.model_name_or_path = str(model_name_or_path)
        self.model_label = model_id or self.model_name_or_path
        self.encoder = encoder
        # what cache keys record: another dtype or backend gives (slightly) other vectors, hence another collection
        self.dtype = encoder.variant
        self.model_id = embedding_id(self.model_label, self.dtype)
        self.device = getattr(encoder, "device", "cpu")
        if query_instruction is None and is_e5_instruct(self.model_name_or_path):
            query_instruction = E5_INSTRUCT_TASK
        self.query_instruction = query_instruction
        plain_e5 = is_e5_plain(self.model_name_or_path)
        self.query_prefix = query_prefix if query_prefix is not None else ("query: " if plain_e5 else "")
        self.passage_prefix = passage_prefix if passage_prefix is not None else ("passage: " if plain_e5 else "")
        self.cache = VectorCache(cache_dir, on_damaged_cache) if cache_dir is not None else None
        self.check = check  # every batch is checked before it is cached or returned (None: not checked)
        if check is not None and self.cache is not None:
            stored = self.cache.dimension(self.model_label, self.dtype)
            if stored:
                check.expect(stored, f"the vector cache {self.cache.path}")
        self.texts_embedded = 0  # texts (passages and queries) run through the model
        self.cache_hits = 0  # texts whose vector came from the cache
        logger.info("embedding model %s on %s (query instruction: %s, prefixes: %r/%r, vector cache: %s)",
                    self.model_id, self.device, bool(self.query_instruction), self.query_prefix,
                    self.passage_prefix, self.cache.path if self.cache else "off")

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self.encoder.encode(texts)
        if self.check is not None:
            vectors = self.check.batch(vectors, len(texts))
        self.texts_embedded += len(texts)
        return vectors.astype("float32").tolist()

    def _embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of exactly these strings: from the cache, else from the model (each distinct string once)."""
        if self.cache is None:
            return self._encode(texts)
        keys = [text_key(text) for text in texts]
        found = self.cache.get_many(self.model_label, self.dtype, keys)
        unusable = set(self.check.screen(found)) if self.check is not None else set()
        for key in unusable:
            del found[key]
        missing = list(dict.fromkeys(key for key in keys if key not in found))
        self.cache_hits += len(texts) - len(missing)
        if missing:
            text_of = dict(zip(keys, texts))
            for start in range(0, len(missing), CACHE_COMMIT_EVERY):
                part = missing[start:start + CACHE_COMMIT_EVERY]
                vectors = self._encode([text_of[key] for key in part])
                items = list(zip(part, vectors))
                self.cache.put_many(self.model_label, self.dtype, [i for i in items if i[0] not in unusable])
                if unusable:
                    self.cache.put_many(self.model_label, self.dtype, [i for i in items if i[0] in unusable], True)
                found.update(zip(part, vectors))  # float32 values: exactly what a later run reads back
        return [found[key] for key in keys]

    def cached_documents(self, texts: Sequence[str]) -> list[array | None]:
        """What embed_documents gives each passage (float32 arrays), read from the vector cache alone (None where it
        holds no usable vector, or without a cache); the model is not run. The reference a stored copy of the
        vectors (a Chroma collection) is checked against."""
        if self.cache is None:
            return [None] * len(texts)
        keys = [text_key(self.passage_prefix + text) for text in texts]
        found = self.cache.get_arrays(self.model_label, self.dtype, keys)
        for key in self.check.screen(found) if self.check is not None else ():
            del found[key]
        return [found.get(key) for key in keys]

    def format_query(self, text: str) -> str:
        return f"Instruct: {self.query_instruction}\nQuery: {text}" if self.query_instruction \
            else self.query_prefix + text

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (cached texts are not re-embedded; the encoder batches the others)."""
        return self._embed([self.passage_prefix + text for text in texts])

    def embed_query(self, text: str) -> list[float]:
        # One query per model call, always: batch composition changes vectors in the 7th decimal, and the chain's
        # retriever, retrieval-only rankings and the cache must all see the same query vector.
        return self._embed([self.format_query(text)])[0]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """`embed_query` for many queries (each encoded on its own, see there; cached ones are read back)."""
        return [self.embed_query(text) for text in texts]
