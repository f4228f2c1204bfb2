"""benchmarks/retrievers.py's choice of one run per setup: a grid's variant folders (one strategy each) are one run
per setup; two runs of the same embedding setup are refused; a retriever that embeds nothing keeps its first run."""

from __future__ import annotations

import pandas as pd

from benchmarks.retrievers import one_run_per_setup


def rows(folder: str, strategy: str, retriever: str, embedding: str, layer: str = "raw") -> dict:
    return {"results_dir": folder, "strategy": strategy, "retriever": retriever, "embedding": embedding,
            "text_layer": layer, "question_index": 0, "budget": 500, "hit": 1.0}


def test_a_grids_variant_folders_are_one_run_per_setup() -> None:
    frame = pd.DataFrame([rows(f"v/{s}__dense__{e}", s, "dense", e) for s in ("paragraph", "newline")
                          for e in ("e5", "minilm")])
    assert one_run_per_setup(frame).equals(frame)


def test_two_runs_of_one_embedding_setup_are_refused_and_bm25_keeps_its_first(capsys) -> None:
    clash = pd.DataFrame([rows("a", "newline", "dense", "e5"), rows("b", "newline", "dense", "e5")])
    assert one_run_per_setup(clash) is None
    assert "more than one run of newline dense (e5, raw)" in capsys.readouterr().err
    bm25 = pd.DataFrame([rows("a", "newline", "bm25", "-"), rows("b", "newline", "bm25", "-")])
    assert list(one_run_per_setup(bm25)["results_dir"]) == ["a"]
    assert "b ranks with bm25" in capsys.readouterr().err


def test_the_results_page_table_gives_a_strategy_that_reads_no_text_layer_one_row() -> None:
    from benchmarks.retrievers import results_page_table

    frame = pd.DataFrame([rows("p", "paragraph", "dense", "e5", "n/a"), rows("f1", "fixed-size", "dense", "e5"),
                          rows("f2", "fixed-size", "dense", "e5", "clean")])
    table = results_page_table(frame)
    assert "| paragraph | n/a | 1.00 |" in table and "| fixed-size | raw | 1.00 |" in table
    assert "| fixed-size | clean | 1.00 |" in table and "—" not in table
