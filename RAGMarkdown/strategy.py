"""What differs for the markdown strategy: PyMuPDF4LLM's Markdown of each PDF, split at headings, size-bounded.

The Markdown comes from `pymupdf4llm.to_markdown(page_chunks=True, header=False, footer=False, use_ocr=False)`:
PyMuPDF's own converter (its ONNX layout model ships in the pymupdf-layout wheel), with running headers and footers
dropped by its layout analysis and one Markdown text per page, so each chunk knows its pages. Pages are joined by a
blank line into the text `start_end_idx` indexes (source_kind "markdown"). The conversion is slow (about 0.21
CPU seconds a page, most of it the layout model), so it is cached under the PDF's sha256, the pymupdf4llm version
and the options, and the chunker's `prepare` converts the PDFs not yet cached in worker processes (`workers`,
default one per core). A run starts them ahead, in the background, as it begins (the registration's `prefetch`,
`convert_ahead`), so the conversion overlaps the other strategies' chunking and embedding; `prepare` then waits for
it. In a worker the layout model's ONNX Runtime sessions run one thread each and sleep instead of spin-waiting: by
default each session starts a thread per core that spins between calls, which on two cores cost 1.7x the CPU
seconds for the same Markdown (13.9 against 8.2 CPU s on a 53-page PDF; see benchmarks/markdown_conversion.py).

Sections: LangChain's `ExperimentalMarkdownSyntaxTextSplitter` (langchain-text-splitters), which cuts at every
heading `#`..`######` outside code fences and, unlike `MarkdownHeaderTextSplitter`, keeps the lines exactly as
written, so sections are slices of the Markdown. Only its heading cuts are kept (it also isolates each code fence,
and PyMuPDF4LLM fences every Courier line separately); a section holding only headings joins the next one, and the
headings of a long section stay with its first piece.
Size bound: a section longer than `chunk_size` (800 characters, the fixed-size parents) is split by
`RecursiveCharacterTextSplitter.from_language(Language.MARKDOWN)` with `chunk_overlap` 50, as the fixed-size
baseline. Each chunk carries its heading path in its metadata ("headers"); with `section_context` it is also the
chunk's `heading_path`, which the knowledge base puts before each child window it embeds. Child windows 200 / 0,
k=4.
"""

from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import CancelledError
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Sequence

from ragstudy.errors import StudyInputError
from ragstudy.io import atomic_write_json, cache_dir, cpu_cores, sha256_text, stable_json
from ragstudy.registry import ChunkerContext, register_strategy
from ragstudy.text.chunks import HEADING_PATH, HEADING_SEPARATOR, ChunkedDocument, build_chunks, locate_pieces
from ragstudy.text.sentences import strip_span
from ragstudy.text.textlayer import BLOCK_SEPARATOR, PdfDocument, SourceText

logger = logging.getLogger(__name__)
Span = tuple[int, int]
_HEADING_LINE = re.compile(r"^#{1,6} ")
_LEADING_HEADINGS = re.compile(r"(?:[ \t]*#{1,6} [^\n]*\n\s*)+")
_EMPHASIS = re.compile(r"[*_`]+")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")  # PyMuPDF4LLM writes underlined text as <u>...</u>


@dataclass(frozen=True)
class MarkdownParams:
    """Heading sections of at most `chunk_size` characters (longer ones split with `chunk_overlap`)."""

    chunk_size: int = 800
    chunk_overlap: int = 50
    heading_levels: int = 6  # split at headings `#` .. `#` * heading_levels
    section_context: bool = False  # store the heading path as `heading_path`: child windows are embedded after it
    workers: int = 0  # PDFs converted at once, each in a worker process (0: one per CPU core); the output is the same

    def __post_init__(self) -> None:
        if self.chunk_size < 20:
            raise ValueError(f"chunk_size must be at least 20 characters, got {self.chunk_size}")
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be >= 0 and less than chunk_size "
                             f"({self.chunk_size})")
        if not 1 <= self.heading_levels <= 6:
            raise ValueError(f"heading_levels must be between 1 and 6, got {self.heading_levels}")
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0 (0: one per CPU core), got {self.workers}")


