"""One PDF text layer for every strategy.

PyMuPDF reads each PDF in the documents folder once: its text blocks in content-stream order, separated by a blank
line (so the blank-line strategy sees real block boundaries), a block's lines by single newlines. `raw` is that text
(the paper's); `clean` applies the paragraph strategy's cleaning (`with_text_layer`, docs/text-layer.md).
"""

from __future__ import annotations

import bisect
import logging
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from ragstudy.errors import StudyInputError
from ragstudy.io import sha256_file
from ragstudy.text.textnorm import compose_latex_accents

logger = logging.getLogger(__name__)

BLOCK_SEPARATOR = "\n\n"
_BLANK_LINES = re.compile(r"\n\s*\n")
RAW, CLEAN = "raw", "clean"
TEXT_LAYERS = (RAW, CLEAN)  # the paper's raw PyMuPDF text, and the same with the paragraph strategy's cleaning


@dataclass(frozen=True)
class SourceText:
    """A text that chunks index into, with the offset where each page's text begins (page i+1 at index i)."""

    path: str
    sha256: str
    text: str
    page_starts: tuple[int, ...]
    layer: str = RAW  # the text layer it is (TEXT_LAYERS); a strategy's own text (paragraphs, Markdown) is "raw"

    @property
    def identity(self) -> str:
        """What chunk ids hash besides offsets and text: the PDF's sha256, plus the layer when it is not raw (so
        that a clean-layer chunk never shares an id, a collection or a cache entry with a raw one)."""
        return self.sha256 if self.layer == RAW else f"{self.sha256}:{self.layer}"

    def page_of(self, offset: int) -> int:
        """1-based page holding character `offset`."""
        return max(1, bisect.bisect_right(self.page_starts, offset))

    def pages_of(self, start: int, end: int) -> tuple[int, int]:
        """First and last 1-based page of the span [start, end)."""
        return self.page_of(start), self.page_of(max(start, end - 1))

    def to_record(self) -> dict:
        record = {"path": self.path, "sha256": self.sha256, "text": self.text, "page_starts": list(self.page_starts)}
        return record if self.layer == RAW else {**record, "text_layer": self.layer}

    @classmethod
    def from_record(cls, record: dict) -> "SourceText":
        """Inverse of to_record (a record without `text_layer` is raw)."""
        return cls(str(record["path"]), str(record["sha256"]), str(record["text"]),
                   tuple(int(p) for p in record["page_starts"]), str(record.get("text_layer", RAW)))


@dataclass(frozen=True)
class PdfDocument:
    """A validated PDF: where it is, its content hash and its shared text layer."""

    path: str
    sha256: str
    page_count: int
    text_layer: SourceText


def with_text_layer(document: PdfDocument, layer: str) -> PdfDocument:
    """`document` with its `text_layer` replaced by the chosen one (TEXT_LAYERS); raw is the document itself."""
    if layer == RAW:
        return document
    if layer != CLEAN:
        raise StudyInputError(f"text_layer must be one of {', '.join(TEXT_LAYERS)}, got {layer!r}")
    return replace(document, text_layer=clean_text_layer(document.path, document.sha256))


@lru_cache(maxsize=256)
def clean_text_layer(path: str, sha256: str) -> SourceText:
    """The clean text layer of the PDF at `path` (`sha256`: its bytes' hash, the cache key), once a process."""
    import pymupdf

    from ragstudy.text.cleaning.layer import clean_pages, clean_text

    with pymupdf.open(path) as doc:
        text, starts = clean_text(clean_pages(doc))
    return SourceText(path=path, sha256=sha256, text=text, page_starts=starts, layer=CLEAN)


def _page_text(page) -> str:
    texts = (compose_latex_accents(_BLANK_LINES.sub("\n", block[4]).strip())  # LaTeX's '`e' -> 'è'
             for block in page.get_text("blocks") if block[6] == 0)  # block type 1: an image
    return BLOCK_SEPARATOR.join(text for text in texts if text)


