"""Chunk-quality metrics on hand-made cases with known answers: alignment, intrinsic statistics, retrieval
span metrics, Spearman table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from Postprocessing.chunkeval import align, chain_retrieval, intrinsic, tables
from Postprocessing.chunkeval.align import ReferenceDoc, TokenSeq, align_document, textlayer_reference

BODY = ("Conservazione\n\nIl sistema conserva i fascicoli per dieci anni dalla chiusura. La verifica avviene ogni sei "
        "mesi.\n\nAccesso\n\nL'accesso avviene con la Carta d'identità elettronica.")


def body_reference() -> ReferenceDoc:
    ends = []
    pos = 0
    for block in BODY.split("\n\n"):
        pos += len(block)
        ends.append(pos)
        pos += 2
    return ReferenceDoc("manuale.pdf", BODY, "groundtruth", tuple(ends))


def chunk_of(alignment, text: str, needle: str, doc_id: str = "c") -> align.AlignedChunk:
    start = text.index(needle)
    return alignment.align_chunk(doc_id, "manuale.pdf", start, start + len(needle), len(needle))


# ------------------------------------------------------------------------------------------------- alignment

def test_fold_joins_line_break_hyphens_and_expands_ligatures_keeping_offsets() -> None:
    text = "la veri\ufb01ca della conﬁgura-\nzione"
    folded, offsets = align.fold_with_offsets(text)
    assert folded == "la verifica della configurazione"
    assert len(offsets) == len(folded)
    assert text[offsets[folded.index("zione")]:].startswith("zione")


def test_identical_texts_map_a_chunk_to_its_own_span() -> None:
    ref = body_reference()
    alignment = align_document(BODY, ref)
    needle = "Il sistema conserva i fascicoli per dieci anni dalla chiusura."
    chunk = chunk_of(alignment, BODY, needle)
    start = BODY.index(needle)
    assert chunk.ref_intervals == ((start, start + len(needle)),)
    assert alignment.matched_share == 1.0


def test_text_layer_with_header_hyphenation_and_ligature_aligns_to_the_body_text() -> None:
    layer = ("Manuale di prova\n\nConservazione\n\nIl sistema conserva i fascicoli per dieci anni dalla chiu-\n"
             "sura. La veri\ufb01ca avviene ogni sei mesi.\n\nPagina 1 di 2\n\nAccesso\n\nL'accesso avviene con la "
             "Carta d'identità elettronica.")
    ref = body_reference()
    alignment = align_document(layer, ref)
    assert alignment.matched_share == 1.0  # every body word is found; the header and footer match nothing
    header = chunk_of(alignment, layer, "Manuale di prova")
    assert header.ref_intervals == () and header.ref_end is None
    paragraph = chunk_of(alignment, layer, "Il sistema conserva i fascicoli per dieci anni dalla chiu-\nsura.")
    start = BODY.index("Il sistema")
    assert paragraph.ref_intervals == ((start, BODY.index("chiusura.") + len("chiusura.")),)


def test_a_block_that_moved_is_matched_in_the_second_pass() -> None:
    ref = textlayer_reference("x.pdf", "alfa beta gamma delta.\n\nuno due tre quattro cinque sei.\n\nfine del testo qui.")
    moved = "uno due tre quattro cinque sei.\n\nalfa beta gamma delta.\n\nfine del testo qui."
    alignment = align_document(moved, ref)
    assert alignment.matched_share == 1.0


def test_tokens_cut_by_a_chunk_edge_count_once() -> None:
    seq = TokenSeq.from_text("abc defgh ij")
    assert list(seq.within(0, 5)) == [0]  # "defgh" has its middle at 6: not in [0, 5)
    assert list(seq.within(5, 12)) == [1, 2]


# ------------------------------------------------------------------------------------------------- intrinsic

def test_two_chunks_overlapping_by_50_characters() -> None:
    assert intrinsic.overlap_counts([(0, 100), (50, 150)]) == (50, 150)
    assert intrinsic.overlap_ratio({"a.pdf": [(0, 100), (50, 150)], "b.pdf": [(0, 50)]}) == pytest.approx(50 / 200)
    assert intrinsic.overlap_ratio({"a.pdf": [(0, 10), (10, 20)]}) == 0.0


def test_merged_length() -> None:
    assert intrinsic.merged_length([(0, 10), (5, 20), (30, 35), (35, 36)]) == 26
    assert intrinsic.merged_length([]) == 0


def test_length_summary_mean_variance_cv() -> None:
    summary = intrinsic.length_summary([100, 200, 300])
    assert summary == {"mean": 200.0, "variance": 10000.0, "cv": 0.5}


def test_midword_cuts() -> None:
    text = "uno due tre"
    assert intrinsic.midword_cuts(text, 0, 3) == 0  # "uno"
    assert intrinsic.midword_cuts(text, 1, 3) == 1  # "no": starts inside "uno"
    assert intrinsic.midword_cuts(text, 5, 9) == 2  # "ue t"
    assert intrinsic.midword_cuts(text, 4, 11) == 0


def test_coverage_counts_reference_word_characters_in_some_chunk() -> None:
    ref = textlayer_reference("x.pdf", "aaaa bbbb cccc dddd")
    alignment = align_document(ref.text, ref)
    first_half = alignment.align_chunk("c1", "x.pdf", 0, 9, 9)
    assert intrinsic.coverage([first_half], {"x.pdf": ref}) == 0.5
    everything = alignment.align_chunk("c2", "x.pdf", 0, 19, 19)
    assert intrinsic.coverage([first_half, everything], {"x.pdf": ref}) == 1.0


def test_boundary_quality_ends_at_sentence_or_block_end() -> None:
    ref = body_reference()
    alignment = align_document(BODY, ref)
    sentence = chunk_of(alignment, BODY, "Il sistema conserva i fascicoli per dieci anni dalla chiusura.")
    mid = chunk_of(alignment, BODY, "Il sistema conserva i fascicoli")
    title = chunk_of(alignment, BODY, "Conservazione")  # a block end without a full stop
    assert ref.near_boundary(sentence.ref_end, tolerance=2)
    assert not ref.near_boundary(mid.ref_end, tolerance=2)
    assert ref.near_boundary(title.ref_end, tolerance=0)
    facts = intrinsic.chunk_facts([sentence, mid, title], ["x" * 5] * 3, [BODY] * 3, {"manuale.pdf": ref},
                                  intrinsic.word_counts, tolerance=2)
    assert [f.boundary_ok for f in facts] == [1.0, 0.0, 1.0]


# ------------------------------------------------------------------------------------------------- retrieval

def _chunk(intervals, length, document="d.pdf") -> align.AlignedChunk:
    return align.AlignedChunk("id", document, document, 0, length, length, np.array([], dtype=np.int64),
                              tuple(intervals))


def test_evidence_equal_to_the_retrieved_chunk_scores_one() -> None:
    result = chain_retrieval.question_retrieval(0, [_chunk([(100, 200)], 100)], [("d.pdf", 100, 200)], 0.9)
    assert (result.recall, result.precision, result.iou, result.hit_at_1, result.hit_at_k) == (1, 1, 1, 1, 1)


def test_chunk_twice_as_long_as_the_evidence() -> None:
    scores = chain_retrieval.span_scores([_chunk([(100, 300)], 200)], [("d.pdf", 150, 250)])
    assert (scores.recall, scores.precision, scores.iou) == (1.0, 0.5, 0.5)


def test_partial_and_second_rank_hits() -> None:
    first = _chunk([(0, 100)], 100)  # misses the evidence
    second = _chunk([(150, 200)], 50)  # holds half of it
    result = chain_retrieval.question_retrieval(3, [first, second], [("d.pdf", 150, 250)], 0.9)
    assert result.recall == 0.5 and result.hit_at_k == 0.0 and result.hit_at_1 == 0.0
    assert result.precision == pytest.approx(50 / 150)
    assert result.iou == pytest.approx(50 / (150 + 50))  # retrieved + unused evidence
    third = _chunk([(200, 250)], 50)
    assert chain_retrieval.question_retrieval(3, [first, second, third], [("d.pdf", 150, 250)], 0.9).hit_at_k == 1.0


def test_a_chunk_of_another_document_never_intersects() -> None:
    scores = chain_retrieval.span_scores([_chunk([(0, 100)], 100, "other.pdf")], [("d.pdf", 0, 100)])
    assert (scores.recall, scores.precision, scores.iou) == (0.0, 0.0, 0.0)


# ------------------------------------------------------------------------------------------------- report

def test_spearman_table_known_values_and_constant_columns() -> None:
    frame = pd.DataFrame({"span_iou": [0.1, 0.2, 0.3, 0.4], "hit_at_k": [1.0] * 4, "ROUGE-L": [0.2, 0.4, 0.5, 0.9]})
    rows = {(r.chunk_metric, r.answer_metric): r for r in tables.spearman_table(frame, ["span_iou", "hit_at_k"],
                                                                                ["ROUGE-L"])}
    assert rows[("span_iou", "ROUGE-L")].rho == pytest.approx(1.0)
    assert rows[("span_iou", "ROUGE-L")].n == 4
    assert math.isnan(rows[("hit_at_k", "ROUGE-L")].rho)
    assert "constant" in rows[("hit_at_k", "ROUGE-L")].note


def test_estimate_uses_the_seeded_bootstrap_and_keeps_zeros() -> None:
    ci = tables.CiSettings(n_resamples=2000, seed=1)
    row = tables.estimate("paragraph", "span_iou", [0.0, 0.0, 1.0, 1.0], ci)
    assert row.mean == 0.5 and row.n == 4
    assert row == tables.estimate("paragraph", "span_iou", [0.0, 0.0, 1.0, 1.0], ci)
    assert 0.0 <= row.ci_low < 0.5 < row.ci_high <= 1.0
    empty = tables.estimate("paragraph", "span_iou", [], ci)
    assert empty.n == 0 and math.isnan(empty.mean)
