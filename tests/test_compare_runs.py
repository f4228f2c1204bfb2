"""benchmarks/compare_runs.py on two tiny study folders, one in the layout before the grid (one folder per
retriever) and one after (`variants/<id>/` listed in variants.csv, scores in `groups/<group>/`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.compare_runs import cells_equal, compare_pair, main, map_pairs

RANKING = "question_index,rank,doc_id,score\n0,1,a,0.5\n0,2,b,0.25\n"
VERDICT = "metric,budget,role,strategy,value\nhit,500,best,paragraph,0.75\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture()
def folders(tmp_path: Path) -> tuple[Path, Path]:
    old, new = tmp_path / "old", tmp_path / "new"
    for root in (old, new):
        _write(root / "answers" / "DatasetCustom.csv", "question_index,answer\n0,sì\n")
        _write(root / "answers" / "chunks_paragraph.csv", "doc_id,contents\na,testo\n")
    _write(old / "answers" / "metrics_summary.csv", "strategy,metric,mean\nparagraph,bleu,0.1\n")
    _write(new / "answers" / "metrics_summary.csv", "strategy,metric,mean\nparagraph,bleu,0.1000000000001\n")
    _write(old / "answers" / "DatasetCustom.json", json.dumps([{"answer": "sì", "score": 0.5}]))
    _write(new / "answers" / "DatasetCustom.json", json.dumps([{"answer": "sì", "score": 0.75}]))
    _write(old / "retrieval" / "config.json", json.dumps({"retriever": "dense,bm25"}))
    _write(old / "retrieval" / "dense" / "retrieval_paragraph.csv", RANKING)
    _write(old / "retrieval" / "bm25" / "retrieval_paragraph.csv", RANKING.replace("0.25", "0.125"))
    _write(old / "retrieval" / "dense" / "retrieval_verdict.csv", VERDICT)
    _write(old / "retrieval" / "retrieval_verdict_by_retriever.csv", "retriever,best\ndense,paragraph\n")
    # ids that a glob on the retriever's name would pair the wrong way round: only variants.csv says which is which
    _write(new / "retrieval" / "variants.csv",
           "id,strategy,params,retriever,text_layer,embedding\nx__dense,paragraph,{},bm25,n/a,n/a\n"
           "x__bm25,paragraph,{},dense,n/a,e5\n")
    _write(new / "retrieval" / "variants" / "x__bm25" / "retrieval_paragraph.csv", RANKING)
    _write(new / "retrieval" / "variants" / "x__dense" / "retrieval_paragraph.csv",
           RANKING.replace("0.25", "0.126"))
    _write(new / "retrieval" / "groups" / "dense" / "retrieval_verdict.csv",
           VERDICT + "hit,500,score,fixed-size,0.5\n")
    _write(new / "retrieval" / "retrieval_verdict_by_retriever.csv", "retriever,best\r\ndense,paragraph\r\n")
    return old, new


def _by_old(old: Path, new: Path) -> dict[str, object]:
    return {str(p.old.relative_to(old)): compare_pair(p) for p in map_pairs(old, new)}


def test_rankings_pair_with_the_variant_variants_csv_names(folders) -> None:
    old, new = folders
    pairs = {str(p.old.relative_to(old)): p.new for p in map_pairs(old, new)}
    variants = new / "retrieval" / "variants"
    assert pairs["retrieval/dense/retrieval_paragraph.csv"] == variants / "x__bm25" / "retrieval_paragraph.csv"
    assert pairs["retrieval/bm25/retrieval_paragraph.csv"] == variants / "x__dense" / "retrieval_paragraph.csv"
    assert pairs["retrieval/dense/retrieval_verdict.csv"] == new / "retrieval/groups/dense/retrieval_verdict.csv"
    assert pairs["answers/DatasetCustom.csv"] == new / "answers/DatasetCustom.csv"


def test_identical_equal_as_data_and_different_files_are_told_apart(folders) -> None:
    old, new = folders
    got = _by_old(old, new)
    assert got["answers/DatasetCustom.csv"].byte_identical
    assert got["retrieval/dense/retrieval_paragraph.csv"].byte_identical
    metrics = got["answers/metrics_summary.csv"]  # 1e-13 apart: not the same bytes, the same numbers
    assert (metrics.byte_identical, metrics.data_equal) == (False, True)
    across = got["retrieval/retrieval_verdict_by_retriever.csv"]  # CRLF line ends: the same table
    assert (across.byte_identical, across.data_equal) == (False, True)
    bm25 = got["retrieval/bm25/retrieval_paragraph.csv"]
    assert (bm25.byte_identical, bm25.data_equal) == (False, False)
    assert "row 1 score: 0.125 -> 0.126" in bm25.notes and "largest numeric difference 0.001" in bm25.notes
    dataset = got["answers/DatasetCustom.json"]
    assert dataset.data_equal is False and "[0].score: 0.5 -> 0.75" in dataset.notes


def test_a_table_that_gained_rows_says_every_old_row_is_kept(folders) -> None:
    old, new = folders
    verdict = _by_old(old, new)["retrieval/dense/retrieval_verdict.csv"]
    assert verdict.data_equal is False
    assert "1 rows in old, 2 in new" in verdict.notes and "every old row is in new" in verdict.notes


def test_a_file_without_counterpart_is_reported_and_fails_the_run(folders, capsys) -> None:
    old, new = folders
    _write(old / "answers" / "DatasetNewLine.csv", "question_index,answer\n0,no\n")
    assert main([str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "| Dataset | `answers/DatasetNewLine.csv` -> `—` | no | — | not in new run |" in out
    assert "`retrieval/bm25/retrieval_paragraph.csv` -> `retrieval/variants/x__dense/retrieval_paragraph.csv`" in out


def test_numbers_within_the_tolerance_are_equal() -> None:
    assert cells_equal("0.3", "0.30000000000000004") and cells_equal("nan", "NaN") and cells_equal("1e3", "1000")
    assert not cells_equal("0.3", "0.300001") and not cells_equal("a", "b") and not cells_equal("nan", "0")
