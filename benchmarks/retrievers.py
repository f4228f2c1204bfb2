"""Retrievers compared at equal context budgets: dense (the run's own rankings), BM25 over child windows, BM25 over
whole parents, and hybrid (reciprocal rank fusion of dense and BM25-over-windows parent rankings).

Reads results folders of `evaluation_chain.py --retrieval-only` (chunks_/sources_/retrieval_<strategy> and
config.json). For each strategy it rebuilds the child windows as the knowledge base cuts them (the strategy's
child_chunk_size/overlap), ranks parents per question by their best BM25 unit (ragstudy.lexical), writes each
alternative ranking as retrieval_<strategy>.csv into a scratch folder beside copies of the chunk exports, and scores
every folder with ragstudy.budget_eval's evaluate_folder against the evidence (hit = whole evidence in
the packed context). Prints hit rate per strategy x retriever x budget, the best strategy per retriever, and each
retriever minus dense.

    python benchmarks/retrievers.py --run /tmp/h5-sample sample/evidence.json \\
        --run /tmp/h5-qa ../shared/qa/evidence.csv --scratch /tmp/h5-retrievers

--dense-windows adds dense-exact (every window scored by the run's embedding model, vectors read from its cache;
a check that it reproduces dense) and hybrid-windows (RRF of the dense and BM25 window rankings, parents by their
best fused window: the pipeline's design). Hybrid fuses the parent rankings: dense as written (deep enough for the
largest budget only) and the full BM25-over-windows one; a parent below the dense depth gets only its BM25 term.
Its in_k marks as many top parents as dense's in_k has.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

RETRIEVERS = ("dense", "bm25-windows", "bm25-parents", "hybrid", "dense-exact", "hybrid-windows")


def dense_window_rankings(embedding, windows: Sequence[str], questions: Sequence[str]) -> list[list[tuple[int, float]]]:
    """Exact dense ranking of every window per question (cosine of normalised vectors, best first, ties in window
    order): the windows' vectors come from the embedding's vector cache when the run embedded them."""
    import numpy as np

    matrix = np.asarray(embedding.embed_documents(list(windows)), dtype=np.float32)
    rankings = []
    for question in questions:
        scores = matrix @ np.asarray(embedding.embed_query(question), dtype=np.float32)
        order = np.lexsort((np.arange(len(scores)), -np.round(scores, 5)))
        rankings.append([(int(i), float(scores[i])) for i in order])
    return rankings


def rank_strategy(results_dir: Path, strategy: str, questions: Sequence[str], params: dict, largest: int,
                  embedding=None) -> tuple[dict[str, list], dict[str, float]]:
    """Alternative rankings of one strategy (retriever -> RetrievedParent rows) and BM25 build times (s). With
    `embedding`, also the exact dense window ranking (dense-exact) and RRF of dense and BM25 at the window level,
    parents by their best fused window (hybrid-windows)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ragstudy.knowledge_base import CHILD_SPLITTER
    from ragstudy.lexical import (LexicalIndex, ParentInfo, UnitCorpus, UnitRanked, fill_depth, paper_k_parents,
                                  parents_by_best_unit, reciprocal_rank_fusion, to_retrieved)
    from ragstudy.results import read_chunks
    from ragstudy.results import read_retrieval, retrieval_path

    assert CHILD_SPLITTER == "RecursiveCharacterTextSplitter", "the knowledge base changed its child splitter"
    chunk_rows, _ = read_chunks(results_dir, strategy)
    parents = {row["doc_id"]: ParentInfo(row["path"], int(row["metadata"]["page_start"]),
                                         int(row["metadata"]["page_end"]), row["contents"]) for row in chunk_rows}
    lengths = {pid: len(info.contents) for pid, info in parents.items()}
    splitter = RecursiveCharacterTextSplitter(chunk_size=params["child_chunk_size"],
                                              chunk_overlap=params["child_chunk_overlap"])
    windows, whole = UnitCorpus(), UnitCorpus()
    for pid, info in parents.items():
        windows.add(pid, splitter.split_text(info.contents))
        whole.add(pid, [info.contents])
    timings = {}
    indexes = {}
    for name, corpus in (("bm25-windows", windows), ("bm25-parents", whole)):
        started = time.perf_counter()
        indexes[name] = LexicalIndex(corpus.texts)
        timings[f"{name} ({len(corpus.texts)} units)"] = time.perf_counter() - started
    dense = read_retrieval(retrieval_path(results_dir, strategy))
    k = int(params["k"])
    out: dict[str, list] = {name: [] for name in RETRIEVERS[1:4]}
    dense_units = None
    if embedding is not None:
        out.update({"dense-exact": [], "hybrid-windows": []})
        started = time.perf_counter()
        dense_units = dense_window_rankings(embedding, windows.texts, questions)
        timings["dense windows (cache)"] = time.perf_counter() - started
    for qi, question in enumerate(questions):
        by_retriever = {}
        for name, corpus in (("bm25-windows", windows), ("bm25-parents", whole)):
            units = indexes[name].ranking(question)
            ranked = parents_by_best_unit(units, corpus.parents)
            in_k = paper_k_parents(units, corpus.parents, k if name == "bm25-windows" else 1)
            by_retriever[name] = ranked
            out[name] += to_retrieved(qi, fill_depth(ranked, lengths, largest), parents, in_k)
        dense_ids = [p.doc_id for p in dense.get(qi, [])]
        fused = reciprocal_rank_fusion([dense_ids, [r.parent for r in by_retriever["bm25-windows"]]])
        hybrid = [UnitRanked(pid, score, -1, rank) for rank, (pid, score) in enumerate(fused, start=1)]
        n_in_k = sum(p.in_k for p in dense.get(qi, []))
        out["hybrid"] += to_retrieved(qi, fill_depth(hybrid, lengths, largest), parents,
                                      {r.parent for r in hybrid[:n_in_k]})
        if dense_units is None:
            continue
        units = dense_units[qi]
        exact = parents_by_best_unit(units, windows.parents)
        out["dense-exact"] += to_retrieved(qi, fill_depth(exact, lengths, largest), parents,
                                           paper_k_parents(units, windows.parents, k))
        bm25_units = indexes["bm25-windows"].ranking(question)
        fused_units = reciprocal_rank_fusion([[str(u) for u, _ in units], [str(u) for u, _ in bm25_units]])
        fused_ranking = [(int(u), score) for u, score in fused_units]
        by_window = parents_by_best_unit(fused_ranking, windows.parents)
        out["hybrid-windows"] += to_retrieved(qi, fill_depth(by_window, lengths, largest), parents,
                                              paper_k_parents(fused_ranking, windows.parents, k))
    return out, timings