MARKDOWN_OPTIONS = {"page_chunks": True, "header": False, "footer": False, "use_ocr": False, "show_progress": False}


@lru_cache(maxsize=1)
def converter_version() -> str:
    """pymupdf4llm's version, read without importing it (the import loads the layout model); once a process."""
    from importlib.metadata import version

    return version("pymupdf4llm")


def _cache_path(document: PdfDocument) -> Path:
    """Where the Markdown of `document` is cached: its sha256, the converter's version and options."""
    key = sha256_text(document.sha256, converter_version(), stable_json(MARKDOWN_OPTIONS))
    return cache_dir() / "markdown" / f"{key}.json"


def one_thread_onnx_sessions() -> None:
    """Make every ONNX Runtime session created later in this process run one intra-op thread that sleeps between
    calls. For the conversion worker processes only, before pymupdf4llm is imported: PyMuPDF's layout model makes
    its sessions with ONNX Runtime's default threading (a thread per core, spin-waiting), which in one worker per
    core oversubscribes the cores and burns CPU while spinning; the Markdown is the same."""
    import onnxruntime

    if getattr(onnxruntime.InferenceSession, "one_thread", False):
        return

    class OneThreadSession(onnxruntime.InferenceSession):
        one_thread = True

        def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
            options = sess_options if sess_options is not None else onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            super().__init__(path_or_bytes, sess_options=options, providers=providers,
                             provider_options=provider_options, **kwargs)

    onnxruntime.InferenceSession = OneThreadSession


def convert_pdf(path: str) -> list[str]:
    """PyMuPDF4LLM Markdown of each page of the PDF at `path` (uncached; runs in a worker process too)."""
    import pymupdf
    import pymupdf4llm

    try:
        with pymupdf.open(path) as pdf:
            return [page["text"] for page in pymupdf4llm.to_markdown(pdf, **MARKDOWN_OPTIONS)]
    except Exception as exc:  # the converter raises many types; name the file and the way out
        raise StudyInputError(
            f"{path}: PyMuPDF4LLM {pymupdf4llm.__version__} could not convert it to Markdown "
            f"({type(exc).__name__}: {exc}). Leave the markdown strategy out (--strategies) or remove the file."
        ) from exc


def _write_cache(cache_file: Path, path: str, pages: list[str]) -> bool:
    """Write the Markdown pages of the PDF at `path` to `cache_file` (atomically); True when they hold any text."""
    atomic_write_json(cache_file, {"path": path, "pymupdf4llm": converter_version(), "pages": pages},
                      store="Markdown cache")
    return any(page.strip() for page in pages)


def _warn_empty(path: str) -> None:
    logger.warning("%s: PyMuPDF4LLM produced no Markdown text; the markdown strategy has no chunks for it", path)


def convert_to_cache(path: str, cache_file: str) -> bool:
    """Convert the PDF at `path` and cache its Markdown in `cache_file` (in a worker process: a conversion that
    finished is kept even if the run stops); True when it holds any text."""
    return _write_cache(Path(cache_file), path, convert_pdf(path))


def pdf_markdown_pages(document: PdfDocument) -> list[str]:
    """PyMuPDF4LLM Markdown of each page of `document` (cached under its sha256, the converter's version, options;
    converted in this process when `convert_all` has not cached it)."""
    from ragstudy.stores.cachefile import read_json

    path = _cache_path(document)
    cached = read_json(path, _cached_pages, "Markdown cache")  # a damaged file is set aside and converted again
    if cached is not None:
        return cached
    pages = convert_pdf(document.path)
    if not _write_cache(path, document.path, pages):
        _warn_empty(document.path)
    return pages


def _cached_pages(data: Any) -> list[str]:
    from ragstudy.stores.cachefile import json_object

    pages = json_object(data, ("pages",), "the file")["pages"]
    if not isinstance(pages, list) or not all(isinstance(page, str) for page in pages):
        raise ValueError("pages must be a list of strings")
    return pages


