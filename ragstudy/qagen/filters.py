"""The rules that drop a generated candidate, each counted in qa_report.md. A candidate is kept only when it passes
all of them; `FILTERS` lists them in the order they are checked (the report counts each candidate under the first
rule it fails, and also every rule it fails). Texts are compared on the evidence normalisation and, for word
overlaps, on the Italian analyzer's content terms (docs/make-qa.md, Filters).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragstudy.lexical import ItalianAnalyzer
from ragstudy.qagen.prompt import FROM_EVIDENCE, SINGLE, SPANNING, Generated, parse_generation
from ragstudy.qagen.sampling import Passage
from ragstudy.scoring.evidence import NormalizedText, normalize_for_match

# name -> what it means (the report's wording)
FILTERS: dict[str, str] = {
    "no_evidence_span": "the passage has no run of whole sentences of {min_evidence} to {max_evidence} characters "
                        "for the code to choose as evidence (--evidence-by code): the model is not asked",
    "too_long": "the output is longer than {max_output:,} characters, or its question or answer longer than "
                "{max_text:,} (an oracle answer is a few sentences; a server that ignored the length limit?)",
    "not_json": "the output is not the JSON object asked for (question and answer, and with --evidence-by model the "
                "evidence, as non-empty strings)",
    "evidence_not_verbatim": "the evidence is not a verbatim quote of the passage (after normalisation)",
    "evidence_length": "the located evidence is shorter than {min_evidence} or longer than {max_evidence} characters",
    "evidence_not_unique": "the evidence occurs more than once in the documents (a hit would be ambiguous)",
    "about_furniture": "the question asks about page furniture (page numbers, headers, footers, titles, indexes)",
    "question_not_a_question": "the question does not end with a question mark (a statement, or the answer again; "
                               "every one of the 81 hand-written questions of the bundled sample and ../shared/qa "
                               "ends with one)",
    "question_echoes_prompt": "the question repeats {echo_words} consecutive words of the prompt's own instructions "
                              "(the model copied what it was asked, not a question about the text)",
    "question_not_standalone": "the question points at the passage it was drawn from (\"questo documento\", \"nel "
                               "testo\", \"in questo contesto\"): asked of a whole collection it has no one answer "
                               "(none of the 85 hand-written questions of the bundled sample and ../shared/qa does)",
    "answer_unsupported": "fewer than {answer_support:.0%} of the answer's content words are in the evidence",
    "answer_is_a_question": "the answer ends with a question mark (a question again, not an answer; none of the 81 "
                            "hand-written answers does)",
    "answer_number_not_in_evidence": "a number in the answer is not in the evidence (an invented figure; 1 of the "
                                     "81 hand-written answers)",
    "question_off_evidence": "none of the question's content words is in the evidence (a question about something "
                             "else; 3 of the 45 bundled hand-written questions, 0 of the 36 of ../shared/qa)",
    "question_copies_evidence": "more than {copy_threshold:.0%} of the question's content words are in the evidence",
    "evidence_reused": "its evidence overlaps the evidence of an earlier kept item (no two items on the same "
                       "evidence)",
    "near_duplicate": "the question's content words overlap an earlier kept question's by {duplicate_threshold:.0%} "
                      "or more (Jaccard)",
    "answer_not_recovered": "asked its own question with only the evidence, the model's reply and the drafted answer "
                            "share under {recovered:.0%} of the content words of either (the question does not ask "
                            "for that answer: a garbled or off-target question)",
    "unfit_generator": "the generator is a plumbing-only model ({unfit}): its items are never counted as valid",
}

# Questions about page furniture, not content: general Italian (and English) wording. Bare "indice" and
# "intestazione" are content words in technical manuals (an analytic index in LaTeX, a message header in a protocol),
# so only their page-furniture uses count.
_DOC = r"(documento|manuale|guida|capitolo|paragrafo|sezione|testo)"
_FURNITURE_QUESTION = re.compile(
    r"\b(numer[oi] di pagin[ae]|a che pagina|in quale pagina|quale pagina|che pagina|"
    r"intestazion[ei] (della|delle|di) pagin[ae]|pi[eè] di pagina|"
    r"(nell'|nel |dall'|dal |secondo l')(indice|sommario)\b|(indice|sommario) (del|della|dello|di questo|di questa) "
    + _DOC + r"|come si (intitola|chiama) (il|la|lo|questo|questa) " + _DOC
    + r"|titolo (del|della|dello|di questo|di questa) " + _DOC
    + r"|in quale (capitolo|sezione|paragrafo)|quale capitolo|page number|running head|table of contents)",
    re.IGNORECASE)

# A question that points at its own source rather than naming what it asks about: demonstratives and "in the text"
# (not "il testo della PEC", "il documento amministrativo": nouns of the domain, followed by what they are of).
_NOT_STANDALONE = re.compile(
    r"\b(quest[oaie]|tal[ei])\s+(testo|testi|documento|documenti|passaggio|brano|estratto|paragrafo|contesto|sezione|"
    r"capitolo|manuale|guida|caso|casi|esempio|figura|tabella)\b"
    r"|\b(nel|dal|secondo il)\s+(testo|passaggio|brano|estratto)\b(?!\s+(del|della|dello|dei|degli|delle|di|d')\b)"
    r"|\bthis\s+(text|passage|excerpt|document|context|section)\b|\bthe\s+(passage|excerpt)\b",
    re.IGNORECASE)

# Generators that cannot write usable Italian questions: the lite profile's SmolLM2-135M (see docs/make-qa.md).
UNFIT_GENERATORS = ("SmolLM2-135M", "smollm2")


@dataclass(frozen=True)
class Thresholds:
    answer_support: float = 0.5  # the human set's lowest is 0.60 (../shared/qa, 36 items)
    copy_threshold: float = 0.85  # the human set's 90th percentile is 0.83; 3 of its 36 questions are above 0.85
    duplicate_threshold: float = 0.8
    min_evidence: int = 40
    max_evidence: int = 400
    max_text: int = 2_000  # characters of a question or an answer (the longest oracle answer of the sample: 309)
    max_output: int = 100_000  # characters of a whole generation: longer ones are dropped unparsed
    echo_words: int = 4  # consecutive words of the prompt's instructions that make a question an echo of it
    recovered: float = 0.5  # round trip: the human set's items pass at 28 of 36, with another's evidence 5 of 36

    def describe(self, unfit: str = "") -> dict[str, str]:
        values = {**vars(self), "unfit": unfit or "none"}
        return {name: text.format(**values) for name, text in FILTERS.items()}


@dataclass(frozen=True)
class Located:
    """Where the evidence lies: its start in the passage text, [start, end) in the text layer, its text, boundary."""

    passage_start: int
    source_start: int
    source_end: int
    text: str
    boundary: str  # none | paragraph | page
    pdf: str = ""


@dataclass
class Checked:
    """One candidate after the filters: the parsed JSON, where its evidence lies, the measures and the reasons."""

    generated: Generated | None
    located: Located | None = None
    question_overlap: float | None = None  # share of the question's content terms in the evidence
    answer_support: float | None = None  # share of the answer's content terms in the evidence
    recovered: float | None = None  # round trip: the larger share of answer/reply content terms in the other
    reply: str | None = None  # round trip: the model's reply to the question asked with only the evidence
    reasons: list[str] = field(default_factory=list)

    @property
    def kept(self) -> bool:
        return not self.reasons


_WORD = re.compile(r"[^\W_]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = [w.casefold() for w in _WORD.findall(text)]
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def instruction_ngrams(n: int) -> set[tuple[str, ...]]:
    """Word n-grams of the prompts' own instructions (the templates without their placeholders)."""
    return {gram for template in (FROM_EVIDENCE, SINGLE, SPANNING) for piece in re.split(r"\{[a-z_]+\}", template)
            for gram in word_ngrams(piece, n)}


