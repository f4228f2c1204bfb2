"""What differs for the paragraph strategy: parents are the layout-aware paragraphs of RAGParagraph.segmenter.

The exported source text of a document is its paragraphs joined by a blank line; `start_end_idx` points into it.
Every segmenter setting is a strategy parameter (`--set paragraph.max_chars=1500`, `--paragraph-mode paper`), and
`--set paragraph.section_context=true` records each paragraph's heading path (sections.py) in its metadata, which
the knowledge base puts before each child window it embeds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ragstudy.registry import ChunkerContext, register_strategy
from ragstudy.text.chunks import HEADING_PATH, HEADING_SEPARATOR, ChunkedDocument, build_chunks
from ragstudy.text.textlayer import BLOCK_SEPARATOR, PdfDocument, SourceText

from .segmenter import Paragraph, SegmenterConfig, segment_pdf


def paragraphs_to_source(document: PdfDocument, paragraphs: list[Paragraph]) -> tuple[SourceText, list]:
    """Join paragraphs into the text their chunks index into; returns (source, spans)."""
    spans, parts, cursor = [], [], 0
    for paragraph in paragraphs:
        if parts:
            cursor += len(BLOCK_SEPARATOR)
        spans.append((cursor, cursor + len(paragraph.text)))
        parts.append(paragraph.text)
        cursor += len(paragraph.text)
    text = BLOCK_SEPARATOR.join(parts)
    # page p starts at the first paragraph that starts on page >= p (monotone even if reading order is not)
    starts, index = [], 0
    for page in range(1, document.page_count + 1):
        while index < len(paragraphs) and paragraphs[index].page_start < page:
            index += 1
        starts.append(spans[index][0] if index < len(spans) else len(text))
    for i in range(1, len(starts)):
        starts[i] = max(starts[i], starts[i - 1])
    return SourceText(path=document.path, sha256=document.sha256, text=text, page_starts=tuple(starts)), spans


@dataclass(frozen=True)
class ParagraphParams(SegmenterConfig):
    """The segmenter's settings and the chunker's own: `section_context` stores each paragraph's heading path in
    its metadata, for the child windows that are embedded (layout mode only: paper mode finds no heading levels)."""

    section_context: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.section_context and self.mode != "layout":
            raise ValueError("section_context needs mode 'layout' (paper mode records no heading paths); "
                             "leave section_context off or use --paragraph-mode layout")


@dataclass(frozen=True)
class ParagraphChunker:
    config: ParagraphParams

    def chunk(self, document: PdfDocument, strategy: str) -> ChunkedDocument:
        paragraphs = segment_pdf(document.path, self.config)  # opened and closed there
        source, spans = paragraphs_to_source(document, paragraphs)
        chunked = build_chunks(source, spans, strategy, pages=[(p.page_start, p.page_end) for p in paragraphs])
        chunks = tuple(replace(c, extra=self._metadata(p)) for c, p in zip(chunked.chunks, paragraphs))
        return ChunkedDocument(source=source, chunks=chunks)

    def _metadata(self, paragraph: Paragraph) -> dict:
        if self.config.section_context and paragraph.heading_path:
            return {"kind": paragraph.kind, HEADING_PATH: HEADING_SEPARATOR.join(paragraph.heading_path)}
        return {"kind": paragraph.kind}


def make_chunker(config: ParagraphParams, context: ChunkerContext) -> ParagraphChunker:
    return ParagraphChunker(config)


# paper: parents are whole paragraphs, child windows 250/50, k=1; "DatasetCustom" is the paper's file name
SPEC = register_strategy("paragraph", make_chunker, ParagraphParams, display_name="Paragraph", color="#0072B2",
                         order=0, source_kind="paragraphs", dataset_name="DatasetCustom", child_chunk_size=250,
                         child_chunk_overlap=50, k=1, description="layout-aware paragraphs (RAGParagraph.segmenter)",
                         paper=True)