def read_pdf(path: Path) -> PdfDocument:
    """Open, validate and extract one PDF; raise StudyInputError naming the file and the fix. A damaged file that
    PyMuPDF repairs (a truncated download) is read with a warning: pages may be missing, nothing else would say so."""
    import pymupdf

    try:
        doc = pymupdf.open(path)
    except (pymupdf.FileDataError, RuntimeError, ValueError) as exc:
        raise StudyInputError(f"{path}: cannot be opened as a PDF ({exc}). Replace it with a valid PDF or remove it "
                              "from the folder.") from exc
    damaged = ("the file is damaged (truncated or corrupt; PyMuPDF had to repair it): replace it with a complete "
               "copy, or repair it (e.g. `qpdf in.pdf out.pdf`), or remove it from the folder.")
    with doc:
        if doc.needs_pass:
            raise StudyInputError(f"{path}: the PDF is password-protected. Decrypt it (e.g. `qpdf --decrypt in.pdf "
                                  "out.pdf`) or remove it from the folder.")
        if doc.page_count == 0:
            if doc.is_repaired:
                raise StudyInputError(f"{path}: no page could be recovered: {damaged}")
            raise StudyInputError(f"{path}: the PDF has no pages. Replace it or remove it from the folder.")
        pages: list[str] = []
        try:
            for page in doc:
                pages.append(_page_text(page))
        except RuntimeError as exc:
            raise StudyInputError(f"{path}: page {len(pages) + 1} cannot be read ({exc}). The file is damaged: "
                                  "repair it (e.g. `qpdf in.pdf out.pdf`) or remove it.") from exc
        page_count = doc.page_count
        repaired = doc.is_repaired  # read after the pages: repair can happen while they load
    empty = [i + 1 for i, text in enumerate(pages) if not text]
    if not any(pages):
        if repaired:
            raise StudyInputError(f"{path}: none of the {page_count} recovered page(s) has text: {damaged}")
        raise StudyInputError(f"{path}: no page has a text layer (a scanned PDF?). Run OCR first (e.g. `ocrmypdf "
                              "in.pdf out.pdf`) or remove it from the folder.")
    if repaired:
        logger.warning("%s: %d page(s) recovered, %d of them with text; pages may be missing or empty: %s",
                       path, page_count, page_count - len(empty), damaged)
    if empty:
        shown = ", ".join(map(str, empty[:10])) + (f" … (and {len(empty) - 10} more)" if len(empty) > 10 else "")
        logger.warning("%s: %d of %d page(s) without text (%s): %s", path, len(empty), page_count,
                       "lost to the damage, or images only" if repaired else "images only?", shown)
    text, starts = "", []
    for page_text in pages:
        if text and page_text:
            text += BLOCK_SEPARATOR
        starts.append(len(text))
        text += page_text
    digest = sha256_file(path)
    return PdfDocument(path=str(path), sha256=digest, page_count=page_count,
                       text_layer=SourceText(path=str(path), sha256=digest, text=text, page_starts=tuple(starts)))


def list_pdfs(folder: Path) -> list[Path]:
    """PDF files directly inside `folder`, sorted by name; other files are skipped with a warning. Subfolders are
    not read (a results folder inside Documents/ must not join the corpus silently): those holding PDFs are named."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StudyInputError(f"{folder}: documents folder not found. Create it and put your PDFs in it, or pass "
                              "--documents DIR.")
    pdfs: list[Path] = []
    nested: list[str] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            count = sum(1 for found in entry.rglob("*") if found.suffix.lower() == ".pdf" and found.is_file())
            if count:
                nested.append(f"{entry.name}/ ({count} PDF{'s' if count != 1 else ''})")
        elif entry.suffix.lower() == ".pdf":
            pdfs.append(entry)
        else:
            logger.warning("%s: not a .pdf file, skipped", entry)
    if nested:
        logger.warning("%s: subfolder(s) with PDFs not read: %s. Only the PDFs directly in the documents folder are "
                       "used; move the others up (or pass --documents SUBFOLDER) to include them.", folder,
                       ", ".join(nested))
    if not pdfs:
        where = f" (its subfolders hold some: {', '.join(nested)}; subfolders are not read)" if nested else ""
        raise StudyInputError(f"{folder}: no PDF files in the documents folder{where}. Add .pdf files or pass "
                              "--documents DIR.")
    return pdfs


def load_documents(folder: Path) -> list[PdfDocument]:
    """Read and validate every PDF in `folder` (sorted by file name)."""
    from tqdm.auto import tqdm

    paths = list_pdfs(folder)
    documents = [read_pdf(path) for path in tqdm(paths, desc="Reading PDFs", unit="pdf", disable=len(paths) < 2)]
    first: dict[str, str] = {}
    for doc in documents:  # chunk ids are content hashes: a copy would give the same ids as its original
        if doc.sha256 in first:
            raise StudyInputError(f"{doc.path} is a byte-identical copy of {first[doc.sha256]}: the same PDF twice "
                                  "would be indexed and scored twice under one set of chunk ids; move one of them "
                                  "out of the documents folder")
        first[doc.sha256] = doc.path
    return documents
