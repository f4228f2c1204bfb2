"""The shared text layer, chunk records and the baseline splitters."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from conftest import TEST_PARAGRAPHS, write_test_pdf
from ragstudy import registry
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.pipeline import StageSettings, chunk_documents
from ragstudy.results import read_chunks as load_chunk_export, write_chunks as export_chunks
from ragstudy.text.textlayer import list_pdfs, load_documents, read_pdf


def test_text_layer_separates_blocks_by_blank_lines_and_records_page_starts(pdf_dir: Path) -> None:
    doc = read_pdf(pdf_dir / "manuale_a.pdf")
    text = doc.text_layer.text
    assert doc.page_count == 2 and len(doc.text_layer.page_starts) == 2
    second = doc.text_layer.page_starts[1]
    assert text[second:].startswith("Manuale di prova - pagina 2")
    assert doc.text_layer.page_of(second - 1) == 1 and doc.text_layer.page_of(second) == 2
    # title and its paragraph are separate blocks, separated by one blank line
    assert "Conservazione\n\nIl sistema di gestione documentale" in text
    assert "è affidata" in text.replace("\n", " ")  # accents kept


def test_accented_italian_words_are_kept_verbatim(tmp_path: Path) -> None:
    sentence = "La città di Forlì è più vicina perché così è scritto. È già l'ora della verità, disse Niccolò."
    pdf = write_test_pdf(tmp_path / "accenti.pdf", paragraphs=[("Città e qualità", sentence)], pages=1)
    text = read_pdf(pdf).text_layer.text
    assert "Città e qualità" in text
    assert sentence in text.replace("\n", " ")  # precomposed letters, not folded to ASCII or split from accents


def test_documents_are_read_in_name_order_and_other_files_skipped(tmp_path: Path, caplog) -> None:
    write_test_pdf(tmp_path / "b.pdf")
    write_test_pdf(tmp_path / "a.PDF")
    (tmp_path / "notes.txt").write_text("not a pdf")
    with caplog.at_level(logging.WARNING):
        paths = list_pdfs(tmp_path)
    assert [p.name for p in paths] == ["a.PDF", "b.pdf"]
    assert "notes.txt" in caplog.text and "skipped" in caplog.text


@pytest.mark.parametrize("strategy", [  # a chunker that embeds loads the embedding model first (~9 s): slow
    pytest.param(name, marks=pytest.mark.slow) if registry.get(name).needs_embedding else name
    for name in registry.available()])
def test_every_strategy_round_trips_start_end_idx(strategy: str, pdf_dir: Path, tmp_path: Path) -> None:
    config = StudyConfig.resolve(profile="lite", strategies=strategy, documents=str(pdf_dir))
    documents = load_documents(pdf_dir)
    chunked = chunk_documents(documents, StageSettings.of(config, strategy))
    assert all(item.chunks for item in chunked)
    for item in chunked:
        # every page repeats the same paragraphs: each chunk must point at its own occurrence, in reading order
        spans = [(chunk.start, chunk.end) for chunk in item.chunks]
        assert spans == sorted(spans) and len(set(spans)) == len(spans)
        for chunk in item.chunks:
            assert chunk.contents.strip() == chunk.contents and chunk.contents
            assert 1 <= chunk.page_start <= chunk.page_end
            assert chunk.path == item.source.path
    ids = [c.doc_id for item in chunked for c in item.chunks]
    assert len(ids) == len(set(ids))
    again = chunk_documents(load_documents(pdf_dir), StageSettings.of(config, strategy))
    assert ids == [c.doc_id for item in again for c in item.chunks]  # content-derived, stable
    export_chunks(chunked, strategy, tmp_path)
    rows, sources = load_chunk_export(tmp_path, strategy)
    assert len(rows) == len(ids)
    for row in rows:
        start, end = row["start_end_idx"]
        assert sources[row["path"]].text[start:end] == row["contents"]
        assert row["metadata"]["page_start"] >= 1
    header = (tmp_path / f"chunks_{strategy}.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "doc_id,contents,path,start_end_idx,metadata"


def test_located_offsets_point_at_the_right_occurrence_of_repeated_text() -> None:
    # build_chunks copies source.text[start:end], so chunk text matches its offsets by construction; what can go
    # wrong is locate_pieces choosing another occurrence of a piece that the text repeats.
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ragstudy.text.chunks import locate_pieces

    pieces = ["rosso verde", "verde rosso", "rosso verde"]
    assert locate_pieces("rosso verde rosso verde", pieces, overlap_hint=5) == [(0, 11), (6, 17), (12, 23)]
    text = " ".join(["Il fascicolo si conserva per dieci anni."] * 12)
    pieces = RecursiveCharacterTextSplitter(chunk_size=90, chunk_overlap=45).split_text(text)
    assert len(set(pieces)) < len(pieces)  # the same piece occurs more than once
    spans = locate_pieces(text, pieces, overlap_hint=45)
    assert [text[start:end] for start, end in spans] == pieces
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[0] < b[0] <= a[1] + 1 for a, b in zip(spans, spans[1:]))  # in order, overlapping or adjacent


def test_fixed_size_parents_respect_size_and_overlap(pdf_dir: Path) -> None:
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", set_params=[
        "fixed-size.chunk_size=300", "fixed-size.chunk_overlap=50"])
    chunked = chunk_documents(load_documents(pdf_dir), StageSettings.of(config, "fixed-size"))
    chunks = [c for item in chunked for c in item.chunks]
    assert len(chunks) > 5 and max(len(c.contents) for c in chunks) <= 300
    pairs = [(a, b) for item in chunked for a, b in zip(item.chunks, item.chunks[1:])]
    assert any(b.start < a.end for a, b in pairs)  # overlapping windows exist
    assert all(b.start < a.end + 3 for a, b in pairs)  # and no text between neighbours is lost


def test_newline_parents_are_exactly_the_blank_line_blocks(pdf_dir: Path) -> None:
    config = StudyConfig.resolve(profile="lite", strategies="newline")
    doc = load_documents(pdf_dir)[0]
    chunks = chunk_documents([doc], StageSettings.of(config, "newline"))[0].chunks
    assert [c.contents for c in chunks] == [b.strip() for b in doc.text_layer.text.split("\n\n")]
    assert any(c.contents == "Conservazione" for c in chunks)
    assert any(c.contents.startswith("Il sistema di gestione") for c in chunks)
    assert len(chunks) == 2 * (1 + 2 * len(TEST_PARAGRAPHS))  # header line + title + body per paragraph


def test_chunk_pages_follow_the_pdf_pages(pdf_dir: Path) -> None:
    config = StudyConfig.resolve(profile="lite", strategies="newline")
    chunks = chunk_documents(load_documents(pdf_dir), StageSettings.of(config, "newline"))[1].chunks
    headers = [c for c in chunks if c.contents.startswith("Manuale di prova - pagina")]
    assert [(c.contents[-1], c.page_start, c.page_end) for c in headers] == [("1", 1, 1), ("2", 2, 2), ("3", 3, 3)]


# ---- bad input: a clear error naming the file and what to do ---------------------------------------------------

def test_corrupt_pdf_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "rotto.pdf"
    bad.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    with pytest.raises(StudyInputError, match=r"rotto\.pdf.*cannot be opened as a PDF"):
        load_documents(tmp_path)


def test_encrypted_pdf_is_named(tmp_path: Path) -> None:
    import pymupdf

    source = write_test_pdf(tmp_path / "plain.pdf")
    folder = tmp_path / "docs"
    folder.mkdir()
    with pymupdf.open(source) as doc:
        doc.save(folder / "segreto.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    with pytest.raises(StudyInputError, match=r"segreto\.pdf.*password-protected.*qpdf --decrypt"):
        load_documents(folder)


def test_scanned_pdf_without_text_layer_is_named(tmp_path: Path) -> None:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 50, 50), False)
    pix.clear_with(200)
    page.insert_image(pymupdf.Rect(72, 72, 300, 300), pixmap=pix)
    doc.save(tmp_path / "scansione.pdf")
    with pytest.raises(StudyInputError, match=r"scansione\.pdf.*no page has a text layer.*ocrmypdf"):
        load_documents(tmp_path)


def test_empty_and_missing_documents_folder(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("x")
    with pytest.raises(StudyInputError, match="no PDF files"):
        load_documents(tmp_path)
    with pytest.raises(StudyInputError, match="documents folder not found"):
        load_documents(tmp_path / "missing")


def test_unknown_strategy_lists_the_registered_ones() -> None:
    with pytest.raises(StudyInputError, match=r"unknown strategy 'semantik'.*fixed-size"):
        StudyConfig.resolve(profile="lite", strategies="fixed-size,semantik")


def test_limit_zero_is_rejected() -> None:
    with pytest.raises(StudyInputError, match="--limit must be a positive"):
        StudyConfig.resolve(profile="lite", strategies="newline", limit=0)


def test_unknown_strategy_parameter_is_rejected() -> None:
    with pytest.raises(StudyInputError, match=r"unknown strategy parameter --set fixed-size.chunk_sise"):
        StudyConfig.resolve(profile="lite", strategies="fixed-size", set_params=["fixed-size.chunk_sise=10"])


@pytest.mark.parametrize("setting, message", [
    ("fixed-size.chunk_size=-5", r"--set fixed-size: chunk_size must be positive, got -5"),
    ("fixed-size.chunk_overlap=900", r"--set fixed-size: chunk_overlap \(900\) must be >= 0 and less than chunk_size"),
    ("fixed-size.chunk_size=abc", r"--set fixed-size.chunk_size: 'abc' is not a valid value \(expected int\)"),
    ("fixed-size.chunk_size=1.5", r"--set fixed-size.chunk_size: 1.5 is not a valid value"),
    ("fixed-size.k=0", r"--set fixed-size: k .* must be positive"),
    ("fixed-size.k=two", r"--set fixed-size: k must be an integer, got 'two'"),
    ("paragraph.max_chars=10", r"--set paragraph: SegmenterConfig.max_chars must be at least 100"),
    ("paragraph.ascii_fold=maybe", r"--set paragraph.ascii_fold: 'maybe' is not a valid value \(expected bool\)"),
])
def test_strategy_parameters_are_validated_when_the_config_is_resolved(setting: str, message: str) -> None:
    """Type and range errors surface at resolution, before anything is written, naming the setting."""
    strategy = setting.split(".", 1)[0]
    with pytest.raises(StudyInputError, match=message):
        StudyConfig.resolve(profile="lite", strategies=strategy, set_params=[setting])


def test_strategy_parameters_from_a_config_file_are_validated(tmp_path: Path) -> None:
    settings = tmp_path / "s.yaml"
    settings.write_text("strategy_params:\n  fixed-size:\n    chunk_size: -1\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match=r"strategy_params.fixed-size: chunk_size must be positive"):
        StudyConfig.resolve(config_file=str(settings), profile="lite", strategies="fixed-size")


def test_resolved_config_records_origins(tmp_path: Path) -> None:
    cfg_file = tmp_path / "study.yaml"
    cfg_file.write_text("profile: lite\nmax_new_tokens: 12\nstrategy_params:\n  fixed-size: {k: 2}\n")
    config = StudyConfig.resolve(config_file=str(cfg_file), strategies="fixed-size", llm="/x/y")
    assert config.profile.max_new_tokens == 12 and config.strategy_params["fixed-size"].k == 2
    assert config.origins["llm"] == "--llm" and config.origins["max_new_tokens"].startswith("config file")
    data = config.to_dict()
    assert data["models"]["llm"] == "/x/y" and data["strategy_params"]["fixed-size"]["parent"]["chunk_size"] == 800
    json.dumps(data)


def test_paragraph_strategy_modes_and_settings(pdf_dir: Path) -> None:
    documents = load_documents(pdf_dir)
    layout = StudyConfig.resolve(profile="lite", strategies="paragraph")
    paper = StudyConfig.resolve(profile="lite", strategies="paragraph", set_params=["paragraph.mode=paper"])
    assert layout.strategy_params["paragraph"].k == 1
    assert layout.strategy_params["paragraph"].child_chunk_size == 250
    for config in (layout, paper):
        chunks = chunk_documents(documents, StageSettings.of(config, "paragraph"))[0].chunks
        assert any("SPID" in c.contents for c in chunks)
        assert all(c.extra["kind"] in {"paragraph", "list", "table", "title"} for c in chunks)
    with pytest.raises(StudyInputError, match=r"--set paragraph: SegmenterConfig.max_chars must be at least 100"):
        StudyConfig.resolve(profile="lite", strategies="paragraph", set_params=["paragraph.max_chars=10"])
