"""The chunk cache's key hashes the code that shapes chunks: every ragstudy module a strategy package imports, or
that the hashed modules import in turn, is either hashed (pipeline.CHUNKING_CODE: editing it makes the cached chunks
stale) or declared plumbing that shapes no chunk (pipeline.CHUNKING_PLUMBING). A new import fails here until it is
classified, so an edit to a module that changes chunks can never be served chunks cached by the old code."""

from __future__ import annotations

from pathlib import Path

from ragstudy.pipeline import CHUNKING_CODE, CHUNKING_PLUMBING
from test_structure import _imports, _modules  # the repository's module graph, as the layer checks read it

REPO = Path(__file__).resolve().parents[1]


def covered(module: str, entries: tuple[str, ...]) -> bool:
    return any(module == entry or module.startswith(entry.rstrip("/") + "/") for entry in entries)


def test_every_module_that_can_shape_chunks_is_in_the_chunk_cache_key() -> None:
    modules = _modules()
    path_of = {name: module.path.relative_to(REPO).as_posix() for name, module in modules.items()}
    sources = [name for name, path in path_of.items()
               if path.startswith("RAG") or covered(path, CHUNKING_CODE)]
    unclassified = {}
    for source in sources:
        for module in _imports(source, modules[source].path, modules):
            if module.startswith("ragstudy.") and not covered(path_of[module], CHUNKING_CODE + CHUNKING_PLUMBING):
                unclassified.setdefault(path_of[module], path_of[source])
    assert unclassified == {}, f"imported by chunking code, neither hashed nor declared plumbing: {unclassified}"


def test_the_sentence_splitter_is_hashed() -> None:
    """RAGSentence and RAGSemantic cut at ragstudy.text.sentences' boundaries: an edit there changes their chunks."""
    assert "ragstudy/text/sentences.py" in CHUNKING_CODE
    assert not set(CHUNKING_CODE) & set(CHUNKING_PLUMBING)
