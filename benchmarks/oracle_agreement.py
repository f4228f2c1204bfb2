"""How well does the oracle-overlap score (ragstudy.scoring.oracle_overlap) agree with the evidence-based hit?

For each results folder of `ragstudy retrieve` (with its evidence file and Oracle.csv): the
evidence hit per strategy x budget x question (ragstudy.scoring.budget_eval's evaluate_folder) and the oracle
overlap on the same packed contexts. Prints, per folder, the Spearman rank correlation of the two means over
strategies x numeric budgets, and the per-question agreement of "overlap >= t" with the hit (accuracy, Cohen's
kappa) at a few thresholds t. Questions scored by both are compared: with evidence, and with an oracle that is not
the unanswerable phrase.

    python benchmarks/oracle_agreement.py --run /tmp/h5-sample sample/evidence.json Oracle.csv \\
        --run /tmp/h5-qa ../shared/qa/evidence.csv ../shared/qa/Oracle.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ragstudy.scoring.budget_metrics import HIT, ORACLE_OVERLAP

THRESHOLDS = (0.5, 0.75, 1.0)


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two binary ratings (nan when the expected agreement is 1)."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    observed = float(np.mean(a == b))
    expected = float(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean()))
    return float("nan") if expected == 1 else (observed - expected) / (1 - expected)


def score_folder(results_dir: Path, evidence_path: Path, oracle_path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Rows (strategy, budget, question_index, hit, oracle_overlap) of questions scored both ways, and notes."""
    from Postprocessing import common
    from ragstudy.config import DEFAULT_BUDGETS
    from ragstudy.grid.variants import run_groups
    from ragstudy.results import open_run, run_oracle
    from ragstudy.scoring.budget_eval import evaluate_members, run_measure
    from ragstudy.scoring.evidence import load_evidence_file

    run_config = common.read_run_config(results_dir)
    budgets = list(run_config.get("budgets") or DEFAULT_BUDGETS)
    measure = run_measure(run_config, results_dir)
    members = run_groups(open_run(results_dir))[0].members  # the run's (first) group of variants, or the folder
    oracle, _ = run_oracle(results_dir, oracle_path)  # row count checked against the run's questions
    scored, evaluations = evaluate_members(members, load_evidence_file(evidence_path), budgets, measure,
                                           oracle)  # one packing per question scores both
    notes = [note for e in evaluations for note in e.notes()]
    frame = scored[["strategy", "budget", "question_index", HIT, ORACLE_OVERLAP]].dropna().reset_index(drop=True)
    return frame, notes


def agreement(frame: pd.DataFrame) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Spearman over strategy x numeric budget means, and per-question agreement at each threshold."""
    from scipy.stats import spearmanr

    numeric = frame[frame["budget"] != "k"].astype({"budget": int})
    means = numeric.groupby(["strategy", "budget"])[[HIT, ORACLE_OVERLAP]].mean()
    rho, p = spearmanr(means[HIT], means[ORACLE_OVERLAP])
    rows = []
    for t in THRESHOLDS:
        predicted = numeric[ORACLE_OVERLAP].to_numpy() >= t - 1e-9
        hit = numeric[HIT].to_numpy() > 0.5
        rows.append({"threshold": t, "accuracy": float(np.mean(predicted == hit)),
                     "kappa": cohen_kappa(predicted, hit), "predicted_rate": float(predicted.mean()),
                     "hit_rate": float(hit.mean())})
    within = {}  # budget -> Spearman over strategies: does the score order the strategies like the hit does?
    for budget, part in means.groupby(level="budget"):
        rho_b, _ = spearmanr(part[HIT], part[ORACLE_OVERLAP])
        same_best = part[HIT].idxmax() == part[ORACLE_OVERLAP].idxmax()
        within[int(budget)] = (float(rho_b), bool(same_best))
    facts = {"within_budget": within, "cells": len(means), "questions": numeric["question_index"].nunique(),
             "pairs": len(numeric), "spearman": float(rho), "spearman_p": float(p),
             "pearson_question": float(np.corrcoef(numeric[HIT], numeric[ORACLE_OVERLAP])[0, 1])}
    return facts, pd.DataFrame(rows), means


def main(argv: list[str] | None = None) -> int:
    from Postprocessing.common import DataError
    from ragstudy.errors import StudyInputError

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", nargs=3, action="append", required=True,
                        metavar=("RESULTS_DIR", "EVIDENCE", "ORACLE_CSV"))
    parser.add_argument("--out", help="write the per-question rows of every run to this CSV")
    args = parser.parse_args(argv)
    frames = []
    for results_dir, evidence, oracle in args.run:
        try:
            frame, notes = score_folder(Path(results_dir), Path(evidence), Path(oracle))
        except (DataError, StudyInputError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        facts, table, means = agreement(frame)
        print(f"## {results_dir} (evidence {evidence}, oracle {oracle})\n")
        print(f"- {facts['questions']} questions scored both ways, {facts['pairs']} question x strategy x budget "
              f"pairs (budgets without k)")
        print(f"- Spearman over {facts['cells']} strategy x budget means: rho = {facts['spearman']:.3f} "
              f"(p = {facts['spearman_p']:.2g}); per-question Pearson (point-biserial) r = "
              f"{facts['pearson_question']:.3f}")
        within = ", ".join(f"{b}: {rho:.2f} ({'yes' if same else 'no'})"
                           for b, (rho, same) in facts["within_budget"].items())
        print(f"- Spearman over strategies within each budget (same best strategy?): {within}\n")
        print(table.to_markdown(index=False, floatfmt=".3f"))
        print()
        print(means.unstack("budget").to_markdown(floatfmt=".2f"))
        print()
        print("\n".join(f"  note: {note}" for note in notes) + "\n")
        frames.append(frame.assign(results_dir=str(results_dir)))
    return write_rows(args.out, frames)


def write_rows(out: str | None, frames: list[pd.DataFrame]) -> int:
    """Write the per-question rows of every run to `out` (if given); the exit code."""
    from Postprocessing.common import atomic_write_csv

    if out:
        atomic_write_csv(Path(out), pd.concat(frames))
        print(f"per-question rows (hit, oracle_overlap) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
