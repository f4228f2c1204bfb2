"""One PDF text layer for every strategy.

PyMuPDF reads each PDF in the documents folder once. The text of a document is its text blocks in content-stream
order, separated by a blank line (so the blank-line strategy sees real block boundaries), with the lines of a
block separated by single newlines. Baselines chunk this text; the paragraph strategy reads the same validated
PDFs through its layout analysis.
"""

from __future__ import annotations

import bisect
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import StudyInputError
from .io import sha256_file

logger = logging.getLogger(__name__)

BLOCK_SEPARATOR = "\n\n"
_BLANK_LINES = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class SourceText:
    """A text that chunks index into, with the offset where each page's text begins (page i+1 at index i)."""

    path: str
    sha256: str
    text: str
    page_starts: tuple[int, ...]

    def page_of(self, offset: int) -> int:
        """1-based page holding character `offset`."""
        return max(1, bisect.bisect_right(self.page_starts, offset))

    def pages_of(self, start: int, end: int) -> tuple[int, int]:
        """First and last 1-based page of the span [start, end)."""
        return self.page_of(start), self.page_of(max(start, end - 1))

    def to_record(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "text": self.text, "page_starts": list(self.page_starts)}


@dataclass(frozen=True)
class PdfDocument:
    """A validated PDF: where it is, its content hash and its shared text layer."""

    path: str
    sha256: str
    page_count: int
    text_layer: SourceText

    def open(self):  # -> pymupdf.Document
        import pymupdf

        return pymupdf.open(self.path)


def _page_text(page) -> str:
    blocks = []
    for block in page.get_text("blocks"):
        if block[6] != 0:  # image block
            continue
        text = _BLANK_LINES.sub("\n", block[4]).strip()
        if text:
            blocks.append(text)
    return BLOCK_SEPARATOR.join(blocks)


def read_pdf(path: Path) -> PdfDocument:
    """Open, validate and extract one PDF; raise StudyInputError naming the file and the fix."""
    import pymupdf

    try:
        doc = pymupdf.open(path)
    except (pymupdf.FileDataError, RuntimeError, ValueError) as exc:
        raise StudyInputError(
            f"{path}: cannot be opened as a PDF ({exc}). Replace it with a valid PDF or remove it from the folder."
        ) from exc
    with doc:
        if doc.needs_pass:
            raise StudyInputError(
                f"{path}: the PDF is password-protected. Decrypt it (e.g. `qpdf --decrypt in.pdf out.pdf`) "
                "or remove it from the folder."
            )
        if doc.page_count == 0:
            raise StudyInputError(f"{path}: the PDF has no pages. Replace it or remove it from the folder.")
        pages: list[str] = []
        try:
            for page in doc:
                pages.append(_page_text(page))
        except RuntimeError as exc:
            raise StudyInputError(
                f"{path}: page {len(pages) + 1} cannot be read ({exc}). The file is damaged: repair it "
                "(e.g. `qpdf in.pdf out.pdf`) or remove it."
            ) from exc
        page_count = doc.page_count
    if not any(pages):
        raise StudyInputError(
            f"{path}: no page has a text layer (a scanned PDF?). Run OCR first (e.g. `ocrmypdf in.pdf out.pdf`) "
            "or remove it from the folder."
        )
    empty = [i + 1 for i, text in enumerate(pages) if not text]
    if empty:
        logger.warning("%s: %d page(s) without text (images only?): %s", path, len(empty), empty[:10])
    text, starts = "", []
    for page_text in pages:
        if text and page_text:
            text += BLOCK_SEPARATOR
        starts.append(len(text))
        text += page_text
    digest = sha256_file(path)
    return PdfDocument(
        path=str(path), sha256=digest, page_count=page_count,
        text_layer=SourceText(path=str(path), sha256=digest, text=text, page_starts=tuple(starts)),
    )


def list_pdfs(folder: Path) -> list[Path]:
    """PDF files directly inside `folder`, sorted by name; other files are skipped with a warning."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StudyInputError(
            f"{folder}: documents folder not found. Create it and put your PDFs in it, or pass --documents DIR."
        )
    pdfs: list[Path] = []
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() or entry.name.startswith("."):
            continue
        if entry.suffix.lower() == ".pdf":
            pdfs.append(entry)
        else:
            logger.warning("%s: not a .pdf file, skipped", entry)
    if not pdfs:
        raise StudyInputError(f"{folder}: no PDF files in the documents folder. Add .pdf files or pass --documents DIR.")
    return pdfs


def load_documents(folder: Path) -> list[PdfDocument]:
    """Read and validate every PDF in `folder` (sorted by file name)."""
    from tqdm.auto import tqdm

    paths = list_pdfs(folder)
    return [read_pdf(path) for path in tqdm(paths, desc="Reading PDFs", unit="pdf", disable=len(paths) < 2)]