@dataclass
class _Conversions:
    """The conversions of this process: queued or in a worker, by cache file."""

    pool: Any = None
    limit: int = 1  # conversions at once
    active: int = 0  # conversions given to a worker and not finished
    queue: list = field(default_factory=list)  # (cache file, document, Future) not yet given to a worker
    running: dict[str, Any] = field(default_factory=dict)  # cache file -> Future (queued or in a worker)
    lock: Any = field(default_factory=threading.RLock)


_CONVERSIONS = _Conversions()


def _fill(state: _Conversions) -> None:
    """Give queued conversions to the workers while fewer than `state.limit` are running."""
    with state.lock:
        while state.pool is not None and state.queue and state.active < state.limit:
            key, doc, future = state.queue.pop(0)
            if not future.set_running_or_notify_cancel():
                continue
            state.active += 1
            state.pool.submit(convert_to_cache, doc.path, key).add_done_callback(partial(_finished, state, future))


def _finished(state: _Conversions, future, done) -> None:
    """A worker's conversion ended: pass its outcome on to `future` and start the next queued one."""
    with state.lock:
        state.active -= 1
    if done.cancelled():
        future.set_exception(CancelledError())
    elif done.exception() is not None:
        future.set_exception(done.exception())
    else:
        future.set_result(done.result())
    _fill(state)


def start_conversions(documents: Sequence[PdfDocument], workers: int = 0,
                      ahead: bool = False) -> dict[Any, PdfDocument]:
    """Queue the PDFs neither cached nor under way, longest first, for worker processes whose ONNX Runtime sessions
    run one thread each (spawned, so a script that calls this needs the usual `if __name__ == "__main__":` guard);
    return at once with the future of each of `documents` under way. `workers` PDFs are converted at once (0: one
    per CPU core); `ahead` (in the background of a run, see convert_ahead): one fewer, leaving a core to the run,
    until someone waits for them (convert_all)."""
    from concurrent.futures import Future, ProcessPoolExecutor
    from multiprocessing import get_context

    state = _CONVERSIONS
    cores = workers or cpu_cores()
    keys = {str(_cache_path(doc)): doc for doc in documents}
    with state.lock:
        todo = {key: doc for key, doc in keys.items() if key not in state.running and not Path(key).is_file()}
        if todo and state.pool is None:
            logger.info("converting %d PDFs (%d pages) to Markdown in up to %d worker process(es)", len(todo),
                        sum(doc.page_count for doc in todo.values()), cores)
            # spawn: a forked copy of a process that has started torch or onnxruntime threads can hang
            state.pool = ProcessPoolExecutor(max_workers=cores, mp_context=get_context("spawn"),
                                             initializer=one_thread_onnx_sessions)
            state.limit = 1
        state.limit = max(state.limit, max(1, cores - 1) if ahead else cores)
        for key, doc in sorted(todo.items(), key=lambda item: -item[1].page_count):
            state.running[key] = Future()
            state.queue.append((key, doc, state.running[key]))
        _fill(state)
        return {state.running[key]: doc for key, doc in keys.items() if key in state.running}


def stop_conversions() -> None:
    """Stop the conversions under way (an error or Ctrl-C elsewhere in the run) and the worker processes. A PDF
    converted in full is already cached; one stopped halfway leaves nothing (the cache is written atomically)."""
    state = _CONVERSIONS
    with state.lock:
        pool, state.pool = state.pool, None
        for _, _, future in state.queue:
            future.cancel()
        state.queue.clear()
        state.running.clear()
        state.active = 0
    if pool is None:
        return
    # ProcessPoolExecutor has no public way to stop a running task before Python 3.14's terminate_workers()
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)  # quick once the workers are gone; releases the pool's queues


def convert_ahead(params: MarkdownParams, documents: Sequence[PdfDocument]):
    """The registration's `prefetch`: start the conversions in the background, leaving a core to the run; return
    how to stop them."""
    start_conversions(documents, params.workers, ahead=True)
    return stop_conversions


