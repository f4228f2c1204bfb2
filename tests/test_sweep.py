"""Sweeps: the sweep file is validated before anything runs, and a real sweep of two configurations (MiniLM,
generated PDFs) writes one summary row per configuration with the metrics at every budget, and the best table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragstudy.errors import StudyInputError
from ragstudy.grid.sweep import load_sweep
from ragstudy_cli import jobs


def write(tmp_path, text: str):
    path = tmp_path / "sweep.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_grid_and_configs_expand_in_file_order_with_readable_ids(tmp_path):
    sweep = load_sweep(write(tmp_path, """
configs:
  - {id: base, strategy: fixed-size}
grid:
  - strategy: fixed-size
    params: {chunk_size: [400, 800], chunk_overlap: 0}
budgets: [100, 300]
evidence: ev.csv
"""))
    assert [c.id for c in sweep.configs] == ["base", None, None]  # ids of the rest: ragstudy.grid.variants.derived_id
    assert sweep.configs[1].params == {"chunk_overlap": 0, "chunk_size": 400}
    assert sweep.budgets == (100, 300) and sweep.evidence == tmp_path / "ev.csv"


@pytest.mark.parametrize("text, message", [
    ("configs:\n  - {strategy: nosuch}\n", "unknown strategy 'nosuch'"),
    ("configs:\n  - {strategy: fixed-size, params: {chunk_sise: 3}}\n", "unknown strategy parameter"),
    ("configs:\n  - {id: a, strategy: newline}\n  - {id: a, strategy: newline}\n", r"ids \['a'\] appear twice"),
    ("budgets: [0]\nconfigs:\n  - {strategy: newline}\n", "positive integers"),
    ("grid: []\n", "no configurations"),
    ("confgs: []\n", "unknown keys"),
    ("configs:\n  - {strategy: newline, retriever: tfidf}\n", "retriever: unknown retriever 'tfidf'; choose one of: dense"),
    ("grid:\n  - {strategy: newline, retriever: [bm25, splade]}\n", "retriever 'splade'"),
    ("configs:\n  - {strategy: newline, retreiver: bm25}\n", r"unknown keys \['retreiver'\]"),
])
def test_bad_sweep_files_fail_before_running(tmp_path, text, message):
    with pytest.raises(StudyInputError, match=message):
        load_sweep(write(tmp_path, text))


def test_retriever_is_a_sweep_axis(tmp_path):
    sweep = load_sweep(write(tmp_path, """
configs:
  - {strategy: fixed-size, retriever: hybrid}
  - {id: plain, strategy: fixed-size}
grid:
  - strategy: newline
    params: {k: [1, 2]}
    retriever: [dense, bm25]
"""))
    assert [(c.id, c.axes.get("retriever"), c.params) for c in sweep.configs] == [
        (None, "hybrid", {}), ("plain", None, {}), (None, "dense", {"k": 1}), (None, "dense", {"k": 2}),
        (None, "bm25", {"k": 1}), (None, "bm25", {"k": 2})]


def test_a_bm25_sweep_entry_runs_without_the_embedding_model(pdf_dir, questions_csv, tmp_path, monkeypatch):
    from ragstudy import pipeline, ranking  # noqa: F401  ranking first: it binds the real lazy_embedding, not the fake
    from ragstudy.config import StudyConfig
    from ragstudy.grid.sweep import run_sweep

    def no_model(embedder, threads, deferred=False):
        return lambda: pytest.fail("a BM25 sweep entry loaded the embedding model")

    monkeypatch.setattr(pipeline, "lazy_embedding", no_model)
    evidence = tmp_path / "evidence.csv"
    pd.DataFrame([{"question_index": 0, "evidence": "conserva i fascicoli per dieci anni dalla chiusura"}]
                 ).to_csv(evidence, index=False)
    sweep = write(tmp_path, """
budgets: [200, 600]
configs:
  - {id: lexical, strategy: fixed-size, params: {chunk_size: 150, chunk_overlap: 0}, retriever: bm25}
