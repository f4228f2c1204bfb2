"""Chunking speed of every registered strategy against raw PyMuPDF text extraction, measured in the same run.

For the same PDFs, prints pages/s of:
  * raw extraction: `pymupdf.open` + `page.get_text()` of every page (the floor every strategy builds on);
  * the shared text layer (`ragstudy.text.textlayer.read_pdf`), which the text-layer strategies chunk;
  * each strategy: reading the text layer + its chunker (model loading is timed apart, as "setup"); `markdown`
    includes PyMuPDF4LLM's conversion (its cache is a fresh temporary folder, so nothing is reused);
and each one's speed as a ratio to raw extraction (raw time / its time: 0.01 means 100x slower). `semantic` is
reported twice more, split into embedding the sentences and splitting (sentence detection, distances,
thresholds), and a second pass over the same PDFs shows what a cached run costs when the embedding model has a
vector cache.

    python benchmarks/chunkers.py                                   # all strategies, Documents/, lite models
    python benchmarks/chunkers.py --documents ../shared/pdfs --strategies token,sentence,semantic --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def best_of(repeat: int, work) -> tuple[float, object]:
    """Best wall time of `repeat` calls of `work()` and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        began = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - began)
    return best, result


def raw_extraction(paths: list[Path]) -> int:
    import pymupdf

    characters = 0
    for path in paths:
        with pymupdf.open(path) as doc:
            characters += sum(len(page.get_text()) for page in doc)
    return characters


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", default="Documents", help="folder of PDFs (default: Documents/)")
    parser.add_argument("--strategies", default="all", help="comma-separated registry names (default: all)")
    parser.add_argument("--profile", default="lite", choices=["lite", "paper"], help="models for token/semantic")
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs per strategy (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()

    # A fresh cache: Markdown conversions and embedding vectors are computed, not read back.
    os.environ["RAGSTUDY_CACHE"] = tempfile.mkdtemp(prefix="ragstudy-bench-")
    import torch

    from ragstudy import registry
    from ragstudy.config import StudyConfig
    from ragstudy.pipeline import StageSettings, chunker_context
    from ragstudy.text.textlayer import list_pdfs, read_pdf

    torch.set_num_threads(args.threads)
    paths = list_pdfs(Path(args.documents))
    config = StudyConfig.resolve(profile=args.profile, strategies=args.strategies, documents=args.documents,
                                 chunks_only=True)
    raw_s, _ = best_of(args.repeat, lambda: raw_extraction(paths))
    read_s, documents = best_of(args.repeat, lambda: [read_pdf(path) for path in paths])
    pages = sum(doc.page_count for doc in documents)
    context = chunker_context(StageSettings.of(config, config.strategies[0]))  # the embedding model's: one for all

    rows = [("raw PyMuPDF get_text", 0.0, raw_s, None, None), ("text layer (read_pdf)", 0.0, read_s, None, None)]
    semantic_rows = []
    for name in config.strategies:
        spec = registry.get(name)
        began = time.perf_counter()
        chunker = spec.make_chunker(config.strategy_params[name], context)
        setup_s = time.perf_counter() - began
        passes = 2 if name == "semantic" else args.repeat
        timings = []
        for number in range(passes):
            seconds_before = dict(getattr(chunker, "seconds", {}))
            began = time.perf_counter()
            chunked = [chunker.chunk(doc, name) for doc in documents]
            timings.append(time.perf_counter() - began)
            if name == "semantic":
                after = chunker.seconds
                semantic_rows.append((f"semantic pass {number + 1}", *(after[key] - seconds_before.get(key, 0.0)
                                                                         for key in ("embedding", "splitting")),
                                      timings[-1]))
        sizes = [len(chunk.contents) for item in chunked for chunk in item.chunks]
        chunk_s = timings[0] if name == "semantic" else min(timings)  # semantic: the cold pass
        rows.append((name, setup_s, read_s + chunk_s, len(sizes), statistics.median(sizes) if sizes else 0))

    print(f"{len(documents)} PDFs, {pages} pages from {args.documents}; profile {args.profile}, "
          f"{args.threads} torch thread(s), best of {args.repeat}\n")
    print("| strategy | setup s | seconds | pages/s | speed vs raw | chunks | median chars |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, setup_s, seconds, chunks, median in rows:
        ratio = raw_s / seconds if seconds else float("nan")
        print(f"| {name} | {setup_s:.1f} | {seconds:.2f} | {pages / seconds:.1f} | {ratio:.3f} | "
              f"{'' if chunks is None else chunks} | {'' if median is None else f'{median:.0f}'} |")
    if semantic_rows:
        print("\nsemantic, split by stage (seconds; pass 2 reuses the embedding model's vector cache if it has one)\n")
        print("| pass | embedding s | splitting s | total chunk s | embedding share |")
        print("|---|---:|---:|---:|---:|")
        for label, embed_s, split_s, total in semantic_rows:
            print(f"| {label} | {embed_s:.2f} | {split_s:.2f} | {total:.2f} | {embed_s / total if total else 0:.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
