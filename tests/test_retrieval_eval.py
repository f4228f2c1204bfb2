"""Retrieval metrics at equal budgets: each metric on hand-made cases with known values, evidence normalisation
(the hand-written CSV format with hyphenation and line breaks inside the evidence), and the script end to end on a
hand-made results folder (no models)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragstudy.errors import StudyInputError
from ragstudy.scoring.evidence import (EvidenceError, EvidenceText, QuestionEvidence, SourceIndex, context_scores,
                                       load_evidence_file, locate, normalize_for_match, score_spans)
from ragstudy_cli import app


# ------------------------------------------------------------------------------------------ metric values

def test_score_spans_on_a_known_case():
    # evidence [0, 10); one retrieved span [5, 25) of 20 characters: 5 shared
    s = score_spans([("a", 0, 10)], [("a", 5, 25)], retrieved_chars=20)
    assert (s.intersection, s.evidence_chars, s.retrieved_chars) == (5, 10, 20)
    assert s.recall == pytest.approx(0.5)
    assert s.precision == pytest.approx(0.25)
    assert s.iou == pytest.approx(5 / (20 + 10 - 5))


def test_score_spans_counts_overlapping_parents_once_in_recall_twice_in_length():
    s = score_spans([("a", 10, 20)], [("a", 0, 15), ("a", 12, 30)], retrieved_chars=15 + 18)
    assert s.recall == 1.0 and s.precision == pytest.approx(10 / 33) and s.iou == pytest.approx(10 / 33)


def test_score_spans_other_document_and_unlocated_evidence():
    s = score_spans([("a", 0, 10)], [("b", 0, 10)], retrieved_chars=10, unlocated_chars=10)
    assert (s.recall, s.precision, s.iou, s.evidence_chars) == (0.0, 0.0, 0.0, 20)


def test_context_scores_hit_and_reciprocal_rank():
    evidence = [("a", 100, 120)]
    second = context_scores(evidence, [([("a", 0, 50)], 50), ([("a", 90, 130)], 40)])
    assert (second.hit, second.reciprocal_rank) == (1.0, 0.5)
    assert second.span_recall == 1.0 and second.span_precision == pytest.approx(20 / 90)
    assert second.span_iou == pytest.approx(20 / 90)
    # evidence split over the parents ranked 1 and 3: complete at rank 3
    split = context_scores(evidence, [([("a", 90, 110)], 20), ([("a", 0, 5)], 5), ([("a", 110, 140)], 30)])
    assert (split.hit, split.reciprocal_rank) == (1.0, pytest.approx(1 / 3))
    partial = context_scores(evidence, [([("a", 90, 110)], 20)])
    assert (partial.hit, partial.reciprocal_rank, partial.span_recall) == (0.0, 0.0, 0.5)
    empty = context_scores(evidence, [])
    assert (empty.hit, empty.span_recall, empty.span_precision, empty.span_iou) == (0.0, 0.0, 0.0, 0.0)


# ------------------------------------------------------------------------------------------ normalisation

def test_normalisation_ignores_line_breaks_hyphenation_ligatures_case_accents_and_quotes():
    assert normalize_for_match("La conﬁgura-\nzione  è “Salvata”\n| OK") == \
        normalize_for_match("la configurazione e \"salvata\" ok") == "laconfigurazioneesalvataok"
    assert normalize_for_match("Ｆｕｌｌ２") == "full2"  # NFKC: full-width letters and digits


def test_hand_written_evidence_with_hyphenation_and_line_breaks(tmp_path):
    path = tmp_path / "evidence.csv"
    pd.DataFrame([
        {"question_index": 0, "evidence": "La configura-\nzione del si-\nstema si salva\nogni sera.", "pdf": "m.pdf"},
        {"question_index": 2, "evidence": "primo punto", "pdf": ""},
        {"question_index": 2, "evidence": "secondo\npunto", "pdf": ""},
    ]).to_csv(path, index=False)
    evidence = load_evidence_file(path)
    assert sorted(evidence) == [0, 2]  # question 1 has no rows: unanswerable
    assert evidence[2].texts == (EvidenceText("primo punto", None), EvidenceText("secondo\npunto", None))
    text = "Capitolo 1\n\nLa configurazione del sistema si salva ogni sera. Altro testo.\n\nprimo punto; secondo punto"
    index = SourceIndex({"docs/m.pdf": text})
    located = index.locate(evidence[0])
    assert located.unlocated == 0 and not located.documents_missing
    (path_, start, end), = located.spans
    norm = index.normalized("docs/m.pdf")
    assert path_ == "docs/m.pdf"
    assert text[norm.offsets[start]:norm.offsets[end - 1] + 1] == "La configurazione del sistema si salva ogni sera"
    assert len(index.locate(evidence[2]).spans) == 2


def test_evidence_across_a_page_break_is_found_in_pieces_around_the_footer():
    text = ("il responsabile della conservazione verifica l'integrità\nPagina 3 di 9\nManuale\n"
            "dei pacchetti di archiviazione ogni sei mesi")
    evidence = normalize_for_match("il responsabile della conservazione verifica l'integrità\n"
                                   "dei pacchetti di archiviazione ogni sei mesi")
    pieces, lost = locate(evidence, normalize_for_match(text))
    assert lost == 0 and len(pieces) == 2
    assert sum(e - s for s, e in pieces) == len(evidence)


def test_evidence_in_a_pdf_that_was_not_indexed_is_reported():
    located = SourceIndex({"a.pdf": "testo"}).locate(QuestionEvidence(0, (EvidenceText("testo", "b.pdf"),)))
    assert located.documents_missing


@pytest.mark.parametrize("content, message", [
    ("question_index,text\n0,x\n", "no 'evidence' column"),
    ("question_index,evidence\nuno,abc\n", "line 2: question_index 'uno'"),
    ("question_index,evidence\n0,abcdef\n1, -- \n", "line 3: empty evidence"),
])
def test_malformed_hand_written_evidence_names_the_row(tmp_path, content, message):
    path = tmp_path / "e.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EvidenceError, match=message):
        load_evidence_file(path)


def test_bundled_sample_evidence_loads_through_the_groundtruth_loader():
    from conftest import REPO_ROOT

    evidence = load_evidence_file(REPO_ROOT / "sample" / "evidence.json")
    assert len(evidence) == 45  # 49 questions, 4 unanswerable
    assert evidence[0].texts[0].document == "manuale_software_gestionale.pdf"


def test_shared_qa_evidence_loads(shared_pdfs):
    path = shared_pdfs.parent / "qa" / "evidence.csv"
    if not path.is_file():
        pytest.skip(f"{path} absent")
    evidence = load_evidence_file(path)
    assert len(evidence) == 36 and all(len(e.texts) == 1 for e in evidence.values())


# ------------------------------------------------------------------------------------------ the script

def _results_folder(tmp_path):
    """Two strategies over one document: fixed-size parents of one sentence (S characters), newline parents of
    three; budgets S and 3S."""
    from ragstudy.results import write_chunks
    from ragstudy.results import RetrievedParent, write_retrieval
    from ragstudy.text.chunks import build_chunks
    from ragstudy.text.textlayer import SourceText

    sentences = [f"Frase numero {i:02d} del manuale tecnico. " for i in range(12)]
    size = len(sentences[0])
    text = "".join(sentences)
    source = SourceText("docs/m.pdf", "0" * 64, text, (0,))
    out = tmp_path / "results"
    out.mkdir()
    for strategy, step in (("fixed-size", size), ("newline", 3 * size)):
        chunked = build_chunks(source, [(s, min(s + step, len(text))) for s in range(0, len(text), step)], strategy)
        write_chunks([chunked], strategy, out)
        chunks = chunked.chunks
        # question 0's evidence is sentence 5; small ranks it 2nd, big ranks the parent holding it 1st
        order = [0, 5, 1, 2, 3] if step == size else [1, 0, 2]
        rows = [RetrievedParent(q, r + 1, chunks[i].doc_id, source.path, 1, 1, 0.1 * r, r == 0, chunks[i].contents)
                for q in (0, 1) for r, i in enumerate(order)]
        write_retrieval(rows, out, strategy)
    (out / "config.json").write_text(json.dumps({"budgets": [size, 3 * size], "budget_unit": "chars",
                                                 "strategy_params": {"fixed-size": {"k": 4}, "newline": {"k": 4}}}))
    evidence = tmp_path / "evidence.csv"
    pd.DataFrame([{"question_index": 0, "evidence": "Frase numero 05 del\nmanuale tecnico.", "pdf": "m.pdf"}]
                 ).to_csv(evidence, index=False)
    return out, evidence, size


def test_script_end_to_end_on_a_hand_made_folder(tmp_path):

    out, evidence, size = _results_folder(tmp_path)
    small, big = str(size), str(3 * size)
    assert app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--no-plot",
                                "--n-resamples", "200"]) == 0
    per_q = pd.read_csv(out / "retrieval_per_question.csv", dtype={"budget": str})
    assert list(per_q.columns) == ["strategy", "budget", "question_index", "hit", "hit_contiguous", "span_recall",
                                   "span_precision", "span_iou", "reciprocal_rank", "context_chars", "oracle_overlap",
                                   "parents"]
    assert set(per_q["question_index"]) == {0}  # question 1 has no evidence: left out
    row = per_q.set_index(["strategy", "budget"])
    # one-sentence parents: budget S holds the rank-1 parent only (no evidence); 3S holds ranks 1-3, evidence at 2
    assert row.loc[("fixed-size", small), ["hit", "reciprocal_rank", "parents"]].tolist() == [0.0, 0.0, 1]
    assert row.loc[("fixed-size", big), ["hit", "reciprocal_rank", "parents"]].tolist() == [1.0, 0.5, 3]
    assert row.loc[("fixed-size", big), "span_precision"] == pytest.approx(1 / 3, abs=0.02)
    # three-sentence parents: the first is cut at S -> sentence 3 only; at 3S it holds sentences 3-5
    assert row.loc[("newline", small), ["hit", "span_recall", "context_chars", "parents"]].tolist() == [0.0, 0.0,
                                                                                                     size, 1]
    assert row.loc[("newline", big), ["hit", "reciprocal_rank", "span_recall"]].tolist() == [1.0, 1.0, 1.0]
    assert row.loc[("newline", big), "span_iou"] == pytest.approx(1 / 3, abs=0.02)
    assert row.loc[("newline", "k"), "context_chars"] == 3 * size
    summary = pd.read_csv(out / "retrieval_summary.csv", dtype={"budget": str})
    assert list(summary.columns) == ["strategy", "strategy_display", "budget", "metric", "n", "mean", "ci_low",
                                     "ci_high", "confidence", "n_resamples", "seed"]
    assert set(summary["metric"]) == {"hit", "hit_contiguous", "span_recall", "span_precision", "span_iou", "mrr",
                                      "context_chars"}
    assert summary[["confidence", "n_resamples", "seed"]].drop_duplicates().values.tolist() == [[0.95, 200, 0]]
    assert set(summary["budget"]) == {small, big, "k"}
    assert summary.loc[(summary.strategy == "newline") & (summary.metric == "mrr") & (summary.budget == big),
                       "mean"].item() == 1.0
    paired = pd.read_csv(out / "retrieval_paired.csv", dtype={"budget": str})
    assert list(paired.columns) == ["budget", "metric", "strategy_a", "strategy_b", "n", "mean_diff", "ci_low",
                                    "ci_high", "p_wilcoxon", "p_holm", "confidence", "n_resamples", "seed"]
    assert "1 unanswerable" in (out / "retrieval_summary.md").read_text(encoding="utf-8")


def test_script_refuses_a_ranking_from_another_run(tmp_path):

    out, evidence, _ = _results_folder(tmp_path)
    path = out / "retrieval_newline.csv"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[0, "contents"] = "altro testo"
    frame.to_csv(path, index=False)
    assert app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--no-plot",
                                "--strategies", "newline"]) == 2


# ------------------------------------------------------------------------ hit and the contiguous hit

PAGE_ONE = ("Capitolo 3. Le domande si presentano allo sportello unico del comune. "
            "Il modulo di richiesta deve essere firmato dal responsabile del procedimento")
FOOTER = "\nManuale operativo - Pagina 1\n"
PAGE_TWO = (" e consegnato entro trenta giorni all'ufficio protocollo generale. "
            "Capitolo 4. Gli allegati tecnici seguono lo schema del regolamento.")
SPLIT_EVIDENCE = ("Il modulo di richiesta deve essere firmato dal responsabile del procedimento e consegnato entro "
                  "trenta giorni all'ufficio protocollo generale.")


def _page_break_folder(tmp_path):
    """One two-page document whose evidence crosses the page break (a running footer between its halves), chunked
    two ways: fixed-size parents [page one | footer + page two] hold the halves in two adjacent parents; newline
    parents [page one | footer | page two] hold them in parents 1 and 3, and the ranking packs only those two."""
    from ragstudy.results import RetrievedParent, write_chunks, write_retrieval
    from ragstudy.text.chunks import build_chunks
    from ragstudy.text.textlayer import SourceText

    text = PAGE_ONE + FOOTER + PAGE_TWO
    one, two = len(PAGE_ONE), len(PAGE_ONE) + len(FOOTER)
    source = SourceText("docs/m.pdf", "0" * 64, text, (0, two))
    out = tmp_path / "results"
    out.mkdir()
    layouts = {"fixed-size": ([(0, one), (one, len(text))], [1, 0]),
               "newline": ([(0, one), (one, two), (two, len(text))], [2, 0])}  # rank page two, then page one
    for strategy, (spans, order) in layouts.items():
        chunked = build_chunks(source, spans, strategy)
        write_chunks([chunked], strategy, out)
        chunks = chunked.chunks
        write_retrieval([RetrievedParent(0, r + 1, chunks[i].doc_id, source.path, 1, 2, 0.1 * r, True,
                                         chunks[i].contents) for r, i in enumerate(order)], out, strategy)
    budget = len(text)  # every ranked parent fits; the newline footer parent is never ranked
    (out / "config.json").write_text(json.dumps({"budgets": [budget], "budget_unit": "chars",
                                                 "strategy_params": {"fixed-size": {"k": 2}, "newline": {"k": 2}}}))
    evidence = tmp_path / "evidence.csv"
    pd.DataFrame([{"question_index": 0, "evidence": SPLIT_EVIDENCE, "pdf": "m.pdf"}]).to_csv(evidence, index=False)
    return out, evidence, budget


def test_contiguous_hit_needs_adjacent_parents_for_a_page_break_evidence(tmp_path):
    from ragstudy.scoring.budget_eval import evaluate_folder
    from ragstudy.scoring.budgets import CHARS
    from ragstudy.scoring.evidence import load_evidence_file

    out, evidence, budget = _page_break_folder(tmp_path)
    frame, _ = evaluate_folder(out, load_evidence_file(evidence), [budget], CHARS, ["fixed-size", "newline"])
    rows = frame.set_index(["strategy", "budget"])
    # adjacent parents in reading order hold the two halves: a hit, and a contiguous one
    assert rows.loc[("fixed-size", str(budget)), ["hit", "hit_contiguous", "parents"]].tolist() == [1.0, 1.0, 2]
    # parents 1 and 3 (the footer parent between them is not in the context): a hit, not a contiguous one
    assert rows.loc[("newline", str(budget)), ["hit", "hit_contiguous", "parents"]].tolist() == [1.0, 0.0, 2]
    assert rows.loc[("newline", str(budget)), "span_recall"] == 1.0


def test_contiguous_hit_on_hand_placed_parents():
    from ragstudy.scoring.budget_metrics import ContextParent, contiguous_hit
    from ragstudy.scoring.evidence import LocatedEvidence

    two_pieces = LocatedEvidence((("a", 10, 20), ("a", 30, 40)), 0, False)
    one, gap, three = ContextParent(("a", 0, 25), 25, 0), ContextParent(("a", 25, 28), 3, 1), \
        ContextParent(("a", 28, 50), 22, 2)
    assert contiguous_hit(two_pieces, [three, one]) == 0.0  # positions 0 and 2: not adjacent
    assert contiguous_hit(two_pieces, [three, gap, one]) == 1.0  # 0, 1, 2 in any rank order
    assert contiguous_hit(LocatedEvidence((("a", 10, 20),), 0, False), [one]) == 1.0  # inside one parent
    assert contiguous_hit(LocatedEvidence((("a", 10, 20),), 3, False), [one]) == 0.0  # partly unlocated
    other = ContextParent(("b", 0, 50), 50, 1)  # adjacent position, another document
    assert contiguous_hit(two_pieces, [one, other]) == 0.0


def test_the_verdict_and_the_report_show_the_contiguous_hit(tmp_path):
    from Postprocessing import write_report
    from ragstudy import results
    from ragstudy.scoring.verdict import all_verdicts

    out, evidence, _ = _page_break_folder(tmp_path)
    assert app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--no-plot",
                                "--n-resamples", "200"]) == 0
    verdicts = all_verdicts(results.read_table(out, results.RETRIEVAL_VERDICT))
    assert [v.metric for v in verdicts] == ["hit", "hit_contiguous"]
    strict = verdicts[1].budgets[0]
    assert [s.strategy for s in strict.best] == ["fixed-size"] and strict.best[0].mean == 1.0
    md = (out / "retrieval_summary.md").read_text(encoding="utf-8")
    assert "### The same verdict on the contiguous hit rate" in md and verdicts[1].lines()[1] in md
    page, page_md, _ = write_report.build(out, generated="test")
    for line in verdicts[1].lines():
        assert line in page_md
    assert "hit_contiguous" in page


def test_each_script_reads_config_json_once_through_its_run_handle(tmp_path, monkeypatch):
    from Postprocessing import write_report
    from ragstudy import results

    out, evidence, _ = _results_folder(tmp_path)
    reads = []
    real = results.read_config
    monkeypatch.setattr(results, "read_config", lambda folder: reads.append(folder) or real(folder))
    assert app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--no-plot",
                                "--n-resamples", "50"]) == 0
    assert len(reads) == 1
    reads.clear()
    write_report.build(out, generated="test")
    assert len(reads) == 1
