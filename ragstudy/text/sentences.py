"""Italian sentence spans of a PDF text layer, and greedy packing of spans into size-bounded chunks.

NLTK's Punkt with an explicit list of Italian abbreviations, then a pass that glues a span ending with one to the
next; block boundaries always end a sentence. Why Punkt and not pysbd or sentencex: docs/strategies.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

Span = tuple[int, int]

# Lower-case, without the final full stop; internal full stops kept ("d.lgs" for "D.Lgs.").
ITALIAN_ABBREVIATIONS: frozenset[str] = frozenset({
    # references inside a document
    "art", "artt", "pag", "pagg", "p", "pp", "cap", "capp", "par", "parr", "sez", "all", "fig", "figg", "tab",
    "tabb", "n", "nn", "nr", "num", "lett", "co", "v", "vol", "voll", "cfr", "cit", "op", "rif", "seg", "segg",
    "sgg", "ss", "mod", "doc", "rev", "ver", "vers", "ed",
    # Latin and discourse
    "ecc", "es", "p.es", "c.d", "cd", "ca", "e.g", "i.e", "etc", "vs", "max", "min", "n.b", "n.d.r",
    # laws and acts
    "d.lgs", "dlgs", "d.l", "d.m", "d.p.r", "dpr", "d.p.c.m", "l", "r.d", "g.u", "s.m.i", "ss.mm.ii", "c.c", "c.p",
    # titles and companies
    "sig", "sigg", "sig.ra", "sig.na", "dott", "dott.ssa", "prof", "prof.ssa", "ing", "avv", "arch", "geom", "rag",
    "s.p.a", "s.r.l", "s.n.c", "s.a.s", "soc", "tel", "fax",
})

_ABBREVIATION_END = re.compile(
    r"(?:^|[^\w.])(?:" + "|".join(re.escape(a) for a in sorted(ITALIAN_ABBREVIATIONS, key=len, reverse=True))
    + r")\.$", re.IGNORECASE)
# A "sentence" that is only a list or heading number ("1.", "2.3.", "a)", "IV."): it belongs to what follows.
_ENUMERATOR = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[a-zA-Z][.)]|[ivxlcdmIVXLCDM]+\.)$")
_BLOCK_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")
_WORD = re.compile(r"\S+")
_LINE = re.compile(r"[^\n]+")


def ends_with_abbreviation(text: str) -> bool:
    """True when `text` ends with one of ITALIAN_ABBREVIATIONS and its full stop (e.g. "... vedi l'art.")."""
    return bool(_ABBREVIATION_END.search(text.rstrip()))


def strip_span(text: str, start: int, end: int) -> Span | None:
    """`(start, end)` narrowed to exclude surrounding whitespace, or None when only whitespace is inside."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


def _glue(text: str, spans: Sequence[Span], keep_enumerators: bool = False) -> list[Span]:
    """Merge each span that ends with an abbreviation (or, unless `keep_enumerators`, is a bare list number)
    with the span after it, so that no cut is made right after "art.", "D.Lgs.", "1." and the like."""
    out: list[Span] = []
    pending: int | None = None
    for start, end in spans:
        if pending is not None:
            start = pending
        piece = text[start:end]
        if ends_with_abbreviation(piece) or (not keep_enumerators and _ENUMERATOR.match(piece)):
            pending = start
            continue
        pending = None
        out.append((start, end))
    if pending is not None:  # nothing follows the last abbreviation
        out.append((pending, spans[-1][1]))
    return out


class ItalianSentenceSplitter:
    """Sentence spans of Italian technical text (the rules and why: docs/strategies.md)."""

    def __init__(self) -> None:
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

        params = PunktParameters()
        params.abbrev_types = set(ITALIAN_ABBREVIATIONS)
        self._tokenizer = PunktSentenceTokenizer(params)

    def spans(self, text: str) -> list[Span]:
        """Character spans of the sentences of `text`, in order, stripped of surrounding whitespace."""
        breaks = list(_BLOCK_BREAK.finditer(text))
        blocks = zip([0, *(m.end() for m in breaks)], [*(m.start() for m in breaks), len(text)])
        raw = [span for block_start, block_end in blocks
               for start, end in self._tokenizer.span_tokenize(text[block_start:block_end])
               if (span := strip_span(text, block_start + start, block_start + end))]
        return _glue(text, raw)


def split_oversize(text: str, span: Span, limit: int) -> list[Span]:
    """Pieces of at most `limit` characters of a longer span (a table, a list without full stops): cut at line breaks,
    then between words, never right after an abbreviation; a longer word (a URL) every `limit` characters."""
    start, end = span
    if end - start <= limit:
        return [span]
    lines = _glue(text, [(start + m.start(), start + m.end()) for m in _LINE.finditer(text[start:end])
                         if strip_span(text, start + m.start(), start + m.end())], keep_enumerators=True)
    units: list[Span] = []
    for line in lines:
        line = strip_span(text, *line) or line
        if line[1] - line[0] <= limit:
            units.append(line)
            continue
        words = _glue(text, [(line[0] + m.start(), line[0] + m.end())
                             for m in _WORD.finditer(text[line[0]:line[1]])], keep_enumerators=True)
        units.extend((cut, min(cut + limit, word_end)) for word_start, word_end in words
                     for cut in range(word_start, word_end, limit))
    return pack(units, limit)


def pack(units: Sequence[Span], limit: int, overlap: int = 0) -> list[Span]:
    """Greedy packing of consecutive `units` (each at most `limit` long) into spans of at most `limit` characters;
    consecutive spans share `overlap` units (fewer when a span holds fewer)."""
    out: list[Span] = []
    i, n = 0, len(units)
    while i < n:
        j = i
        while j + 1 < n and units[j + 1][1] - units[i][0] <= limit:
            j += 1
        out.append((units[i][0], units[j][1]))
        if j == n - 1:
            break
        i = max(j + 1 - overlap, i + 1)
    return out


@dataclass(frozen=True)
class SentenceUnits:
    """Sentence spans of a text, each at most `limit` characters (longer ones pre-split by `split_oversize`)."""

    splitter: ItalianSentenceSplitter
    limit: int

    def __call__(self, text: str) -> list[Span]:
        return [unit for span in self.splitter.spans(text) for unit in split_oversize(text, span, self.limit)]
