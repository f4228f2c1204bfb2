"""Postprocessing/chunk_quality.py end to end on a hand-made results folder: two strategies over one document
whose ground truth and evidence are in tests/fixtures/chunk_quality, with known retrieval scores; HOPE through
the script with a fake LLM and fake embeddings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from Postprocessing.chunkeval.align import document_name
from ragstudy_cli import app

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "chunk_quality"
REPO_ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["Per quanti anni si conservano i fascicoli?", "Come si accede al portale?", "Quanto costa il servizio?"]
P1 = ("Il sistema conserva i fascicoli per dieci anni dalla chiusura. La verifica dell'integrità avviene ogni sei "
      "mesi.")
P2 = "Per accedere al portale serve la Carta d'identità elettronica. L'accesso è consentito dalle otto alle venti."
BODY = f"Conservazione\n\n{P1}\n\nAccesso\n\n{P2}"
# the shared text layer: header and footer, a line-break hyphen and a ligature the ground truth does not have
LAYER = ("Manuale di prova\n\nConservazione\n\nIl sistema conserva i fascicoli per dieci anni dalla chiu-\nsura. "
         "La veri\ufb01ca dell'integrità avviene ogni sei mesi.\n\nAccesso\n\nPer accedere al portale serve la Carta "
         "d'identità elettronica. L'accesso è consentito dalle otto alle venti.\n\nPagina 1 di 1")
PDF = "/data/manuale.pdf"


def _export(results: Path, strategy: str, text: str, pieces: list[str]) -> list:
    from ragstudy.results import write_chunks as export_chunks
    from ragstudy.text.chunks import build_chunks, locate_pieces
    from ragstudy.text.textlayer import SourceText

    source = SourceText(PDF, "0" * 64, text, (0,))
    chunked = build_chunks(source, locate_pieces(text, pieces), strategy, pages=[(1, 1)] * len(pieces))
    export_chunks([chunked], strategy, results)
    return list(chunked.chunks)


def _dataset(results: Path, stem: str, strategy: str, retrieved: list[list]) -> None:
    rows = [{"question_index": i, "question": q, "answer": "risposta", "contexts": [c.contents for c in chunks],
             "sources": [{"doc_id": c.doc_id, "path": c.path, "page_start": 1, "page_end": 1} for c in chunks],
             "strategy": strategy} for i, (q, chunks) in enumerate(zip(QUESTIONS, retrieved, strict=True))]
    (results / f"{stem}.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    para = _export(folder, "paragraph", BODY, ["Conservazione", P1, "Accesso", P2])
    fixed_pieces = ["Manuale di prova\n\nConservazione\n\nIl sistema conserva i fascicoli per dieci anni dalla chiu-",
                    "dalla chiu-\nsura. La veri\ufb01ca dell'integrità avviene ogni sei mesi.\n\nAccesso",
                    "Per accedere al portale serve la Carta d'identità elettronica. L'accesso è",
                    "L'accesso è consentito dalle otto alle venti.\n\nPagina 1 di 1"]
    fixed = _export(folder, "fixed-size", LAYER, fixed_pieces)
    _dataset(folder, "DatasetCustom", "paragraph", [[para[1]], [para[1], para[3]], [para[3]]])
    _dataset(folder, "DatasetFixedSize", "fixed-size", [[fixed[1], fixed[0]], [fixed[2]], [fixed[3]]])
    (folder / "config.json").write_text(json.dumps({"profile": "lite", "strategy_params": {
        "paragraph": {"k": 1}, "fixed-size": {"k": 4}}}), encoding="utf-8")
    return folder


def _args(results: Path, *extra: str) -> list[str]:
    return ["--results-dir", str(results), "--groundtruth", str(FIXTURES / "groundtruth"), "--evidence",
            str(FIXTURES / "evidence.json"), "--tokens", "words", "--n-resamples", "500", *extra]


def _table(results: Path) -> dict[tuple[str, str], pd.Series]:
    frame = pd.read_csv(results / "chunk_quality.csv")
    return {(row.strategy, row.metric): row for row in frame.itertuples()}


def test_tables_with_known_retrieval_scores(results: Path, capsys) -> None:
    assert app.main(["chunk-quality", *_args(results, "--no-hope")]) == 0
    table = _table(results)
    # paragraph: question 0 retrieves exactly its evidence; question 1 retrieves P1 then P2 (evidence: P2's
    # first sentence without its full stop, 61 characters); question 2 is unanswerable and left out
    assert table[("paragraph", "hit_at_1")].mean == 0.5
    assert table[("paragraph", "hit_at_k")].mean == 1.0
    assert table[("paragraph", "span_recall")].mean == pytest.approx(1.0)
    assert table[("paragraph", "span_iou")].mean == pytest.approx((1.0 + 61 / (len(P1) + len(P2))) / 2)
    assert table[("paragraph", "span_iou")].n == 2
    # context size: every question (the unanswerable one too), the characters the LLM received
    assert table[("paragraph", "context_chars")].n == 3
    assert table[("paragraph", "context_chars")].mean == pytest.approx((len(P1) + len(P1) + len(P2) + len(P2)) / 3)
    # fixed-size: P1 is split over two chunks; the first-ranked one holds most of it, but not 90%
    assert table[("fixed-size", "hit_at_k")].mean == 1.0
    assert table[("fixed-size", "hit_at_1")].mean == 0.5
    # intrinsic: the ground truth's body text is fully covered by both, the fixed-size chunks overlap
    assert table[("paragraph", "coverage")].mean == 1.0
    assert table[("fixed-size", "coverage")].mean == 1.0
    assert table[("paragraph", "overlap_ratio")].mean == 0.0
    overlap = len("dalla chiu-") + len("L'accesso è")
    covered = (LAYER.index("Accesso") + len("Accesso")) + (len(LAYER) - LAYER.index("Per accedere"))
    assert table[("fixed-size", "overlap_ratio")].mean == pytest.approx(overlap / covered)
    assert table[("paragraph", "chunks")].mean == 4
    assert table[("paragraph", "boundary_quality")].mean == 1.0
    assert table[("fixed-size", "boundary_quality")].mean == pytest.approx(2 / 4)
    assert table[("fixed-size", "midword_cut_rate")].mean == 0.0
    md = (results / "chunk_quality.md").read_text(encoding="utf-8")
    assert "| span_iou ↑ |" in md and "Paragraph" in md and "Fixed-size" in md
    assert "1 unanswerable question(s) left out" in (results / "chunk_quality.csv").read_text(encoding="utf-8")
    per_question = pd.read_csv(results / "chunk_quality_questions.csv")
    assert sorted(per_question["question_index"].unique()) == [0, 1]
    assert "Chunk quality" in capsys.readouterr().out


def test_correlations_with_answer_metrics(results: Path) -> None:
    from scipy.stats import spearmanr

    # rows in another order than the script's per-question table: pairs must be joined by strategy and question
    answers = pd.DataFrame({
        "strategy": ["fixed-size", "paragraph", "fixed-size", "paragraph"],
        "strategy_display": ["Fixed-size", "Paragraph", "Fixed-size", "Paragraph"],
        "question_index": [1, 0, 0, 1], "question": [QUESTIONS[1], QUESTIONS[0], QUESTIONS[0], QUESTIONS[1]],
        "ROUGE-L": [0.3, 0.9, 0.4, 0.5], "BERTScore F1": [0.5, 0.8, 0.6, 0.7],
    })
    answers.to_csv(results / "metrics_per_question.csv", index=False)
    assert app.main(["chunk-quality", *_args(results, "--no-hope")]) == 0
    corr = pd.read_csv(results / "chunk_quality_correlation.csv")
    row = corr[(corr.chunk_metric == "span_iou") & (corr.answer_metric == "ROUGE-L")].iloc[0]
    pairs = pd.read_csv(results / "chunk_quality_questions.csv").merge(answers, on=["strategy", "question_index"])
    expected = spearmanr(pairs["span_iou"], pairs["ROUGE-L"])
    assert row.n == len(pairs) == 4
    assert row.rho == pytest.approx(expected.statistic) and row.p == pytest.approx(expected.pvalue)
    # by hand: span_iou (paragraph 1.0, 0.277; fixed-size 0.675, 0.824) has ranks 4, 1, 2, 3 and ROUGE-L
    # (0.9, 0.5, 0.4, 0.3) ranks 4, 3, 2, 1: sum of d^2 = 8, rho = 1 - 6 * 8 / (4 * 15) = 0.2
    assert row.rho == pytest.approx(0.2)
    assert "Chunk metrics vs answer metrics" in (results / "chunk_quality.md").read_text(encoding="utf-8")


def test_text_layer_reference_without_ground_truth(results: Path) -> None:
    assert app.main(["chunk-quality", *_args(results, "--no-hope", "--groundtruth", "none", "--evidence", "none")]) == 0
    table = _table(results)
    # the header and footer are now part of the reference: the paragraph strategy does not cover them
    assert table[("paragraph", "coverage")].mean < 1.0
    assert table[("fixed-size", "coverage")].mean == 1.0
    assert ("paragraph", "span_iou") not in table


def test_without_evidence_a_run_on_other_questions_is_not_scored_against_the_samples(results: Path) -> None:
    """The one evidence-default rule (ragstudy.scoring.evidence.default_evidence): sample/evidence.json only for a run
    on the bundled Questions.csv; this run's config.json names no questions, so no --evidence means no evidence."""
    from ragstudy.results import CHUNK_QUALITY_RUN

    args = [a for a in _args(results, "--no-hope") if a not in ("--evidence", str(FIXTURES / "evidence.json"))]
    assert app.main(["chunk-quality", *args]) == 0
    assert not any(metric == "span_iou" for _, metric in _table(results))
    notes = json.loads(CHUNK_QUALITY_RUN.path(results).read_text(encoding="utf-8"))["notes"]
    assert any(note.startswith("retrieval metrics skipped: no evidence file (pass --evidence FILE") for note in notes)


