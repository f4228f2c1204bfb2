"""Oracle overlap: the share of the oracle answer's content terms found in the packed context."""

from __future__ import annotations

import pytest
from conftest import TEST_PARAGRAPHS

from ragstudy.groundtruth import UNANSWERABLE_ORACLE
from ragstudy.lexical import STOPWORDS_IT, ItalianAnalyzer
from ragstudy.oracle_overlap import answer_terms, is_unanswerable, overlap, score_strategy
from ragstudy.results import RetrievedParent

pytestmark = pytest.mark.skipif(not STOPWORDS_IT.is_file(), reason=f"{STOPWORDS_IT} absent (tools/setup.sh "
                                "installs liblingua-stopwords-perl)")
TEXTS = [f"{title}. {body}" for title, body in TEST_PARAGRAPHS]


def ranking(question_index: int, order: list[int]) -> list[RetrievedParent]:
    return [RetrievedParent(question_index, rank, f"p{i}", "doc.pdf", 1, 1, 0.1 * rank, rank == 1, TEXTS[i])
            for rank, i in enumerate(order, start=1)]


def test_unanswerable_phrase_is_recognised_loosely():
    assert is_unanswerable(UNANSWERABLE_ORACLE)
    assert is_unanswerable("  il contesto fornito NON contiene la risposta ")
    assert not is_unanswerable("Il contesto fornito contiene la risposta: dieci anni.")


def test_overlap_counts_stemmed_content_words_only():
    analyzer = ItalianAnalyzer()
    terms = answer_terms("Il certificato dura tre anni e si rinnova.", analyzer)
    assert analyzer.tokens("il e si") == [] and len(terms) == 5  # certificato dura tre anni rinnova
    assert overlap(terms, TEXTS[3], analyzer) == 1.0  # "rinnova", "dura" ... all in the Firma paragraph
    assert overlap(terms, TEXTS[1], analyzer) == 0.0
    # certificato, rinnovava match by stem; Snowball keeps "anno" and "anni" apart
    assert overlap(terms, "Il certificato si rinnovava ogni anno.", analyzer) == pytest.approx(2 / 5)
    with pytest.raises(ValueError):
        overlap(frozenset(), TEXTS[0], analyzer)


def test_score_strategy_per_budget_leaves_out_unanswerable_oracles():
    oracle = ["Il certificato dura tre anni.", UNANSWERABLE_ORACLE, "Sì."]
    lengths = [len(t) for t in TEXTS]
    budget_one = lengths[1] + 1  # room for the first parent only
    rankings = {0: ranking(0, [1, 3, 0, 2]), 1: ranking(1, [0, 1]), 2: ranking(2, [2, 0])}
    scored = score_strategy("s", rankings, oracle, [budget_one, sum(lengths)])
    assert scored.unanswerable == 1
    assert scored.no_terms == 1  # "Sì" is a stopword
    by_budget = {row["budget"]: row["oracle_overlap"] for row in scored.rows if row["question_index"] == 0}
    assert by_budget[str(budget_one)] == pytest.approx(0.0)  # only the Accesso paragraph fits
    assert by_budget[str(sum(lengths))] == 1.0  # the Firma paragraph is packed too
    assert by_budget["k"] == 0.0  # the paper's k: the first parent only
    assert {row["question_index"] for row in scored.rows} == {0}


def test_the_oracle_is_the_given_file_else_the_one_beside_the_questions(tmp_path):
    """The oracle overlap takes its oracle through the one rule every script uses (ragstudy.results.run_oracle)."""
    import json

    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError
    from ragstudy.results import run_oracle

    questions = tmp_path / "Questions.csv"
    questions.write_text("questions\nUno?\nDue?\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", questions=str(questions)).to_dict()
    (run / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert run_oracle(run) is None  # no Oracle.csv beside the questions: no oracle overlap
    (tmp_path / "Oracle.csv").write_text("oracle\nuno\ndue\n", encoding="utf-8")
    assert run_oracle(run) == (["uno", "due"], tmp_path / "Oracle.csv")
    with pytest.raises(StudyInputError, match="file not found"):
        run_oracle(run, tmp_path / "missing.csv")
    short = tmp_path / "short.csv"
    short.write_text("oracle\nuno\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match=r"short\.csv: 1 oracle answers but .*Questions\.csv has 2 questions"):
        run_oracle(run, short)


def test_oracle_overlap_join_keeps_the_evidence_rows_in_their_order():
    """Strategies stay in registry order (paragraph before fixed-size), as retrieval_per_question.csv had them
    before the oracle overlap was joined; questions scored by the overlap alone follow."""
    import pandas as pd

    from ragstudy.budget_eval import with_oracle_overlap

    frame = pd.DataFrame({"strategy": ["paragraph", "paragraph", "fixed-size"], "budget": ["500", "1000", "500"],
                          "question_index": [0, 0, 0], "hit": [1.0, 0.0, 1.0]})
    overlap = [{"strategy": "fixed-size", "budget": "500", "question_index": 0, "oracle_overlap": 0.5},
               {"strategy": "paragraph", "budget": "500", "question_index": 0, "oracle_overlap": 1.0},
               {"strategy": "paragraph", "budget": "500", "question_index": 7, "oracle_overlap": 0.25}]
    joined = with_oracle_overlap(frame, overlap)
    assert list(zip(joined["strategy"], joined["budget"], joined["question_index"])) == [
        ("paragraph", "500", 0), ("paragraph", "1000", 0), ("fixed-size", "500", 0), ("paragraph", "500", 7)]
    assert joined["oracle_overlap"].iloc[0] == 1.0 and joined["oracle_overlap"].iloc[2] == 0.5
    assert pd.isna(joined["oracle_overlap"].iloc[1])
    assert pd.isna(joined["hit"].iloc[3])
