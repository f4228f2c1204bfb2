"""A cold retrieval-only run against embedding its distinct child windows once, in one run (issue 22).

(a) A `--retrieval-only` run of every registered strategy on the Italian PDFs of ../shared/pdfs and
    ../shared/pdfs/more-it with the ../shared/qa questions, from an empty project cache and empty Chroma folders,
    timed per stage: reading the PDFs, loading the embedding model (the ONNX export, on an empty cache), and per
    strategy chunking (PyMuPDF4LLM's conversion for markdown, started in the background as the run begins, as in
    `run_retrieval`, so its wall time is what the markdown strategy still waits for; sentence embeddings for
    semantic), indexing (embedding the child windows into Chroma) and ranking the parents of every question.
(b) Then the run's distinct child windows (over all strategies) embedded once with the same backend, threads and
    batch size into an empty vector cache (the exported model is reused; its load is timed apart).

Prints the per-stage table (wall and CPU seconds: this process and its finished child processes), both totals
and their ratio (issue 22 asks for at most 1.5). The machine may be shared: CPU seconds are the steadier number.

    nice python -m benchmarks.cold_retrieval                       # onnx-int8, all strategies
    nice python -m benchmarks.cold_retrieval --backend onnx --strategies paragraph,markdown --json profile.json
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


def link_documents(folders: list[Path], pattern: str, target: Path) -> int:
    """Symlink the `pattern` PDFs of `folders` into `target` (the documents folder is not searched recursively)."""
    target.mkdir(parents=True)
    count = 0
    for folder in folders:
        for pdf in sorted(folder.glob(pattern)):
            (target / pdf.name).symlink_to(pdf.resolve())
            count += 1
    return count


def distinct_windows(config, documents) -> list[str]:
    """Distinct child windows of every strategy's parents (read back from the run's chunk cache)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ragstudy.pipeline import StageSettings, chunk_cached
    from ragstudy.stores.knowledge_base import child_windows

    texts: dict[str, None] = {}
    for strategy in config.strategies:
        params = config.strategy_params[strategy]
        splitter = RecursiveCharacterTextSplitter(chunk_size=params.child_chunk_size,
                                                  chunk_overlap=params.child_chunk_overlap)
        chunked = chunk_cached(StageSettings.of(config, strategy), documents)
        parents = [chunk.to_document() for item in chunked for chunk in item.chunks]
        texts.update(dict.fromkeys(child.page_content for child in child_windows(parents, splitter)[0]))
    return list(texts)


def cold_run(config, work: Path) -> dict:
    """(a): the retrieval-only run, stage by stage, from an empty cache."""
    from ragstudy.pipeline import StageSettings, chunking_ahead, lazy_embedding
    from ragstudy.ranking import retrieve_strategy
    from ragstudy.results import ResultsFolder, read_questions
    from ragstudy.text.textlayer import load_documents

    os.environ["RAGSTUDY_CACHE"] = str(work / "cache")
    start = clock()
    documents = load_documents(Path(config.documents))
    stages = {"read PDFs": since(start)}
    questions = read_questions(config.questions, config.limit)
    output_dir = ResultsFolder(config.output_dir).prepare().path
    embedding = lazy_embedding(config.embedder, config.resolved_threads())
    loading = clock()
    model = embedding()
    stages["load model"] = since(loading)
    strategies = {}
    # as run_retrieval: the markdown strategy's conversion starts in the background, beside the other strategies
    with chunking_ahead(config, documents):
        for strategy in config.strategies:
            run = retrieve_strategy(StageSettings.of(config, strategy), documents, questions, embedding, output_dir)
            strategies[strategy] = {"stages": run.stages, "embedded": run.embedded, "reused": run.reused,
                                    "parents": run.chunks}
            done = ", ".join(f"{name} {wall:.1f} s ({cpu:.1f} CPU s)" for name, (wall, cpu) in run.stages.items())
            print(f"{strategy}: {done}; {run.embedded} windows embedded", flush=True)
    return {"documents": documents, "pages": sum(doc.page_count for doc in documents), "stages": stages,
            "strategies": strategies, "texts_embedded": model.texts_embedded, "total": since(start)}


def embed_once(config, windows: list[str], work: Path) -> dict:
    """(b): the distinct windows embedded once, same backend, empty vector cache (exported model reused)."""
    cache = work / "cache-embed-once"
    cache.mkdir()
    (cache / "onnx").symlink_to(work / "cache" / "onnx", target_is_directory=True)
    os.environ["RAGSTUDY_CACHE"] = str(cache)
    loading = clock()
    model = config.embedder.load()
    load = since(loading)
    start = clock()
    model.embed_documents(windows)
    return {"load model": load, "total": since(start), "texts_embedded": model.texts_embedded}


