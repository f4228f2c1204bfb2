"""The shared text rules (ragstudy.text.textnorm): LaTeX accent composition, sentence ends, wrapped-line joins."""

from __future__ import annotations

import pytest

from ragstudy.text.textnorm import (LINE_BREAK_HYPHEN, SENTENCE_FINAL, compose_latex_accents, continues_sentence,
                                    ends_sentence, is_line_end_hyphen, join_lines, split_sentences)


@pytest.mark.parametrize(
    ("raw", "composed"),
    [
        ("sar`a", "sarà"),
        ("pi`u", "più"),
        ("Poich´e", "Poiché"),
        ("perch´e n´e", "perché né"),
        ("questo `e vero", "questo è vero"),
        ("`E inoltre disponibile", "È inoltre disponibile"),
        ("cos`ı:", "così:"),  # TeX's \`{\i}: the accent on a dotless i
        ("VARIE FUNZIONALIT`A MATEMATICHE", "VARIE FUNZIONALITÀ MATEMATICHE"),
        ("C’`e", "C’è"),
        ("pi`e di pagina", "piè di pagina"),
        ("´etude", "étude"),  # an acute at a word's start
        ("na¨ıve", "naïve"),
        ("fa¸cade", "façade"),  # the cedilla follows its letter
        ("ˆa", "â"),
    ],
)
def test_latex_accents_are_composed(raw: str, composed: str) -> None:
    assert compose_latex_accents(raw) == composed


@pytest.mark.parametrize(
    "text",
    [
        "`ls`",  # code in backquotes
        "`a`",  # a one-letter code span
        "``quoted''",  # TeX quotes
        "x``e",
        "due ` (accento grave)",  # a backquote before a space
        "`12",  # before a non-letter
        "`echo` e `cat`",  # a backquote before a word, not a letter at its end
        "l´utente",  # an apostrophe typed as an acute accent, inside a word
        "x^2 e a~b",  # ASCII caret and tilde are code, never accents
        "testo senza accenti separati",
    ],
)
def test_real_backquotes_and_code_are_left_alone(text: str) -> None:
    assert compose_latex_accents(text) == text


def test_text_without_accent_glyphs_is_returned_as_is() -> None:
    text = "già composto: è, à, ù"
    assert compose_latex_accents(text) is text


@pytest.mark.parametrize(
    ("text", "ends"),
    [
        ("Fine della frase.", True),
        ("i seguenti:", True),
        ("davvero?", True),
        ("detto (vedi sopra).", True),
        ("«fine.»", True),
        ("e così via…", True),
        ("il paragrafo continua", False),
        ("spezzata con un trattino coe-", False),
        ("(in via di pubblicazione)", False),
        ("", False),
    ],
)
def test_ends_sentence(text: str, ends: bool) -> None:
    assert ends_sentence(text) is ends


@pytest.mark.parametrize(
    ("text", "continues"),
    [("questo termine, l'account", True), (", e poi", True), ("Nuova frase", False), ("1. Voce", False), ("", False)],
)
def test_continues_sentence(text: str, continues: bool) -> None:
    assert continues_sentence(text) is continues


def test_line_end_hyphen_and_join() -> None:
    assert is_line_end_hyphen("coe-", "rente") and join_lines("coe-", "rente") == "coerente"
    assert not is_line_end_hyphen("PDF-", "A") and join_lines("PDF-", "A") == "PDF- A"
    assert not is_line_end_hyphen("-", "rente")
    assert join_lines("", "b") == "b" and join_lines("a", "") == "a" and join_lines("a", "b") == "a b"


def test_sentence_split_uses_the_shared_end_marks() -> None:
    assert split_sentences("Prima frase. Seconda: Terza! quarta") == ["Prima frase.", "Seconda:", "Terza! quarta"]


def test_line_break_hyphen_and_sentence_final_patterns() -> None:
    assert LINE_BREAK_HYPHEN.sub("", "conserva-\n  zione, soft\u00ad\nhyphen, 3-\n4") == "conservazione, softhyphen, 3-\n4"
    ends = [m.end() for m in SENTENCE_FINAL.finditer('Fine." Poi (vedi sopra.) e: no! 3.14 resta')]
    assert ends == [6, 24, 31]
