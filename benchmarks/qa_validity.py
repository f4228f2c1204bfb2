"""Can a generated question set stand in for a hand-written one? Both are scored on the same PDFs by the study's own
retrieval-only run and `ragstudy score-retrieval`; then:

- ranking agreement: Spearman (and Kendall) correlation of the mean hit rates of every strategy x budget cell
  between the two sets, and per budget whether both sets put the same strategy first;
- each set's verdict (retrieval_summary.md's verdict box, as written);
- per-item difficulty: each question's hit rate over all strategy x budget cells, its distribution per set (how
  many items every configuration finds, how many none does).

    python benchmarks/qa_validity.py --documents DIR --human ../shared/qa --generate extractive --out bench-qa
    python benchmarks/qa_validity.py --documents DIR --human ../shared/qa --generated qa/ --out bench-qa

--generate extractive writes the generated set first with make-qa's LLM-free template writer (a baseline:
ragstudy.qagen.extractive); --generated reads a set make-qa wrote with a real LLM. Writes qa_validity.md and
qa_validity.json into --out (with each set's run folder beside them). Runs are cached like the study's: a re-run
re-embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ragstudy.io import PROJECT_ROOT, atomic_write_json, atomic_write_text
from ragstudy.results import QA_SIDECAR, RETRIEVAL_PER_QUESTION, RETRIEVAL_SUMMARY, RETRIEVAL_SUMMARY_MD, read_table
from ragstudy.scoring.budget_metrics import HIT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", required=True, help="folder of the PDFs both sets are about")
    parser.add_argument("--human", required=True, help="folder with the hand-written Questions.csv and evidence.csv")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--generated", help="folder make-qa wrote (Questions.csv, evidence.csv, make_qa.json)")
    source.add_argument("--generate", choices=["extractive"],
                        help="write the generated set first, with the LLM-free template writer")
    parser.add_argument("--n", type=int, help="questions to generate (default: as many as the human set has)")
    parser.add_argument("--seed", type=int, default=0, help="make-qa's sampling seed (default 0)")
    parser.add_argument("--strategies", default="paragraph,fixed-size,newline", help="strategies to compare")
    parser.add_argument("--budgets", default="500,1000,2000,4000", help="context budgets (characters)")
    parser.add_argument("--retriever", default="dense", help="ragstudy retrieve --retriever (default dense)")
    parser.add_argument("--db-dir", help="root of the Chroma folders (default: --out/db)")
    parser.add_argument("--out", required=True, help="output folder")
    return parser


def run(command: list[str], log: Path) -> None:
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as handle:
        done = subprocess.run([sys.executable, *command], cwd=PROJECT_ROOT, stdout=handle, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"error: {' '.join(command[:2])} failed (exit {done.returncode}): {' | '.join(tail)}; "
                         f"see {log}")
    print(f"  {command[0]} done in {time.perf_counter() - started:.0f} s ({log})", flush=True)


def score_set(name: str, questions: Path, evidence: Path, args: argparse.Namespace, out: Path) -> Path:
    """Retrieval-only run + retrieval_eval for one set; returns its results folder."""
    results = out / f"{name}-run"
    results.mkdir(parents=True, exist_ok=True)
    print(f"{name}: retrieval-only run and retrieval_eval on {questions}", flush=True)
    run(["evaluation_chain.py", "--profile", "lite", "--retrieval-only", "--strategies", args.strategies,
         "--documents", args.documents, "--questions", str(questions), "--output-dir", str(results),
         "--budgets", args.budgets, "--retriever", args.retriever, "--db-dir", args.db_dir or str(out / "db")], out / f"{name}-chain.log")
    run(["Postprocessing/retrieval_eval.py", "--results-dir", str(results), "--evidence", str(evidence),
         "--no-plot"], out / f"{name}-eval.log")
    return results


def verdict_text(results: Path) -> str:
    text = RETRIEVAL_SUMMARY_MD.path(results).read_text(encoding="utf-8")
    part = text.split("## Verdict", 1)[1]
    return part.split("\n## ", 1)[0].split("\n### ", 1)[0].strip()  # its sentence and matrix, not the details


def cell_means(results: Path) -> pd.Series:
    summary = read_table(results, RETRIEVAL_SUMMARY)
    hits = summary[(summary["metric"] == HIT) & summary["budget"].str.isdigit()]
    return hits.set_index(["strategy", "budget"])["mean"]


def difficulty(results: Path) -> pd.Series:
    per = read_table(results, RETRIEVAL_PER_QUESTION)
    per = per[per["budget"].str.isdigit() & per[HIT].notna()]
    return per.groupby("question_index")[HIT].mean()


def describe(values: pd.Series) -> dict:
    q = np.percentile(values.to_numpy(), [25, 50, 75]) if len(values) else [np.nan] * 3
    return {"n": int(len(values)), "mean": round(float(values.mean()), 3), "q1": round(float(q[0]), 3),
            "median": round(float(q[1]), 3), "q3": round(float(q[2]), 3),
            "never_found": int((values == 0).sum()), "always_found": int((values == 1).sum())}


def compare(human: Path, generated: Path) -> dict:
    from scipy.stats import kendalltau, spearmanr

    a, b = cell_means(human), cell_means(generated)
    cells = a.index.intersection(b.index)
    rho = spearmanr(a[cells], b[cells]) if len(cells) > 2 else None
    tau = kendalltau(a[cells], b[cells]) if len(cells) > 2 else None
    firsts = {}
    for budget in sorted({c[1] for c in cells}, key=int):
        top_a = a[cells].xs(budget, level="budget").idxmax()
        top_b = b[cells].xs(budget, level="budget").idxmax()
        firsts[budget] = {"human": top_a, "generated": top_b, "same": top_a == top_b}
    return {"cells": len(cells),
            "spearman": None if rho is None else {"rho": round(float(rho.statistic), 3),
                                                  "p": round(float(rho.pvalue), 4)},
            "kendall": None if tau is None else {"tau": round(float(tau.statistic), 3),
                                                 "p": round(float(tau.pvalue), 4)},
            "best_per_budget": firsts,
            HIT: {"human": {f"{s} {bud}": round(float(v), 3) for (s, bud), v in a[cells].items()},
                    "generated": {f"{s} {bud}": round(float(v), 3) for (s, bud), v in b[cells].items()}},
            "difficulty": {"human": describe(difficulty(human)), "generated": describe(difficulty(generated))}}


def generate(args: argparse.Namespace, out: Path, n: int) -> Path:
    from ragstudy.qagen.extractive import EXTRACTIVE_MODEL, ExtractiveGenerator
    from ragstudy.qagen.run import QaSettings, make_qa

    folder = out / "generated-set"
    human = Path(args.human)
    settings = QaSettings(documents=Path(args.documents), out=folder, n=n, seed=args.seed,
                          reference=[(human / "Questions.csv", human / "evidence.csv")], overwrite=True)
    result = make_qa(settings, ExtractiveGenerator(), EXTRACTIVE_MODEL, "extractive")
    print(f"generated set: {result.kept} of {result.candidates} candidates kept ({folder})", flush=True)
    return folder


def markdown(result: dict, human: Path, generated: Path, verdicts: dict, model: str) -> str:
    c = result
    lines = ["# Generated vs hand-written questions: do they rank the strategies alike?\n",
             f"Human-written: {human}. Generated: {generated} (generator {model}).\n",
             "## Ranking agreement (mean hit rate of every strategy x budget cell)\n",
             f"Spearman rho {c['spearman']['rho'] if c['spearman'] else '–'} (p {c['spearman']['p'] if c['spearman'] else '–'}), "
             f"Kendall tau {c['kendall']['tau'] if c['kendall'] else '–'} over {c['cells']} cells.\n",
             "| budget | best (human) | best (generated) | same |", "|---|---|---|---|"]
    lines += [f"| {b} | {v['human']} | {v['generated']} | {'yes' if v['same'] else 'no'} |"
              for b, v in c["best_per_budget"].items()]
    lines += ["", "| cell | hit (human) | hit (generated) |", "|---|---|---|"]
    lines += [f"| {cell} | {c[HIT]['human'][cell]} | {c[HIT]['generated'][cell]} |" for cell in c[HIT]["human"]]
    lines += ["", "## Per-item difficulty (hit rate of each question over all cells)\n",
              "| set | n | mean | q1 | median | q3 | never found | always found |", "|---|---|---|---|---|---|---|---|"]
    for name in ("human", "generated"):
        d = c["difficulty"][name]
        lines.append(f"| {name} | {d['n']} | {d['mean']} | {d['q1']} | {d['median']} | {d['q3']} | "
                     f"{d['never_found']} | {d['always_found']} |")
    for name, text in verdicts.items():
        lines += ["", f"## Verdict on the {name} set\n", text]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    human = Path(args.human)
    for name in ("Questions.csv", "evidence.csv"):
        if not (human / name).is_file():
            print(f"error: {human / name} not found; --human needs a folder with Questions.csv and evidence.csv",
                  file=sys.stderr)
            return 2
    from ragstudy.results import read_questions

    n = args.n or len(read_questions(human / "Questions.csv"))
    generated = generate(args, out, n) if args.generate else Path(args.generated)
    sidecar = json.loads(QA_SIDECAR.path(generated).read_text(encoding="utf-8"))
    model = sidecar["generator"]["model"]
    started = time.perf_counter()
    human_run = score_set("human", human / "Questions.csv", human / "evidence.csv", args, out)
    generated_run = score_set("generated", generated / "Questions.csv", generated / "evidence.csv", args, out)
    result = compare(human_run, generated_run)
    verdicts = {"human": verdict_text(human_run), "generated": verdict_text(generated_run)}
    result.update({"human": str(human), "generated": str(generated), "model": model, "verdicts": verdicts,
                   "seconds": round(time.perf_counter() - started, 1)})
    atomic_write_json(out / "qa_validity.json", result)
    report = markdown(result, human, generated, verdicts, model)
    atomic_write_text(out / "qa_validity.md", report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