def print_report(config, run: dict, once: dict, windows: int) -> None:
    def cell(pair) -> str:
        return f"{pair[0]:8.1f} {pair[1]:8.1f}" if pair else f"{'-':>8} {'-':>8}"

    print(f"\n(a) cold --retrieval-only run: {len(run['documents'])} PDFs, {run['pages']} pages, backend "
          f"{config.embedding_backend}, {config.embedder.threads()} embedding thread(s); wall s / CPU s")
    for name, seconds in run["stages"].items():
        print(f"{name}: {seconds[0]:.1f} s wall, {seconds[1]:.1f} CPU s")
    print(f"{'strategy':<22}{'chunk':>17}{'index (embed)':>18}{'rank':>18}{'parents':>9}{'embedded':>10}{'reused':>8}")
    sums = [0.0] * 6
    for strategy, item in run["strategies"].items():
        stages = item["stages"]
        print(f"{strategy:<22}{cell(stages.get('chunk')):>17} {cell(stages.get('index')):>17} "
              f"{cell(stages.get('rank')):>17}{item['parents']:>9}{item['embedded']:>10}{item['reused']:>8}")
        for i, key in enumerate(("chunk", "index", "rank")):
            if key in stages:
                sums[2 * i] += stages[key][0]
                sums[2 * i + 1] += stages[key][1]
    print(f"{'all strategies':<22}{cell(sums[0:2]):>17} {cell(sums[2:4]):>17} {cell(sums[4:6]):>17}")
    total, load = run["total"], run["stages"]["load model"]
    print(f"total {total[0]:.1f} s wall, {total[1]:.1f} CPU s; texts embedded {run['texts_embedded']} "
          f"(child windows, semantic chunker sentences, questions)")
    rate = windows / once["total"][0] if once["total"][0] else float("nan")
    print(f"\n(b) {windows} distinct child windows embedded once: {once['total'][0]:.1f} s wall, "
          f"{once['total'][1]:.1f} CPU s ({rate:.1f} windows/s; model load {once['load model'][0]:.1f} s apart)")
    print(f"\nratio (a)/(b): {total[0] / once['total'][0]:.2f} wall, {total[1] / once['total'][1]:.2f} CPU "
          f"(without (a)'s model load and ONNX export: {(total[0] - load[0]) / once['total'][0]:.2f} wall, "
          f"{(total[1] - load[1]) / once['total'][1]:.2f} CPU); issue 22 asks for <= 1.5")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", nargs="+", default=[str(SHARED / "pdfs"), str(SHARED / "pdfs" / "more-it")],
                        help="folders whose --pattern PDFs are the documents")
    parser.add_argument("--pattern", default="it_*.pdf", help="which PDFs of those folders (default: it_*.pdf)")
    parser.add_argument("--questions", default=str(SHARED / "qa" / "Questions.csv"))
    parser.add_argument("--backend", default="onnx-int8", choices=["torch", "onnx", "onnx-int8"])
    parser.add_argument("--strategies", help="comma-separated (default: every registered strategy)")
    parser.add_argument("--threads", type=int, help="embedding threads (default: the study's, one per core for onnx)")
    parser.add_argument("--work", help="empty folder for the cache, Chroma and outputs (default: a temp folder)")
    parser.add_argument("--json", help="also write the measurements to this JSON file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError

    folders = [Path(folder) for folder in args.documents]
    missing = [str(f) for f in folders if not f.is_dir()] + ([] if Path(args.questions).is_file() else [args.questions])
    if missing:
        print(f"error: not found: {', '.join(missing)} (this benchmark needs ../shared/pdfs and ../shared/qa)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="cold-retrieval-") as temp:
        work = Path(args.work) if args.work else Path(temp)
        if work.exists() and any(work.iterdir()):
            print(f"error: --work {work} is not empty; give an empty or new folder", file=sys.stderr)
            return 2
        if link_documents(folders, args.pattern, work / "docs") == 0:
            print(f"error: no {args.pattern} in {', '.join(map(str, folders))}", file=sys.stderr)
            return 2
        try:
            config = StudyConfig.resolve(profile="lite", strategies=args.strategies or "all",
                                         retrieval_only=True, documents=str(work / "docs"), questions=args.questions,
                                         output_dir=str(work / "out"), db_dir=str(work / "db"),
                                         embedding_backend=args.backend, embedding_threads=args.threads)
            run = cold_run(config, work)
            windows = distinct_windows(config, run["documents"])
            once = embed_once(config, windows, work)
        except StudyInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print_report(config, run, once, len(windows))
        if args.json:
            data = {"backend": config.embedding_backend, "threads": config.embedder.threads(),
                    "pages": run["pages"], "documents": [doc.path for doc in run["documents"]], "stages": run["stages"],
                    "strategies": run["strategies"], "run_total": run["total"], "windows": len(windows),
                    "embed_once": once}
            Path(args.json).write_text(json.dumps(data, indent=1, default=list), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