def test_mismatched_dataset_and_export_is_an_error_naming_the_file(results: Path, capsys) -> None:
    data = json.loads((results / "DatasetCustom.json").read_text(encoding="utf-8"))
    data[1]["sources"][0]["doc_id"] = "nope"
    data[1]["contexts"][0] = "testo che non esiste"
    (results / "DatasetCustom.json").write_text(json.dumps(data), encoding="utf-8")
    assert app.main(["chunk-quality", *_args(results, "--no-hope")]) == 2
    err = capsys.readouterr().err
    assert "DatasetCustom.json row 1" in err and "different runs" in err


class _Generator:
    def __init__(self, params) -> None:
        self.params, self.generated, self.cached = params, 0, 0

    def __call__(self, prompt: str, params=None) -> str:
        self.generated += 1
        if prompt.startswith("Leggi il testo seguente e scrivi"):
            return "1. Per quanto tempo si conserva?\n2. Chi controlla l'integrità?\n3. Come si accede?"
        if prompt.startswith("Leggi il testo seguente. Scrivi"):
            return "non ho capito"  # every window fails to parse: counted, not scored
        return "Dieci anni."


class _Embedder:
    def embed_documents(self, texts):
        return [[1.0, float(len(t) % 7)] for t in texts]

    def embed_query(self, text):
        return [1.0, float(len(text) % 7)]


