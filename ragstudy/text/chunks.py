"""Chunk records shared by every strategy, and the export that `--chunks-only` writes.

A chunk records where it came from: the PDF path, its first and last page, and `start_end_idx` into the exported
source text of its strategy, so that `source.text[start:end] == contents` always holds. `doc_id` is derived from
the content (not a random uuid), so ids are stable across runs and comparable between tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol, Sequence

from ragstudy.io import sha256_text
from ragstudy.text.textlayer import PdfDocument, SourceText

# Chunk metadata a strategy sets when it knows the document's structure and its `section_context` is on: the
# parent's section titles, outermost first, joined by HEADING_SEPARATOR. The knowledge base prefixes each child
# window with it for embedding and indexing (`window_text`); the parent's text, what the LLM reads, is unchanged.
HEADING_PATH = "heading_path"
HEADING_SEPARATOR = " > "


@dataclass(frozen=True)
class Chunk:
    """One parent chunk: what is retrieved and put into the prompt."""

    doc_id: str
    contents: str
    path: str
    start: int
    end: int
    page_start: int
    page_end: int
    strategy: str
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def metadata(self) -> dict:
        return {
            "doc_id": self.doc_id, "path": self.path, "page_start": self.page_start, "page_end": self.page_end,
            "start_index": self.start, "end_index": self.end, "strategy": self.strategy, **self.extra,
        }

    def to_document(self):  # -> langchain_core.documents.Document
        from langchain_core.documents import Document

        return Document(page_content=self.contents, metadata=self.metadata, id=self.doc_id)


@dataclass(frozen=True)
class ChunkedDocument:
    """A document's chunks and the text their offsets point into."""

    source: SourceText
    chunks: tuple[Chunk, ...]


class Chunker(Protocol):
    """What a strategy provides: turn a validated PDF into chunk records. An optional `prepare(documents)`, called
    once before the documents are chunked one by one, does work that runs better in bulk (every PDF converted in
    parallel); the registration's `prefetch` may start it ahead (pipeline.chunking_ahead), and `prepare` waits."""

    def chunk(self, document: PdfDocument, strategy: str) -> ChunkedDocument: ...


def prepare_chunker(chunker: Chunker, documents: Sequence[PdfDocument]) -> None:
    """Call the chunker's optional `prepare(documents)` hook (a no-op for chunkers without one)."""
    prepare = getattr(chunker, "prepare", None)
    if prepare is not None:
        prepare(documents)


def window_text(window: str, metadata: dict) -> str:
    """The text embedded and indexed for a child window of a parent with `metadata`: the window itself, after a
    line with the parent's heading path when its strategy recorded one (section context)."""
    path = metadata.get(HEADING_PATH)
    return f"{path}\n{window}" if path else window


def locate_pieces(text: str, pieces: Sequence[str], overlap_hint: int = 0) -> list[tuple[int, int]]:
    """Offsets of consecutive, possibly overlapping substrings `pieces` of `text`, searched left to right;
    ValueError if a piece is not found where expected (a splitter that altered its input)."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for number, piece in enumerate(pieces):
        start = text.find(piece, max(0, cursor))
        if start < 0:
            start = text.find(piece)
        if start < 0:
            raise ValueError(f"chunk {number} is not a substring of its source text: {piece[:60]!r}")
        spans.append((start, start + len(piece)))
        cursor = start + max(1, len(piece) - overlap_hint)
    return spans


def build_chunks(source: SourceText, spans: Iterable[tuple[int, int]], strategy: str,
                 pages: Sequence[tuple[int, int]] | None = None) -> ChunkedDocument:
    """Chunk records for `spans` of `source` (pages from its page offsets unless given), with content-derived ids: the
    same PDF bytes and text layer (SourceText.identity), strategy and span give the same id on every run."""
    chunks = []
    for i, (start, end) in enumerate(spans):
        contents = source.text[start:end]
        page_start, page_end = pages[i] if pages is not None else source.pages_of(start, end)
        chunks.append(Chunk(
            doc_id=sha256_text(strategy, source.identity, str(start), str(end), contents)[:32], contents=contents,
            path=source.path, start=start, end=end, page_start=page_start, page_end=page_end, strategy=strategy,
        ))
    return ChunkedDocument(source=source, chunks=tuple(chunks))


@dataclass(frozen=True)
class SplitterChunker:
    """Chunks the shared text layer with a LangChain TextSplitter (the baselines)."""

    splitter: object  # langchain_text_splitters.TextSplitter
    overlap: int = 0

    def chunk(self, document: PdfDocument, strategy: str) -> ChunkedDocument:
        source = document.text_layer
        pieces = self.splitter.split_text(source.text)
        return build_chunks(source, locate_pieces(source.text, pieces, self.overlap), strategy)


@dataclass(frozen=True)
class SpanChunker:
    """Chunks the shared text layer with a splitter that returns exact character spans (`spans(text)`)."""

    splitter: object  # has spans(text: str) -> list[tuple[int, int]]

    def chunk(self, document: PdfDocument, strategy: str) -> ChunkedDocument:
        source = document.text_layer
        return build_chunks(source, self.splitter.spans(source.text), strategy)