""")
    out = tmp_path / "out"
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", documents=str(pdf_dir),
                                 questions=str(questions_csv), output_dir=str(out), db_dir=str(tmp_path / "db"))
    run_sweep(config, sweep, evidence)
    summary = pd.read_csv(out / "sweep_summary.csv")
    assert summary["retriever"].tolist() == ["bm25"] and summary["embedded"].tolist() == [0]
    assert summary["hit@600"].item() == 1.0  # "fascicoli ... dieci anni": BM25 finds the one parent with them
    recorded = json.loads((out / "variants" / "lexical" / "config.json").read_text(encoding="utf-8"))
    assert recorded["retriever"] == "bm25"


def test_a_sweep_without_evidence_on_other_questions_stops_before_running(pdf_dir, questions_csv, tmp_path):
    """The bundled sample's evidence belongs to the bundled Questions.csv only
    (ragstudy.scoring.evidence.default_evidence): a sweep of other questions with no --evidence and no `evidence:` key
    is one error naming the fix, and writes nothing."""
    from ragstudy.config import StudyConfig
    from ragstudy.grid.sweep import run_sweep

    sweep = write(tmp_path, "configs:\n  - {id: one, strategy: fixed-size}\n")
    out = tmp_path / "out"
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", documents=str(pdf_dir),
                                 questions=str(questions_csv), output_dir=str(out), db_dir=str(tmp_path / "db"))
    with pytest.raises(StudyInputError, match=r"sweep\.yaml: a sweep is scored against evidence and none is given "
                                              r"for .*Questions\.csv; pass --evidence FILE or set `evidence:`"):
        run_sweep(config, sweep)
    assert not out.exists()


def test_shipped_sweeps_are_valid():
    from conftest import REPO_ROOT

    hope = load_sweep(REPO_ROOT / "sweeps" / "hope_eight.yaml")
    assert [c.strategy for c in hope.configs].count("token") == 4
    assert [c.strategy for c in hope.configs].count("fixed-size") == 2
    assert [c.strategy for c in hope.configs].count("semantic") == 2
    assert hope.configs[-1].strategy == "paragraph" and hope.evidence.is_file()
    assert len(load_sweep(REPO_ROOT / "sweeps" / "paragraph_sizes.yaml").configs) == 8


@pytest.mark.slow  # ~45 s on a loaded 2-core machine (indexes 4 configurations' windows)
def test_sweep_of_two_configurations(pdf_dir, questions_csv, tmp_path, capsys):
    from ragstudy.config import StudyConfig
    from ragstudy.grid.sweep import run_sweep

    evidence = tmp_path / "evidence.csv"
    pd.DataFrame([{"question_index": 0, "evidence": "conserva i fascicoli per dieci anni dalla chiusura"},
                  {"question_index": 2, "evidence": "ricevono risposta entro cinque giorni lavorativi"}]
                 ).to_csv(evidence, index=False)
    sweep = write(tmp_path, """
budgets: [200, 600]
configs:
  - {id: small, strategy: fixed-size, params: {chunk_size: 150, chunk_overlap: 0}}
  - {id: large, strategy: fixed-size, params: {chunk_size: 600, chunk_overlap: 0}}
""")
    out = tmp_path / "out"
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", documents=str(pdf_dir),
                                 questions=str(questions_csv), output_dir=str(out), db_dir=str(tmp_path / "db"))
    result = run_sweep(config, sweep, evidence)
    assert [r["config"] for r in result.rows] == ["small", "large"]
    summary = pd.read_csv(out / "sweep_summary.csv")
    assert list(summary.columns[:9]) == ["config", "strategy", "params", "chunks", "chars_mean", "chars_cv",
                                         "index_seconds", "embedded", "reused"]
    for label in ("200", "600", "k"):
        for metric in ("hit", "span_recall", "span_precision", "span_iou", "mrr"):
            assert f"{metric}@{label}" in summary.columns
    small, large = summary.iloc[0], summary.iloc[1]
    assert json.loads(small["params"]) == {"chunk_overlap": 0, "chunk_size": 150}
    assert small["chunks"] > large["chunks"] and small["chars_mean"] < large["chars_mean"]
    assert small["embedded"] > 0
    assert 0 <= summary["hit@600"].min() and summary["hit@600"].max() <= 1
    best = pd.read_csv(out / "sweep_best.csv", dtype={"budget": str})
    assert list(best.columns) == ["metric", "budget", "config", "strategy", "params", "value"]
    assert len(best) == 3 * 6  # budgets x the metrics scored without an oracle (hit, hit_contiguous, spans, mrr)
    hit600 = best[(best.metric == "hit") & (best.budget == "600")].iloc[0]
    assert hit600["value"] == summary["hit@600"].max()
    for name in ("small", "large"):
        assert (out / "variants" / name / "retrieval_fixed-size.csv").is_file()
        assert (out / "variants" / name / "retrieval_per_question.csv").is_file()
    # the script prints the table and draws the plot (the core does neither)

    jobs.print_sweep(result)
    assert "sweep of 2 configurations" in capsys.readouterr().out
    assert (out / "sweep_hit_rate.html").is_file()
    # a second sweep with nothing changed embeds nothing
    again = run_sweep(config, sweep, evidence).rows
    assert [r["embedded"] for r in again] == [0, 0]
