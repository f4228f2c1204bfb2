"""Put the chunks of every strategy on one common reference text, so that cross-strategy measures are comparable.

Each strategy's chunks index into that strategy's own source text (the shared PyMuPDF text layer for the
baselines, the segmenter's cleaned text for the paragraph strategy). Coverage and evidence overlap must instead be
measured on one reference per document: the ground truth's body text when there is one, else the shared text
layer. A source text is aligned to the reference word by word: both are folded (ligatures expanded, line-break
hyphens joined), cut into whitespace-separated tokens compared by their lower-cased letters and digits, and
matched with difflib (a second pass matches blocks that moved, e.g. a footer that precedes the body in the PDF's
content stream). A chunk then maps to the reference characters of the matched tokens it contains.
"""

from __future__ import annotations

import bisect
import difflib
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ragstudy.text.textnorm import LINE_BREAK_HYPHEN, SENTENCE_FINAL, LIGATURES as _LIGATURES

logger = logging.getLogger(__name__)

_SOFT_HYPHEN = "\u00ad"
# a hyphen (or soft hyphen) at a line end between two letters: "configura-\nzione" -> "configurazione"
_HYPHEN_BREAK = LINE_BREAK_HYPHEN
_TOKEN = re.compile(r"\S+")
_WORD = re.compile(r"\w+")
# a sentence ends after . ! ? or … (and any closing quotes/brackets) followed by whitespace or the end
_SENTENCE_END = SENTENCE_FINAL
_BLOCK_BREAK = re.compile(r"\n[ \t]*\n")
MOVED_BLOCK_MIN_TOKENS = 3  # second-pass matches shorter than this are too likely to be chance


def fold_with_offsets(text: str) -> tuple[str, list[int]]:
    """`text` with ligatures expanded and line-break hyphens removed, and the offset in `text` of each character."""
    removed = np.zeros(len(text) + 1, dtype=bool)
    for match in _HYPHEN_BREAK.finditer(text):
        removed[match.start():match.end()] = True
    chars: list[str] = []
    offsets: list[int] = []
    for i, ch in enumerate(text):
        if removed[i] or ch == _SOFT_HYPHEN:
            continue
        plain = _LIGATURES.get(ch, ch)
        chars.append(plain)
        offsets.extend([i] * len(plain))
    return "".join(chars), offsets


def token_key(token: str) -> str:
    """What two tokens must share to match: their letters and digits, lower-cased (punctuation ignored)."""
    return "".join(_WORD.findall(token.casefold()))


@dataclass(frozen=True)
class TokenSeq:
    """Whitespace-separated tokens of a text that carry a letter or digit: key and [start, end) in the text."""

    keys: tuple[str, ...]
    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def from_text(cls, text: str) -> "TokenSeq":
        folded, offsets = fold_with_offsets(text)
        keys, starts, ends = [], [], []
        for match in _TOKEN.finditer(folded):
            key = token_key(match.group())
            if key:
                keys.append(key)
                starts.append(offsets[match.start()])
                ends.append(offsets[match.end() - 1] + 1)
        return cls(tuple(keys), np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.keys)

    def chars(self, indices: np.ndarray | None = None) -> int:
        """Total characters of the tokens at `indices` (all tokens when None)."""
        if indices is None:
            return int((self.ends - self.starts).sum())
        return int((self.ends[indices] - self.starts[indices]).sum())

    def within(self, start: int, end: int) -> np.ndarray:
        """Indices of tokens whose middle lies in [start, end) (a token cut by a chunk edge counts once)."""
        mids = (self.starts + self.ends - 1) // 2
        lo = int(np.searchsorted(mids, start, side="left"))
        hi = int(np.searchsorted(mids, end, side="left"))
        return np.arange(lo, hi)


def match_tokens(ref_keys: Sequence[str], src_keys: Sequence[str]) -> np.ndarray:
    """For each source token, the index of the reference token it matches, or -1.

    Pass 1: difflib matching blocks in document order. Pass 2: the still unmatched tokens of both sides are
    matched again (blocks of >= MOVED_BLOCK_MIN_TOKENS tokens), which catches text that moved.
    """
    src_to_ref = np.full(len(src_keys), -1, dtype=np.int64)
    matcher = difflib.SequenceMatcher(None, list(ref_keys), list(src_keys), autojunk=False)
    for block in matcher.get_matching_blocks():
        src_to_ref[block.b:block.b + block.size] = np.arange(block.a, block.a + block.size)
    free_src = np.flatnonzero(src_to_ref < 0)
    used_ref = np.zeros(len(ref_keys), dtype=bool)
    used_ref[src_to_ref[src_to_ref >= 0]] = True
    free_ref = np.flatnonzero(~used_ref)
    if len(free_src) >= MOVED_BLOCK_MIN_TOKENS and len(free_ref) >= MOVED_BLOCK_MIN_TOKENS:
        second = difflib.SequenceMatcher(None, [ref_keys[i] for i in free_ref], [src_keys[i] for i in free_src],
                                         autojunk=False)
        for block in second.get_matching_blocks():
            if block.size >= MOVED_BLOCK_MIN_TOKENS:
                src_to_ref[free_src[block.b:block.b + block.size]] = free_ref[block.a:block.a + block.size]
    return src_to_ref