def run_embedding(run_config: dict, results_dir: Path):
    """The run's embedding model (with its vector cache: set RAGSTUDY_CACHE to the run's cache)."""
    from ragstudy.config import StudyConfig
    from ragstudy.pipeline import lazy_embedding

    return lazy_embedding(StudyConfig.from_dict(run_config, str(Path(results_dir) / "config.json")))()


def evaluate_run(results_dir: Path, evidence_path: Path, scratch: Path, dense_windows: bool = False
                 ) -> tuple[pd.DataFrame, dict]:
    """Per-question hit rows of every retriever (column `retriever`) and the BM25 build times."""
    from Postprocessing import common
    from ragstudy.budget_eval import evaluate_folder, run_measure as measure_for
    from ragstudy.evidence import load_evidence_file as load_evidence
    from ragstudy.results import ranked_strategies as discover
    from ragstudy.results import read_questions
    from ragstudy.results import write_retrieval

    run_config = common.read_run_config(results_dir)
    budgets = list(run_config["budgets"])
    measure = measure_for(run_config, results_dir)
    questions = read_questions(run_config["questions_resolved"] if Path(
        str(run_config.get("questions_resolved", ""))).is_file() else run_config["questions"])
    strategies = discover(results_dir)
    evidence = load_evidence(evidence_path)
    frames = []
    hits, _ = evaluate_folder(results_dir, evidence, budgets, measure, strategies)
    frames.append(hits.assign(retriever="dense"))
    timings = {}
    retrievers = RETRIEVERS[1:] if dense_windows else RETRIEVERS[1:4]
    embedding = run_embedding(run_config, results_dir) if dense_windows else None
    for retriever in retrievers:
        folder = scratch / retriever
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy2(results_dir / "config.json", folder / "config.json")
    for strategy in strategies:
        params = run_config["strategy_params"][strategy]
        ranked, times = rank_strategy(results_dir, strategy, questions, params, max(budgets), embedding)
        timings[strategy] = times
        for retriever, rows in ranked.items():
            folder = scratch / retriever
            for kind in (f"chunks_{strategy}.csv", f"sources_{strategy}.jsonl"):
                shutil.copy2(results_dir / kind, folder / kind)
            write_retrieval(rows, folder, strategy)
    for retriever in retrievers:
        hits, _ = evaluate_folder(scratch / retriever, evidence, budgets, measure, strategies)
        frames.append(hits.assign(retriever=retriever))
    return pd.concat(frames, ignore_index=True), timings


def tables(frame: pd.DataFrame) -> str:
    numeric = frame[frame["budget"] != "k"].astype({"budget": int})
    means = numeric.groupby(["strategy", "retriever", "budget"])["hit"].mean().unstack("budget")
    order = {name: i for i, name in enumerate(RETRIEVERS)}
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


def main(argv: list[str] | None = None) -> int:
    from Postprocessing.common import DataError
    from ragstudy.errors import StudyInputError

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", nargs=2, action="append", required=True, metavar=("RESULTS_DIR", "EVIDENCE"))
    parser.add_argument("--scratch", default="/tmp/ragstudy-retrievers",
                        help="folder for the alternative rankings (one subfolder per run and retriever)")
    parser.add_argument("--out", help="write every per-question hit row to this CSV")
    parser.add_argument("--dense-windows", action="store_true",
                        help="also rank windows exactly with the run's embedding model (vectors from its cache: set "
                             "RAGSTUDY_CACHE as for the run): dense-exact and window-level hybrid-windows")
    args = parser.parse_args(argv)
    frames = []
    for number, (results_dir, evidence) in enumerate(args.run):
        started = time.perf_counter()
        try:
            frame, timings = evaluate_run(Path(results_dir), Path(evidence),
                                          Path(args.scratch) / f"{number}-{Path(results_dir).name}",
                                          args.dense_windows)
        except (DataError, StudyInputError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"## {results_dir} (evidence {evidence}; {time.perf_counter() - started:.0f} s)\n")
        print(tables(frame))
        print("\nBM25 index build (s): " + "; ".join(
            f"{s}: " + ", ".join(f"{k} {v:.2f}" for k, v in t.items()) for s, t in timings.items()))
        print()
        frames.append(frame.assign(results_dir=str(results_dir)))
    if args.out:
        from Postprocessing.common import atomic_write_csv

        atomic_write_csv(Path(args.out), pd.concat(frames))
        print(f"per-question rows in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
