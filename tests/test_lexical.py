"""The Italian analyzer, BM25 over text units, reciprocal rank fusion and parents ranked by their best unit."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO_ROOT, TEST_PARAGRAPHS

from ragstudy.errors import StudyInputError
from ragstudy.lexical import (STOPWORDS_IT, ItalianAnalyzer, LexicalIndex, ParentInfo, UnitRanked, fill_depth, fold,
                              italian_stopwords, paper_k_parents, parents_by_best_unit, to_retrieved)

needs_stopwords = pytest.mark.skipif(not STOPWORDS_IT.is_file(), reason=f"{STOPWORDS_IT} absent (tools/setup.sh "
                                     "installs liblingua-stopwords-perl)")
TEXTS = [f"{title}. {body}" for title, body in TEST_PARAGRAPHS]


def test_fold_lowercases_and_strips_accents():
    assert fold("Più Città È PERCHÉ") == "piu citta e perche"


@needs_stopwords
def test_stopwords_come_from_the_debian_list_folded():
    words = italian_stopwords()
    assert {"di", "che", "non", "piu", "e"} <= words  # "più", "è" folded like the text
    assert not any(ch in "àèéìòù" for word in words for ch in word)
    assert "installazione" not in words


def test_missing_stopword_list_names_the_file_and_package(tmp_path: Path):
    missing = tmp_path / "IT.pm"
    with pytest.raises(StudyInputError, match=r"IT\.pm is missing.*liblingua-stopwords-perl"):
        ItalianAnalyzer(stopwords_path=str(missing)).tokens("il sistema")


def test_unreadable_stopword_list_is_reported(tmp_path: Path):
    bad = tmp_path / "IT.pm"
    bad.write_text("package Lingua::StopWords::IT; 1;\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match="no `return qw"):
        italian_stopwords(bad)


@needs_stopwords
def test_analyzer_drops_stopwords_and_stems_inflections_together():
    analyzer = ItalianAnalyzer()
    tokens = analyzer.tokens("L'installazione è più semplice: installare i requisiti di sistema 3.2")
    assert "e" not in tokens and "piu" not in tokens and "di" not in tokens
    assert tokens.count(analyzer.tokens("installare")[0]) == 2  # installazione and installare share a stem
    assert "3" in tokens and "2" in tokens
    assert ItalianAnalyzer(stem=False).tokens("Installazione") == ["installazione"]


@needs_stopwords
def test_bm25_ranks_the_unit_that_answers_first():
    index = LexicalIndex(TEXTS)
    ranking = index.ranking("Quanto dura il certificato per la firma digitale?")
    assert [unit for unit, _ in ranking][0] == 3
    assert ranking[0][1] > ranking[1][1]
    assert sorted(unit for unit, _ in ranking) == list(range(len(TEXTS)))  # every unit is ranked
    assert index.ranking("Come si accede al portale con SPID?")[0][0] == 1


@needs_stopwords
def test_equal_scores_keep_unit_order_and_unknown_queries_score_zero():
    units = [TEXTS[0], TEXTS[2], TEXTS[0], TEXTS[2]]
    index = LexicalIndex(units)
    ranking = index.ranking("conservazione dei fascicoli")
    assert [unit for unit, _ in ranking[:2]] == [0, 2]
    assert ranking[0][1] == ranking[1][1] > 0
    none = index.ranking("zzzz qwerty")
    assert [unit for unit, _ in none] == [0, 1, 2, 3] and all(score == 0 for _, score in none)


@needs_stopwords
def test_index_key_follows_units_and_analyzer():
    key = LexicalIndex(TEXTS).key
    assert LexicalIndex(list(TEXTS)).key == key
    assert LexicalIndex(TEXTS[::-1]).key != key
    assert LexicalIndex(TEXTS, ItalianAnalyzer(stem=False)).key != key


def test_empty_corpus_is_refused():
    with pytest.raises(StudyInputError, match="at least one"):
        LexicalIndex([])


def test_parents_ranked_by_best_unit_and_depth_fills_the_largest_budget():
    unit_parent = ["p1", "p1", "p2", "p3", "p2"]
    ranked = parents_by_best_unit([(2, 9.0), (0, 8.0), (4, 7.0), (1, 6.0), (3, 1.0)], unit_parent)
    assert ranked == [UnitRanked("p2", 9.0, 2, 1), UnitRanked("p1", 8.0, 0, 2), UnitRanked("p3", 1.0, 3, 3)]
    lengths = {"p1": 300, "p2": 500, "p3": 400}
    assert [r.parent for r in fill_depth(ranked, lengths, 700)] == ["p2", "p1"]  # 800 > 700: overfilled
    assert [r.parent for r in fill_depth(ranked, lengths, 800)] == ["p2", "p1", "p3"]
    assert [r.parent for r in fill_depth(ranked, lengths, 5000)] == ["p2", "p1", "p3"]  # all there is
    assert paper_k_parents([(2, 9.0), (4, 7.0), (0, 8.0)], unit_parent, 2) == {"p2"}


def test_lexical_rankings_round_trip_through_the_retrieval_file(tmp_path: Path):
    from ragstudy.results import read_retrieval, write_retrieval
    from ragstudy.scoring.budgets import pack_budget

    info = {f"p{i}": ParentInfo("Documents/x.pdf", i + 1, i + 1, text) for i, text in enumerate(TEXTS)}
    ranked = [UnitRanked("p3", 7.5, 9, 1), UnitRanked("p0", 2.0, 0, 2)]
    rows = to_retrieved(4, ranked, info, {"p3"})
    assert [(r.doc_id, r.rank, r.in_k, r.page_start) for r in rows] == [("p3", 1, True, 4), ("p0", 2, False, 1)]
    assert rows[0].score < rows[1].score  # negated: lower is better, as for Chroma distances
    back = read_retrieval(write_retrieval(rows, tmp_path, "paragraph"))[4]
    assert back == rows
    assert pack_budget(back, len(TEXTS[3]) + len(TEXTS[0])).texts == (TEXTS[3], TEXTS[0])


@needs_stopwords
def test_a_unit_of_stopwords_only_is_indexed_and_ranked_last():
    index = LexicalIndex(["il di la che", TEXTS[2]])
    assert index.ranking("assistenza telefono") == [(1, pytest.approx(index.scores("assistenza telefono")[1])),
                                                    (0, 0.0)]


@needs_stopwords
@pytest.mark.skipif(not (REPO_ROOT / "Documents").is_dir(), reason="Documents/ absent")
def test_bm25_over_child_windows_of_a_real_pdf():
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ragstudy.text.textlayer import load_documents

    pdf = REPO_ROOT / "Documents" / "manuale_inverter_fotovoltaico.pdf"
    docs = [d for d in load_documents(pdf.parent) if Path(d.path).name == pdf.name]
    windows = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0).split_text(docs[0].text_layer.text)
    index = LexicalIndex(windows)
    best = windows[index.ranking("inverter fotovoltaico")[0][0]]
    assert "inverter" in fold(best)
