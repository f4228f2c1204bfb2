"""The chunk cache's key hashes the code that shapes chunks: every ragstudy module a strategy package imports, or
that the hashed modules import in turn, is either hashed (ranking.CHUNKING_CODE: editing it makes the cached chunks
stale) or declared plumbing that shapes no chunk (ranking.CHUNKING_PLUMBING). A new import fails here until it is
classified, so an edit to a module that changes chunks can never be served chunks cached by the old code."""

from __future__ import annotations

import ast
from pathlib import Path

from ragstudy.ranking import CHUNKING_CODE, CHUNKING_PLUMBING

REPO = Path(__file__).resolve().parents[1]


def ragstudy_imports(path: Path) -> set[str]:
    """The ragstudy modules `path` imports (absolute or relative, at any depth of the file), as repository paths."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.parent.relative_to(REPO).parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package[:len(package) - node.level + 1] + tuple((node.module or "").split("."))
            else:
                parts = tuple((node.module or "").split("."))
            names = [parts + (alias.name,) for alias in node.names]  # resolve() falls back to the module itself
        elif isinstance(node, ast.Import):
            names = [tuple(alias.name.split(".")) for alias in node.names]
        else:
            continue
        for parts in names:
            if parts and parts[0] == "ragstudy":
                module = resolve(parts)
                if module:
                    found.add(module)
    return found


def resolve(parts: tuple[str, ...]) -> str | None:
    """The file or package folder of `parts` (ragstudy.x.y), relative to the repository; None for a name inside a
    module."""
    for end in range(len(parts), 0, -1):
        path = REPO.joinpath(*parts[:end])
        if path.with_suffix(".py").is_file():
            return path.with_suffix(".py").relative_to(REPO).as_posix()
        if (path / "__init__.py").is_file() and end == len(parts):
            return path.relative_to(REPO).as_posix()
    return None


def covered(module: str, entries: tuple[str, ...]) -> bool:
    return any(module == entry or module.startswith(entry.rstrip("/") + "/") for entry in entries)


def test_every_module_that_can_shape_chunks_is_in_the_chunk_cache_key() -> None:
    sources = [p for p in REPO.glob("RAG*/**/*.py")]
    for entry in CHUNKING_CODE:
        path = REPO / entry
        sources += [path] if path.is_file() else sorted(path.rglob("*.py"))
    unclassified = {}
    for source in sources:
        for module in ragstudy_imports(source):
            if not covered(module, CHUNKING_CODE + CHUNKING_PLUMBING) and module != "ragstudy":
                unclassified.setdefault(module, source.relative_to(REPO).as_posix())
    assert unclassified == {}, f"imported by chunking code, neither hashed nor declared plumbing: {unclassified}"


def test_the_sentence_splitter_is_hashed() -> None:
    """RAGSentence and RAGSemantic cut at ragstudy.sentences' boundaries: an edit there changes their chunks."""
    assert "ragstudy/sentences.py" in CHUNKING_CODE
    assert not set(CHUNKING_CODE) & set(CHUNKING_PLUMBING)