def test_hope_through_the_script_with_fake_models(results: Path, monkeypatch) -> None:
    import ragstudy.embedders
    import ragstudy.llms
    from ragstudy.llms import GenerationParams

    monkeypatch.setattr(ragstudy.llms, "make_generator", lambda config: _Generator(GenerationParams(96)))
    monkeypatch.setattr(ragstudy.embedders.Embedder, "load", lambda self: _Embedder())  # every local backend
    assert app.main(["chunk-quality", *_args(results, "--hope-passages", "2", "--hope-windows", "2")]) == 0
    table = _table(results)
    for strategy in ("paragraph", "fixed-size"):
        assert table[(strategy, "semantic_independence")].mean == pytest.approx(1.0)  # same answer both ways
        assert table[(strategy, "concept_unity")].n == 2
        ip = table[(strategy, "information_preservation")]
        assert ip.n == 0 and ip.failures == 2  # parse failures are counted, never scored as 0
        assert table[(strategy, "hope")].mean == pytest.approx(
            (table[(strategy, "concept_unity")].mean + 1.0) / 2)
    items = pd.read_csv(results / "chunk_quality_hope.csv")
    measures = {"concept_unity", "semantic_independence", "information_preservation"}
    assert set(items["measure"]) == measures | {m + "_random" for m in measures}  # each beside its floor
    for strategy in ("paragraph", "fixed-size"):  # the floor: random cuts of the strategy's own chunk lengths
        floor, lead = table[(strategy, "concept_unity_random")], table[(strategy, "concept_unity_over_random")]
        assert floor.n == 2 and lead.mean == pytest.approx(table[(strategy, "concept_unity")].mean - floor.mean)
        assert lead.ci_low <= lead.mean <= lead.ci_high
    assert "### HOPE against its floor" in (results / "chunk_quality.md").read_text(encoding="utf-8")
    run = json.loads((results / "chunk_quality_run.json").read_text(encoding="utf-8"))
    assert run["hope"]["passages"] == 2


def test_help_is_fast_and_describes_the_outputs() -> None:
    out = subprocess.run([sys.executable, str(REPO_ROOT / "Postprocessing" / "chunk_quality.py"), "--help"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert "chunk_quality.md" in out and "--hope-passages" in out and "--no-hope" in out


def test_document_name_ties_paths_to_ground_truth() -> None:
    assert document_name(PDF) == "manuale.pdf"


def test_papers_dataset_files_give_the_same_retrieval_scores(results: Path) -> None:
    """The paper's files (question, answer, contexts; no question_index, no sources) match chunks by their text."""
    assert app.main(["chunk-quality", *_args(results, "--no-hope")]) == 0
    ours = pd.read_csv(results / "chunk_quality.csv")
    for path in results.glob("Dataset*.json"):
        rows = json.loads(path.read_text(encoding="utf-8"))
        path.write_text("\n".join(json.dumps({k: r[k] for k in ("question", "answer", "contexts")},
                                             ensure_ascii=False) for r in rows), encoding="utf-8")
        path.with_suffix(".csv").unlink(missing_ok=True)
    assert app.main(["chunk-quality", *_args(results, "--no-hope")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(results / "chunk_quality.csv"), ours)
