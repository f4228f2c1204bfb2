"""What the benchmarks share (no `__main__` block, so any benchmark may import it): CPU-time clocks, answering in
batches of similar length, and the table of answering modes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ragstudy.llms import GenerationParams, length_batches


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of this process, or of process `pid` (Linux /proc): on a machine shared with other
    jobs, answers per CPU second compare modes more fairly than wall-clock time."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batched_answers(model, prompts: Sequence[str], params: GenerationParams, batch_size: int) -> list[str]:
    """`model`'s answers to `prompts` in input order, generated in batches of prompts of similar token length."""
    answers = [""] * len(prompts)
    for batch in length_batches([len(model.prompt_ids(p)) for p in prompts], batch_size):
        for index, answer in zip(batch, model.generate_batch([prompts[i] for i in batch], params)):
            answers[index] = answer
    return answers


def modes_table(results: Mapping[str, tuple[float, float, Sequence[str]]], base: str, reference: str,
                labels: Mapping[str, str] | None = None,
                extra: tuple[str, Callable[[Sequence[str]], str]] | None = None) -> str:
    """A Markdown table with a row per mode of `results` (mode -> wall s, CPU s, answers): answers/s and answers per
    CPU s with their ratios to mode `base`, and how many answers are the same text as mode `reference`'s ("-" where
    that mode did not run); `extra` adds a column (its title, and its cell from a mode's answers)."""
    def name(mode: str) -> str:
        return (labels or {}).get(mode, mode)

    head = ["mode", "seconds", "answers/s", f"vs {name(base)}", "CPU s", "answers per CPU s", f"vs {name(base)}",
            f"identical to {name(reference)}", *([extra[0]] if extra else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    baseline, same_as = results.get(base), results.get(reference)
    for mode, (wall, cpu, answers) in results.items():
        n = len(answers)
        cells = [name(mode), f"{wall:.1f}", f"{n / wall:.3f}", f"{baseline[0] / wall:.2f}x" if baseline else "-",
                 f"{cpu:.1f}", f"{n / cpu:.3f}", f"{baseline[1] / cpu:.2f}x" if baseline else "-",
                 f"{sum(a == b for a, b in zip(answers, same_as[2]))}/{n}" if same_as else "-",
                 *([extra[1](answers)] if extra else [])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def study_prompts(results_dir: Path, strategies: list[str], questions: int, template: str | None = None
                  ) -> list[str]:
    """The chain's prompts for the first `questions` questions of each strategy (its k parents as context), from a
    retrieval-only run: a grid's dense variant of each strategy (variants.csv), else the folder's own rankings."""
    from ragstudy.config import PAPER_PROMPT, StudyConfig
    from ragstudy.pipeline import build_prompt
    from ragstudy.results import open_run, read_config, read_questions, read_retrieval, retrieval_path, variant_folder
    from ragstudy.scoring.budgets import pack_paper_k

    grid = {v.strategy: variant_folder(results_dir, v.id) for v in reversed(open_run(results_dir).variants())
            if v.value("retriever") == "dense"}
    prompts = []
    for strategy in strategies:
        folder = grid.get(strategy, results_dir)
        asked = read_questions(StudyConfig.of_run(read_config(folder)).questions)
        ranked = read_retrieval(retrieval_path(folder, strategy))
        for index in sorted(ranked)[:questions]:
            context = "\n\n".join(pack_paper_k(ranked[index]).texts)
            prompts.append(build_prompt(template or PAPER_PROMPT, context, asked[index]))
    return prompts
