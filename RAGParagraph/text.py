"""Text rules of segmentation: the paper mode's bullets and separators, ASCII folding, splitting long paragraphs.

The per-line cleaning (ligatures, odd spaces, symbol bullets) lives in ragstudy.text.cleaning.lines, shared with the
clean text layer; the line-join and sentence rules in ragstudy.text.textnorm.
"""

from __future__ import annotations

import re
import unicodedata

# join_lines and split_sentences are re-exported: the one definition of the line-join and sentence rules lives in
# ragstudy.text.textnorm.
from ragstudy.text.textnorm import join_lines, split_sentences  # noqa: F401

# paper: bullets '• - ▪ * ‣ ◦ ‧ – →' and numbered/lettered items '1.', 'a)'.
PAPER_BULLETS = ("•", "-", "▪", "*", "‣", "◦", "‧", "–", "→")
PAPER_NUMBERED = re.compile(r"^([0-9]+|[a-zA-Z]+)[\.\)](?:\s|$)")
# paper: lines with 5+ dots, dashes or underscores are skipped (TOC leaders, separators).
PAPER_SEPARATOR = re.compile(r"\.{5,}|-{5,}|_{5,}")


def fold_ascii(text: str) -> str:
    """ASCII folding without unidecode: NFKD, drop combining marks, map common typographic punctuation."""
    text = text.translate(_PUNCT_FOLD)
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


_PUNCT_FOLD = str.maketrans(
    {"’": "'", "‘": "'", "“": '"', "”": '"', "«": '"', "»": '"', "–": "-", "—": "-", "…": "...", "•": "*", "€": "EUR"}
)

def pack(pieces: list[tuple[str, str]], max_chars: int) -> list[str]:
    """Greedily pack (separator, piece) pairs into chunks of at most max_chars; an oversized piece is cut at spaces."""
    out: list[str] = []
    current = ""
    for sep, piece in pieces:
        for part in _hard_split(piece, max_chars):
            candidate = current + sep + part if current else part
            if len(candidate) <= max_chars:
                current = candidate
            else:
                if current:
                    out.append(current)
                current = part
            sep = " "
    if current:
        out.append(current)
    return out


def _hard_split(text: str, max_chars: int) -> list[str]:
    if len(text) <= max_chars:
        return [text]
    parts: list[str] = []
    while len(text) > max_chars:
        cut = text.rfind(" ", 0, max_chars + 1)
        if cut <= max_chars // 2:
            cut = max_chars
        parts.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        parts.append(text)
    return parts


def split_to_max(text: str, max_chars: int) -> list[str]:
    """Split a paragraph longer than max_chars at line breaks, then sentence boundaries, then spaces."""
    if len(text) <= max_chars:
        return [text]
    pieces: list[tuple[str, str]] = []
    for line in text.split("\n"):
        if len(line) <= max_chars:
            pieces.append(("\n", line))
        else:
            sentences = split_sentences(line)
            pieces.extend([("\n", sentences[0])] + [(" ", s) for s in sentences[1:]])
    return [p.strip() for p in pack(pieces, max_chars) if p.strip()]
