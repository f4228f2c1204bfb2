"""Section context: heading paths of paragraph and markdown chunks, prefixed to the child windows that are embedded.

Off by default (the chunk export and the Chroma collection are those of before); on, each parent records its
heading path in its metadata, its child windows are embedded after it, and the parent's text is unchanged. Also
the markdown chunker's `prepare`: PDFs converted in parallel worker processes, the same Markdown as one by one.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from ragstudy import registry
from ragstudy.errors import StudyInputError
from ragstudy.registry import ChunkerContext
from ragstudy.stores.knowledge_base import child_windows, collection_name
from ragstudy.text.chunks import HEADING_PATH, HEADING_SEPARATOR, prepare_chunker, window_text
from ragstudy.text.textlayer import read_pdf
from RAGParagraph.sections import Heading, HeadingPath, section_number

from conftest import REPO_ROOT, SHARED_PDFS

INVERTER = REPO_ROOT / "Documents" / "manuale_inverter_fotovoltaico.pdf"
CIE = SHARED_PDFS / "it_ipzs_cie-middleware_manuale-uso.pdf"
_NUMBER = re.compile(r"^(\d+(?:\.\d+)*)\.?\s")


def chunker(name: str, **overrides):
    spec = registry.get(name)
    return spec.make_chunker(spec.resolve_params(overrides), ChunkerContext())


def heading_paths(path: Path, name: str = "paragraph") -> list[tuple[str, str]]:
    """(heading path, contents) of each chunk of the PDF at `path`, section context on."""
    chunked = chunker(name, section_context=True).chunk(read_pdf(path), name)
    return [(chunk.metadata.get(HEADING_PATH, ""), chunk.contents) for chunk in chunked.chunks]


def test_section_numbers_nest_and_font_sizes_rank_unnumbered_titles() -> None:
    assert section_number("3.2.1 Requisiti") == ("3", "2", "1")
    assert section_number("8. GESTIONE DELLE EMERGENZE") == ("8",)
    assert section_number("A.1 Formati") == ("A", "1")
    assert section_number("Appendice") is None and section_number("2024") is None
    path = HeadingPath()
    assert path.enter(Heading.of("Manuale", 20, 2)) == ("Manuale",)
    assert path.enter(Heading.of("3  Installazione", 14, 2)) == ("Manuale", "3 Installazione")
    assert path.enter(Heading.of("3.2 Requisiti", 14, 2)) == ("Manuale", "3 Installazione", "3.2 Requisiti")
    assert path.enter(Heading.of("Nota", 10, 1)) == ("Manuale", "3 Installazione", "3.2 Requisiti", "Nota")
    # a sibling closes the label and its own sibling; the next chapter closes the whole section
    assert path.enter(Heading.of("3.3 Avvio", 14, 2)) == ("Manuale", "3 Installazione", "3.3 Avvio")
    assert path.enter(Heading.of("4.1 Rete", 12, 2)) == ("Manuale", "4.1 Rete")
    assert path.enter(Heading.of("Glossario", 20, 2)) == ("Glossario",)


def assert_numbered_paths_name_their_sections(paths: list[tuple[str, str]]) -> int:
    """Every numbered heading in a path is preceded there by its parent section's heading; returns how many
    parents sit under a numbered subsection."""
    nested = 0
    for path, _ in paths:
        numbers = [m.group(1) for part in path.split(HEADING_SEPARATOR) if (m := _NUMBER.match(part))]
        for number in numbers:
            if "." in number:
                nested += 1
                assert number.rsplit(".", 1)[0] in numbers, (number, path)
    return nested


def test_paragraph_heading_paths_of_the_sample_manual() -> None:
    paths = heading_paths(INVERTER)
    first = next(i for i, (_, text) in enumerate(paths) if text.startswith("4.2 Lato corrente alternata"))
    assert paths[first][0].endswith("4 Collegamenti elettrici > 4.2 Lato corrente alternata")
    # the next paragraph of the subsection, without a title of its own, has the same path
    assert paths[first + 1][0] == paths[first][0] and not paths[first + 1][1].startswith("4.")
    assert assert_numbered_paths_name_their_sections(paths) >= 2
    assert all(path for path, _ in paths)  # every paragraph sits under a title (the cover under its own)


@pytest.mark.skipif(not CIE.is_file(), reason=f"real PDF not available ({CIE} is absent)")
def test_paragraph_heading_paths_of_a_real_manual() -> None:
    paths = heading_paths(CIE)
    assert assert_numbered_paths_name_their_sections(paths) >= 10
    sblocco = [path for path, text in paths if text.startswith(("7.3 Sblocco", "Se il PUK"))]
    assert len(sblocco) >= 2 and all(path.endswith("7. Gestione del PIN utente > 7.3 Sblocco") for path in sblocco)


def test_off_by_default_and_the_parents_text_is_unchanged() -> None:
    document = read_pdf(INVERTER)
    off = chunker("paragraph").chunk(document, "paragraph")
    on = chunker("paragraph", section_context=True).chunk(document, "paragraph")
    assert all(HEADING_PATH not in chunk.metadata for chunk in off.chunks)
    assert [c.contents for c in on.chunks] == [c.contents for c in off.chunks]
    assert [c.doc_id for c in on.chunks] == [c.doc_id for c in off.chunks]
    assert on.source == off.source


def test_child_windows_are_embedded_after_the_heading_path_in_their_own_collection() -> None:
    spec = registry.get("paragraph")
    document = read_pdf(INVERTER)
    params = {flag: spec.resolve_params({"section_context": flag}) for flag in (False, True)}
    chunked = {flag: [chunker("paragraph", section_context=flag).chunk(document, "paragraph")] for flag in params}
    splitter_of = {flag: _splitter(params[flag]) for flag in params}
    windows = {flag: child_windows([c.to_document() for c in chunked[flag][0].chunks], splitter_of[flag])
               for flag in params}
    assert windows[True][1] == windows[False][1]  # the same windows, the same ids
    path_of = {chunk.doc_id: chunk.metadata.get(HEADING_PATH) for chunk in chunked[True][0].chunks}
    assert all(path_of.values())  # every paragraph of this manual sits under a title
    for plain, prefixed in zip(windows[False][0], windows[True][0]):
        path = path_of[plain.metadata["doc_id"]]
        assert prefixed.page_content == f"{path}\n{plain.page_content}"
        assert prefixed.metadata == plain.metadata
    names = {flag: collection_name(spec, params[flag], chunked[flag], "model") for flag in params}
    assert names[True] != names[False]
    assert window_text("finestra", {}) == "finestra"


def _splitter(params):
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=params.child_chunk_size,
                                          chunk_overlap=params.child_chunk_overlap)


def test_section_context_is_refused_in_paper_mode_with_the_setting_named() -> None:
    with pytest.raises(StudyInputError, match="section_context needs mode 'layout'"):
        registry.get("paragraph").resolve_params({"mode": "paper", "section_context": True})
    with pytest.raises(StudyInputError, match="markdown.section_context"):
        registry.get("markdown").resolve_params({"section_context": "yes"})


@pytest.mark.slow
def test_markdown_heading_paths_and_parallel_conversion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from RAGMarkdown.strategy import convert_pdf

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    documents = [read_pdf(path) for path in sorted((REPO_ROOT / "Documents").glob("*.pdf"))[:3]]
    on = chunker("markdown", section_context=True, workers=2)
    prepare_chunker(on, documents)  # converts the three PDFs in two worker processes and caches them
    cached = sorted((tmp_path / "cache" / "markdown").glob("*.json"))
    assert len(cached) == 3
    # the workers' Markdown is the converter's, as one by one in this process
    assert on.chunk(documents[0], "markdown").source.text.startswith(convert_pdf(documents[0].path)[0].strip())
    off = chunker("markdown")
    for document in documents:
        with_path, without = on.chunk(document, "markdown"), off.chunk(document, "markdown")
        assert [c.contents for c in with_path.chunks] == [c.contents for c in without.chunks]
        assert all(HEADING_PATH not in c.metadata for c in without.chunks)
        for chunk in with_path.chunks:  # the '#' headings over the chunk, without empty ones and HTML tags
            titles = chunk.metadata.get(HEADING_PATH, "").split(HEADING_SEPARATOR)
            assert all(title and title in chunk.metadata["headers"] and "<" not in title for title in titles) \
                or not chunk.metadata["headers"].strip(" >")
        assert any(HEADING_SEPARATOR in c.metadata.get(HEADING_PATH, "") for c in with_path.chunks)


@pytest.mark.slow
def test_a_failed_conversion_in_a_worker_names_the_pdf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from RAGMarkdown.strategy import convert_all

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    good = read_pdf(INVERTER)
    gone = tmp_path / "rimosso.pdf"
    gone.write_bytes(INVERTER.read_bytes())
    vanished = read_pdf(gone)
    gone.unlink()  # removed after it was read: its conversion fails in the worker
    vanished = dataclasses.replace(vanished, sha256="0" * 64)
    with pytest.raises(StudyInputError, match="rimosso.pdf"):
        convert_all([good, vanished], workers=2)


def test_conversion_workers_run_the_layout_model_on_one_non_spinning_thread() -> None:
    """PyMuPDF's layout model makes its ONNX Runtime sessions with the default threading (a spin-waiting thread per
    core); in a conversion worker (one per core) every session it makes, at import and later, runs one thread and
    sleeps between calls. Checked in fresh interpreters: with and without the worker's initializer."""
    import json
    import subprocess
    import sys

    probe = (
        "import sys, gc\n"
        "if sys.argv[1] == 'worker':\n"
        "    from RAGMarkdown.strategy import one_thread_onnx_sessions\n"
        "    one_thread_onnx_sessions(); one_thread_onnx_sessions()\n"
        "import pymupdf4llm, onnxruntime\n"
        "from pymupdf.layout.onnx.common_util import make_session\n"
        "import pymupdf.layout, pathlib\n"
        "model = next(pathlib.Path(pymupdf.layout.__file__).parent.glob('resources/onnx/feature_imf1.onnx'))\n"
        "later = make_session(str(model), ['CPUExecutionProvider'])\n"
        "sessions = [o for o in gc.get_objects() if isinstance(o, onnxruntime.InferenceSession)]\n"
        "def spin(s):\n"
        "    try: return s.get_session_options().get_session_config_entry('session.intra_op.allow_spinning')\n"
        "    except Exception: return 'default'\n"
        "import json\n"
        "print(json.dumps([len(sessions), sorted({s.get_session_options().intra_op_num_threads for s in sessions}),"
        " sorted({spin(s) for s in sessions})]))\n"
    )

    def run(mode: str) -> list:
        done = subprocess.run([sys.executable, "-c", probe, mode], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    count, threads, spinning = run("worker")
    assert count >= 2  # the layout model's sessions made at import, and one made later
    assert threads == [1] and spinning == ["0"]
    assert run("plain")[1] == [0]  # without the initializer: ONNX Runtime's default (0: a thread per core)
