"""Equal context budgets: packing hand-made rankings, the retrieval file's round trip, and a real retrieval-only run
(MiniLM, generated PDFs) whose rankings are deep enough for the largest budget and agree with the chain's k."""

from __future__ import annotations

import pytest

from ragstudy.config import validate_budgets
from ragstudy.errors import StudyInputError
from ragstudy.grid.records import RetrievedParent
from ragstudy.results import open_run, read_retrieval, retrieval_path, write_retrieval
from ragstudy.scoring.budgets import PackedContext, budget_labels, pack_all, pack_budget, pack_paper_k, token_measure
from ragstudy_cli import app


def ranking(lengths, scores=None, in_k=0, question_index=0):
    """Parents of the given lengths in rank order (contents: a letter per parent, repeated)."""
    scores = scores or [0.1 * (i + 1) for i in range(len(lengths))]
    return [RetrievedParent(question_index, i + 1, f"id{i}", "doc.pdf", 1, 1, scores[i], i < in_k,
                            chr(ord("a") + i) * n) for i, n in enumerate(lengths)]


def ids(packed: PackedContext) -> list[str]:
    return [p.doc_id for p in packed.parents]


def test_whole_parents_in_rank_order_until_one_does_not_fit():
    packed = pack_budget(ranking([300, 400, 500, 100]), 1000)
    # 300 + 400 fit; 500 would make 1200: packing stops there and does not skip ahead to the 100-character parent
    assert ids(packed) == ["id0", "id1"]
    assert packed.used == 700 and not packed.cut
    assert packed.texts == ("a" * 300, "b" * 400)


def test_a_total_equal_to_the_budget_fits():
    packed = pack_budget(ranking([500, 500, 1]), 1000)
    assert ids(packed) == ["id0", "id1"] and packed.used == 1000


def test_first_parent_longer_than_the_budget_is_cut_at_the_budget():
    parents = ranking([1500, 100])
    packed = pack_budget(parents, 1000)
    assert ids(packed) == ["id0"] and packed.cut
    assert packed.texts == ("a" * 1000,)
    assert packed.parents[0].contents == "a" * 1500  # the parent itself is untouched


def test_tied_scores_keep_the_rankers_order_whatever_the_input_order():
    parents = ranking([200, 200, 200], scores=[0.5, 0.5, 0.5])
    packed = pack_budget(list(reversed(parents)), 400)
    assert ids(packed) == ["id0", "id1"]


def test_paper_k_takes_the_parents_the_k_windows_retrieved_whole():
    parents = ranking([900, 800, 700], in_k=2)
    packed = pack_paper_k(parents)
    assert ids(packed) == ["id0", "id1"] and packed.used == 1700 and packed.budget == "k"


def test_pack_all_labels_every_budget_and_k():
    packed = pack_all(ranking([300, 300, 300, 300], in_k=1), [1000, 500])
    assert list(packed) == ["500", "1000", "k"] == budget_labels([1000, 500])
    assert [len(packed[b].parents) for b in packed] == [1, 3, 1]


def test_budget_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        pack_budget(ranking([10]), 0)


def test_token_budget_cuts_at_a_token_boundary(minilm_path):
    from transformers import AutoTokenizer

    measure = token_measure(AutoTokenizer.from_pretrained(minilm_path))
    text = "La conservazione dei fascicoli dura dieci anni dalla chiusura del procedimento amministrativo."
    n = measure.length(text)
    assert n > 10
    cut = measure.cut(text, 5)
    assert text.startswith(cut) and measure.length(cut) == 5
    packed = pack_budget(ranking([1])[:0] + [RetrievedParent(0, 1, "x", "d.pdf", 1, 1, 0.1, True, text)], 5,
                         measure)
    assert packed.cut and packed.texts == (cut,) and packed.used == 5
    assert pack_budget([RetrievedParent(0, 1, "x", "d.pdf", 1, 1, 0.1, True, text)], n, measure).texts == (text,)


