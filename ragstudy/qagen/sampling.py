"""Passages to ask questions about, drawn from the shared PyMuPDF text layer (`ragstudy.text.textlayer`), which every
strategy reads: no strategy's chunk boundaries decide what is asked, so none is favoured. The block classes, the
passage kinds and the stratified sample are described in docs/make-qa.md (How passages are chosen).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

import numpy as np

from ragstudy.errors import StudyInputError
from ragstudy.text.textlayer import BLOCK_SEPARATOR, PdfDocument

logger = logging.getLogger(__name__)

MIN_BLOCK_CHARS = 80  # shorter blocks are headings, captions, labels
MIN_BLOCK_WORDS = 10
MIN_LETTER_RATIO = 0.6  # letters / non-space characters of a body block
MAX_PASSAGE_CHARS = 1200  # a longer block is cut to a window of whole lines of at most this many characters
MAX_SPAN_PART_CHARS = 700  # each part of a two-block passage is at most this long (its end or start is kept)
REPEAT_PAGE_SHARE = 0.2  # a masked block text on at least this share of pages (and >= REPEAT_MIN_PAGES) is furniture
REPEAT_MIN_PAGES = 3
TOC_LINE_SHARE = 0.5  # a block (or a page) with at least this share of TOC/index lines is TOC

_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
# a TOC entry: a dot (or middle-dot, ellipsis) leader, or a title then a page number at the end of the line
_TOC_LINE = re.compile(r"(?:\.\s?){4,}|…{2,}|·{3,}|\s(?:\.\s){3,}|^\D.{2,80}?\s{2,}\d{1,4}\s*$")
# an index entry: words, then a comma and page numbers ("tabella, 23, 45–47")
_INDEX_LINE = re.compile(r"^[^\d,]{2,60},\s*\d{1,4}(?:\s*[-–]\s*\d{1,4})?(?:\s*,\s*\d{1,4}(?:\s*[-–]\s*\d{1,4})?)*\s*$")
# a page number alone: "7", "- 7 -", "Pagina 7", "Pag. 7 di 84", "7 / 84", "12 - 53", "vii"
_PAGE_NUMBER = re.compile(r"^\W*(?:(?:pagina|pag\.?|page|p\.)\s*)?(?:\d{1,4}|[ivxlcdm]{1,7})"
                          r"(?:\s*(?:di|of|/|-|–)\s*\d{1,4})?\W*$", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """One text block of a document's text layer: [start, end) offsets, its 1-based page and its class."""

    start: int
    end: int
    page: int
    kind: str  # body | furniture | toc | low-text | short


@dataclass(frozen=True)
class Passage:
    """A passage asked about: source spans in its document's text layer (one, or two for spanning passages) and
    the text shown to the LLM (the spans joined by one newline)."""

    document: str  # the PDF's path, as the text layer names it
    kind: str  # block | paragraph | page
    spans: tuple[tuple[int, int], ...]
    pages: tuple[int, ...]
    text: str

    @property
    def pdf(self) -> str:
        return Path(self.document).name

    @property
    def page(self) -> int:
        return self.pages[0]

    @property
    def key(self) -> str:
        return f"{self.pdf}:{':'.join(f'{s}-{e}' for s, e in self.spans)}"

    @property
    def spans_boundary(self) -> bool:
        return self.kind != "block"

    def source_offset(self, position: int) -> int:
        """The text-layer offset of character `position` of `text` (the joining newline maps to its part's end)."""
        cursor = 0
        for start, end in self.spans:
            length = end - start
            if position < cursor + length:
                return start + position - cursor
            cursor += length + 1  # the joining newline
            if position < cursor:
                return end
        return self.spans[-1][1]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """[start, end) of `text` as [start, end) of the text layer (a span across parts covers what lies between)."""
        return self.source_offset(start), self.source_offset(max(start, end - 1)) + 1

    def to_record(self) -> dict:
        return {"document": self.document, "kind": self.kind, "spans": [list(s) for s in self.spans],
                "pages": list(self.pages), "text": self.text}

    @classmethod
    def from_record(cls, record: dict) -> "Passage":
        return cls(record["document"], record["kind"], tuple(tuple(s) for s in record["spans"]),
                   tuple(record["pages"]), record["text"])


def _mask(text: str) -> str:
    return _SPACES.sub(" ", _DIGITS.sub("#", text)).strip().casefold()


_NUMBER_LINE = re.compile(r"^[\divxlc.]+$", re.IGNORECASE)  # a page or section number on a line of its own


def _toc_share(lines: Sequence[str]) -> float:
    """Share of TOC/index lines among the lines that are not bare numbers (entries often put those apart)."""
    lines = [line.strip() for line in lines if line.strip() and not _NUMBER_LINE.match(line.strip())]
    return sum(bool(_TOC_LINE.search(line) or _INDEX_LINE.match(line)) for line in lines) / len(lines) if lines else 0.0


def letter_ratio(text: str) -> float:
    chars = [ch for ch in text if not ch.isspace()]
    return sum(ch.isalpha() for ch in chars) / len(chars) if chars else 0.0


