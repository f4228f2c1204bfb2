"""Oracle overlap: the share of the oracle answer's content terms found in the packed context."""

from __future__ import annotations

import pytest
from conftest import TEST_PARAGRAPHS

from ragstudy.lexical import STOPWORDS_IT, ItalianAnalyzer
from ragstudy.results import RetrievedParent
from ragstudy.scoring.groundtruth import UNANSWERABLE_ORACLE
from ragstudy.scoring.oracle_overlap import is_unanswerable, overlap

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
    terms = frozenset(analyzer.tokens("Il certificato dura tre anni e si rinnova."))
    assert analyzer.tokens("il e si") == [] and len(terms) == 5  # certificato dura tre anni rinnova
    assert overlap(terms, TEXTS[3], analyzer) == 1.0  # "rinnova", "dura" ... all in the Firma paragraph
    assert overlap(terms, TEXTS[1], analyzer) == 0.0
    # certificato, rinnovava match by stem; Snowball keeps "anno" and "anni" apart
    assert overlap(terms, "Il certificato si rinnovava ogni anno.", analyzer) == pytest.approx(2 / 5)
    with pytest.raises(ValueError):
        overlap(frozenset(), TEXTS[0], analyzer)


def _overlap_per_budget(oracle, rankings, budgets):
    """The oracle overlap of each packed context, through the budget metric registry (as the budget loop does)."""
    from ragstudy.scoring import budget_metrics
    from ragstudy.scoring.budgets import pack_all
    from ragstudy.scoring.oracle_overlap import oracle_terms

    analyzer = ItalianAnalyzer()
    terms = oracle_terms(oracle, analyzer)
    rows = []
    for question, ranked in rankings.items():
        if question not in terms.terms:
            continue
        for label, context in pack_all(ranked, budgets).items():
            case = budget_metrics.ContextCase(context.texts, oracle_terms=terms.terms[question], analyzer=analyzer)
            rows.append({"question_index": question, "budget": label, **budget_metrics.score(case)})
    return terms, rows


def test_oracle_overlap_per_budget_leaves_out_unanswerable_oracles():
    import math

    oracle = ["Il certificato dura tre anni.", UNANSWERABLE_ORACLE, "Sì."]
    lengths = [len(t) for t in TEXTS]
    budget_one = lengths[1] + 1  # room for the first parent only
    rankings = {0: ranking(0, [1, 3, 0, 2]), 1: ranking(1, [0, 1]), 2: ranking(2, [2, 0])}
    terms, rows = _overlap_per_budget(oracle, rankings, [budget_one, sum(lengths)])
    assert terms.unanswerable == {1}
    assert terms.no_terms == {2}  # "Sì" is a stopword
    by_budget = {row["budget"]: row["oracle_overlap"] for row in rows if row["question_index"] == 0}
    assert by_budget[str(budget_one)] == pytest.approx(0.0)  # only the Accesso paragraph fits
    assert by_budget[str(sum(lengths))] == 1.0  # the Firma paragraph is packed too
    assert by_budget["k"] == 0.0  # the paper's k: the first parent only
    assert {row["question_index"] for row in rows} == {0}
    assert all(math.isnan(row["hit"]) for row in rows)  # no evidence given: the evidence metrics are NaN


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


def test_one_packing_per_question_scores_evidence_and_oracle(tmp_path, monkeypatch):
    """The budget loop packs each ranked question once for every metric: the oracle overlap is one of them. A
    question without evidence but with an oracle answer keeps its oracle overlap (and NaN evidence scores)."""
    import math

    from test_retrieval_eval import _results_folder

    from ragstudy.scoring import budget_eval, budgets
    from ragstudy.scoring.evidence import load_evidence_file

    out, evidence, size = _results_folder(tmp_path)
    calls = []
    real = budgets.pack_all
    monkeypatch.setattr(budget_eval, "pack_all", lambda *a, **k: calls.append(a[0][0].question_index) or real(*a, **k))
    oracle = ["Frase numero 05 del manuale tecnico.", "Frase numero 00."]
    frame, evaluations = budget_eval.evaluate_folder(out, load_evidence_file(evidence), [size, 3 * size],
                                                     budgets.CHARS, ["fixed-size", "newline"], oracle)
    assert sorted(calls) == [0, 0, 1, 1]  # two strategies x two ranked questions, each packed once
    rows = frame.set_index(["strategy", "budget", "question_index"])
    assert rows.loc[("fixed-size", str(3 * size), 0), ["hit", "oracle_overlap"]].tolist() == [1.0, 1.0]
    one = rows.loc[("newline", "k", 1)]
    # own k: the parent of sentences 03-05 holds "frase" and "numero" but not "00"
    assert math.isnan(one["hit"]) and one["oracle_overlap"] == pytest.approx(2 / 3)
    assert one["context_chars"] == 3 * size
    assert "oracle overlap of 2 questions" in " ".join(evaluations[0].notes())