def runs_to_intervals(ref: TokenSeq, indices: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Character intervals of the reference covered by token `indices`: consecutive tokens form one interval."""
    ordered = sorted(set(int(i) for i in indices))
    intervals: list[tuple[int, int]] = []
    run_start = prev = None
    for i in ordered:
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if run_start is not None:
            intervals.append((int(ref.starts[run_start]), int(ref.ends[prev])))
        run_start = prev = i
    if run_start is not None:
        intervals.append((int(ref.starts[run_start]), int(ref.ends[prev])))
    return tuple(intervals)


@dataclass(frozen=True)
class ReferenceDoc:
    """The common text of one document that every strategy's chunks are measured against."""

    name: str  # PDF file name, e.g. "manuale.pdf"
    text: str
    kind: str  # "groundtruth" (body text of sample/groundtruth) or "textlayer" (shared PyMuPDF text)
    block_ends: tuple[int, ...] = field(default=())

    @cached_property
    def tokens(self) -> TokenSeq:
        return TokenSeq.from_text(self.text)

    @cached_property
    def boundaries(self) -> np.ndarray:
        """Sorted offsets where a sentence or a block ends (the end of the text included)."""
        ends = {m.end() for m in _SENTENCE_END.finditer(self.text)}
        ends.update(self.block_ends)
        ends.add(len(self.text.rstrip()))
        return np.asarray(sorted(ends), dtype=np.int64)

    def near_boundary(self, offset: int, tolerance: int) -> bool:
        """True when a sentence or block end lies within `tolerance` characters of `offset`."""
        b = self.boundaries
        i = bisect.bisect_left(b, offset - tolerance)
        return i < len(b) and b[i] <= offset + tolerance


def textlayer_reference(name: str, text: str) -> ReferenceDoc:
    """Reference from the shared text layer: blocks are separated by blank lines."""
    ends = [m.start() for m in _BLOCK_BREAK.finditer(text)]
    return ReferenceDoc(name=name, text=text, kind="textlayer", block_ends=tuple(ends))


def groundtruth_reference(groundtruth) -> ReferenceDoc:  # groundtruth: ragstudy.scoring.groundtruth.GroundTruth
    """Reference from a ground-truth file: its body text, blocks ending where each body block ends."""
    offsets = groundtruth.body_offsets()
    ends = tuple(offsets[i] + len(groundtruth.blocks[i].text) for i in sorted(offsets))
    return ReferenceDoc(name=groundtruth.document, text=groundtruth.body_text, kind="groundtruth", block_ends=ends)


@dataclass(frozen=True)
class AlignedChunk:
    """A chunk of some strategy, and what it covers of its document's reference text."""

    doc_id: str
    document: str  # PDF file name (the key of the reference)
    path: str
    start: int  # offsets into the strategy's own source text
    end: int
    length: int  # characters of the chunk as retrieved (len(contents))
    ref_tokens: np.ndarray = field(compare=False, repr=False)  # matched reference token indices, sorted
    ref_intervals: tuple[tuple[int, int], ...] = ()

    @property
    def ref_end(self) -> int | None:
        """Reference offset where the chunk's body content ends (None: no body content, e.g. a footer)."""
        return self.ref_intervals[-1][1] if self.ref_intervals else None

    @property
    def ref_chars(self) -> int:
        return sum(e - s for s, e in self.ref_intervals)


@dataclass(frozen=True)
class DocumentAlignment:
    """A strategy's source text of one document aligned to the document's reference."""

    reference: ReferenceDoc
    source_tokens: TokenSeq
    src_to_ref: np.ndarray

    @property
    def matched_share(self) -> float:
        """Share of reference characters (in tokens) that some source token matched."""
        ref = self.reference.tokens
        total = ref.chars()
        matched = np.unique(self.src_to_ref[self.src_to_ref >= 0])
        return ref.chars(matched) / total if total else 0.0

    def ref_tokens_of(self, start: int, end: int) -> np.ndarray:
        mapped = self.src_to_ref[self.source_tokens.within(start, end)]
        return np.unique(mapped[mapped >= 0])

    def align_chunk(self, doc_id: str, path: str, start: int, end: int, length: int) -> AlignedChunk:
        tokens = self.ref_tokens_of(start, end)
        return AlignedChunk(doc_id=doc_id, document=self.reference.name, path=path, start=start, end=end,
                            length=length, ref_tokens=tokens,
                            ref_intervals=runs_to_intervals(self.reference.tokens, tokens))


def align_document(source_text: str, reference: ReferenceDoc) -> DocumentAlignment:
    """Align one strategy's source text of a document with the document's reference text."""
    source_tokens = TokenSeq.from_text(source_text)
    src_to_ref = match_tokens(reference.tokens.keys, source_tokens.keys)
    alignment = DocumentAlignment(reference, source_tokens, src_to_ref)
    logger.debug("%s: %.1f%% of the %s reference matched", reference.name, 100 * alignment.matched_share,
                 reference.kind)
    return alignment


def document_name(path: str) -> str:
    """The key that ties a chunk's `path` to ground truth and evidence: the PDF's file name."""
    return Path(path).name