def test_retrieval_file_round_trip(tmp_path):
    rows = ranking([5, 6], in_k=1) + ranking([7], question_index=3)
    rows[0] = RetrievedParent(0, 1, "id0", "doc.pdf", 2, 3, 0.25, True, 'testo con "virgolette", a capo\ne più')
    path = write_retrieval(rows, tmp_path, "fixed-size")
    assert path == retrieval_path(tmp_path, "fixed-size")
    header = path.read_text(encoding="utf-8").splitlines()[0]
    assert header == "question_index,rank,doc_id,path,page_start,page_end,score,in_k,contents"
    back = read_retrieval(path)
    assert back == {0: rows[:2], 3: rows[2:]}


def test_retrieval_file_with_a_gap_in_the_ranks_is_an_error(tmp_path):
    rows = ranking([5, 6, 7])
    write_retrieval([rows[0], rows[2]], tmp_path, "x")
    with pytest.raises(StudyInputError, match=r"question_index 0 has ranks \[1, 3\]"):
        read_retrieval(retrieval_path(tmp_path, "x"))


def test_retrieval_only_run_ranks_deep_enough_and_matches_the_chains_k(pdf_dir, questions_csv, tmp_path):
    """A real run (MiniLM, two generated PDFs): no LLM loaded, every question ranked past the largest budget, and
    the parents marked in_k are exactly what the strategy's retriever returns (a prefix of the ranking)."""
    from ragstudy import registry

    out = tmp_path / "out"
    code = app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--documents", str(pdf_dir),
                                  "--questions", str(questions_csv), "--output-dir", str(out), "--db-dir",
                                  str(tmp_path / "db"), "--strategies", "fixed-size,newline", "--budgets", "300,900",
                                  "--set", "fixed-size.chunk_size=200", "--set", "fixed-size.chunk_overlap=0"]))
    assert code == 0
    assert not list(out.glob("Dataset*"))
    for strategy in ("fixed-size", "newline"):
        rankings = read_retrieval(retrieval_path(open_run(out).strategy_folder(strategy), strategy))
        assert sorted(rankings) == [0, 1, 2]
        k = registry.get(strategy).defaults.k
        for parents in rankings.values():
            total = sum(len(p.contents) for p in parents)
            assert total > 900 or len(parents) >= 8  # overfills the largest budget (or ranks every parent)
            flags = [p.in_k for p in parents]
            assert flags[0] and flags == sorted(flags, reverse=True)  # in_k is a prefix of the ranking
            assert 1 <= sum(flags) <= k
            assert [p.score for p in parents] == sorted(p.score for p in parents)


