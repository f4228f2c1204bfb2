"""Retrievers compared at equal context budgets, from retrieval-only runs of the pipeline:

    python evaluation_chain.py --profile lite --retrieval-only --retriever dense,dense-parents,bm25,bm25-parents,hybrid \
        --output-dir /tmp/sample-retrievers
    python benchmarks/retrievers.py --evidence sample/evidence.json /tmp/sample-retrievers

(or one run per retriever, each folder given). A run with several retrievers holds one subfolder per retriever
(ragstudy.retrievers.result_folders).

Every folder is scored against the evidence with ragstudy.budget_eval's evaluate_folder (hit = the whole evidence
in the packed context) and labelled with the retriever its config.json records. Prints the hit rate per strategy x
retriever x budget, the best strategy per retriever, each retriever minus dense, the mean over strategies, and,
when dense, bm25 and hybrid runs are all given, hybrid minus the better of the two with its paired bootstrap CI.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from ragstudy.budget_metrics import HIT


def evaluate_runs(results_dir: Path, evidence: dict) -> pd.DataFrame:
    """Per-question hit rows of every retriever of a run (one folder, or one subfolder per retriever)."""
    from ragstudy.retrievers import result_folders

    return pd.concat([evaluate_run(folder, evidence).assign(results_dir=str(folder))
                      for folder in result_folders(results_dir).values()], ignore_index=True)


def evaluate_run(results_dir: Path, evidence: dict) -> pd.DataFrame:
    """Per-question hit rows of one retriever's folder, with its `retriever` (config.json; runs before the flag are
    dense)."""
    from Postprocessing import common
    from ragstudy.budget_eval import evaluate_folder, run_measure
    from ragstudy.results import ranked_strategies

    run_config = common.read_run_config(results_dir)
    hits, _ = evaluate_folder(results_dir, evidence, list(run_config["budgets"]),
                              run_measure(run_config, results_dir), ranked_strategies(results_dir))
    return hits.assign(retriever=run_config.get("retriever", "dense"))


def tables(frame: pd.DataFrame) -> str:
    numeric = frame[frame["budget"] != "k"].astype({"budget": int})
    means = numeric.groupby(["strategy", "retriever", "budget"])[HIT].mean().unstack("budget")
    from ragstudy import retrievers

    order = {name: i for i, name in enumerate(retrievers.names())}
    means = means.sort_index(key=lambda idx: idx.map(order) if idx.name == "retriever" else idx)
    best = means.groupby(level="retriever").max().sort_index(key=lambda idx: idx.map(order))
    dense = means.xs("dense", level="retriever")
    delta = (means - dense.reindex(means.index, level="strategy")).drop("dense", level="retriever")
    n = numeric["question_index"].nunique()
    return "\n\n".join([
        f"hit rate ({n} questions with evidence), strategy x retriever x budget (chars):",
        means.to_markdown(floatfmt=".2f"),
        "best strategy's hit rate per retriever (max over strategies):", best.to_markdown(floatfmt=".2f"),
        "retriever minus dense, same strategy:", delta.to_markdown(floatfmt="+.2f"),
        "mean over strategies:", means.groupby(level="retriever").mean().sort_index(
            key=lambda idx: idx.map(order)).to_markdown(floatfmt=".3f")])


def hybrid_against_its_parts(frame: pd.DataFrame, n_resamples: int = 10_000) -> pd.DataFrame:
    """Per strategy x budget: dense, bm25 and hybrid hit rates, and hybrid minus the better of the two (the one
    with the higher hit rate there) with its paired bootstrap 95 % CI over questions (ragstudy.stats). `verdict` is
    `below` only when the whole CI is below zero."""
    from ragstudy.stats import paired_bootstrap

    rows = []
    numeric = frame[frame["budget"] != "k"]
    for (strategy, budget), group in numeric.groupby(["strategy", "budget"], sort=False):
        hits = group.pivot_table(index="question_index", columns="retriever", values="hit", aggfunc="first")
        if not {"dense", "bm25", "hybrid"} <= set(hits.columns):
            continue
        hits = hits[["dense", "bm25", "hybrid"]].dropna().astype(float)
        better = "dense" if hits["dense"].mean() > hits["bm25"].mean() else "bm25"
        diff, low, high, _ = paired_bootstrap(hits["hybrid"].to_numpy(), hits[better].to_numpy(), n_resamples)
        rows.append({"strategy": strategy, "budget": int(budget), "dense": hits["dense"].mean(),
                     "bm25": hits["bm25"].mean(), "hybrid": hits["hybrid"].mean(), "better part": better,
                     "hybrid - better": diff, "95% CI": f"[{low:+.2f}, {high:+.2f}]",
                     "verdict": "above" if low > 0 else "below" if high < 0 else "within CI"})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    from Postprocessing.common import DataError
    from ragstudy.errors import StudyInputError
    from ragstudy.evidence import load_evidence_file

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="RESULTS_DIR", help="retrieval-only runs (one or several "
                                                                       "retrievers each)")
    parser.add_argument("--evidence", required=True, help="evidence file of the runs' questions")
    parser.add_argument("--out", help="write every per-question hit row to this CSV")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        evidence = load_evidence_file(Path(args.evidence))
        frame = pd.concat([evaluate_runs(Path(d), evidence) for d in args.runs], ignore_index=True)
    except (DataError, StudyInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    twice = frame.drop_duplicates(["results_dir", "retriever"])["retriever"].value_counts()
    if (twice > 1).any():
        print(f"error: more than one run of retriever(s) {sorted(twice[twice > 1].index)}", file=sys.stderr)
        return 2
    print(f"## {', '.join(args.runs)} (evidence {args.evidence}; {time.perf_counter() - started:.0f} s)\n")
    print(tables(frame))
    check = hybrid_against_its_parts(frame)
    if not check.empty:
        print("\nhybrid against the better of dense and bm25 (paired bootstrap over questions):\n")
        print(check.to_markdown(index=False, floatfmt="+.2f"))
    if args.out:
        from Postprocessing.common import atomic_write_csv

        atomic_write_csv(Path(args.out), frame)
        print(f"per-question rows in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
