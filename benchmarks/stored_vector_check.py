"""What checking a Chroma collection's stored vectors against the vector cache costs (knowledge_base.KnowledgeBase.
_replace_damaged: CustomEmbedding.cached_documents + vectorcheck.differing_vectors), beside the baseline every warm
build already pays: reading the same vectors from Chroma (_stored_vectors). Synthetic vectors (a hash of the text),
so no model is loaded.

    python -m benchmarks.stored_vector_check --windows 8000 --dims 384
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.clock import cpu_seconds


class HashEncoder:
    """A text's vector from a generator seeded by its sha256 (normalised, float32)."""

    variant = "float32"

    def __init__(self, dims: int) -> None:
        self.dims = dims

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = np.stack([np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
                         .standard_normal(self.dims).astype(np.float32) for t in texts])
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def timed(work) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = work()
    return time.perf_counter() - wall, cpu_seconds() - cpu, result


def main() -> None:
    import chromadb
    from chromadb.config import Settings

    from customembedding import CustomEmbedding
    from ragstudy.stores.knowledge_base import READ_BATCH
    from ragstudy.stores.vectorcheck import VectorCheck, differing_vectors

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=8000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        def embedding() -> CustomEmbedding:
            return CustomEmbedding("bench", HashEncoder(args.dims), cache_dir=Path(folder) / "vectors",
                                   check=VectorCheck("bench", Path(folder) / "vectors"))

        texts = [f"finestra {i} " + "testo " * 30 for i in range(args.windows)]
        ids = [f"w{i:06d}" for i in range(args.windows)]
        vectors = embedding().embed_documents(texts)
        client = chromadb.PersistentClient(path=str(Path(folder) / "db"), settings=Settings(anonymized_telemetry=False))
        collection = client.create_collection("stored-vector-check")
        for start in range(0, args.windows, 4000):
            collection.add(ids=ids[start:start + 4000], embeddings=vectors[start:start + 4000])

        def read_chroma() -> dict:
            stored: dict = {}
            for start in range(0, len(ids), READ_BATCH):
                got = collection.get(ids=ids[start:start + READ_BATCH], include=["embeddings"])
                stored.update(zip(got["ids"], got["embeddings"]))
            return stored

        print("| run | Chroma read s (CPU s) | check s (CPU s) | check / read | differing |\n|---|---|---|---|---|")
        for run in range(args.repeats):
            read_wall, read_cpu, stored = timed(read_chroma)
            reader = embedding()
            check_wall, check_cpu, wrong = timed(lambda: differing_vectors(stored, dict(zip(
                ids, reader.cached_documents(texts)))))
            print(f"| {run} | {read_wall:.3f} ({read_cpu:.3f}) | {check_wall:.3f} ({check_cpu:.3f}) | "
                  f"{check_wall / read_wall:.2f}x | {len(wrong)} |")


if __name__ == "__main__":
    main()
