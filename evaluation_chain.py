"""Run the study: answer every question of Questions.csv with each chunking strategy.

    python evaluation_chain.py                      # all strategies, profile by hardware (paper on CUDA, else lite)
    python evaluation_chain.py --profile lite --limit 5 --strategies fixed-size,newline
    python evaluation_chain.py --chunks-only        # export chunks_<strategy>.csv + sources, then stop

Writes one Dataset<Name>.{csv,json} per strategy (the paper's DatasetCustom/FixedSize/NewLine, then DatasetToken,
DatasetSentence, DatasetSemantic, DatasetMarkdown) and config.json into --output-dir. Chroma collections and
LLM answers are cached by content hash: an identical re-run re-embeds and regenerates nothing, and an interrupted
run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
import time


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", help="folder of PDFs (default: Documents/)")
    parser.add_argument("--questions", help="CSV with a 'questions' column (default: Questions.csv)")
    parser.add_argument("--output-dir", help="where outputs go (default: results/)")
    parser.add_argument("--profile", choices=["paper", "lite"],
                        help="paper: Phi-3.5-mini-ITA bf16 on CUDA + multilingual-e5-large-instruct; lite: "
                             "SmolLM2-135M + MiniLM from PyPI wheels on CPU (default: paper if CUDA is available)")
    parser.add_argument("--strategies", help="comma-separated registry names, e.g. paragraph,fixed-size,newline,token,"
                                             "sentence,semantic,markdown or all (default: the paper's "
                                             "paragraph,fixed-size,newline when answering, all registered for "
                                             "--chunks-only and --retrieval-only)")
    parser.add_argument("--limit", type=int, help="answer only the first N questions")
    parser.add_argument("--chunks-only", action="store_true", default=None,
                        help="write chunks_<strategy>.csv and sources_<strategy>.jsonl, then stop")
    parser.add_argument("--config", dest="config_file", help="YAML file with settings (overridden by flags)")
    parser.add_argument("--llm", help="LLM hub id or local folder (overrides the profile)")
    parser.add_argument("--embedding", help="embedding model hub id or local folder (overrides the profile)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="device for both models")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], help="LLM dtype")
    parser.add_argument("--max-new-tokens", type=int, help="answer length limit (paper: 5000; lite: 96)")
    parser.add_argument("--prompt-file", help="file with a prompt template containing {context} and {query}")
    parser.add_argument("--paragraph-mode", choices=["layout", "paper"],
                        help="paragraph segmenter: layout (default) or the paper's heuristics")
    parser.add_argument("--set", dest="set_params", action="append", metavar="STRATEGY.PARAM=VALUE",
                        help="override a strategy parameter, e.g. fixed-size.chunk_size=1000, newline.k=2 "
                             "(repeatable)")
    parser.add_argument("--embedding-dtype", choices=["float32", "bfloat16", "float16"],
                        help="embedding model dtype (default float32; bfloat16 ~2x faster on AMX CPUs and GPUs)")
    parser.add_argument("--threads", type=int, help="CPU threads for torch (default: half the cores)")
    parser.add_argument("--embedding-threads", type=int,
                        help="threads of the ONNX embedding backends (default: one per core; vectors are the same)")
    parser.add_argument("--db-dir", help="root for Chroma folders (default: each strategy folder's db/)")
    fair = parser.add_argument_group("retrieval-only runs and sweeps")
    fair.add_argument("--retrieval-only", action="store_true", default=None,
                      help="index and rank parents for every question (retrieval_<strategy>.csv); load no LLM")
    fair.add_argument("--budgets", help="context budgets for retrieval-only runs, comma-separated (default: "
                                        "500,1000,2000,4000)")
    fair.add_argument("--budget-unit", choices=["chars", "tokens"],
                      help="unit of --budgets: characters (default) or tokens of the LLM's tokenizer")
    from ragstudy.config import RETRIEVERS

    fair.add_argument("--retriever", choices=RETRIEVERS,
                      help="how a retrieval-only run ranks parents: dense child windows (default, the paper's), "
                           "dense whole parents, BM25 over child windows or whole parents, hybrid (RRF of dense "
                           "and BM25 child windows)")
    fair.add_argument("--text-layer", metavar="raw|clean|raw,clean",
                      help="text the text-layer strategies chunk: raw (default, the paper's PyMuPDF text) or clean "
                           "(the paragraph strategy's cleaning: no running heads or page numbers, no TOC pages, "
                           "sentences joined across page breaks, hyphenation undone); raw,clean in a retrieval-only run "
                           "ranks both (clean into <output-dir>/text-layer-clean/) for the cleaning/segmentation split")
    fair.add_argument("--sweep", metavar="FILE.yaml", help="run a grid of strategy x parameter settings "
                                                           "retrieval-only (see sweeps/)")
    fair.add_argument("--evidence", help="evidence file the sweep is scored against (sample/evidence.json format or "
                                         "CSV question_index,evidence[,pdf]; default: the sweep file's)")
    scale = parser.add_argument_group("answers at scale")
    scale.add_argument("--llm-batch-size", type=int, help="prompts generated together in-process")
    scale.add_argument("--llm-engine", choices=["torch", "onnxruntime"],
                       help="in-process LLM engine (default: onnxruntime for the lite profile's SmolLM2 when "
                            "onnxruntime-genai is installed, else torch)")
    scale.add_argument("--llm-server", dest="llm_servers", action="append", metavar="URL",
                       help="OpenAI-compatible server (e.g. vLLM) base URL; repeatable or comma-separated")
    scale.add_argument("--llm-server-model", help="model name the server(s) serve")
    scale.add_argument("--concurrency", type=int, help="requests in flight when answering through servers")
    scale.add_argument("--llm-timeout", type=float, metavar="SECONDS",
                       help="seconds one LLM server request may take before it is tried again (3 tries; default 600)")
    scale.add_argument("--chroma-server", help="http://host:port of a Chroma server instead of local folders")
    scale.add_argument("--embedding-backend", choices=["torch", "onnx", "onnx-int8"],
                       help="how the embedding model runs (default: the profile's, paper torch, lite onnx; onnx/onnx-int8: ONNX Runtime, CPU)")
    scale.add_argument("--embedding-server", metavar="URL", help="OpenAI-compatible /v1/embeddings server")
    scale.add_argument("--embedding-server-model", help="model name the embedding server serves")
    scale.add_argument("--embedding-timeout", type=float, metavar="SECONDS",
                       help="seconds one embedding server request may take before it is tried again (3 tries; "
                            "default 60)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def interrupted_message(flags: dict) -> str:
    """One line for Ctrl-C: what is kept and how to resume (no traceback)."""
    from ragstudy.io import cache_dir

    output = flags.get("output_dir") or "results"
    return (f"interrupted: every answer generated so far is saved in {cache_dir() / 'answers'}, embedded child "
            f"windows in the Chroma folders, finished strategies' files in {output}/; re-run the same command "
            "to resume without redoing that work")


def unnamed_store_message(exc: BaseException) -> str:
    """One line for a store failure that no layer named (the vector cache's SQLite, a stray OSError)."""
    import sqlite3

    from ragstudy.errors import store_error

    if isinstance(exc, sqlite3.Error):
        from customembedding import CACHE_FILE
        from ragstudy.io import cache_dir

        return str(store_error("vector cache", cache_dir() / "vectors" / CACHE_FILE, "reading or writing it failed", exc,
                               "its vectors are embedded again"))
    return str(store_error("file", getattr(exc, "filename", None) or "(unnamed)", "cannot be read or written", exc))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "chromadb", "sentence_transformers", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    import transformers  # quiet its per-load progress bars; ours (tqdm) remain

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError
    from ragstudy.pipeline import run_study
    from ragstudy.ranking import run_retrieval

    flags = vars(args).copy()
    flags.pop("verbose")
    set_params = list(flags.pop("set_params") or [])
    mode = flags.pop("paragraph_mode")
    sweep, evidence = flags.pop("sweep"), flags.pop("evidence")
    if mode:
        set_params.append(f"paragraph.mode={mode}")
    started = time.perf_counter()
    try:
        config = StudyConfig.resolve(set_params=set_params, sweep=sweep, **flags)
        from ragstudy.models import check_embedding

        check_embedding(config)  # a bad --embedding stops here, before anything is written
        print(f"profile: {config.profile.name} ({config.origins['profile']}); LLM {config.profile.llm}; "
              f"embedding {config.profile.embedding}; device {config.profile.device}; "
              f"strategies: {', '.join(config.strategies)}", flush=True)
        if sweep:
            from ragstudy.sweep import run_sweep

            print_sweep(run_sweep(config, sweep, evidence))
            return 0
        reports = run_retrieval(config) if config.retrieval_only else run_study(config)
    except StudyInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:  # a store that failed without naming itself: still one line
        print(f"error: {unnamed_store_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(interrupted_message(flags), file=sys.stderr)
        return 130
    print("\n| strategy | documents | chunks | embedded | reused | generated | cached |")
    print("|---|---|---|---|---|---|---|")
    for r in reports:
        print(f"| {r.strategy} | {r.documents} | {r.chunks} | {r.embedded} | {r.reused} | {r.generated} | "
              f"{r.cached} |")
    print(f"\noutputs in {config.output_dir}/ ({time.perf_counter() - started:.1f} s)")
    return 0


def print_sweep(result) -> None:
    """The sweep's table on stdout and its hit-rate plot beside the tables (HTML; PNG/PDF when Chromium is there)."""
    from Postprocessing.budget_plots import sweep_figure, write_plots

    notes: list[str] = []
    write_plots(sweep_figure(result.summary, list(result.labels)), result.output_dir, "sweep_hit_rate", notes)
    print(result.summary.to_string(index=False, max_colwidth=40))
    for note in notes:
        print(f"note: {note}")
    print(f"\nsweep of {len(result.summary)} configurations in {result.seconds:.0f} s; evidence {result.evidence}; "
          f"tables in {result.output_dir}/sweep_summary.csv and sweep_best.csv")


if __name__ == "__main__":
    code = main()
    if code == 130:  # Ctrl-C: everything kept is already fsynced; skip the libraries' teardown (seconds)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