def split_blocks(document: PdfDocument) -> list[Block]:
    """Every block of the document's text layer, classified (docs/make-qa.md)."""
    layer = document.text_layer
    text = layer.text
    pieces = text.split(BLOCK_SEPARATOR)
    starts = accumulate((len(piece) + len(BLOCK_SEPARATOR) for piece in pieces), initial=0)
    raw = [(start, start + len(piece), layer.page_of(start)) for start, piece in zip(starts, pieces) if piece]
    pages_of_mask: dict[str, set[int]] = {}
    for start, end, page in raw:
        pages_of_mask.setdefault(_mask(text[start:end]), set()).add(page)
    repeat = max(REPEAT_MIN_PAGES, math.ceil(REPEAT_PAGE_SHARE * document.page_count))
    toc_pages = _toc_pages(raw, text)
    blocks = []
    for start, end, page in raw:
        body = text[start:end]
        if len(pages_of_mask[_mask(body)]) >= repeat or _PAGE_NUMBER.match(body.strip()):
            kind = "furniture"
        elif page in toc_pages or _toc_share(body.split("\n")) >= TOC_LINE_SHARE:
            kind = "toc"
        elif letter_ratio(body) < MIN_LETTER_RATIO:
            kind = "low-text"
        elif len(body.strip()) < MIN_BLOCK_CHARS or len(body.split()) < MIN_BLOCK_WORDS:
            kind = "short"
        else:
            kind = "body"
        blocks.append(Block(start, end, page, kind))
    return blocks


def _toc_pages(raw: Sequence[tuple[int, int, int]], text: str) -> set[int]:
    """Pages most of whose lines are TOC or index lines."""
    lines: dict[int, list[str]] = {}
    for start, end, page in raw:
        lines.setdefault(page, []).extend(text[start:end].split("\n"))
    return {page for page, found in lines.items() if len(found) >= 4 and _toc_share(found) >= TOC_LINE_SHARE}


