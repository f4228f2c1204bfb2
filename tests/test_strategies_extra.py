"""The chunkers a researcher compares against: token, sentence, semantic, markdown.

Each strategy's chunks round-trip through the export (`text[start:end] == contents`, pages from the exported
source), respect its size bounds, and the sentence splitter never cuts after an Italian abbreviation. Tests on
../shared/pdfs skip where that folder is absent.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from ragstudy import registry
from ragstudy.errors import StudyInputError
from ragstudy.registry import ChunkerContext
from ragstudy.results import read_chunks, write_chunks
from ragstudy.text.chunks import ChunkedDocument
from ragstudy.text.sentences import ItalianSentenceSplitter, ends_with_abbreviation, pack, split_oversize
from ragstudy.text.textlayer import PdfDocument, read_pdf
from RAGSemantic.strategy import SemanticParams, breakpoints

from conftest import REPO_ROOT, SHARED_PDFS

EXTRA = ("token", "sentence", "semantic", "markdown")
SAMPLE = REPO_ROOT / "Documents"
REAL_PDFS = sorted([*SHARED_PDFS.glob("*.pdf"), *SHARED_PDFS.glob("more-it/*.pdf")]) if SHARED_PDFS.is_dir() else []
needs_shared = pytest.mark.skipif(not REAL_PDFS, reason=f"real PDFs not available ({SHARED_PDFS} is absent)")


@lru_cache(maxsize=None)
def pdf(path: Path) -> PdfDocument:
    return read_pdf(path)


def sample_documents() -> list[PdfDocument]:
    return [pdf(path) for path in sorted(SAMPLE.glob("*.pdf"))]


class WordHashEmbedding:
    """A deterministic stand-in for the embedding model: hashed bag of words (sentences sharing words are close)."""

    def __init__(self) -> None:
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        out = np.zeros((len(texts), 64))
        for row, text in enumerate(texts):
            for word in re.findall(r"\w{4,}", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        return out.tolist()


@pytest.fixture(scope="session")
def minilm_tokenizer(minilm_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


def chunker(name: str, tokenizer=None, embedding=None, **overrides):
    spec = registry.get(name)
    context = ChunkerContext(embedding=lambda: embedding, tokenizer=lambda: tokenizer, embedding_label="MiniLM")
    return spec.make_chunker(spec.resolve_params(overrides), context)


def exported(chunked: list[ChunkedDocument], strategy: str, folder: Path) -> list[dict]:
    """Write the chunks as `--chunks-only` does, read them back and check each round-trips into its source."""
    write_chunks(chunked, strategy, folder)
    rows, sources = read_chunks(folder, strategy)
    assert len(rows) == sum(len(item.chunks) for item in chunked) > 0
    for row in rows:
        source = sources[row["path"]]
        start, end = row["start_end_idx"]
        assert source.text[start:end] == row["contents"], (row["path"], start, end)
        assert row["contents"] == row["contents"].strip() != ""
        assert (row["metadata"]["page_start"], row["metadata"]["page_end"]) == source.pages_of(start, end)
        assert 1 <= row["metadata"]["page_start"] <= row["metadata"]["page_end"] <= len(source.page_starts)
        row["source"] = source
    return rows


def check_sentence_rows(rows: list[dict], chunk_size: int = 800) -> None:
    for row in rows:
        assert len(row["contents"]) <= chunk_size
        _, end = row["start_end_idx"]
        if row["source"].text[end:].strip():  # only the end of a document may end with an abbreviation
            assert not ends_with_abbreviation(row["contents"]), row["contents"][-80:]


def check_token_rows(rows: list[dict], tokenizer, chunk_size: int = 200) -> None:
    for row in rows:
        assert len(tokenizer(row["contents"], add_special_tokens=False)["input_ids"]) <= chunk_size


def check_semantic_rows(rows: list[dict], params: SemanticParams) -> None:
    by_path: dict[str, list[dict]] = {}
    for row in rows:
        assert len(row["contents"]) <= params.max_chunk_size
        by_path.setdefault(row["path"], []).append(row)
    for group in by_path.values():
        for i, row in enumerate(group):
            if len(row["contents"]) >= params.min_chunk_size or len(group) == 1:
                continue
            # a short chunk is allowed only where joining a neighbour would break the maximum
            start, end = row["start_end_idx"]
            for j in (i - 1, i + 1):
                if 0 <= j < len(group):
                    other = group[j]["start_end_idx"]
                    assert max(end, other[1]) - min(start, other[0]) > params.max_chunk_size


# ------------------------------------------------------------------------------------------ sentence splitting

# Each is ONE sentence: none may be cut after its abbreviations or inside its numbers.
ONE_SENTENCE = [
    "Si veda l'art. 5 del D.Lgs. 82/2005 per i dettagli.",
    "Le tabelle alle pagg. 3-4 e a pag. 12 elencano i formati ammessi.",
    "Sono ammessi PDF, XML, ecc. e gli altri formati dell'allegato 2.",
    "Si usano, p.es. nel caso di firme, i formati indicati, cfr. il manuale operativo.",
    "Ad es. il sig. Rossi e il dott. Bianchi hanno firmato il verbale n. 12 del 2024.",
    "Il D.P.R. 445/2000 disciplina la c.d. documentazione amministrativa.",
    "Il costo è di 1.000 euro per la v. 1.2 del software, nr. 3 licenze.",
    "Come previsto dall'art. 3, es. 4, la Sig. Verdi riceve la nota dalla Dott. Neri.",
    "Il massimale (es. 1.500,00 euro) vale per la versione v. 2.0.1 del D.Lgs. n. 50/2016.",
]


@pytest.mark.parametrize("sentence", ONE_SENTENCE)
def test_sentence_splitter_does_not_cut_after_italian_abbreviations(sentence: str) -> None:
    text = f"{sentence} Segue un'altra frase. E poi un'altra ancora!"
    spans = ItalianSentenceSplitter().spans(text)
    assert [text[a:b] for a, b in spans] == [sentence, "Segue un'altra frase.", "E poi un'altra ancora!"]


def test_sentence_splitter_splits_ordinary_sentences_and_blocks() -> None:
    text = "Il sistema è pronto. Il servizio risponde entro 5 giorni? Sì.\n\n2.3 Requisiti\n\nIl server ha 8 GB."
    pieces = [text[a:b] for a, b in ItalianSentenceSplitter().spans(text)]
    assert pieces == ["Il sistema è pronto.", "Il servizio risponde entro 5 giorni?", "Sì.", "2.3 Requisiti",
                      "Il server ha 8 GB."]


@pytest.mark.parametrize("text, expected", [
    ("vedi l'art.", True), ("ai sensi del D.Lgs.", True), ("(PDF, XML, ecc.", True), ("p.es.", True),
    ("il verbale n.", True), ("la c.d.", True), ("la pagina.", False), ("il 2024.", False), ("partecipes.", False),
])
def test_ends_with_abbreviation(text: str, expected: bool) -> None:
    assert ends_with_abbreviation(text) is expected


def test_oversize_sentence_is_cut_at_line_breaks_then_words_never_after_an_abbreviation() -> None:
    rows = "\n".join(f"Voce {i} conforme all'art. {i} del D.Lgs. 82/2005 pag. {i}" for i in range(40))
    text = f"Tabella senza punti\n{rows}"
    pieces = split_oversize(text, (0, len(text)), 120)
    assert len(pieces) > 5
    assert all(b - a <= 120 for a, b in pieces)
    assert all(not ends_with_abbreviation(text[a:b]) for a, b in pieces[:-1])
    assert pieces[0][0] == 0 and pieces[-1][1] == len(text)
    word = "x" * 250  # a word longer than the limit is cut every `limit` characters
    assert split_oversize(word, (0, 250), 100) == [(0, 100), (100, 200), (200, 250)]


def test_pack_is_greedy_and_overlaps_whole_units() -> None:
    units = [(0, 10), (11, 20), (21, 30), (31, 40)]
    assert pack(units, 20) == [(0, 20), (21, 40)]
    assert pack(units, 20, overlap=1) == [(0, 20), (11, 30), (21, 40)]
    assert pack(units, 5) == [(0, 10), (11, 20), (21, 30), (31, 40)]


# ------------------------------------------------------------------------------------------------ registration

def test_the_four_strategies_are_registered_with_their_facts() -> None:
    names = registry.available()
    assert all(name in names for name in EXTRA)
    expected = {"token": ("DatasetToken", "RAGToken", 3, "text-layer"),
                "sentence": ("DatasetSentence", "RAGSentence", 4, "text-layer"),
                "semantic": ("DatasetSemantic", "RAGSemantic", 5, "text-layer"),
                "markdown": ("DatasetMarkdown", "RAGMarkdown", 6, "markdown")}
    for name, (dataset, folder, order, kind) in expected.items():
        spec = registry.get(name)
        assert (spec.dataset_name, spec.folder, spec.order, spec.source_kind) == (dataset, folder, order, kind)
        assert (spec.defaults.child_chunk_size, spec.defaults.child_chunk_overlap, spec.defaults.k) == (200, 0, 4)
        assert registry.by_dataset_name(dataset) is spec
    colours = [spec.color.lower() for spec in registry.specs()]
    assert len(set(colours)) == len(colours)
    assert registry.parse_strategies("token,sentence,semantic,markdown") == EXTRA


def test_dataset_names_follow_from_the_folder_or_the_registry_name() -> None:
    assert registry.default_dataset_name("RAGNewLine", "newline") == "DatasetNewLine"
    assert registry.default_dataset_name("my_chunkers", "by-heading_v2") == "DatasetByHeadingV2"
    assert registry.get("paragraph").dataset_name == "DatasetCustom"  # the paper's name, given explicitly


def test_a_registration_hands_the_chunker_its_typed_parameters() -> None:
    spec = registry.get("sentence")
    chunker = spec.make_chunker(spec.resolve_params({"chunk_size": 300}), registry.ChunkerContext())
    text = "Prima frase del testo. " * 40
    assert max(len(piece) for piece in chunker.splitter.split_text(text)) <= 300
    with pytest.raises(StudyInputError, match="at least 20"):
        spec.make_chunker(registry.StrategyParams(parent={"chunk_size": 5, "overlap_sentences": 0}),
                          registry.ChunkerContext())


@pytest.mark.parametrize("name, overrides, message", [
    ("token", {"chunk_overlap": 200}, "less than chunk_size"),
    ("token", {"chunk_size": "200"}, "not a valid value"),
    ("sentence", {"chunk_size": 5}, "at least 20"),
    ("semantic", {"threshold_type": "median"}, "one of"),
    ("semantic", {"threshold_amount": 150}, "[0, 100]"),
    ("semantic", {"min_chunk_size": 900}, "at most max_chunk_size"),
    ("markdown", {"heading_levels": 7}, "between 1 and 6"),
    ("markdown", {"chunk_sizes": 100}, "unknown strategy parameter"),
])
def test_bad_parameters_are_refused_with_the_setting_named(name: str, overrides: dict, message: str) -> None:
    with pytest.raises(StudyInputError, match=re.escape(message)):
        registry.get(name).resolve_params(overrides)


def test_token_windows_larger_than_what_the_embedder_reads_are_refused(minilm_tokenizer) -> None:
    with pytest.raises(StudyInputError, match="reads at most 254 tokens"):
        chunker("token", tokenizer=minilm_tokenizer, chunk_size=300)


# --------------------------------------------------------------------------------- round trips on the sample

def test_token_chunks_round_trip_and_fit_the_embedder(tmp_path: Path, minilm_tokenizer) -> None:
    chunks = chunker("token", tokenizer=minilm_tokenizer)
    rows = exported([chunks.chunk(doc, "token") for doc in sample_documents()], "token", tmp_path)
    check_token_rows(rows, minilm_tokenizer)
    # windows overlap and tile each document: every character of the text layer is in some window
    for doc in sample_documents():
        spans = chunks.splitter.spans(doc.text_layer.text)
        assert all(a < prev_end for (a, _), (_, prev_end) in zip(spans[1:], spans))
        assert not doc.text_layer.text[:spans[0][0]].strip() and not doc.text_layer.text[spans[-1][1]:].strip()


def test_sentence_chunks_round_trip_and_never_end_after_an_abbreviation(tmp_path: Path) -> None:
    chunks = chunker("sentence")
    rows = exported([chunks.chunk(doc, "sentence") for doc in sample_documents()], "sentence", tmp_path)
    check_sentence_rows(rows)
    # whole sentences: every chunk ends where a sentence ends
    splitter = ItalianSentenceSplitter()
    for doc in sample_documents():
        ends = {b for _, b in splitter.spans(doc.text_layer.text)}
        cut = [row for row in rows if row["path"] == doc.path]
        assert sum(row["start_end_idx"][1] in ends for row in cut) >= 0.9 * len(cut)


def test_semantic_chunks_round_trip_and_respect_min_and_max(tmp_path: Path) -> None:
    embedding = WordHashEmbedding()
    chunks = chunker("semantic", embedding=embedding)
    rows = exported([chunks.chunk(doc, "semantic") for doc in sample_documents()], "semantic", tmp_path)
    check_semantic_rows(rows, SemanticParams())
    assert embedding.calls == len(sample_documents())  # one batch per document
    assert chunks.seconds["embedding"] > 0 and chunks.seconds["splitting"] > 0


@pytest.mark.parametrize("threshold_type", ["standard_deviation", "interquartile", "gradient"])
def test_semantic_threshold_types_and_text_buffers_keep_the_bounds(tmp_path: Path, threshold_type: str) -> None:
    chunks = chunker("semantic", embedding=WordHashEmbedding(), threshold_type=threshold_type, buffer_mode="text",
                     max_chunk_size=500, min_chunk_size=50)
    documents = sample_documents()[:2]
    rows = exported([chunks.chunk(doc, "semantic") for doc in documents], "semantic", tmp_path)
    check_semantic_rows(rows, SemanticParams(max_chunk_size=500, min_chunk_size=50))


def test_breakpoint_thresholds_match_hand_computed_values() -> None:
    distances = np.array([0.1, 0.2, 0.9, 0.1, 0.3, 0.8])
    # percentile 50 of the distances is 0.25: breakpoints above it
    assert breakpoints(distances, "percentile", 50).tolist() == [2, 4, 5]
    # mean 0.4, population sd 0.3109: mean + 1 sd = 0.711
    assert breakpoints(distances, "standard_deviation", 1).tolist() == [2, 5]
    # q1 0.125, q3 0.675, IQR 0.55: mean + 0.5 IQR = 0.675
    assert breakpoints(distances, "interquartile", 0.5).tolist() == [2, 5]
    # gradient [0.1, 0.4, -0.05, -0.3, 0.35, 0.5]; its 80th percentile is 0.4
    assert breakpoints(distances, "gradient", 80).tolist() == [5]
    assert breakpoints(np.zeros(0), "percentile", 95).tolist() == []


def test_semantic_cuts_between_topics_not_inside_them() -> None:
    from RAGSemantic.strategy import SemanticSplitter

    cats = " ".join(f"Il gatto domestico dorme sul divano numero {i}." for i in range(4))
    servers = " ".join(f"Il server remoto replica il database numero {i}." for i in range(4))
    text = f"{cats} {servers}"
    spans = SemanticSplitter(WordHashEmbedding().embed_documents,
                             SemanticParams(threshold_amount=90, min_chunk_size=0, max_chunk_size=800)).spans(text)
    assert [text[a:b] for a, b in spans] == [cats, servers]


def test_markdown_chunks_round_trip_with_pages_and_headings(tmp_path: Path, pdf_dir: Path) -> None:
    chunks = chunker("markdown")
    documents = [pdf(path) for path in sorted(pdf_dir.glob("*.pdf"))]
    rows = exported([chunks.chunk(doc, "markdown") for doc in documents], "markdown", tmp_path)
    assert all(len(row["contents"]) <= 800 for row in rows)
    assert all(row["metadata"]["strategy"] == "markdown" and "headers" in row["metadata"] for row in rows)
    for doc in documents:
        pages = {row["metadata"]["page_start"] for row in rows if row["path"] == doc.path}
        assert pages == set(range(1, doc.page_count + 1))  # every page of the generated PDFs has text
    text = rows[0]["source"].text
    assert "Conservazione" in text and "#" in text  # Markdown, with headings


def test_markdown_long_sections_keep_their_heading_with_the_first_piece() -> None:
    from RAGMarkdown.strategy import MarkdownParams, MarkdownSectionSplitter

    body = " ".join(f"Frase numero {i} della sezione lunga." for i in range(60))
    text = f"# Titolo\n\n## Sezione\n\n{body}\n\n```\ncodice\n```\n\n## Altra\n\nTesto breve."
    splitter = MarkdownSectionSplitter(MarkdownParams(chunk_size=300, chunk_overlap=0))
    spans = splitter.spans(text)
    pieces = [text[a:b] for (a, b), _ in spans]
    assert pieces[0].startswith("# Titolo\n\n## Sezione\n\nFrase numero 0")
    assert all(len(piece) <= 300 for piece in pieces)
    assert pieces[-1] == "## Altra\n\nTesto breve."
    assert "```\ncodice\n```" in pieces[-2]  # a code block stays in its section
    assert spans[-1][1] == "Titolo > Altra"


def test_chunks_only_run_exports_the_extra_strategies(tmp_path: Path, pdf_dir: Path) -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.pipeline import run_study

    config = StudyConfig.resolve(profile="lite", strategies="token,sentence", documents=str(pdf_dir),
                                 output_dir=str(tmp_path), chunks_only=True)
    reports = run_study(config)
    assert [report.strategy for report in reports] == ["token", "sentence"]
    for strategy in ("token", "sentence"):
        rows, sources = read_chunks(tmp_path, strategy)
        assert rows and all(sources[r["path"]].text[slice(*r["start_end_idx"])] == r["contents"] for r in rows)


# ------------------------------------------------------------------------------- slow: real models, Markdown

@pytest.mark.slow
def test_semantic_with_the_study_embedding_model(tmp_path: Path, minilm_embedding) -> None:
    chunks = chunker("semantic", embedding=minilm_embedding)
    doc = pdf(SAMPLE / "guida_api_servizi_pagamento.pdf")
    rows = exported([chunks.chunk(doc, "semantic")], "semantic", tmp_path)
    check_semantic_rows(rows, SemanticParams())
    assert 3 <= len(rows) <= 30


@pytest.mark.slow
def test_markdown_of_the_sample_drops_running_footers(tmp_path: Path) -> None:
    chunks = chunker("markdown")
    documents = [pdf(SAMPLE / name) for name in ("manuale_software_gestionale.pdf", "guida_api_servizi_pagamento.pdf")]
    rows = exported([chunks.chunk(doc, "markdown") for doc in documents], "markdown", tmp_path)
    assert all(len(row["contents"]) <= 800 for row in rows)
    markdown = "\n".join(row["contents"] for row in rows)
    assert not re.search(r"Pagina \d+ di \d+", markdown)  # footers "Versione 4.2 – … Pagina N di M", "Pagina N di 4"
    assert all(re.search(r"Pagina \d+ di \d+", doc.text_layer.text) for doc in documents)  # the text layer has them


# ---------------------------------------------------------------------------------------- real PDFs (../shared)

@needs_shared
@pytest.mark.parametrize("path", REAL_PDFS, ids=lambda p: p.name)
def test_sentence_and_token_on_real_pdfs(tmp_path: Path, path: Path, minilm_tokenizer) -> None:
    doc = pdf(path)
    sentence = exported([chunker("sentence").chunk(doc, "sentence")], "sentence", tmp_path)
    check_sentence_rows(sentence)
    token = exported([chunker("token", tokenizer=minilm_tokenizer).chunk(doc, "token")], "token", tmp_path)
    check_token_rows(token, minilm_tokenizer)


@needs_shared
@pytest.mark.parametrize("path", REAL_PDFS, ids=lambda p: p.name)
def test_semantic_bounds_on_real_pdfs(tmp_path: Path, path: Path) -> None:
    rows = exported([chunker("semantic", embedding=WordHashEmbedding()).chunk(pdf(path), "semantic")], "semantic",
                    tmp_path)
    check_semantic_rows(rows, SemanticParams())


@needs_shared
@pytest.mark.slow
def test_markdown_on_a_real_italian_pdf(tmp_path: Path) -> None:
    doc = pdf(SHARED_PDFS / "it_gu-ue_eupl-v1.2_licenza.pdf")
    rows = exported([chunker("markdown").chunk(doc, "markdown")], "markdown", tmp_path)
    assert all(len(row["contents"]) <= 800 for row in rows)
    assert {row["metadata"]["page_end"] for row in rows} == set(range(1, doc.page_count + 1))
    assert not any("Gazzetta ufficiale dell'Unione europea" in row["contents"] for row in rows)  # running header
