"""make-qa with the evidence chosen by the code (`--evidence-by code`, the default): the chosen runs of whole
sentences, a set drafted on the bundled sample whose every evidence an independent check finds in its PDF (the test
reads the PDF's text with PyMuPDF itself), no two items on one evidence, the new filters, and the report's counts
at each filter. The extractive template writer stands in for the LLM (fast, deterministic); the lite model's
numbers are in docs/make-qa.md."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from ragstudy.qagen.choose import choose_evidence
from ragstudy.qagen.extractive import ExtractiveGenerator
from ragstudy.qagen.filters import FILTERS, CandidateFilter, Thresholds
from ragstudy.qagen.prompt import ROUND_TRIP_TOKENS, build_evidence_prompt, parse_generation, passage_parts
from ragstudy.qagen.run import QaSettings, make_qa
from ragstudy.qagen.sampling import sample_passages
from ragstudy.text.textlayer import load_documents

DOCUMENTS = REPO_ROOT / "Documents"


@pytest.fixture(scope="module")
def bundled() -> list:
    return load_documents(DOCUMENTS)


def _folded(text: str) -> str:
    """The test's own normalisation, written apart from the project's: NFKC, accents dropped, case folded, only
    letters and digits (what the text layer's normalisation compares)."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    return "".join(ch for ch in decomposed.casefold() if ch.isalnum() and not unicodedata.combining(ch))


def _pdf_text(path: Path) -> str:
    import pymupdf

    with pymupdf.open(path) as doc:
        return _folded("".join(page.get_text() for page in doc))


def test_the_code_chooses_runs_of_whole_sentences_that_fit_and_cross_the_break(bundled) -> None:
    t = Thresholds()
    sample = sample_passages(bundled, 120, seed=0, span_share=0.5)
    chosen = {p.key: choose_evidence(p, t.min_evidence, t.max_evidence) for p in sample.passages}
    blocks = [p for p in sample.passages if p.kind == "block"]
    assert sum(chosen[p.key] is not None for p in blocks) >= 0.9 * len(blocks)
    crossing = 0
    for passage in sample.passages:
        span = chosen[passage.key]
        if span is None:
            continue
        start, end = span
        text = passage.text[start:end]
        assert t.min_evidence <= len(text) <= t.max_evidence and text == text.strip()
        first = next(ch for ch in text if ch.isalnum())
        listed = re.match(r"(?:[•▪–-]|[a-z]\))\s", text)  # a list item: its marker, then lower case allowed
        assert first.isupper() or first.isdigit() or listed, text  # starts a sentence, never a cut one's tail
        assert end == len(passage.text.rstrip()) or re.search(r"[.!?:;»”)\"']$", text), text  # ends one
        if len(passage.spans) == 2:
            cut = passage.spans[0][1] - passage.spans[0][0]
            assert start < cut < end  # the evidence crosses the block or page break, as the sampler intended
            crossing += 1
    assert crossing >= 5


def test_the_prompt_shows_only_the_evidence_and_the_model_writes_question_and_answer(bundled) -> None:
    passage = sample_passages(bundled, 6, seed=0).passages[0]
    t = Thresholds()
    start, end = choose_evidence(passage, t.min_evidence, t.max_evidence)
    prompt = build_evidence_prompt(passage, passage.text[start:end])
    assert passage_parts(prompt) == [passage.text[start:end]] and len(prompt) < len(passage.text[start:end]) + 700
    found = parse_generation('```json\n{"risposta": "Dieci anni.", "domanda": "Quanto dura?"}\n```', "EVIDENZA")
    assert (found.question, found.answer, found.evidence) == ("Quanto dura?", "Dieci anni.", "EVIDENZA")
    assert parse_generation('{"risposta": "Dieci anni."}', "EVIDENZA") is None


def test_backslashes_a_model_did_not_escape_are_read_as_written() -> None:
    """Real 1.5B outputs on a LaTeX manual: `\\leftmargin` is no JSON escape (nothing parses) and `\\thispagestyle`
    parses as a tab; both are read as the command, and the draft says it was read so. Valid escapes stay as JSON
    reads them."""
    raw = r'{"risposta": "Si usa \\oddsidemargin, non \leftmargin.", "domanda": "Quale parametro?"}'
    found = parse_generation(raw, "EVIDENZA")
    assert found.answer == r"Si usa \oddsidemargin, non \leftmargin." and found.backslashes_as_written
    found = parse_generation(r'{"risposta": "Il comando \thispagestyle.", "domanda": "Quale \"stile\"?"}', "E")
    assert (found.answer, found.question) == (r"Il comando \thispagestyle.", 'Quale "stile"?')
    assert found.backslashes_as_written
    found = parse_generation(r'{"risposta": "Riga uno\nRiga due \u00e8.", "domanda": "Quale?"}', "E")
    assert found.answer == "Riga uno\nRiga due è." and not found.backslashes_as_written
    assert parse_generation(r'{"risposta": "\leftmargin"', "E") is None  # still not an object
    # the 1.5B on amsldoc-it: "\notag" is a valid escape (a line break and "otag"); the evidence quotes the command
    raw = r'{"risposta": "Nessuna riga va segnata con \notag.", "domanda": "Cosa non si usa in multline?"}'
    found = parse_generation(raw, r"nessuna delle singole linee dovrebbe essere segnata con \notag")
    assert found.answer == r"Nessuna riga va segnata con \notag." and found.backslashes_as_written
    assert parse_generation(raw, "un'altra evidenza").answer == "Nessuna riga va segnata con \notag."
    escaped = r'{"risposta": "Si usa \\notag.", "domanda": "Quale?"}'  # escaped as JSON asks: read as written
    found = parse_generation(escaped, r"segnata con \notag")
    assert found.answer == r"Si usa \notag." and not found.backslashes_as_written


def _first_passage_reasons(bundled):
    """The first sampled passage's code-chosen evidence, its first content words, and the filter's reasons for a
    draft of (question, answer) about it."""
    passage = sample_passages(bundled, 6, seed=0).passages[0]
    t = Thresholds()
    start, end = choose_evidence(passage, t.min_evidence, t.max_evidence)
    evidence = passage.text[start:end]
    filt = CandidateFilter({Path(d.path).name: d.text_layer.text for d in bundled})

    def reasons(question: str, answer: str) -> list[str]:
        return filt.check(json.dumps({"risposta": answer, "domanda": question}), passage, evidence).reasons

    return re.findall(r"[^\W\d_]{6,}", evidence)[:4], reasons


def test_a_question_about_something_else_is_dropped(bundled) -> None:
    words, reasons = _first_passage_reasons(bundled)
    assert reasons("Quanto costa allacciare il frigorifero al contatore?", " ".join(words[:3])) == [
        "question_off_evidence"]


def test_a_question_that_points_at_its_own_passage_is_dropped(bundled) -> None:
    """Real 1.5B drafts ("... in questo documento?", "... nel testo?"): no answer in a collection. A domain noun
    followed by what it is of ("il testo della", "il documento amministrativo") is a question like any other."""
    words, reasons = _first_passage_reasons(bundled)
    answer = " ".join(words[:3])
    for pointing in (f"Che cosa dice questo documento su {words[3]}?", f"Quale {words[3]} è indicato nel testo?",
                     f"Cosa significa {words[3]} in questo contesto?"):
        assert "question_not_standalone" in reasons(pointing, answer), pointing
    assert "question_not_standalone" not in reasons(f"Cosa riporta il testo della {words[3]}?", answer)


@pytest.fixture(scope="module")
def drafted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("qa") / "qa"
    result = make_qa(QaSettings(documents=DOCUMENTS, out=out, n=20, candidates=60, seed=0), ExtractiveGenerator(),
                     "scripted-test-model", "test")
    assert result.kept == 20
    return out


def test_every_kept_evidence_is_found_verbatim_in_its_pdf_by_an_independent_check(drafted: Path) -> None:
    import pandas as pd

    table = pd.read_csv(drafted / "evidence.csv")
    assert len(table) == 20 and table["question_index"].tolist() == list(range(20))
    texts = {name: _pdf_text(DOCUMENTS / name) for name in set(table["pdf"])}
    spans = []
    for row in table.itertuples():
        evidence, pdf = _folded(row.evidence), texts[row.pdf]
        if row.boundary == "page":  # two parts with the page's furniture between them: each part, in order
            parts = row.evidence.split("\n")
            assert any(_folded("\n".join(parts[:k])) in pdf and _folded("\n".join(parts[k:])) in pdf
                       and pdf.index(_folded("\n".join(parts[:k]))) < pdf.index(_folded("\n".join(parts[k:])))
                       for k in range(1, len(parts)))
        else:
            assert evidence in pdf, (row.pdf, row.evidence)
        spans.append((row.pdf, *json.loads(row.start_end_idx)))
    for i, (pdf, start, end) in enumerate(spans):  # no two items on the same evidence
        assert not any(p == pdf and s < end and start < e for p, s, e in spans[i + 1:])
    oracle = pd.read_csv(drafted / "Oracle.csv")
    for answer, evidence in zip(oracle.iloc[:, 0], table["evidence"]):  # every answer's words are in its evidence
        words = re.findall(r"[^\W\d_]{4,}", answer)
        assert sum(_folded(w) in _folded(evidence) for w in words) >= 0.5 * len(words), (answer, evidence)


def test_the_report_counts_the_drafts_kept_at_each_filter_and_scores_the_kept_ones(drafted: Path) -> None:
    sidecar = json.loads((drafted / "make_qa.json").read_text())
    assert sidecar["generator"]["evidence_by"] == "code" and sidecar["counts"]["kept"] == 20
    filters = sidecar["counts"]["filters"]
    assert list(filters) == list(FILTERS)
    left = [filters[name]["left_after"] for name in FILTERS]
    assert left == sorted(left, reverse=True) and left[-1] == 20
    assert sidecar["counts"]["candidates"] - 20 == sum(f["dropped_first"] for f in filters.values())
    report = (drafted / "qa_report.md").read_text()
    assert "| filter | drops a candidate when | first failed | failed (any) | left |" in report
    assert re.search(r"\| kept \| passed every filter \|  \|  \| 20 \|", report)
    assert "| questions, kept items | 20 |" in report and "| answers, kept items | 20 |" in report


class RoundTrip(ExtractiveGenerator):
    """The extractive writer's drafts, and a round trip that answers every other question with a word of nothing:
    the model whose own answer to its question is not the drafted one."""

    answers_questions = True

    def __init__(self) -> None:
        super().__init__()
        self.round_trips: list[str] = []

    def generate_many(self, prompts, params=None, desc: str = ""):
        drafts = [p for p in prompts if "\nDomanda: " not in p]
        asked = [p for p in prompts if "\nDomanda: " in p]
        assert not (drafts and asked), "drafts and round trips are asked apart"
        if drafts:
            return super().generate_many(drafts, params)
        assert params is not None and params.max_new_tokens == ROUND_TRIP_TOKENS
        self.round_trips += asked
        start = len(self.round_trips) - len(asked)
        return [passage_parts(p)[0] if (start + i) % 2 == 0 else "Non lo so." for i, p in enumerate(asked)]


def test_a_question_whose_answer_does_not_come_back_is_dropped(tmp_path: Path) -> None:
    """The round trip: each draft that passed every other filter is asked again with only its evidence; a reply
    holding the drafted answer keeps it, "Non lo so." drops it as answer_not_recovered. The records say how much
    came back, and the extractive writer (which answers nothing) is not asked and the report says so."""
    from ragstudy.llms.cache import GenerationParams

    generator = RoundTrip()
    generator.params = GenerationParams(max_new_tokens=384)
    result = make_qa(QaSettings(documents=DOCUMENTS, out=tmp_path / "qa", n=6, candidates=24, seed=0), generator,
                     "scripted-test-model", "test")
    records = [json.loads(line) for line in (tmp_path / "qa" / "candidates.jsonl").read_text().splitlines()]
    dropped = [r for r in records if r["reasons"] == ["answer_not_recovered"]]
    kept = [r for r in records if r["kept"]]
    assert result.kept == len(kept) == 6 and len(dropped) >= 5
    assert all(r["recovered"] == 1.0 for r in kept) and all(r["recovered"] == 0.0 for r in dropped)
    assert all(f"Domanda: {r['question']}" in "".join(generator.round_trips) for r in kept + dropped)
    assert all(r["round_trip_reply"] == "Non lo so." for r in dropped)
    sidecar = json.loads((tmp_path / "qa" / "make_qa.json").read_text())
    assert sidecar["counts"]["filters"]["answer_not_recovered"]["dropped_first"] == len(dropped)
    from openpyxl import load_workbook  # the reviewer sees what the model replied beside the filter that used it

    sheet = load_workbook(tmp_path / "qa" / "review.xlsx").active
    filters = {row[0]: row[8] for row in sheet.iter_rows(min_row=2, values_only=True)}
    assert sum("answer_not_recovered\nRisposta del modello con la sola evidenza: «Non lo so.»" in (cell or "")
               for cell in filters.values()) == len(dropped)
    make_qa(QaSettings(documents=DOCUMENTS, out=tmp_path / "plain", n=2, candidates=8, seed=0), ExtractiveGenerator(),
            "scripted-test-model", "test")
    assert "The round trip (answer_not_recovered) was not asked" in (tmp_path / "plain" / "qa_report.md").read_text()