def convert_all(documents: Sequence[PdfDocument], workers: int = 0) -> None:
    """Convert and cache the PDFs not yet cached (see start_conversions), and wait for those under way, started
    here or ahead by `convert_ahead`."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    from tqdm.auto import tqdm

    futures = start_conversions(documents, workers)
    if not futures:
        return
    state = _CONVERSIONS
    finished = False
    try:
        with tqdm(total=sum(doc.page_count for doc in futures.values()), desc="Markdown conversion",
                  unit="page") as bar:
            for future in as_completed(futures):
                doc = futures[future]
                try:
                    has_text = future.result()
                except BrokenProcessPool as exc:
                    raise StudyInputError(
                        f"{doc.path}: the Markdown conversion worker stopped ({exc}); remove that PDF or leave "
                        f"the markdown strategy out (--strategies), then re-run (PDFs converted so far are "
                        f"cached)") from exc
                if not has_text:
                    _warn_empty(doc.path)
                bar.update(doc.page_count)
        finished = True
    finally:
        if not finished:
            stop_conversions()
        else:
            with state.lock:
                for key in [key for key, future in state.running.items() if future.done()]:
                    del state.running[key]
                pool = state.pool if not state.running and not state.queue else None
                if pool is not None:
                    state.pool = None
            if pool is not None:
                pool.shutdown(wait=True)


def markdown_source(document: PdfDocument) -> SourceText:
    """The document's Markdown as the text chunks index into, with the offset where each page begins."""
    text, starts = "", []
    for page_text in pdf_markdown_pages(document):
        page_text = page_text.strip()
        if text and page_text:
            text += BLOCK_SEPARATOR
        starts.append(len(text))
        text += page_text
    return SourceText(path=document.path, sha256=document.sha256, text=text, page_starts=tuple(starts))


