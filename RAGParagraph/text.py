"""Text normalisation shared by both segmentation modes: ligatures, bullets, hyphens, folding, sentences."""

from __future__ import annotations

import re
import unicodedata

# Ligature code points that some fonts map to a single glyph (U+FB00..U+FB06). join_lines and split_sentences
# are re-exported: the one definition of the line-join and sentence rules lives in ragstudy.textnorm.
from ragstudy.textnorm import LIGATURES as _LIGATURES
from ragstudy.textnorm import join_lines, split_sentences  # noqa: F401

# Characters dropped outright: soft hyphen, zero-width space/joiners, BOM.
_DROP = {"\u00ad": "", "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": ""}
# Spaces that should read as a plain space.
_SPACES = {"\u00a0": " ", "\u2002": " ", "\u2003": " ", "\u2009": " ", "\u202f": " ", "\t": " "}
_TRANSLATE = str.maketrans({**_LIGATURES, **_DROP, **_SPACES})

# Glyphs that start a bulleted item. U+0001 is what Wingdings check marks extract as; U+F0xx are Symbol/
# Wingdings private-use code points (, , ,  ...).
BULLET_CHARS = frozenset("•-▪*‣◦‧–→●○■□◆◇►▶➢➤✓✔❖∙·—" + "\x01")
_PRIVATE_USE = re.compile(r"[\ue000-\uf8ff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ODD = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ue000-\uf8ff]")
_MULTISPACE = re.compile(r"[ ]{2,}")

# paper: bullets '• - ▪ * ‣ ◦ ‧ – →' and numbered/lettered items '1.', 'a)'.
PAPER_BULLETS = ("•", "-", "▪", "*", "‣", "◦", "‧", "–", "→")
PAPER_NUMBERED = re.compile(r"^([0-9]+|[a-zA-Z]+)[\.\)](?:\s|$)")
# paper: lines with 5+ dots, dashes or underscores are skipped (TOC leaders, separators).
PAPER_SEPARATOR = re.compile(r"\.{5,}|-{5,}|_{5,}")

# Enumerators that open a list item in layout mode: 1.  1)  a)  a.  iv)  (a)  -- followed by a space.
ENUMERATOR = re.compile(r"^(?:\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{1,5})[\.\)]|\(\d{1,3}\)|\([a-zA-Z]\))(?:\s+|$)")


def clean_line(text: str) -> str:
    """Normalise one extracted line: ligatures, odd spaces, control/private-use glyphs, collapsed spaces."""
    text = text.translate(_TRANSLATE)
    if _ODD.search(text):
        stripped = text.lstrip()
        # A symbol-font glyph at the start of a line is a bullet; anywhere else it is noise.
        if stripped and (_PRIVATE_USE.match(stripped) or stripped[0] == "\x01"):
            text = "• " + stripped[1:]
        text = _PRIVATE_USE.sub("", text)
        text = _CONTROL.sub("", text)
    return _MULTISPACE.sub(" ", text).strip() if "  " in text else text.strip()


def is_bullet_glyph(text: str) -> bool:
    """True when the text is nothing but a bullet glyph (a detached bullet; Word's second level is 'o')."""
    return len(text) == 1 and (text in BULLET_CHARS or text in "o§")


def starts_item(text: str) -> bool:
    """True when a line opens a list item: a bullet glyph followed by a space, or an enumerator."""
    if not text:
        return False
    if text[0] in BULLET_CHARS and text[0] not in "-*·" and (len(text) == 1 or text[1] == " "):
        return True
    if text[0] in "-*" and len(text) > 1 and text[1] == " ":
        return True
    return ENUMERATOR.match(text) is not None


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
