"""The evidence of a passage, chosen by the code (make-qa's default, `--evidence-by code`): a run of whole sentences of
the passage, so that a small model only has to ask about a short text and never has to quote it. Which run: see
docs/make-qa.md (The evidence, chosen by the code); the limits are the evidence_length filter's, so a chosen
evidence never fails it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragstudy.qagen.sampling import Passage
from ragstudy.text.sentences import ItalianSentenceSplitter, Span


# a list item's marker: a bullet or dash, or an enumerator ("a)", "3.", "iv)"), then the item (lower case allowed)
_LIST_MARKER = re.compile(r"^\s*(?:[•▪◦‣∙·*–—-]|\(?(?:[a-z]|\d{1,2}|[ivx]{1,4})[).])\s", re.IGNORECASE)


def _starts_sentence(text: str, span: Span) -> bool:
    """A sentence's start (a capital letter or a digit), or a list item's marker."""
    piece = text[span[0]:span[1]]
    first = next((ch for ch in piece if ch.isalnum()), "")
    return first.isupper() or first.isdigit() or bool(_LIST_MARKER.match(piece))


def _within_block(text: str, spans: Sequence[Span], min_chars: int, max_chars: int) -> Span | None:
    for i, span in enumerate(spans):
        if span[1] - span[0] > max_chars or not _starts_sentence(text, span):
            continue
        start, end = span
        for _, next_end in spans[i + 1:]:  # packed greedily: the following sentences while the run fits
            if next_end - start > max_chars:
                break
            end = next_end
        if end - start >= min_chars:
            return start, end
    return None


def _across_break(spans: Sequence[Span], cut: int, min_chars: int, max_chars: int) -> Span | None:
    """The sentences around `cut` (the joining newline's position in the passage text)."""
    across = [s for s in spans if s[0] < cut < s[1]]
    if across:
        start, end = across[0]
    else:
        before = [s for s in spans if s[1] <= cut]
        after = [s for s in spans if s[0] > cut]
        if not before or not after:
            return None
        start, end = before[-1][0], after[0][1]
    return (start, end) if min_chars <= end - start <= max_chars else None


def choose_evidence(passage: Passage, min_chars: int, max_chars: int,
                    splitter: ItalianSentenceSplitter | None = None) -> tuple[int, int] | None:
    """[start, end) of `passage.text` to ask about, or None when no run of whole sentences fits."""
    text = passage.text
    spans = (splitter or ItalianSentenceSplitter()).spans(text)
    if not spans:
        return None
    if len(passage.spans) == 2:
        return _across_break(spans, passage.spans[0][1] - passage.spans[0][0], min_chars, max_chars)
    return _within_block(text, spans, min_chars, max_chars)