@dataclass
class MarkdownSectionSplitter:
    """Heading sections of a Markdown text as (span, heading path), each at most `chunk_size` characters."""

    params: MarkdownParams
    _sections: object = field(init=False, repr=False)
    _bounded: object = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from langchain_text_splitters import (ExperimentalMarkdownSyntaxTextSplitter, Language,
                                              RecursiveCharacterTextSplitter)

        headers = [("#" * level, f"h{level}") for level in range(1, self.params.heading_levels + 1)]
        self._sections = ExperimentalMarkdownSyntaxTextSplitter(headers_to_split_on=headers, strip_headers=False)
        self._bounded = RecursiveCharacterTextSplitter.from_language(
            Language.MARKDOWN, chunk_size=self.params.chunk_size, chunk_overlap=self.params.chunk_overlap)

    def sections(self, text: str) -> list[tuple[Span, str]]:
        """Heading sections (stripped spans) with their heading path; they cover all non-blank text."""
        starts: list[tuple[int, str]] = []
        cursor = 0
        for doc in self._sections.split_text(text):
            at = text.find(doc.page_content, cursor)
            if at < 0:  # the splitter keeps lines verbatim; this would be a change in langchain-text-splitters
                raise ValueError(f"markdown section not found in its source: {doc.page_content[:60]!r}")
            cursor = at + len(doc.page_content)
            # only headings start a section: code blocks and text after a rule stay with their heading
            if _HEADING_LINE.match(doc.page_content):
                path = HEADING_SEPARATOR.join(_EMPHASIS.sub("", str(value)).strip()
                                  for key, value in sorted(doc.metadata.items()) if key.startswith("h"))
                starts.append((at, path))
        if not starts or text[:starts[0][0]].strip():
            starts.insert(0, (0, ""))
        sections: list[tuple[Span, str]] = []
        pending: int | None = None
        for number, (start, path) in enumerate(starts):
            end = starts[number + 1][0] if number + 1 < len(starts) else len(text)
            span = strip_span(text, pending if pending is not None else start, end)
            if span is None:
                continue
            body = [line for line in text[start:end].splitlines() if line.strip()]
            if number + 1 < len(starts) and all(_HEADING_LINE.match(line) for line in body):
                pending = span[0]  # a heading with no text of its own belongs to the next section
                continue
            pending = None
            sections.append((span, path))
        return sections

    def _split(self, text: str, start: int, end: int, size: int) -> list[Span]:
        from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

        splitter = self._bounded if size == self.params.chunk_size else RecursiveCharacterTextSplitter.from_language(
            Language.MARKDOWN, chunk_size=size, chunk_overlap=min(self.params.chunk_overlap, size // 2))
        section = text[start:end]
        return [(start + a, start + b) for a, b in locate_pieces(section, splitter.split_text(section),
                                                                 self.params.chunk_overlap)]

    def spans(self, text: str) -> list[tuple[Span, str]]:
        out: list[tuple[Span, str]] = []
        limit = self.params.chunk_size
        for (start, end), path in self.sections(text):
            if end - start <= limit:
                out.append(((start, end), path))
                continue
            # keep the section's headings with its first piece of text (the splitter would isolate them)
            head = _LEADING_HEADINGS.match(text, start, end)
            body = head.end() if head else start
            if body - start > limit // 2:
                body = start
            pieces = self._split(text, body, end, limit - (body - start))
            pieces[0] = (start, pieces[0][1])
            out.extend((piece, path) for piece in _join_crumbs(pieces, limit))
        return out

    def split_text(self, text: str) -> list[str]:
        """The chunks' texts (the TextSplitter interface)."""
        return [text[start:end] for (start, end), _ in self.spans(text)]


def _join_crumbs(pieces: list[Span], limit: int, crumb: int = 40) -> list[Span]:
    """Join a piece shorter than `crumb` characters (a lone code fence, "<!-- Start of picture text -->") to the
    piece before or after it when the result fits in `limit`."""
    out: list[Span] = []
    for piece in pieces:
        if out and min(out[-1][1] - out[-1][0], piece[1] - piece[0]) < crumb and piece[1] - out[-1][0] <= limit:
            out[-1] = (out[-1][0], piece[1])
        else:
            out.append(piece)
    return out


@dataclass
class MarkdownChunker:
    splitter: MarkdownSectionSplitter

    def prepare(self, documents: Sequence[PdfDocument]) -> None:
        """Convert the PDFs not yet cached, in parallel, before they are chunked one by one."""
        convert_all(documents, self.splitter.params.workers)

    def chunk(self, document: PdfDocument, strategy: str) -> ChunkedDocument:
        source = markdown_source(document)
        spans = self.splitter.spans(source.text)
        chunked = build_chunks(source, [span for span, _ in spans], strategy)
        chunks = tuple(replace(chunk, extra=self._metadata(path)) for chunk, (_, path) in zip(chunked.chunks, spans))
        return ChunkedDocument(source=source, chunks=chunks)

    def _metadata(self, path: str) -> dict:
        # the heading path without PyMuPDF4LLM's tags and without empty headings
        heading_path = HEADING_SEPARATOR.join(
            title for part in path.split(HEADING_SEPARATOR) if (title := _HTML_TAG.sub("", part).strip()))
        if self.splitter.params.section_context and heading_path:
            return {"headers": path, HEADING_PATH: heading_path}
        return {"headers": path}


def make_chunker(config: MarkdownParams, context: ChunkerContext) -> MarkdownChunker:
    return MarkdownChunker(MarkdownSectionSplitter(config))


# parents: heading sections of PyMuPDF4LLM Markdown, at most 800 characters (overlap 50 inside a long section);
# child windows 200/0, k=4, as the baselines; dark grey (Okabe–Ito's yellow is too pale on white)
SPEC = register_strategy("markdown", make_chunker, MarkdownParams, display_name="Markdown", color="#555555", order=6,
                         source_kind="markdown", prefetch=convert_ahead,
                         description="PyMuPDF4LLM Markdown split at headings, up to 800 characters")
