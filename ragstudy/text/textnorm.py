"""Text normalisation shared by the segmenter, the text layer, the ground-truth checks and the chunk alignment.

One definition of each text rule the project needs: ligatures, where a sentence ends, how two wrapped lines join
(line-end hyphens), and the composition of the separate accent glyphs older LaTeX fonts leave in the text layer.
"""

from __future__ import annotations

import re
import unicodedata

# Ligature code points that PDF text layers contain, and the letters they stand for.
LIGATURES: dict[str, str] = {
    "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st",
}

# A line ending in one of these ends a sentence or a lead-in ("... i seguenti:").
SENTENCE_END_CHARS = ".!?:;"
# Closing quotes and brackets that may follow the sentence-ending mark: 'detto (vedi sopra).' or '«fine.»'.
_CLOSERS = "\"'»”’)]"
# Where to split text into sentences: after an end mark, before an upper-case letter, digit, quote or bullet.
SENTENCE_BOUNDARY = re.compile(r"(?<=[" + re.escape(SENTENCE_END_CHARS) + r"])\s+(?=[A-ZÀ-ÖØ-Þ0-9\"“«(•])")
# Where a sentence is *finished* (for boundary-quality metrics): terminal punctuation, optional closing quotes or
# brackets, then whitespace or the end. Unlike SENTENCE_END_CHARS (the segmenter's line-continuation rule, where a
# colon or semicolon also closes a line because a list follows) a colon does not finish a sentence here.
SENTENCE_FINAL = re.compile(r"[.!?…][" + re.escape(_CLOSERS) + r"]*(?=\s|$)")
# A word hyphenated across a line break ("conserva-\nzione"; also the soft hyphen U+00AD): the hyphen, the break
# and the next line's indentation go when lines are joined for matching (ground truth, chunk alignment).
LINE_BREAK_HYPHEN = re.compile(r"(?<=[^\W\d_])[-\u00ad][ \t]*\n\s*(?=[^\W\d_])")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (a light rule-based splitter: NLTK's punkt data is not available offline)."""
    return [s for s in SENTENCE_BOUNDARY.split(text) if s]


def ends_sentence(text: str) -> bool:
    """True when `text` ends with a sentence-ending mark (. ! ? : ; or …), closing quotes/brackets ignored."""
    stripped = text.rstrip().rstrip(_CLOSERS)
    return bool(stripped) and (stripped[-1] in SENTENCE_END_CHARS or stripped[-1] == "…")


def continues_sentence(text: str) -> bool:
    """True when `text` can only be the rest of a sentence begun earlier: it opens with a lower-case letter or
    with punctuation that never starts a sentence (',', ';', ')', '.')."""
    stripped = text.lstrip()
    return bool(stripped) and (stripped[0].islower() or stripped[0] in ",;:.)]»”’")


def is_line_end_hyphen(left: str, right: str) -> bool:
    """True when `left` ends with a hyphen splitting a word that `right` continues in lower case ('coe-' 'rente')."""
    return len(left) > 1 and left[-1] == "-" and left[-2].isalpha() and bool(right) and right[0].islower()


def join_lines(left: str, right: str) -> str:
    """Join two wrapped lines, removing a line-end hyphen when a lowercase word continues after it."""
    if not left or not right:
        return left or right
    if is_line_end_hyphen(left, right):
        return left[:-1] + right
    return left + " " + right


# Spacing accents that TeX's \accent (OT1 fonts such as Computer Modern, or any accent without a precomposed
# glyph) puts *before* the letter they sit on, and the combining marks they stand for; the cedilla and ogonek
# come first too. ASCII '^' and '~' are left out: in text layers they are code, not accents.
_PREFIX_ACCENTS = {
    "`": "\u0300", "\u00b4": "\u0301", "\u02c6": "\u0302", "\u02dc": "\u0303", "\u00af": "\u0304",
    "\u02d8": "\u0306", "\u02d9": "\u0307", "\u00a8": "\u0308", "\u02da": "\u030a", "\u02dd": "\u030b",
    "\u02c7": "\u030c", "\u00b8": "\u0327", "\u02db": "\u0328",
}
# TeX accents i and j without their dot: \`{\i} extracts as '`ı'.
_DOTLESS = {"ı": "i", "ȷ": "j"}
_PREFIX_RE = re.compile("[" + "".join(_PREFIX_ACCENTS) + "](?=[A-Za-zıȷ])")


def _composed(base: str, mark: str) -> str | None:
    """The single precomposed letter for base + combining mark, or None where Unicode has none."""
    letter = unicodedata.normalize("NFC", _DOTLESS.get(base, base) + mark)
    return letter if len(letter) == 1 else None


def compose_latex_accents(text: str) -> str:
    """Compose spacing accents that precede their letter into one letter: 'sar`a' -> 'sarà', 'Poich´e' ->
    'Poiché', '`E' -> 'È', 'cos`ı' -> 'così', 'fa¸cade' -> 'façade'. Only where an accent is meant: a backquote
    only on a word's last letter and never next to another backquote (`ls`, ``quoted'' stay); an acute inside a
    word ('l´utente', an apostrophe) is not composed. Text without these glyphs is returned as the same object."""
    if not any(ch in _PREFIX_ACCENTS for ch in text):
        return text
    out: list[str] = []
    pos = 0
    for match in _PREFIX_RE.finditer(text):
        start = match.start()
        if start < pos:
            continue  # the previous composition consumed this accent's letter
        accent, base = text[start], text[start + 1]
        before = text[start - 1] if start > 0 else ""
        after = text[start + 2] if start + 2 < len(text) else ""
        word_final = not after.isalpha()
        if accent == "`":
            # Backquotes in code: `x` and ``quoted'' keep theirs; an accent sits on a word's last letter.
            if before == "`" or after == "`" or not word_final:
                continue
        elif accent == "\u00b4" and before.isalpha() and not word_final:
            continue  # 'l´utente': an apostrophe typed as an acute accent, not TeX
        letter = _composed(base, _PREFIX_ACCENTS[accent])
        if letter is None:
            continue
        out.extend((text[pos:start], letter))
        pos = start + 2
    out.append(text[pos:])
    return "".join(out)