def numbers_missing(answer: str, evidence: str) -> list[str]:
    """The numbers of `answer` (digits, separators ignored) that `evidence` does not hold."""
    held = normalize_for_match(evidence)
    return [n for n in _NUMBER.findall(answer) if re.sub(r"\D", "", n) not in held]


def terms(text: str, analyzer: ItalianAnalyzer) -> frozenset[str]:
    return frozenset(analyzer.tokens(text))


def share_in(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def locate_in_passage(evidence: str, passage: Passage) -> Located | None:
    """The evidence on the passage (normalised match) and on the text layer, or None when it is not verbatim."""
    needle = normalize_for_match(evidence)
    if not needle:
        return None
    hay = NormalizedText.of(passage.text)
    at = hay.text.find(needle)
    if at < 0:
        return None
    start = int(hay.offsets[at])
    end = int(hay.offsets[at + len(needle) - 1]) + 1
    source_start, source_end = passage.source_span(start, end)
    cut = passage.spans[0][1] - passage.spans[0][0]  # the joining newline of a two-part passage
    across = len(passage.spans) == 2 and start < cut < end
    boundary = ("page" if passage.kind == "page" else "paragraph") if across else "none"
    return Located(start, source_start, source_end, passage.text[start:end], boundary, passage.pdf)


class CandidateFilter:
    """The filters over a corpus: `check` one raw generation for its passage; `keep` decides duplicates in order."""

    def __init__(self, corpus: Mapping[str, str], thresholds: Thresholds = Thresholds(),
                 unfit_generator: str | None = None, analyzer: ItalianAnalyzer | None = None) -> None:
        self.thresholds = thresholds
        self.analyzer = analyzer or ItalianAnalyzer()
        self.normalized = {name: normalize_for_match(text) for name, text in corpus.items()}
        self.unfit_generator = unfit_generator
        self._kept: list[tuple[str, int, int, frozenset[str]]] = []  # each kept item's evidence span and question terms
        self._instructions = instruction_ngrams(thresholds.echo_words)

    def occurrences(self, evidence: str) -> int:
        needle = normalize_for_match(evidence)
        return sum(text.count(needle) for text in self.normalized.values())

    def no_evidence(self) -> Checked:
        """A passage the code found no evidence in (--evidence-by code): nothing was asked."""
        return self._unfit(Checked(None, reasons=["no_evidence_span"]))

    def check(self, raw: str, passage: Passage, evidence: str | None = None) -> Checked:
        """Every filter except evidence_reused and near_duplicate (which depend on the kept set: `keep`). With
        `evidence` (chosen by the code) the model's output needs only the question and the answer; the evidence is
        checked like a quoted one."""
        t = self.thresholds
        if len(raw) > t.max_output:  # not parsed: a runaway generation, dropped before any work on it
            return self._unfit(Checked(None, reasons=["too_long"]))
        generated = parse_generation(raw, evidence)
        if generated is None:
            return self._unfit(Checked(None, reasons=["not_json"]))
        if max(len(generated.question), len(generated.answer)) > t.max_text:
            return self._unfit(Checked(generated, reasons=["too_long"]))
        question, answer = generated.question, generated.answer
        evidence_terms = terms(generated.evidence, self.analyzer)
        located = locate_in_passage(generated.evidence, passage)
        checked = Checked(generated, located, share_in(terms(question, self.analyzer), evidence_terms),
                          share_in(terms(answer, self.analyzer), evidence_terms))
        failed = {  # in FILTERS order
            "evidence_not_verbatim": located is None,
            "evidence_length": located is not None
                               and not t.min_evidence <= len(located.text.strip()) <= t.max_evidence,
            "evidence_not_unique": located is not None and self.occurrences(located.text) > 1,
            "about_furniture": _FURNITURE_QUESTION.search(question),
            "question_not_a_question": not question.rstrip().endswith("?"),
            "question_echoes_prompt": word_ngrams(question, t.echo_words) & self._instructions,
            "question_not_standalone": _NOT_STANDALONE.search(question),
            "answer_unsupported": checked.answer_support < t.answer_support,
            "answer_is_a_question": answer.rstrip().endswith("?"),
            "answer_number_not_in_evidence": numbers_missing(answer, generated.evidence),
            "question_off_evidence": checked.question_overlap == 0.0,
            "question_copies_evidence": checked.question_overlap > t.copy_threshold,
        }
        checked.reasons += [name for name, fails in failed.items() if fails]
        return self._unfit(checked)

    def round_trip(self, checked: Checked, reply: str) -> None:
        """Record the round trip of a candidate that passed `check`: the model, asked the candidate's question with
        only its evidence (prompt.ROUND_TRIP), replied `reply`; it must give back the drafted answer."""
        checked.reply = reply
        answer, replied = terms(checked.generated.answer, self.analyzer), terms(reply, self.analyzer)
        # either way round: a reply that is part of a longer drafted answer gives it back as well as one that holds it
        checked.recovered = max(share_in(answer, replied), share_in(replied, answer))
        if checked.recovered < self.thresholds.recovered:
            checked.reasons.append("answer_not_recovered")

    def _unfit(self, checked: Checked) -> Checked:
        if self.unfit_generator:
            checked.reasons.append("unfit_generator")
        return checked

    def _mark(self, checked: Checked) -> tuple[str, int, int, frozenset[str]]:
        located = checked.located
        return located.pdf, located.source_start, located.source_end, terms(checked.generated.question, self.analyzer)

    def clash(self, checked: Checked, others: Sequence[Checked] | None = None) -> str | None:
        """Why `keep` would drop a candidate that passed every other filter: its evidence overlaps an earlier kept
        item's (evidence_reused) or its question nearly duplicates one (near_duplicate); None when neither.
        `others`: compare with those candidates instead of the kept items."""
        pdf, start, end, question = self._mark(checked)
        marks = self._kept if others is None else [self._mark(other) for other in others]
        if any(pdf == p and start < e and s < end for p, s, e, _ in marks):
            return "evidence_reused"
        for *_, earlier in marks:
            union = question | earlier
            if union and len(question & earlier) / len(union) >= self.thresholds.duplicate_threshold:
                return "near_duplicate"
        return None

    def keep(self, checked: Checked) -> bool:
        """Record a candidate that passed every other filter as kept unless it clashes with an earlier kept one."""
        if checked.reasons:
            return False
        reason = self.clash(checked)
        if reason is not None:
            checked.reasons.append(reason)
            return False
        self._kept.append(self._mark(checked))
        return True


def unfit_generator(model: str) -> str | None:
    lowered = model.casefold()
    return model if any(name.casefold() in lowered for name in UNFIT_GENERATORS) else None


def overlap_distribution(values: Sequence[float]) -> dict[str, float]:
    """min, quartiles, 90th percentile and max of a list of overlaps (empty: {})."""
    if not values:
        return {}
    q = np.percentile(np.asarray(values, dtype=float), [0, 25, 50, 75, 90, 100])
    return {"n": len(values), **{k: round(float(v), 3) for k, v in zip(("min", "q1", "median", "q3", "p90", "max"), q)}}
