"""The markdown strategy's PyMuPDF4LLM conversion, four ways over the same PDFs in one run (issue 22).

  in process      `pymupdf4llm.to_markdown` one PDF after another in this process, with ONNX Runtime's default
                  threading for PyMuPDF's layout model (a thread per core, spin-waiting between calls): what a user
                  calling PyMuPDF4LLM gets, and the baseline of the ratios;
  N workers, default threads
                  one spawned worker process per core, default threading (the markdown strategy before this
                  benchmark: N workers x N spinning threads on N cores);
  1 worker, 1 thread / N workers, 1 thread
                  `RAGMarkdown.strategy.convert_all`, whose workers make one-thread, non-spinning sessions (now).

Each variant converts into its own empty cache. Prints wall seconds, CPU seconds (this process and its reaped
worker processes), pages per wall second and per CPU second, the ratio of CPU seconds and of wall time to the
baseline, and whether every page's Markdown is identical to the baseline's (it must be: threads change speed,
not output). CPU seconds are the steady measure on a shared machine; the wall ratio of the parallel variants
needs a quiet one.

    nice python -m benchmarks.markdown_conversion                                  # the Italian PDFs of ../shared
    python -m benchmarks.markdown_conversion --documents Documents --pattern '*.pdf'
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from ragstudy.ranking import stage_clock as clock, stage_since as since

SHARED = Path(__file__).resolve().parents[2] / "shared"


def in_process(paths: list[str]) -> dict[str, list[str]]:
    from RAGMarkdown.strategy import convert_pdf

    return {path: convert_pdf(path) for path in paths}


def workers_default_threads(paths: list[str], workers: int) -> dict[str, list[str]]:
    """Spawned workers with ONNX Runtime's default threading (no initializer)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from RAGMarkdown.strategy import convert_pdf

    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return dict(zip(paths, pool.map(convert_pdf, paths)))


def strategy_workers(documents, workers: int) -> dict[str, list[str]]:
    """The strategy's own `convert_all` (one-thread sessions), read back from its cache."""
    from RAGMarkdown.strategy import convert_all, pdf_markdown_pages

    convert_all(documents, workers)
    return {doc.path: pdf_markdown_pages(doc) for doc in documents}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", nargs="+", default=[str(SHARED / "pdfs"), str(SHARED / "pdfs" / "more-it")],
                        help="folders whose --pattern PDFs are converted")
    parser.add_argument("--pattern", default="it_*.pdf", help="which PDFs of those folders (default: it_*.pdf)")
    parser.add_argument("--json", help="also write the measurements to this JSON file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from ragstudy.io import cpu_cores
    from ragstudy.text.textlayer import read_pdf

    paths = sorted(str(pdf) for folder in args.documents for pdf in Path(folder).glob(args.pattern))
    if not paths:
        print(f"error: no {args.pattern} in {', '.join(args.documents)} (the default needs ../shared/pdfs)",
              file=sys.stderr)
        return 2
    documents = [read_pdf(Path(path)) for path in paths]
    pages = sum(doc.page_count for doc in documents)
    cores = cpu_cores()
    print(f"{len(paths)} PDFs, {pages} pages, {cores} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    variants = [
        ("in process, default threads", lambda: in_process(paths)),
        (f"{cores} workers, default threads", lambda: workers_default_threads(paths, cores)),
        ("1 worker, 1 thread", lambda: strategy_workers(documents, 1)),
        (f"{cores} workers, 1 thread each", lambda: strategy_workers(documents, 0)),
    ]
    rows, baseline = [], None
    with tempfile.TemporaryDirectory(prefix="markdown-conversion-") as temp:
        for number, (name, work) in enumerate(variants):
            os.environ["RAGSTUDY_CACHE"] = str(Path(temp) / f"cache-{number}")
            start = clock()
            markdown = work()
            wall, cpu = since(start)
            baseline = baseline or (wall, cpu, markdown)
            same = markdown == baseline[2]
            rows.append({"variant": name, "wall_s": wall, "cpu_s": cpu, "identical": same})
            print(f"{name:<32} {wall:7.1f} s wall {cpu:7.1f} CPU s  {pages / wall:5.2f} pages/s "
                  f"{pages / cpu:5.2f} pages/CPU s  CPU x{baseline[1] / cpu:4.2f} wall x{baseline[0] / wall:4.2f} "
                  f"vs in process  {'identical Markdown' if same else 'MARKDOWN DIFFERS'}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"pdfs": paths, "pages": pages, "cores": cores, "rows": rows},
                                              indent=1), encoding="utf-8")
    return 0 if all(row["identical"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