def test_token_budgets_use_the_llms_tokenizer_end_to_end(pdf_dir, questions_csv, tmp_path, tiny_phi3):
    """--budget-unit tokens: rankings overfill the largest budget in LLM tokens (the tiny Phi-3's BPE), and the
    evaluation reads the unit from config.json and packs in tokens too."""
    import pandas as pd
    from transformers import AutoTokenizer


    out = tmp_path / "out"
    assert app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--llm", tiny_phi3, "--documents",
                                  str(pdf_dir), "--questions", str(questions_csv), "--output-dir", str(out),
                                  "--db-dir", str(tmp_path / "db"), "--strategies", "newline", "--budgets", "60,300",
                                  "--budget-unit", "tokens"])) == 0
    measure = token_measure(AutoTokenizer.from_pretrained(tiny_phi3))
    for parents in read_retrieval(retrieval_path(open_run(out).strategy_folder("newline"), "newline")).values():
        assert sum(measure.length(p.contents) for p in parents) > 300 or len(parents) >= 8
    evidence = tmp_path / "evidence.csv"
    pd.DataFrame([{"question_index": 1, "evidence": "autenticarsi con SPID"}]).to_csv(evidence, index=False)
    assert app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--no-plot",
                                "--n-resamples", "100"]) == 0
    per_q = pd.read_csv(out / "retrieval_per_question.csv", dtype={"budget": str})
    assert set(per_q["budget"]) == {"60", "300", "k"}
    assert "(tokens)" in (out / "retrieval_summary.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------ the chunk cache

class _Planted:
    """Unpickling this would create `marker`: a stand-in for a malicious pickle in the cache folder."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import pathlib

        return pathlib.Path.touch, (pathlib.Path(self.marker),)


@pytest.mark.parametrize("planted", ["pickle", "garbage", "wrong-json", "list-document", "null-offset"])
def test_chunk_cache_is_json_and_a_bad_file_is_replaced_never_run(pdf_dir, tmp_path, monkeypatch, caplog, planted):
    """The chunk cache is JSON: a planted pickle (which would create a file if unpickled), bytes that are not
    JSON, or JSON of another shape is reported by name, never executed, and replaced by a readable cache whose
    chunks equal a fresh chunking."""
    import json
    import logging
    import pickle

    from ragstudy.config import StudyConfig
    from ragstudy.pipeline import StageSettings, chunk_cache_path, chunk_cached, chunk_documents, chunked_from_json
    from ragstudy.text.textlayer import load_documents

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    stage = StageSettings.of(StudyConfig.resolve(profile="lite", strategies="newline"), "newline")
    documents = load_documents(pdf_dir)
    path = chunk_cache_path(stage, documents)
    assert path.suffix == ".json"
    marker = tmp_path / "executed"
    path.parent.mkdir(parents=True)
    path.write_bytes({"pickle": pickle.dumps(_Planted(marker)), "garbage": b"\x80\x04not json at all",
                      "wrong-json": json.dumps({"format": 1, "documents": [{"chunks": []}]}).encode(),
                      "list-document": json.dumps({"format": 1, "documents": [["a", "b"]]}).encode(),
                      "null-offset": json.dumps({"format": 1, "documents": [{
                          "source": {"path": "a.pdf", "sha256": "0", "text": "abc", "page_starts": [0]},
                          "chunks": [{"doc_id": "x", "contents": "abc", "path": "a.pdf", "start": None, "end": 3,
                                      "page_start": 1, "page_end": 1, "strategy": "newline", "extra": {}}]}]}
                                                ).encode()}[planted])
    with caplog.at_level(logging.WARNING, logger="ragstudy.pipeline"):
        chunked = chunk_cached(stage, documents)
    assert not marker.exists()
    assert str(path) in caplog.text and "unreadable chunk cache" in caplog.text
    fresh = chunk_documents(documents, stage)
    assert [c.chunks for c in chunked] == [c.chunks for c in fresh]
    again = chunked_from_json(path.read_text(encoding="utf-8"))  # replaced by a readable cache
    assert [c.chunks for c in again] == [c.chunks for c in fresh] and [c.source for c in again] == [
        c.source for c in fresh]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ragstudy.pipeline"):
        assert [c.chunks for c in chunk_cached(stage, documents)] == [c.chunks for c in fresh]
    assert "unreadable" not in caplog.text


@pytest.mark.parametrize("budgets, message", [
    ([0, 500], "positive integers"), ([], "positive integers"), ("500,abc", "give positive integers"),
    ([True], "positive integers")])
def test_budgets_are_validated_in_one_place(budgets, message):
    with pytest.raises(StudyInputError, match=message):
        validate_budgets(budgets, "--budgets")
    assert validate_budgets("500, 1000", "--budgets") == (500, 1000)


@pytest.mark.slow
def test_the_answering_chain_chunks_through_the_same_cache(pdf_dir, tmp_path, monkeypatch) -> None:
    """`ragstudy chunks` (the answering chain, chunks only) writes the chunk cache a retrieval run reads, and a
    second chain run reads it back instead of chunking again."""
    from ragstudy import pipeline
    from ragstudy.config import StudyConfig
    from ragstudy.text.textlayer import load_documents

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    args = ["chunks", "--profile", "lite", "--documents", str(pdf_dir), "--strategies", "newline"]
    assert app.main([*args, "--output-dir", str(tmp_path / "one")]) == 0
    config = StudyConfig.resolve(profile="lite", strategies="newline")
    path = pipeline.chunk_cache_path(pipeline.StageSettings.of(config, "newline"), load_documents(pdf_dir))
    assert path.is_file()
    chunked = []
    monkeypatch.setattr(pipeline, "chunk_documents", lambda *a, **k: chunked.append(a) or [])
    assert app.main([*args, "--output-dir", str(tmp_path / "two")]) == 0
    assert chunked == []  # read from the cache
    written = [(tmp_path / run / "chunks_newline.csv").read_bytes() for run in ("one", "two")]
    assert written[0] == written[1]