def _window(text: str, start: int, end: int, limit: int, rng: np.random.Generator) -> tuple[int, int]:
    """A window of whole lines of text[start:end] of at most `limit` characters (seeded choice of its first line)."""
    if end - start <= limit:
        return start, end
    line_starts = [start] + [start + i + 1 for i, ch in enumerate(text[start:end]) if ch == "\n"]
    fits = [s for s in line_starts if s + limit // 2 <= end] or [start]
    first = int(fits[int(rng.integers(len(fits)))])
    stop = min(first + limit, end)
    cut = text.rfind("\n", first, stop)
    if cut <= first + limit // 3:
        cut = text.rfind(" ", first, stop)  # no line end nearby: end at a word boundary
    return first, (cut if cut > first else stop)


def _part(text: str, start: int, end: int, limit: int, tail: bool) -> tuple[int, int]:
    """The end (`tail`) or the start of text[start:end], at most `limit` characters, cut at a line end if any."""
    if end - start <= limit:
        return start, end
    if tail:
        cut = text.find("\n", end - limit, end)
        return (cut + 1 if 0 <= cut < end - 1 else end - limit), end
    cut = text.rfind("\n", start, start + limit)
    return start, (cut if cut > start else start + limit)


@dataclass(frozen=True)
class DocumentPassages:
    """Every eligible passage of one document, by kind, and the block counts by class."""

    document: PdfDocument
    by_kind: dict[str, list[tuple[int, ...]]]  # kind -> block indices of each passage (1 or 2)
    blocks: list[Block]

    def counts(self) -> Counter:
        return Counter(block.kind for block in self.blocks)

    def available(self) -> int:
        """Passages that can be drawn without two sharing a block (an upper bound for the sample)."""
        return self.counts()["body"]


def eligible_passages(document: PdfDocument) -> DocumentPassages:
    blocks = split_blocks(document)
    body = [i for i, block in enumerate(blocks) if block.kind == "body"]
    by_kind: dict[str, list[tuple[int, ...]]] = {"block": [(i,) for i in body], "paragraph": [], "page": []}
    for a, b in zip(body, body[1:]):
        between = blocks[a + 1:b]
        if blocks[a].page == blocks[b].page and not between:
            by_kind["paragraph"].append((a, b))
        elif blocks[b].page == blocks[a].page + 1 and all(x.kind == "furniture" for x in between):
            by_kind["page"].append((a, b))
    return DocumentPassages(document, by_kind, blocks)


def make_passage(found: DocumentPassages, kind: str, indices: tuple[int, ...], rng: np.random.Generator) -> Passage:
    text = found.document.text_layer.text
    blocks = [found.blocks[i] for i in indices]
    if kind == "block":
        spans = (_window(text, blocks[0].start, blocks[0].end, MAX_PASSAGE_CHARS, rng),)
    else:
        spans = tuple(_part(text, b.start, b.end, MAX_SPAN_PART_CHARS, tail) for b, tail in zip(blocks, (True, False)))
    pages = tuple(sorted({found.document.text_layer.page_of(s) for s, _ in spans}))
    return Passage(found.document.path, kind, spans, pages, "\n".join(text[s:e] for s, e in spans))


def allocate(total: int, weights: Sequence[float], caps: Sequence[int]) -> list[int]:
    """Split `total` over strata in proportion to `weights` (largest remainders), none above its cap."""
    shares = [0] * len(weights)
    open_ = [i for i in range(len(weights)) if caps[i] > 0]
    left = total
    while left > 0 and open_:
        weight = sum(weights[i] for i in open_)
        exact = {i: left * weights[i] / weight for i in open_}
        step = {i: min(int(exact[i]), caps[i] - shares[i]) for i in open_}
        given = sum(step.values())
        if given == 0:  # hand out one at a time by largest remainder
            i = max(open_, key=lambda j: (exact[j] - int(exact[j]), weights[j], -j))
            step = {i: 1}
            given = 1
        for i, k in step.items():
            shares[i] += k
        left -= given
        open_ = [i for i in open_ if shares[i] < caps[i]]
    return shares


def _stratified(candidates: Sequence[tuple[int, ...]], k: int, blocks: Sequence[Block], used: set[int],
                rng: np.random.Generator) -> list[tuple[int, ...]]:
    """k candidates spread over k equal strata of the document's pages (in page order), none sharing a block."""
    if k <= 0 or not candidates:
        return []
    ordered = sorted(candidates, key=lambda c: blocks[c[0]].start)
    picked: list[tuple[int, ...]] = []

    def pick(pool: Sequence[tuple[int, ...]], limit: int) -> None:
        """Up to `limit` of `pool`, in a seeded order, that share no block with one picked already."""
        for j in rng.permutation(len(pool)):
            if limit == 0:
                break
            if not used.intersection(pool[int(j)]):
                picked.append(pool[int(j)])
                used.update(pool[int(j)])
                limit -= 1

    bounds = np.linspace(0, len(ordered), k + 1)
    for s in range(k):
        pick(ordered[int(bounds[s]):int(bounds[s + 1])], 1)
    if len(picked) < k:  # a stratum had only blocks already used: fill from anywhere
        pick([c for c in ordered if not used.intersection(c)], k - len(picked))
    return picked


@dataclass(frozen=True)
class Sample:
    passages: tuple[Passage, ...]
    found: tuple[DocumentPassages, ...]


def sample_passages(documents: Sequence[PdfDocument], n: int, seed: int, span_share: float = 0.25,
                    required: int | None = None) -> Sample:
    """`n` passages, seeded and stratified (docs/make-qa.md), in an order whose every prefix is spread over the
    documents (by relative position in each document's page order). StudyInputError when fewer than `required`
    (default `n`) are available; between `required` and `n`, all the available ones are drawn."""
    required = n if required is None else required
    if required < 1:
        raise StudyInputError(f"--n must be at least 1, got {required}")
    if not 0.0 <= span_share <= 1.0:
        raise StudyInputError(f"--span-share must be between 0 and 1, got {span_share}")
    found = [eligible_passages(doc) for doc in documents]
    for f in found:
        if not f.available():
            logger.warning("%s: no body text block to ask about (%s); the document gets no question",
                           f.document.path, ", ".join(f"{k} {v}" for k, v in sorted(f.counts().items())))
    caps = [f.available() for f in found]
    available = sum(caps)
    if required > available:
        per = ", ".join(f"{Path(f.document.path).name} {cap}" for f, cap in zip(found, caps))
        raise StudyInputError(f"--n {required} is more than the {available} passages the documents offer ({per}); "
                              f"pass --n {available} or less, or add documents")
    if n > available:
        logger.info("%d passages asked for, the documents offer %d: all of them are drawn", n, available)
        n = available
    shares = allocate(n, [math.sqrt(c) for c in caps], caps)
    per_document: list[list[Passage]] = []
    for index, (f, share) in enumerate(zip(found, shares)):
        rng = np.random.default_rng([seed, index])
        spans = round(share * span_share)
        page_k = min(len(f.by_kind["page"]), spans // 2 + spans % 2)
        para_k = min(len(f.by_kind["paragraph"]), spans - page_k)
        page_k = min(len(f.by_kind["page"]), spans - para_k)
        used: set[int] = set()
        picked = [("page", c) for c in _stratified(f.by_kind["page"], page_k, f.blocks, used, rng)]
        picked += [("paragraph", c) for c in _stratified(f.by_kind["paragraph"], para_k, f.blocks, used, rng)]
        picked += [("block", c) for c in _stratified(f.by_kind["block"], share - len(picked), f.blocks, used, rng)]
        picked.sort(key=lambda item: f.blocks[item[1][0]].start)
        per_document.append([make_passage(f, kind, c, rng) for kind, c in picked])
    rng = np.random.default_rng([seed, len(found)])
    # interleave by relative position in each document's page order, so that every prefix is stratified
    keyed = [((i + 0.5) / len(ps), d, i) for d, ps in enumerate(per_document) for i in range(len(ps))]
    jitter = rng.random(len(keyed))
    order = [per_document[d][i] for (_, d, i), _j in sorted(zip(keyed, jitter), key=lambda kj: (kj[0][0], kj[1]))]
    return Sample(tuple(order), tuple(found))
